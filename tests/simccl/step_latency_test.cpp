// NCCL's per-step pipeline latency as timed dependencies of the plan (simccl.step_latency and
// simccl.launch_latency, both nccl by default). Closed forms on an idle fabric: 8 GPUs of one
// host (NVLink, flow rung, NVLink latency 1 ps, the least the engine takes as lookahead, so a
// message of b bytes takes b / rate + at most 2 ps: GPU -> NVSwitch -> GPU), C channels.
//
// Ring AllReduce, k loops of chunks per channel, ns slices per step piece. Every rank and channel
// runs in lock step (the channels' rings are rotations of one cyclic order, so all send to the
// same next GPU; same piece sizes). A channel's sends go back to back (each waits for the
// channel's previous send to leave); slice j of step k > 0 of a loop also waits for slice j of
// step k-1 to arrive from the predecessor and for the receiver's hop latency h after that
// arrival (NCCL: the receiver sees the sender's FIFO flag h after the data landed; the sender has
// NCCL_STEPS slots and does not wait for it). With w = C x wire / rate (the C channels share
// each GPU's NVLink port, max-min: rate / C each), the start of slice j of step k within a loop
// is a + P k + w j with the step period
//   P = max(ns w, w + h)
// (by induction: s(k,0) = max(s(k-1,ns-1) + w, s(k-1,0) + w + h), s(k,j) = max(s(k,j-1) + w,
// s(k-1,j) + w + h)); step 0 of the next loop waits only for the previous send (ns w after the
// last step's start), and the collective ends when the last slice arrived plus h:
//   T = base + k ((2(n-1) - 1) P + ns w) + h.
// For one slice per step (LL, LL128) this is base + k 2(n-1) w + (k (2(n-1) - 1) + 1) h.
//
// Tree AllReduce on one node (a chain per channel, NCCL 2.28.9 src/graph/trees.cc; channel c's
// chain is the node's GPUs rotated by c), one chunk per channel: the chunk goes up m-1 hops to
// the chain's head and back down m-1 hops, one send at a time, each after its hop latency; in
// every stage each channel's sender and receiver are GPUs no other channel uses in that stage,
// so each send has the full rate:
//   T = base + 2(m-1) x (hop + wire / rate).
//
// The latency terms, all NCCL 2.28.9 src/graph/tuning.cc (../shared/reference/nccl.md §2.1-2.2):
//   base = baseLatencies[algo][proto], charged once at the collective's start (the launch):
//          Ring Simple 8.4 us, LL 6.6 us, LL128 14.0 us; Tree Simple 8.4 us, LL 6.8 us;
//   h    = hwLatencies[NVLINK][algo][proto] (one node: no network overhead, nccl.md §2.5):
//          Ring Simple 3.4 us, LL 0.6 us, LL128 1.9 us; Tree Simple 4.0 us, LL 0.6 us.
// Piece / slice / wire (nccl.md §1.2-1.4, src/enqueue.cc calcCollChunking, src/include/
// collectives.h): Ring Simple chunk 4 x 512 KiB = 2 MiB per step piece, sent as 2 slices of
// 1 MiB, wire = data; LL chunk 32 KiB of data (64 KiB step, half data), 1 slice, wire = 2 x data
// (16 B lines of 8 data bytes); LL128 chunk 576,000 B of data (600 KiB step, 15/16 data), 1
// slice, wire 614,400 B (128 B lines of 120 data bytes); Tree Simple chunk one 512 KiB step.
// The test asserts that T is the closed form within 2% (the flow rung charges each message a
// little more than b / rate: framing, under 10 ns per message in these runs) and never below it,
// and for the Tree that the defaults add exactly base + 2(m-1) x hop to the run with both
// settings none. The same runs with 1 and 2 threads (and 2 MPI processes, the test is registered
// MPI 2) give identical results.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "jobs/nccl_tests.hpp"
#include "jobs/run.hpp"

namespace {

struct Shape {
  const char* algo;
  const char* proto;
  std::uint32_t channels;
  std::uint64_t bytes;        // all_reduce buffer
  std::uint64_t loops;        // Ring: k loops per channel; Tree: 1
  std::uint32_t slices;       // Ring: ns slices per step piece; Tree: 1
  std::uint64_t wire;         // bytes on the wire per send
  std::uint32_t sharing;      // sends sharing a GPU port at a time (Ring: C; Tree: 1)
  double base_us, hop_us;     // tuning.cc baseLatencies / hwLatencies[NVLINK] (nccl.md §2.1-2.2)
};

constexpr std::uint32_t kRanks = 8;
constexpr double kRateBps = 3600e9;  // cluster.nvlink_bandwidth set below

// latency "" = the defaults; else both simccl.launch_latency and simccl.step_latency.
fabricsim::jobs::RunResult run(const Shape& s, const std::string& latency, MPI_Comm comm, unsigned threads) {
  const auto w = fabricsim::jobs::nccl_tests_workload("all_reduce", kRanks, s.bytes, 0);
  fabricsim::jobs::RunOptions o;
  o.workload_data = &w;
  o.sets = {"cluster.gpus_per_host=8",
            "cluster.hosts=1",
            "cluster.nvlink_bandwidth=3600Gbps", "cluster.nvlink_efficiency=1",
            "cluster.nvlink_latency=1ps",
            "sim.fidelity=flow",
            std::string("nccl.NCCL_ALGO=") + s.algo,
            std::string("nccl.NCCL_PROTO=") + s.proto,
            "nccl.NCCL_MIN_NCHANNELS=" + std::to_string(s.channels),
            "nccl.NCCL_MAX_NCHANNELS=" + std::to_string(s.channels)};
  if (!latency.empty()) {
    o.sets.push_back("simccl.launch_latency=" + latency);
    o.sets.push_back("simccl.step_latency=" + latency);
  }
  o.threads = threads;
  o.write_h5 = false;
  o.quiet = true;
  return fabricsim::jobs::run_simulation(o, comm, "test", "test");
}

// 8 ranks: Ring 2(n-1) = 14 steps per loop. Simple: per channel k x 8 x 2 MiB, pieces of 2 MiB
// in 2 slices. LL: per channel k x 8 x 32 KiB, pieces of one 32 KiB slice (64 KiB on the wire).
// LL128: per channel 8 x 576,000 B, pieces of one slice (614,400 B on the wire). Tree: one
// chunk per channel, 2 x 7 = 14 sends in series.
const std::vector<Shape> kShapes = {
    {"Ring", "Simple", 1, 16ull << 20, 1, 2, 1ull << 20, 1, 8.4, 3.4},
    {"Ring", "Simple", 2, 64ull << 20, 2, 2, 1ull << 20, 2, 8.4, 3.4},
    {"Ring", "LL", 2, 2ull << 20, 4, 1, 64ull << 10, 2, 6.6, 0.6},
    {"Ring", "LL", 4, 1ull << 20, 1, 1, 64ull << 10, 4, 6.6, 0.6},
    {"Ring", "LL128", 2, 2ull * 8 * 576000, 1, 1, 614400, 2, 14.0, 1.9},
    {"Tree", "Simple", 2, 2ull * (512 << 10), 1, 1, 512 << 10, 1, 8.4, 4.0},
    {"Tree", "LL", 4, 4ull * (32 << 10), 1, 1, 64 << 10, 1, 6.8, 0.6},
};

// The closed form of the header (ps) and the number of messages on the critical path.
double closed_form_ps(const Shape& s, std::uint64_t& sends) {
  const double w = static_cast<double>(s.sharing * s.wire) * 8 / kRateBps * 1e12;
  const double h = s.hop_us * 1e6, base = s.base_us * 1e6;
  if (std::string(s.algo) == "Tree") {
    sends = 2 * (kRanks - 1);
    return base + static_cast<double>(sends) * (h + w);
  }
  const std::uint64_t steps = 2 * (kRanks - 1);
  sends = s.loops * steps * s.slices;
  const double P = std::max(s.slices * w, w + h);
  return base + static_cast<double>(s.loops) * (static_cast<double>(steps - 1) * P + s.slices * w) + h;
}

TEST(StepLatency, AllReduceIsTheStepByStepSum) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(std::string(s.algo) + " " + s.proto + " " + std::to_string(s.channels) + " ch, " +
                 std::to_string(s.bytes) + " B");
    const auto got = run(s, "", MPI_COMM_SELF, 1);
    const auto none = run(s, "none", MPI_COMM_SELF, 1);
    ASSERT_EQ(got.collectives.size(), 1u);
    std::uint64_t sends = 0;
    const double expect_ps = closed_form_ps(s, sends);
    if (std::string(s.algo) == "Tree") {
      // The latencies add exactly base + sends x hop (integer ps: tuning.cc's us x 1e6).
      const auto base_ps = static_cast<std::int64_t>(std::llround(s.base_us * 1e6));
      const auto hop_ps = static_cast<std::int64_t>(std::llround(s.hop_us * 1e6));
      EXPECT_EQ(got.meta.simulated_time_ps - none.meta.simulated_time_ps,
                base_ps + static_cast<std::int64_t>(sends) * hop_ps);
    }
    // The whole time is the closed form up to the flow rung's own per-message cost beyond
    // b / rate (framing; under 10 ns per message here): within 2%, and never below it.
    EXPECT_NEAR(static_cast<double>(got.meta.simulated_time_ps) / expect_ps, 1.0, 0.02);
    EXPECT_GE(static_cast<double>(got.meta.simulated_time_ps), expect_ps - 3.0 * static_cast<double>(sends));
    EXPECT_EQ(got.flows, none.flows);  // the latencies move no bytes
  }
}

// Without the latencies the sends of a channel go back to back: base and h drop out of the
// closed form (P = ns w), T = k 2(n-1) ns w.
TEST(StepLatency, WithoutLatenciesTheSendsOfAChannelGoBackToBack) {
  const Shape& s = kShapes[1];
  const auto none = run(s, "none", MPI_COMM_SELF, 1);
  const double w = static_cast<double>(s.sharing * s.wire) * 8 / kRateBps * 1e12;
  const double expect_ps = static_cast<double>(s.loops * 2 * (kRanks - 1) * s.slices) * w;
  EXPECT_NEAR(static_cast<double>(none.meta.simulated_time_ps) / expect_ps, 1.0, 0.005);
}

TEST(StepLatency, LaunchAloneChargesTheModelLatency) {
  const Shape& s = kShapes[3];
  auto sets_run = [&](const char* launch, const char* step) {
    const auto w = fabricsim::jobs::nccl_tests_workload("all_reduce", kRanks, s.bytes, 0);
    fabricsim::jobs::RunOptions o;
    o.workload_data = &w;
    o.sets = {"cluster.gpus_per_host=8", "cluster.hosts=1", "cluster.nvlink_bandwidth=3600Gbps", "cluster.nvlink_efficiency=1",
              "cluster.nvlink_latency=1ps", "sim.fidelity=flow", "nccl.NCCL_ALGO=Ring", "nccl.NCCL_PROTO=LL",
              "nccl.NCCL_MIN_NCHANNELS=4", "nccl.NCCL_MAX_NCHANNELS=4",
              std::string("simccl.launch_latency=") + launch, std::string("simccl.step_latency=") + step};
    o.write_h5 = false;
    o.quiet = true;
    return fabricsim::jobs::run_simulation(o, MPI_COMM_SELF, "test", "test").meta.simulated_time_ps;
  };
  const std::int64_t none = sets_run("none", "none");
  EXPECT_EQ(sets_run("nccl", "none") - none, std::llround((6.6 + 14 * 0.6) * 1e6));
  EXPECT_EQ(sets_run("none", "nccl") - none, 14 * std::llround(0.6 * 1e6));  // the hops, no launch
  EXPECT_EQ(sets_run("nccl", "nccl") - none, std::llround((6.6 + 14 * 0.6) * 1e6));
}

TEST(StepLatency, IdenticalAcrossThreadsAndProcesses) {
  for (const Shape& s : {kShapes[1], kShapes[2], kShapes[5]}) {
    SCOPED_TRACE(std::string(s.algo) + " " + s.proto);
    const auto ref = run(s, "", MPI_COMM_SELF, 1);
    for (unsigned threads : {1u, 2u}) {
      const auto got = run(s, "", MPI_COMM_WORLD, threads);
      EXPECT_EQ(got.digest, ref.digest);
      EXPECT_EQ(got.meta.simulated_time_ps, ref.meta.simulated_time_ps);
      EXPECT_EQ(got.flows, ref.flows);
    }
  }
}

// The materialized plans (simccl.lazy_plans=false: every op with its P2pOp::delay_ps) and the
// lazy ones (LazyChannelRing::recv_delay_ps, LazyTree::Channel delays) time the same, on one
// node and (Tree: NET hops between nodes) on two.
TEST(StepLatency, LazyAndMaterializedAgree) {
  for (const char* algo : {"Ring", "Tree"}) {
    for (std::uint32_t hosts : {1u, 2u}) {
      SCOPED_TRACE(std::string(algo) + " " + std::to_string(hosts) + " hosts");
      const auto w = fabricsim::jobs::nccl_tests_workload("all_reduce", 4 * hosts, 3ull << 20, 0);
      std::int64_t t[2] = {0, 0};
      for (int lazy = 0; lazy < 2; ++lazy) {
        fabricsim::jobs::RunOptions o;
        o.workload_data = &w;
        o.sets = {"cluster.gpus_per_host=4", "cluster.hosts=" + std::to_string(hosts), "sim.fidelity=flow",
                  std::string("nccl.NCCL_ALGO=") + algo, std::string("simccl.lazy_plans=") + (lazy ? "true" : "false")};
        o.write_h5 = false;
        o.quiet = true;
        t[lazy] = fabricsim::jobs::run_simulation(o, MPI_COMM_SELF, "test", "test").meta.simulated_time_ps;
      }
      EXPECT_GT(t[0], 0);
      EXPECT_EQ(t[0], t[1]);
    }
  }
}

}  // namespace
