// simccl.step_latency=nccl: NCCL's per-step pipeline synchronization as timed dependencies of
// the plan. Closed form on an idle fabric: a Ring AllReduce on 8 GPUs of one host (NVLink, flow
// rung, NVLink latency 1 ps, the least the engine takes as lookahead, so a message of b bytes takes
// b / rate + at most 2 ps: GPU -> NVSwitch -> GPU), C channels, k loops of
// chunks per channel. Every rank and channel runs in lock step (same ring order, same piece
// sizes), and each send waits for the channel's previous send and for the previous step's
// receive of the same slice, which arrive at the same instant; so the sends of one channel are
// strictly serial and the collective takes
//   T = base + N x (hop + C x wire / rate),
//   N = k x 2(n-1) x slices per piece (the sends of one channel),
// where the C channels share each GPU's NVLink port (max-min: rate / C each, all in lock step),
// and
//   base = baseLatencies[Ring][proto]      (NCCL 2.28 src/graph/tuning.cc; nccl.md §2.1):
//          Simple 8.4 us, LL 6.6 us, charged once at the collective's start;
//   hop  = hwLatencies[NVLINK][Ring][proto] (tuning.cc; nccl.md §2.2): Simple 3.4 us, LL 0.6 us,
//          charged before every send of a step (single node: no network overhead, §2.5);
//   piece / slice / wire: nccl.md §1.2-1.4: Simple chunk 4 x 512 KiB = 2 MiB per step piece,
//          sent as 2 slices of 1 MiB, wire = data; LL chunk 32 KiB of data (64 KiB step, half
//          data), 1 slice, wire = 2 x data (16 B lines of 8 data bytes).
// The test asserts that the setting adds exactly base + N x hop to the run without it, and that
// T is the closed form within 2% (the flow rung charges each message a little more than
// b / rate: framing, under 10 ns per message in these runs) and never below it. The same runs with 1 and 2 threads (and 2 MPI
// processes, the test is registered MPI 2) give identical results.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "jobs/nccl_tests.hpp"
#include "jobs/run.hpp"

namespace {

struct Shape {
  const char* proto;
  std::uint32_t channels;
  std::uint64_t bytes;        // all_reduce buffer
  std::uint64_t sends;        // N: sends of one channel, k x 2(n-1) x slices
  std::uint64_t wire;         // bytes on the wire per send
  double base_us, hop_us;     // tuning.cc baseLatencies / hwLatencies[NVLINK] (nccl.md §2.1-2.2)
};

constexpr std::uint32_t kRanks = 8;
constexpr double kRateBps = 3600e9;  // cluster.nvlink_bandwidth set below

fabricsim::jobs::RunResult run(const Shape& s, const char* step, MPI_Comm comm, unsigned threads) {
  const auto w = fabricsim::jobs::nccl_tests_workload("all_reduce", kRanks, s.bytes, 0);
  fabricsim::jobs::RunOptions o;
  o.workload_data = &w;
  o.sets = {"cluster.gpus_per_host=8",
            "cluster.hosts=1",
            "cluster.nvlink_bandwidth=3600Gbps",
            "cluster.nvlink_latency=1ps",
            "sim.fidelity=flow",
            "nccl.NCCL_ALGO=Ring",
            std::string("nccl.NCCL_PROTO=") + s.proto,
            "nccl.NCCL_MIN_NCHANNELS=" + std::to_string(s.channels),
            "nccl.NCCL_MAX_NCHANNELS=" + std::to_string(s.channels),
            "simccl.launch_latency=none",
            std::string("simccl.step_latency=") + step};
  o.threads = threads;
  o.write_h5 = false;
  o.quiet = true;
  return fabricsim::jobs::run_simulation(o, comm, "test", "test");
}

// 8 ranks: 2(n-1) = 14 steps per loop. Simple: per channel k x 8 x 2 MiB, pieces of 2 MiB in
// 2 slices. LL: per channel k x 8 x 32 KiB, pieces of one 32 KiB slice (64 KiB on the wire).
const std::vector<Shape> kShapes = {
    {"Simple", 1, 16ull << 20, 1 * 14 * 2, 1ull << 20, 8.4, 3.4},
    {"Simple", 2, 64ull << 20, 2 * 14 * 2, 1ull << 20, 8.4, 3.4},
    {"LL", 2, 2ull << 20, 4 * 14 * 1, 64ull << 10, 6.6, 0.6},
    {"LL", 4, 1ull << 20, 1 * 14 * 1, 64ull << 10, 6.6, 0.6},
};

TEST(StepLatency, RingAllReduceIsTheStepByStepSum) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(std::string(s.proto) + " " + std::to_string(s.channels) + " ch, " + std::to_string(s.bytes) + " B");
    const auto got = run(s, "nccl", MPI_COMM_SELF, 1);
    const auto none = run(s, "none", MPI_COMM_SELF, 1);
    ASSERT_EQ(got.collectives.size(), 1u);
    const double step_ps = s.hop_us * 1e6 + static_cast<double>(s.channels * s.wire) * 8 / kRateBps * 1e12;
    const double expect_ps = s.base_us * 1e6 + static_cast<double>(s.sends) * step_ps;
    // The pipeline latency adds exactly base + N x hop (integer ps: tuning.cc's us x 1e6).
    const auto base_ps = static_cast<std::int64_t>(std::llround(s.base_us * 1e6));
    const auto hop_ps = static_cast<std::int64_t>(std::llround(s.hop_us * 1e6));
    EXPECT_EQ(got.meta.simulated_time_ps - none.meta.simulated_time_ps,
              base_ps + static_cast<std::int64_t>(s.sends) * hop_ps);
    // The whole time is the step-by-step sum up to the flow rung's own per-message cost beyond
    // b / rate (framing; measured under 10 ns per message here): within 2%.
    EXPECT_NEAR(static_cast<double>(got.meta.simulated_time_ps) / expect_ps, 1.0, 0.02);
    EXPECT_GE(static_cast<double>(got.meta.simulated_time_ps), expect_ps - 3.0 * static_cast<double>(s.sends));
    EXPECT_EQ(got.flows, none.flows);  // the latencies move no bytes
  }
}

TEST(StepLatency, IdenticalAcrossThreadsAndProcesses) {
  for (const Shape& s : {kShapes[1], kShapes[2]}) {
    SCOPED_TRACE(s.proto);
    const auto ref = run(s, "nccl", MPI_COMM_SELF, 1);
    for (unsigned threads : {1u, 2u}) {
      const auto got = run(s, "nccl", MPI_COMM_WORLD, threads);
      EXPECT_EQ(got.digest, ref.digest);
      EXPECT_EQ(got.meta.simulated_time_ps, ref.meta.simulated_time_ps);
      EXPECT_EQ(got.flows, ref.flows);
    }
  }
}

// The materialized plan (simccl.lazy_plans=false: every op with its P2pOp::delay_ps) and the
// lazy one (LazyChannelRing::step_delay_ps) time the same.
TEST(StepLatency, LazyAndMaterializedAgree) {
  const auto w = fabricsim::jobs::nccl_tests_workload("all_reduce", kRanks, 3ull << 20, 0);
  std::int64_t t[2] = {0, 0};
  for (int lazy = 0; lazy < 2; ++lazy) {
    fabricsim::jobs::RunOptions o;
    o.workload_data = &w;
    o.sets = {"cluster.gpus_per_host=8", "cluster.hosts=1", "sim.fidelity=flow", "nccl.NCCL_ALGO=Ring",
              "simccl.step_latency=nccl", std::string("simccl.lazy_plans=") + (lazy ? "true" : "false")};
    o.write_h5 = false;
    o.quiet = true;
    t[lazy] = fabricsim::jobs::run_simulation(o, MPI_COMM_SELF, "test", "test").meta.simulated_time_ps;
  }
  EXPECT_GT(t[0], 0);
  EXPECT_EQ(t[0], t[1]);
}

}  // namespace
