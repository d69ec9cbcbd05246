// Streamed rings (sim.ring_flows: stream, models/flow/ring_stream.hpp): the ring planner's AllReduce,
// AllGather and ReduceScatter as one flow per rank instead of one per step.
//
// Closed form (fidelity_test.cpp): one transfer of C bytes (a multiple of the 4,096 B MTU) alone
// on a GPU -> leaf -> GPU path (two 400 Gb/s links of 500 ns) takes
//     T(C) = (C / 4096) s + s + 2 x 500 ns,   s = ser(4096 B, 400 Gb/s) = 81,920 ps,
// and an uncongested ring of S steps of C bytes takes S T(C) (every step's send waits for the
// previous step's receive). The stream must complete at that instant, to the picosecond.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/errors.hpp"
#include "engine/time.hpp"
#include "jobs/run.hpp"
#include "models/core/workload.hpp"
#include "tests/support/workloads.hpp"
#include "tests/support/mpi.hpp"
#include "tests/support/run.hpp"

using fabricsim::testing::iteration;
using fabricsim::testing::world_procs;

namespace {

using fabricsim::engine::SimTime;
using fabricsim::engine::serialization_ps;
using fabricsim::jobs::RunResult;
namespace m = fabricsim::models;

/// One collective `op` of `bytes` on every rank of the world communicator of n ranks.
m::Workload collective(std::uint32_t n, m::CollOp op, std::uint64_t bytes) {
  return fabricsim::testing::collective_workload(n, op, bytes, "coll");
}

/// Rings given by their members, each running one AllReduce of its own size.
m::Workload rings_of(const std::vector<std::vector<std::uint32_t>>& rings, const std::vector<std::uint64_t>& bytes,
                     std::uint32_t ranks) {
  m::Workload w;
  w.source = "<test>";
  w.format = "simai";
  w.ranks = ranks;
  w.programs.resize(ranks);
  for (std::size_t g = 0; g < rings.size(); ++g) {
    w.groups.push_back(m::CommGroup{"ring" + std::to_string(g), rings[g]});
    for (std::uint32_t r : rings[g]) {
      m::WorkNode c;
      c.name = "allreduce";
      c.type = m::NodeType::kCollective;
      c.op = m::CollOp::kAllReduce;
      c.bytes = bytes[g];
      c.group = static_cast<std::int32_t>(g);
      w.programs[r].push_back(c);
    }
  }
  return w;
}

/// `rings` communicators of `per` ranks, ring g = {g, g + rings, g + 2 rings, ...} (with one GPU
/// per host and `rings` hosts per leaf, every ring link leaves its leaf: the rings share the
/// leaves' spine uplinks); every rank runs one AllReduce of `bytes` on its ring.
m::Workload strided_rings(std::uint32_t rings, std::uint32_t per, std::uint64_t bytes) {
  std::vector<std::vector<std::uint32_t>> members(rings);
  for (std::uint32_t g = 0; g < rings; ++g) {
    for (std::uint32_t k = 0; k < per; ++k) members[g].push_back(g + k * rings);
  }
  return rings_of(members, std::vector<std::uint64_t>(rings, bytes), rings * per);
}

RunResult run(const m::Workload* w, const std::string& rung, const std::string& mode, std::vector<std::string> sets,
              MPI_Comm comm = MPI_COMM_SELF, unsigned threads = 1) {
  sets.insert(sets.begin(), "simccl.planner=ring");
  sets.push_back("sim.fidelity=" + rung);
  sets.push_back("sim.ring_flows=" + mode);
  return fabricsim::testing::run_quiet(w, std::move(sets), comm, threads);
}

/// n hosts of one GPU under one leaf: every ring link is GPU -> leaf -> GPU, none shared.
std::vector<std::string> one_leaf(std::uint32_t n) {
  return {"cluster.gpus_per_host=1", "cluster.topology=leaf_spine", "cluster.nics_per_leaf=" + std::to_string(n)};
}

std::uint32_t steps_of(m::CollOp op, std::uint32_t n) { return op == m::CollOp::kAllReduce ? 2 * (n - 1) : n - 1; }

const m::CollOp kOps[] = {m::CollOp::kAllReduce, m::CollOp::kAllGather, m::CollOp::kReduceScatter};

// Must-show 1: exact when uncongested with equal chunks (flow and analytical rungs), and the
// stream is one flow per rank (AllGather / ReduceScatter of 2 ranks are one step: step-wise).
TEST(RingStream, UncongestedEqualChunksEqualStepwiseAndClosedForm) {
  const SimTime s = serialization_ps(4096, 400'000'000'000);
  ASSERT_EQ(s, 81'920);
  // n = 2 and 3 too: their AllReduce chains take whole turns of the ring plus few links
  // (ring_stream_timing's other branch).
  for (const std::uint32_t n : {2u, 3u, 4u, 8u, 16u}) {
    for (const m::CollOp op : kOps) {
      // Chunks of 16 KiB and 64 KiB (whole packets); AllGather/ReduceScatter sizes are the total.
      for (const std::uint64_t chunk : {std::uint64_t{16384}, std::uint64_t{65536}}) {
        const std::uint64_t bytes = chunk * n;
        const SimTime closed = static_cast<SimTime>(steps_of(op, n)) *
                               (static_cast<SimTime>(chunk / 4096) * s + s + 2 * 500'000);
        const m::Workload w = collective(n, op, bytes);
        for (const char* rung : {"flow", "analytical"}) {
          SCOPED_TRACE(std::string(rung) + " n=" + std::to_string(n) + " op=" + std::to_string(static_cast<int>(op)) +
                       " chunk=" + std::to_string(chunk));
          const RunResult step = run(&w, rung, "step", one_leaf(n));
          const RunResult stream = run(&w, rung, "stream", one_leaf(n));
          EXPECT_EQ(iteration(step), closed);
          EXPECT_EQ(iteration(stream), closed);
          // One flow per rank instead of one per step (flow rung: the network LP's count).
          if (std::string(rung) == "flow") {
            EXPECT_EQ(step.flows, std::uint64_t{n} * steps_of(op, n));
            EXPECT_EQ(stream.flows, std::uint64_t{n});
          }
        }
      }
    }
  }
}

// Must-show 1, sizes not divisible by n (chunks of C and C + 1 bytes, C = 10,000 B not a whole
// number of packets). Bound derived: every chunk of the step-wise ring travels one chain, so with
// equal links and no step's send waiting for its queue pair (T(C + 1) - T(C) = one byte's
// serialization, far below a step) the last receive of rank i is S T(c_i) after the start, c_i
// in {C, C + 1} the size of its last incoming message; the collective is the slowest rank:
//     S T(C) <= t <= S T(C + 1),   T(k 4096 + r) = (k + 1) s + ser(r) + 2 x 500 ns (0 < r < 4096,
// the short last packet behind the full one, fidelity_test ShortLastPacketClosedFormAllRungs).
// The stream's correction uses c_i itself (the last step's incoming bytes), so it is exact here
// too: asserted equal to the step-wise ring to the picosecond, and inside the bound.
TEST(RingStream, UncongestedUnequalChunksWithinBound) {
  const SimTime s = serialization_ps(4096, 400'000'000'000);
  auto t = [&](std::uint64_t r) { return 3 * s + serialization_ps(r, 400'000'000'000) + 2 * 500'000; };
  for (const std::uint32_t n : {4u, 8u, 16u}) {
    for (const m::CollOp op : kOps) {
      for (const std::uint64_t extra : {std::uint64_t{1}, std::uint64_t{3}}) {
        const std::uint64_t bytes = 10'000 * std::uint64_t{n} + extra;
        const m::Workload w = collective(n, op, bytes);
        for (const char* rung : {"flow", "analytical"}) {
          SCOPED_TRACE(std::string(rung) + " n=" + std::to_string(n) + " op=" + std::to_string(static_cast<int>(op)) +
                       " bytes=" + std::to_string(bytes));
          const SimTime step = iteration(run(&w, rung, "step", one_leaf(n)));
          const SimTime stream = iteration(run(&w, rung, "stream", one_leaf(n)));
          EXPECT_EQ(stream, step);
          const auto S = static_cast<SimTime>(steps_of(op, n));
          EXPECT_GE(stream, S * t(10'000 - 2 * 4096));
          EXPECT_LE(stream, S * t(10'001 - 2 * 4096));
        }
      }
    }
  }
}

// Rings whose links differ (8 GPUs per host: NVLink hops inside a host, a NIC hop between
// hosts; the MoE DP rings' shape). Not exact: the step-wise ring is paced by its slowest link
// (the NIC), which reaches every rank through the ring-wide maximum (the rank downstream of the
// NIC hop sees T_nic(B)); bandwidth-bound rings come out late by the token rounds
// (R x D at the flow rung, R x the route latency at the analytical rung), latency-bound ones a
// few percent early (P1 leaves out queue-pair waits). Asserted within 10%; measured values
// printed and quoted in docs/fidelity.md.
TEST(RingStream, MixedNvlinkNicRingWithinTenPercent) {
  for (const std::uint32_t n : {16u, 64u}) {
    for (const m::CollOp op : {m::CollOp::kAllGather, m::CollOp::kAllReduce}) {
      for (const std::uint64_t bytes : {std::uint64_t{256} << 10, std::uint64_t{16} << 20}) {
        const m::Workload w = collective(n, op, bytes);
        for (const char* rung : {"flow", "analytical"}) {
          SCOPED_TRACE(std::string(rung) + " n=" + std::to_string(n) + " bytes=" + std::to_string(bytes));
          const SimTime step = iteration(run(&w, rung, "step", {}));
          const SimTime stream = iteration(run(&w, rung, "stream", {}));
          const double d = static_cast<double>(stream - step) / static_cast<double>(step);
          std::printf("%u GPUs (8 per host) %llu B ring %s, %s: step %lld ps, stream %lld ps (%+.3f%%)\n", n,
                      static_cast<unsigned long long>(bytes), op == m::CollOp::kAllGather ? "AllGather" : "AllReduce",
                      rung, static_cast<long long>(step), static_cast<long long>(stream), 100 * d);
          EXPECT_LT(std::fabs(d), 0.10);
        }
      }
    }
  }
}

// Must-show 2: congestion. 16 hosts of one GPU on a leaf-spine fabric, 4 hosts per leaf, 4:1
// oversubscribed (one spine uplink per leaf).
// (a) 4 rings of 4 ranks, one rank per leaf each: every ring link crosses the spines and the 4
// rings share every uplink symmetrically; each step-wise step then takes the same shared time
// and the stream equals the step-wise ring to the picosecond (the correction is linear in the
// drain: S (T_shared(C) - T(C)) = T_shared(S C) - T(S C) with whole packets).
// (b) asymmetric: rings of different sizes and byte counts sharing some uplinks (2, 3 or 4
// flows on an uplink, changing as rings finish): the stream takes each link's max-min share over
// the whole collective where the step-wise ring is gated by its slowest edge at every step.
// Asserted loosely (10%), measured values printed and quoted in docs/fidelity.md.
TEST(RingStream, CongestedOversubscribedWithinTenPercent) {
  const std::vector<std::string> fabric = {"cluster.gpus_per_host=1", "cluster.topology=leaf_spine",
                                           "cluster.nics_per_leaf=4", "cluster.oversubscription=4:1"};
  const SimTime s = serialization_ps(4096, 400'000'000'000);
  for (const std::uint64_t bytes : {std::uint64_t{1} << 20, std::uint64_t{16} << 20}) {
    const m::Workload w = strided_rings(4, 4, bytes);
    const SimTime step = iteration(run(&w, "flow", "step", fabric));
    const SimTime stream = iteration(run(&w, "flow", "stream", fabric));
    std::printf("(a) 4 rings x 4 ranks, leaf-spine 4:1, %llu B AllReduce: step %lld ps, stream %lld ps\n",
                static_cast<unsigned long long>(bytes), static_cast<long long>(step), static_cast<long long>(stream));
    EXPECT_EQ(stream, step);
    // Each uplink carries 4 rings' flows: at least 4x the drain of the 6 steps' chunks.
    EXPECT_GE(stream, 4 * 6 * static_cast<SimTime>(bytes / 4 / 4096) * s);
  }
  const std::vector<std::vector<std::uint32_t>> rings = {
      {0, 4, 8, 12}, {1, 5, 9, 13, 2, 6, 10, 14}, {3, 7}, {11, 15}};
  for (const std::uint64_t scale : {std::uint64_t{1}, std::uint64_t{16}}) {
    const std::vector<std::uint64_t> bytes = {scale << 20, scale << 21, scale << 19, scale << 20};
    const m::Workload w = rings_of(rings, bytes, 16);
    const SimTime step = iteration(run(&w, "flow", "step", fabric));
    const SimTime stream = iteration(run(&w, "flow", "stream", fabric));
    const double d = static_cast<double>(stream - step) / static_cast<double>(step);
    std::printf("(b) rings of 4, 8, 2, 2 ranks, leaf-spine 4:1, %llu/%llu/%llu/%llu B AllReduce: step %lld ps, "
                "stream %lld ps (%+.3f%%)\n",
                static_cast<unsigned long long>(bytes[0]), static_cast<unsigned long long>(bytes[1]),
                static_cast<unsigned long long>(bytes[2]), static_cast<unsigned long long>(bytes[3]),
                static_cast<long long>(step), static_cast<long long>(stream), 100 * d);
    EXPECT_LT(std::fabs(d), 0.10);
  }
}

// A documented difference that is not congestion: flows of one queue pair are served one at a
// time (FlowNetLp), and a ring shares its QP (src, dst, channel 0) with other traffic to the same
// peer. Every rank also sends `p2p` bytes to its ring successor, posted right after the ring
// started. Step-wise, step 1 of the ring queues behind the whole p2p message; the stream took
// the QP first and completes at the uncongested S T(C), the p2p message after it. The iteration
// (all bytes through the same QPs) stays within 5% (measured: 1 MiB p2p: step 174.264 us,
// stream 168.854 us, -3.1%; 64 MiB: 1,495.469 vs 1,490.060 us, -0.4%); the collective's own
// time does not (174.264 / 1,495.469 us step-wise, 154.374 us streamed).
TEST(RingStream, SharedQueuePairOrderDiffers) {
  const SimTime s = serialization_ps(4096, 400'000'000'000);
  const SimTime t = 256 * s + s + 2 * 500'000;  // T(1 MiB)
  const std::uint32_t n = 8;
  for (const std::uint64_t p2p : {std::uint64_t{1} << 20, std::uint64_t{64} << 20}) {
    m::Workload w = collective(n, m::CollOp::kAllGather, std::uint64_t{n} << 20);
    for (std::uint32_t r = 0; r < n; ++r) {
      m::WorkNode snd;
      snd.name = "send";
      snd.type = m::NodeType::kSend;
      snd.peer = static_cast<std::int32_t>((r + 1) % n);
      snd.bytes = p2p;
      snd.tag = 7;
      m::WorkNode rcv = snd;
      rcv.name = "recv";
      rcv.type = m::NodeType::kRecv;
      rcv.peer = static_cast<std::int32_t>((r + n - 1) % n);
      w.programs[r].push_back(snd);
      w.programs[r].push_back(rcv);
    }
    SCOPED_TRACE("p2p=" + std::to_string(p2p));
    const RunResult step = run(&w, "flow", "step", one_leaf(n));
    const RunResult stream = run(&w, "flow", "stream", one_leaf(n));
    const SimTime coll_step = step.collectives[0].end_ps - step.collectives[0].start_ps;
    const SimTime coll_stream = stream.collectives[0].end_ps - stream.collectives[0].start_ps;
    std::printf("AllGather 8 x 1 MiB + %llu B p2p to the successor: step coll %lld iter %lld, stream coll %lld iter %lld\n",
                static_cast<unsigned long long>(p2p), static_cast<long long>(coll_step),
                static_cast<long long>(iteration(step)), static_cast<long long>(coll_stream),
                static_cast<long long>(iteration(stream)));
    EXPECT_EQ(coll_stream, static_cast<SimTime>(n - 1) * t);
    EXPECT_GE(coll_step, static_cast<SimTime>(p2p / 4096) * s);  // behind the whole p2p message
    EXPECT_LT(std::fabs(static_cast<double>(iteration(stream) - iteration(step))) / static_cast<double>(iteration(step)),
              0.05);
  }
}

// Must-show 3: bit-identical across 1, 2 and 4 MPI processes (and 1 and 2 threads) with
// streams: the congested rings and a ring inside and across hosts.
TEST(RingStream, BitIdenticalAcrossProcessesAndThreads) {
  const int procs = world_procs();
  const std::vector<std::string> fabric = {"cluster.gpus_per_host=1", "cluster.topology=leaf_spine",
                                           "cluster.nics_per_leaf=4", "cluster.oversubscription=4:1"};
  const m::Workload rings = strided_rings(4, 4, 1u << 20);
  const m::Workload world = collective(16, m::CollOp::kAllReduce, 1u << 20);
  for (const char* rung : {"flow", "analytical"}) {
    SCOPED_TRACE(rung);
    const RunResult ref_r = run(&rings, rung, "stream", fabric);
    const RunResult ref_w = run(&world, rung, "stream", {});
    EXPECT_NE(ref_r.digest, run(&rings, rung, "step", fabric).digest);  // the mode is in effect
    for (unsigned threads : {1u, 2u}) {
      SCOPED_TRACE("threads=" + std::to_string(threads) + " processes=" + std::to_string(procs));
      const RunResult got_r = run(&rings, rung, "stream", fabric, MPI_COMM_WORLD, threads);
      EXPECT_EQ(got_r.digest, ref_r.digest);
      EXPECT_EQ(iteration(got_r), iteration(ref_r));
      const RunResult got_w = run(&world, rung, "stream", {}, MPI_COMM_WORLD, threads);
      EXPECT_EQ(got_w.digest, ref_w.digest);
      EXPECT_EQ(iteration(got_w), iteration(ref_w));
    }
  }
}

// The packet rung ignores the key (it is the reference: `ladder` on a spec that sets it still
// runs the packet rung step by step).
TEST(RingStream, PacketRungIgnoresIt) {
  const m::Workload w = collective(4, m::CollOp::kAllGather, 4 * 16384);
  const RunResult step = run(&w, "packet", "step", one_leaf(4));
  const RunResult stream = run(&w, "packet", "stream", one_leaf(4));
  EXPECT_EQ(step.digest, stream.digest);
  EXPECT_EQ(iteration(step), iteration(stream));
}

TEST(RingStream, BadValueIsInputErrorNamingTheField) {
  const m::Workload w = collective(4, m::CollOp::kAllGather, 4 * 16384);
  try {
    run(&w, "flow", "streams", {});
    FAIL() << "no error";
  } catch (const fabricsim::engine::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sim.ring_flows"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("step or stream"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {
// Start skew: rank 3 computes `delay` before an AllGather of C = 1 MiB per rank on an uncongested
// ring of equal links. Step-wise, rank 2's last receive is the end of the chain that starts at
// rank 3 (S = n - 1 steps), so the collective ends at delay + S T(C); streamed, rank 4's incoming
// stream leaves rank 3 at `delay` and completes at delay + T_in(B_in) + (P1 - T_in(B_in)) =
// delay + S T(C), the same instant (the other ranks end earlier than step-wise: the stream does
// not forward the late start around the ring, docs/fidelity.md). T(1 MiB) = 256 s + s + 1 us.
TEST(RingStream, LateRankEndsTheRingAtTheSameInstant) {
  const SimTime s = serialization_ps(4096, 400'000'000'000);
  const SimTime t = 256 * s + s + 2 * 500'000;
  for (const std::uint32_t n : {8u, 16u}) {
    for (const SimTime delay : {SimTime{1'000'000}, SimTime{100'000'000}}) {
      m::Workload w = collective(n, m::CollOp::kAllGather, std::uint64_t{n} << 20);
      m::WorkNode c;
      c.name = "compute";
      c.type = m::NodeType::kCompute;
      c.duration_ps = delay;
      auto& p = w.programs[3];
      p.insert(p.begin(), c);
      p[1].deps = {0};
      SCOPED_TRACE("n=" + std::to_string(n) + " delay=" + std::to_string(delay));
      const SimTime closed = delay + static_cast<SimTime>(n - 1) * t;
      EXPECT_EQ(iteration(run(&w, "flow", "step", one_leaf(n))), closed);
      EXPECT_EQ(iteration(run(&w, "flow", "stream", one_leaf(n))), closed);
    }
  }
}
}  // namespace
