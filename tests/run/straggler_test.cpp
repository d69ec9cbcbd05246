// Straggler GPUs (compute.stragglers, compute.straggler_dist): a slow GPU delays the step by what
// the DAG's critical path says; the seeded distribution is what it claims and gives identical
// results on any number of processes.
#include <gtest/gtest.h>

#include <algorithm>
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
}

}  // namespace
