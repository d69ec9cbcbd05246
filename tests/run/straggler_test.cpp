// Straggler GPUs (compute.stragglers, compute.straggler_dist): a slow GPU delays the step by what
// the DAG's critical path says; the seeded distribution is what it claims and gives identical
// results on any number of processes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "jobs/run/context.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/mpi.hpp"
#include "tests/support/run.hpp"
#include "tests/support/workloads.hpp"

namespace {

namespace m = fabricsim::models;
using fabricsim::testing::iteration;
using fabricsim::testing::run_quiet;
constexpr long long kUs = 1'000'000;  // ps per us

/// A DP=16 step: every rank computes `us` microseconds, then the gradient AllReduce of `bytes`.
m::Workload dp_step(long long us, std::uint64_t bytes) {
  m::Workload w = fabricsim::testing::world_workload(16);
  for (auto& p : w.programs) {
    m::WorkNode c;
    c.name = "backward";
    c.type = m::NodeType::kCompute;
    c.duration_ps = us * kUs;
    p.push_back(c);
  }
  fabricsim::testing::add_collective(w, m::CollOp::kAllReduce, bytes, "grad_allreduce");
  for (auto& p : w.programs) p.back().deps = {0};
  return w;
}

/// A DP=16 step whose GPU work comes after the gradient AllReduce (the optimizer step): every
/// rank starts the collective at time 0, then computes `us` microseconds.
m::Workload dp_tail(long long us, std::uint64_t bytes) {
  m::Workload w = fabricsim::testing::world_workload(16);
  fabricsim::testing::add_collective(w, m::CollOp::kAllReduce, bytes, "grad_allreduce");
  for (auto& p : w.programs) {
    m::WorkNode c;
    c.name = "optimizer";
    c.type = m::NodeType::kCompute;
    c.duration_ps = us * kUs;
    c.deps = {0};
    p.push_back(c);
  }
  return w;
}

// One GPU 20% slower, its compute on the critical path's end: the AllReduce is the same in both
// runs (every member starts it at 0), and only the slow rank's 200 us optimizer step changes: that
// rank ends exactly 0.2 * 200 us = 40 us later, every other rank when it did, and the step is the
// latest of these ends, at every rung.
TEST(Stragglers, OneSlowGpuGrowsTheStepByItsCriticalPath) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const m::Workload w = dp_tail(200, 8ull << 20);
  for (const char* rung : {"analytical", "flow", "packet"}) {
    SCOPED_TRACE(rung);
    const std::string fid = std::string("sim.fidelity=") + rung;
    const auto even = run_quiet(&w, {fid});
    const auto slow = run_quiet(&w, {fid, "compute.stragglers=5:1.2"});
    // Rank 5 ends 40 us later than it did; every other rank ends when it did.
    long long want = even.ranks[5].finish_ps + 40 * kUs;
    for (const auto& r : even.ranks) {
      if (r.rank != 5) want = std::max<long long>(want, r.finish_ps);
    }
    EXPECT_EQ(iteration(slow), want);
    EXPECT_EQ(slow.ranks[5].compute_ps, 240 * kUs);
    EXPECT_EQ(slow.ranks[4].compute_ps, 200 * kUs);
  }
}

// The slow GPU computes before the AllReduce (500 us backward, 20% slower: it joins at 600 us).
// The step cannot end before the slow rank has sent its ring share, 2 (n - 1) / n of 8 MiB, none
// of which can leave before 600 us, through at most its NVLink plus NIC rate (3600 + 400 Gb/s):
// 600 us + 15 MiB * 8 / 4 Tb/s = 631.46 us. The other ranks' head start lets part of the
// collective finish before the slow rank joins, so the step grows by less than 100 us at the
// analytical rung (where flows never share a link) and may grow by a little more at the flow and
// packet rungs (the slow rank's queued ring steps contend for its own ports). The upper bound
// (100 us plus the whole even collective) is a sanity bound, not a derived one.
TEST(Stragglers, OneSlowGpuBeforeTheCollectiveDelaysItBoundedly) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const m::Workload w = dp_step(500, 8ull << 20);
  for (const char* rung : {"analytical", "flow", "packet"}) {
    SCOPED_TRACE(rung);
    const std::vector<std::string> base = {std::string("sim.fidelity=") + rung, "cluster.nvlink_bandwidth=3600Gbps",
                                           "cluster.nic_bandwidth=400Gbps"};
    std::vector<std::string> slow_sets = base;
    slow_sets.push_back("compute.stragglers=5:1.2");
    const auto even = run_quiet(&w, base);
    const auto slow = run_quiet(&w, slow_sets);
    const long long coll = iteration(even) - 500 * kUs;
    ASSERT_GT(coll, 0);
    const double wire_ps = 2.0 * 15 / 16 * (8 << 20) * 8 / 4000e9 * 1e12;
    EXPECT_GE(static_cast<double>(iteration(slow)), 600.0 * kUs + wire_ps);
    EXPECT_LE(iteration(slow) - iteration(even), 100 * kUs + coll);
    if (std::string(rung) == "analytical") {
      EXPECT_LE(iteration(slow) - iteration(even), 100 * kUs);
    }
    EXPECT_EQ(slow.ranks[5].compute_ps, 600 * kUs);
  }
}

// The draw: median 1 and 99% of factors at or below p99, over 20,000 ranks (binomial sd of the
// fraction: sqrt(0.99 * 0.01 / 20000) = 0.0007; bounds at about 4 sd). Same seed, same draw.
TEST(Stragglers, LognormalDrawHasTheAskedMedianAndP99) {
  constexpr std::uint32_t kN = 20000;
  std::vector<double> f(kN);
  for (std::uint32_t r = 0; r < kN; ++r) f[r] = fabricsim::jobs::run_stages::lognormal_straggler(7, r, 1.3);
  const double below = static_cast<double>(std::count_if(f.begin(), f.end(), [](double x) { return x <= 1.3; })) / kN;
  EXPECT_NEAR(below, 0.99, 0.003);
  std::vector<double> s = f;
  std::nth_element(s.begin(), s.begin() + kN / 2, s.end());
  EXPECT_NEAR(s[kN / 2], 1.0, 0.01);
  EXPECT_EQ(fabricsim::jobs::run_stages::lognormal_straggler(7, 123, 1.3), f[123]);
  EXPECT_NE(fabricsim::jobs::run_stages::lognormal_straggler(8, 123, 1.3), f[123]);
}

// Seeded stragglers on every GPU: the same results on this process alone and across all the
// processes of the test (run under mpiexec -n 2 and -n 4), with 1 and 2 threads.
TEST(Stragglers, SeededDistributionIsIdenticalOnAnyProcessCount) {
  const m::Workload w = dp_step(50, 1ull << 20);
  const std::vector<std::string> sets = {"compute.straggler_dist=lognormal", "compute.straggler_p99=1.5",
                                         "sim.seed=11"};
  const auto alone = run_quiet(&w, sets, MPI_COMM_SELF);
  for (unsigned threads : {1u, 2u}) {
    const auto all = run_quiet(&w, sets, MPI_COMM_WORLD, threads);
    EXPECT_EQ(all.digest, alone.digest) << threads << " threads";
    EXPECT_EQ(iteration(all), iteration(alone));
  }
  const auto even = run_quiet(&w, {}, MPI_COMM_SELF);
  EXPECT_GT(iteration(alone), iteration(even));  // with 16 draws, some GPU is slower than median
}

/// End of `work` ps of compute started at `s` under one throttling window [a, b) of factor `f`:
/// full speed before and after the window, 1/f of the speed inside it (the rule of
/// compute.throttle, written out for a start before the window).
long long throttled_end(long long s, long long work, long long a, long long b, double f) {
  if (s + work <= a) return s + work;
  const long long before = a - s;
  const double rest = static_cast<double>(work - before);
  if (rest * f <= static_cast<double>(b - a)) return a + std::llround(rest * f);
  return b + (work - before - std::llround(static_cast<double>(b - a) / f));
}

// Thermal throttling of host 1 (ranks 8..15 with 8 GPUs per host) in a window that starts 50 us
// into their 200 us optimizer step and lasts 100 us at factor 2: the step's first 50 us run at
// full speed, the window does 50 us of work, the last 100 us run at full speed again, so each of
// those ranks ends 50 us later than it did (the AllReduce before is the same in both runs: every
// member starts it at 0). Host 0's ranks end when they did. Every rung.
TEST(Stragglers, ThrottlingWindowStretchesTheComputeInsideIt) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const m::Workload w = dp_tail(200, 8ull << 20);
  for (const char* rung : {"analytical", "flow", "packet"}) {
    SCOPED_TRACE(rung);
    const std::string fid = std::string("sim.fidelity=") + rung;
    const auto even = run_quiet(&w, {fid});
    long long s_min = even.ranks[8].finish_ps;
    for (const auto& r : even.ranks) {
      if (r.rank >= 8) s_min = std::min<long long>(s_min, r.finish_ps - 200 * kUs);
    }
    const long long a = s_min + 50 * kUs, b = a + 100 * kUs;
    const std::string spec = "compute.throttle=1:" + std::to_string(a) + "ps:" + std::to_string(b) + "ps:2";
    const auto hot = run_quiet(&w, {fid, spec});
    for (const auto& r : hot.ranks) {
      const long long start = even.ranks[r.rank].finish_ps - 200 * kUs;
      const long long want = r.rank < 8 ? even.ranks[r.rank].finish_ps : throttled_end(start, 200 * kUs, a, b, 2.0);
      EXPECT_EQ(r.finish_ps, want) << "rank " << r.rank;
    }
    // The rank that started first does exactly 50 us of work before the window: +50 us.
    long long first = 8;
    for (std::uint32_t r = 8; r < 16; ++r) {
      if (even.ranks[r].finish_ps < even.ranks[first].finish_ps) first = r;
    }
    EXPECT_EQ(hot.ranks[first].finish_ps, even.ranks[first].finish_ps + 50 * kUs);
    EXPECT_EQ(hot.ranks[first].compute_ps, 250 * kUs);
  }
}

// A NIC that runs at half its rate (cluster.degraded_nics): a 64 MiB send from GPU 3 (host 0) to
// GPU 11 (host 1, the same rail, so no PXN relay) at the flow rung is limited by the slower NIC,
// so it takes 64 MiB x 8 / 200 Gb/s instead of / 400 Gb/s: 1342.18 us longer, whichever end's NIC
// is degraded. The other GPUs' NICs are untouched.
TEST(Stragglers, DegradedNicSlowsItsTransfersByTheRateRatio) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const unsigned long long bytes = 64ull << 20;
  const m::Workload w = fabricsim::testing::p2p_workload(16, {{3, 11, bytes, 0}});
  const std::vector<std::string> base = {"sim.fidelity=flow", "cluster.nic_bandwidth=400Gbps"};
  const auto fast = run_quiet(&w, base);
  const double extra_ps = static_cast<double>(bytes) * 8 * (1 / 200e9 - 1 / 400e9) * 1e12;
  for (const char* nic : {"cluster.degraded_nics=3:200Gbps", "cluster.degraded_nics=11:200Gbps"}) {
    SCOPED_TRACE(nic);
    auto sets = base;
    sets.push_back(nic);
    const auto slow = run_quiet(&w, sets);
    EXPECT_NEAR(static_cast<double>(iteration(slow) - iteration(fast)), extra_ps, 0.001 * extra_ps);
  }
  auto other = base;
  other.push_back("cluster.degraded_nics=4:100Gbps");
  EXPECT_EQ(iteration(run_quiet(&w, other)), iteration(fast));
}

// Throttling and a degraded NIC give the same results on any process and thread count.
TEST(Stragglers, ThrottlingAndDegradedNicAreIdenticalOnAnyProcessCount) {
  const m::Workload w = dp_step(50, 4ull << 20);
  const std::vector<std::string> sets = {"sim.fidelity=packet", "compute.throttle=0:10us:40us:1.7,1:0us:20us:3",
                                         "cluster.degraded_nics=9:100Gbps"};
  const auto alone = run_quiet(&w, sets, MPI_COMM_SELF);
  for (unsigned threads : {1u, 2u}) {
    const auto all = run_quiet(&w, sets, MPI_COMM_WORLD, threads);
    EXPECT_EQ(all.digest, alone.digest) << threads << " threads";
    EXPECT_EQ(iteration(all), iteration(alone));
  }
  const auto even = run_quiet(&w, {"sim.fidelity=packet"}, MPI_COMM_SELF);
  EXPECT_GT(iteration(alone), iteration(even));
}

TEST(Stragglers, BadValuesAreRefusedInOneLine) {
  FABRICSIM_SEQUENTIAL_ONLY("input errors");
  const m::Workload w = dp_step(5, 4096);
  EXPECT_INPUT_ERROR(run_quiet(&w, {"compute.stragglers=3:0"}), "compute.stragglers", "(0, 1e6]");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"compute.stragglers=3:-1.2"}), "compute.stragglers", "(0, 1e6]");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"compute.stragglers=99:1.2"}), "compute.stragglers", "rank 99 is not in the 16-rank");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"compute.stragglers=3"}), "compute.stragglers", "RANK:FACTOR");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"compute.stragglers=3:1.2,3:1.1"}), "compute.stragglers", "listed twice");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"compute.straggler_dist=normal"}), "compute.straggler_dist", "none or lognormal");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"compute.straggler_dist=lognormal"}), "compute.straggler_p99", "above 1");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"compute.straggler_p99=0"}), "compute.straggler_p99", "(0, 1000]");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"compute.throttle=1:0us:10us:1"}), "compute.throttle", "(1, 1e6]");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"compute.throttle=1:0us:10us"}), "compute.throttle", "HOSTS:START:UNTIL:FACTOR");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"compute.throttle=1:10us:5us:1.5"}), "compute.throttle", "START < UNTIL");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"compute.throttle=1:-1us:5us:1.5"}), "compute.throttle", "negative");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"compute.throttle=3-1:0us:5us:1.5"}), "compute.throttle", "empty");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"compute.throttle=0-1:0us:5us:1.5,1:4us:9us:2"}), "compute.throttle", "overlaps");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"compute.throttle=7:0us:5us:1.5"}), "compute.throttle", "host 7 is not in this 2-host");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"cluster.degraded_nics=3"}), "cluster.degraded_nics", "GPU:RATE");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"cluster.degraded_nics=3:100Gbps,3:50Gbps"}), "cluster.degraded_nics", "listed twice");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"cluster.degraded_nics=40:100Gbps"}), "cluster.degraded_nics", "GPU 40 is not in this 16-GPU");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"cluster.nic_bandwidth=400Gbps", "cluster.degraded_nics=3:800Gbps"}), "cluster.degraded_nics",
                     "not below");
}

}  // namespace
