// Issue 9: the flow and analytical rungs against closed forms, against the packet level, and
// bit-identical across 1, 2 and 4 MPI processes and 1 and 2 threads.
//
// Closed form of one transfer of S bytes alone on a store-and-forward path of h links (rates R_i,
// latencies L_i, MTU M, n = S/M packets, s_i = ceil(M*8e12/R_i) ps as the packet level rounds):
//     T = n*s_1 + sum_{i>=2} s_i + sum_i L_i        (the first link serializes every packet,
//                                                    each later hop adds one packet's time)
// An uncongested ring AllReduce of N ranks and S bytes is 2(N-1) such steps of C = S/N bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/errors.hpp"
#include "engine/time.hpp"
#include "jobs/run.hpp"
#include "models/core/workload.hpp"
#include "tests/support/paths.hpp"
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

const char* const kRungs[] = {"packet", "flow", "analytical"};

m::Workload allreduce(std::uint32_t n, std::uint64_t bytes) {
  return fabricsim::testing::collective_workload(n, m::CollOp::kAllReduce, bytes, "allreduce");
}

m::Workload alltoall(std::uint32_t n, std::uint64_t bytes) {
  return fabricsim::testing::collective_workload(n, m::CollOp::kAllToAll, bytes, "allreduce");
}

/// Ranks 1..n-1 each send `bytes` to rank 0 at time 0.
m::Workload incast(std::uint32_t n, std::uint64_t bytes) { return fabricsim::testing::incast_workload(n, bytes); }

RunResult run(const m::Workload* w, const std::string& rung, std::vector<std::string> sets,
              MPI_Comm comm = MPI_COMM_SELF, unsigned threads = 1, const std::string& path = "") {
  sets.insert(sets.begin(), "simccl.planner=ring");  // callers may override it
  // The closed forms here take the NVLink rate as the link's data rate (no NCCL per-link
  // efficiency; nvlink_domain_test covers that).
  sets.insert(sets.begin(), "cluster.nvlink_efficiency=1");
  sets.push_back("sim.fidelity=" + rung);
  return fabricsim::testing::run_quiet(w, std::move(sets), comm, threads, false, path);
}

TEST(Fidelity, SingleFlowClosedFormAllRungs) {
  const std::uint64_t bytes = 1u << 20;
  const std::uint64_t n = bytes / 4096;
  // Across hosts through one leaf: NIC 400 Gb/s, 500 ns per link.
  const SimTime nic = static_cast<SimTime>(n) * serialization_ps(4096, 400'000'000'000) +
                      serialization_ps(4096, 400'000'000'000) + 2 * 500'000;
  // Inside a host through the NVSwitch: 3.6 Tb/s, 100 ns (9102.2 ps per packet, rounded up).
  const SimTime nvl = static_cast<SimTime>(n) * serialization_ps(4096, 3'600'000'000'000) +
                      serialization_ps(4096, 3'600'000'000'000) + 2 * 100'000;
  EXPECT_EQ(nic, 22'053'440);
  const m::Workload w = incast(2, bytes);  // one flow: rank 1 -> rank 0
  for (const char* rung : kRungs) {
    SCOPED_TRACE(rung);
    EXPECT_EQ(iteration(run(&w, rung, {"cluster.gpus_per_host=1"})), nic);
    EXPECT_EQ(iteration(run(&w, rung, {"cluster.gpus_per_host=2"})), nvl);
  }
}

// A transfer whose last packet is short (S = k*M + r, 0 < r < M) through two equal
// store-and-forward hops: the last packet waits at the second hop behind the full packet before
// it (tandem of FIFO stations: packet j leaves hop 2 at max(hop 2 free, its arrival) + its
// serialization), so T = (k+1)*s + ser(r) + L_1 + L_2, not k*s + 2*ser(r) + L_1 + L_2 (the
// last packet's own store-and-forward only, which the flow and analytical rungs charged before:
// they were 5-7.5% fast just over one MTU per flow, docs/fidelity.md).
TEST(Fidelity, ShortLastPacketClosedFormAllRungs) {
  for (const std::uint64_t bytes : {std::uint64_t{4097}, std::uint64_t{3 * 4096 + 100}}) {
    const std::uint64_t k = bytes / 4096, r = bytes % 4096;
    const SimTime nic = static_cast<SimTime>(k + 1) * serialization_ps(4096, 400'000'000'000) +
                        serialization_ps(r, 400'000'000'000) + 2 * 500'000;
    const SimTime nvl = static_cast<SimTime>(k + 1) * serialization_ps(4096, 3'600'000'000'000) +
                        serialization_ps(r, 3'600'000'000'000) + 2 * 100'000;
    const m::Workload w = incast(2, bytes);  // one flow: rank 1 -> rank 0
    for (const char* rung : kRungs) {
      SCOPED_TRACE(std::string(rung) + " " + std::to_string(bytes) + " B");
      EXPECT_EQ(iteration(run(&w, rung, {"cluster.gpus_per_host=1"})), nic);
      EXPECT_EQ(iteration(run(&w, rung, {"cluster.gpus_per_host=2"})), nvl);
    }
  }
}

TEST(Fidelity, UncongestedRingAllReduceClosedForm) {
  const std::uint32_t ranks = 8;
  const std::uint64_t bytes = 1u << 20, chunk = bytes / ranks;
  const SimTime s = serialization_ps(4096, 3'600'000'000'000);
  const SimTime step = static_cast<SimTime>(chunk / 4096) * s + s + 2 * 100'000;
  const SimTime closed = 2 * (ranks - 1) * step;
  const m::Workload w = allreduce(ranks, bytes);
  for (const char* rung : kRungs) {
    SCOPED_TRACE(rung);
    EXPECT_EQ(iteration(run(&w, rung, {})), closed);
  }
}

double rel(SimTime a, SimTime b) { return std::fabs(static_cast<double>(a - b)) / static_cast<double>(b); }

TEST(Fidelity, FlowWithinFivePercentOfPacketUncongested) {
  // The ASTRA-sim 16-NPU 1 MB AllReduce trace (two hosts) with the ring planner (one ring,
  // 64 KiB chunks). With the NCCL planner the same trace becomes ~2,000 flows of a few packets
  // on 16+ channels; there flow is +25..35% vs packet (see docs/fidelity.md): each step's send
  // completes one hop late at the flow level, and max-min sharing finishes concurrent channel
  // flows together where the packet level's FIFOs let some finish early and pipeline on.
  const std::string trace = fabricsim::testing::data(
      "chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/16npus_1MB/all_reduce");
  {
    const SimTime p = iteration(run(nullptr, "packet", {}, MPI_COMM_SELF, 1, trace));
    const SimTime f = iteration(run(nullptr, "flow", {}, MPI_COMM_SELF, 1, trace));
    // Known error source of the flow rung at small chunks: its send completion returns
    // D = min(NVLink, NIC) latency (100 ns) after the flow drained at the network LP, which runs
    // D behind the GPUs, so each of the ring's 2(N-1) = 30 dependent steps on the bottleneck NIC
    // can open a gap of up to 2D = 200 ns that the packet level does not have. Bound: 5% plus those gaps. (Measured: equal to the picosecond, because the
    // ring's receives, not its send completions, pace it; the flow rung is never faster here
    // since every byte of a flow, its last packet included, holds its share of the NIC.)
    const double gaps = 30 * 2 * 100'000;
    EXPECT_GE(f, p) << "flow rung faster than packet";
    EXPECT_LT(static_cast<double>(f - p), 0.05 * static_cast<double>(p) + gaps) << "packet " << p << " flow " << f;
  }
  // 128 GPUs (16 hosts, leaf-spine: 4 hosts per leaf, only 4 ring edges cross a spine), 16 MiB
  // ring AllReduce. The NIC edges (host to host) are the bottleneck and every rank's successive
  // sends overlap on its own NIC: packet and flow share the NIC (FIFO vs max-min), analytical
  // serializes them on the sender's port (its only shared resource) and so also reaches the
  // NIC's line rate; without that port clock it reported the dependency bound, ~3x too fast. (On the
  // rail-optimized default the host-crossing ring edges all leave one rail leaf and collide on
  // ECMP spine uplinks: packet 824.8 us, flow 874.0 us, +6%: congestion, not the uncongested case.)
  const m::Workload w = allreduce(128, 16u << 20);
  const std::vector<std::string> ls = {"cluster.topology=leaf_spine"};
  const SimTime p = iteration(run(&w, "packet", ls));
  const SimTime f = iteration(run(&w, "flow", ls));
  const SimTime a = iteration(run(&w, "analytical", ls));
  EXPECT_LT(rel(f, p), 0.05) << "packet " << p << " flow " << f;
  EXPECT_LE(a, p) << "packet " << p << " analytical " << a;  // nothing beyond the sender waits
  EXPECT_LT(rel(a, p), 0.05) << "packet " << p << " analytical " << a;
  std::printf("128-GPU 16 MiB ring AllReduce, leaf-spine: packet %lld ps, flow %lld ps, analytical %lld ps\n",
              static_cast<long long>(p), static_cast<long long>(f), static_cast<long long>(a));
}

// AllToAll whose per-peer messages are one packet each (32 GPUs, 1 and 2 KiB per peer; NCCL
// planner, default rail-optimized fabric, no congestion): a GPU's ~31 one-packet sends leave its
// ports one after another. The flow rung served single-packet flows as pure latency (no port
// time) and was 40-55% fast (1.291 vs 2.142 us); with the port clock it is within 5% (measured
// 0.0% and -0.5%). Analytical (its own port clock) too.
TEST(Fidelity, OnePacketAllToAllFlowWithinFivePercentOfPacket) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential comparison");
  for (const std::uint64_t bytes : {std::uint64_t{32} << 10, std::uint64_t{64} << 10}) {
    const m::Workload w = alltoall(32, bytes);
    const std::vector<std::string> sets = {"simccl.planner=nccl"};
    const RunResult p = run(&w, "packet", sets);
    const RunResult f = run(&w, "flow", sets);
    const RunResult a = run(&w, "analytical", sets);
    EXPECT_EQ(p.fabric.pause_frames, 0u);
    EXPECT_EQ(p.flows, f.flows);
    EXPECT_LT(rel(iteration(f), iteration(p)), 0.05) << bytes << " B: packet " << iteration(p) << " flow " << iteration(f);
    EXPECT_LT(rel(iteration(a), iteration(p)), 0.05) << bytes << " B: packet " << iteration(p) << " analytical " << iteration(a);
    std::printf("32-GPU AllToAll %llu B: packet %lld ps, flow %lld ps, analytical %lld ps\n",
                static_cast<unsigned long long>(bytes), static_cast<long long>(iteration(p)),
                static_cast<long long>(iteration(f)), static_cast<long long>(iteration(a)));
  }
}

// Just over one MTU per flow (a short last packet): 16 GPUs, NCCL planner, 4,097 B AllReduce;
// 64 GPUs, ring planner, 262,208 B (4,097 B per ring step). The flow rung was -5.1% / -7.5%
// (the short last packet's tandem wait, ShortLastPacketClosedFormAllRungs); measured now
// -0.03% / +0.5%.
TEST(Fidelity, JustOverOneMtuFlowWithinFivePercentOfPacket) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential comparison");
  struct Case {
    std::uint32_t ranks;
    std::uint64_t bytes;
    const char* planner;
  };
  for (const Case c : {Case{16, 4097, "simccl.planner=nccl"}, Case{64, 64 * 4097, "simccl.planner=ring"}}) {
    const m::Workload w = allreduce(c.ranks, c.bytes);
    const RunResult p = run(&w, "packet", {c.planner});
    const RunResult f = run(&w, "flow", {c.planner});
    EXPECT_EQ(p.fabric.pause_frames, 0u);
    EXPECT_LT(rel(iteration(f), iteration(p)), 0.05) << c.ranks << " GPUs " << c.bytes << " B: packet " << iteration(p)
                                                   << " flow " << iteration(f);
    std::printf("%u-GPU AllReduce %llu B (%s): packet %lld ps, flow %lld ps\n", c.ranks,
                static_cast<unsigned long long>(c.bytes), c.planner, static_cast<long long>(iteration(p)),
                static_cast<long long>(iteration(f)));
  }
}

// The 64-GPU leaf-spine 1:1 AllReduce of 256 MiB with nic.cc=none (issue 24's case: NVLS
// within the hosts, the NCCL planner's default choice) scaled down to what CI affords: 32 GPUs
// on the same non-blocking leaf-spine fabric, 32 MiB, no congestion control. Without
// congestion at the packet level (no PFC pause, no drop) the flow rung agrees within 5%
// (measured +0.3%: 335.026 vs 334.081 us; the 64-GPU 256 MiB case reads -5.8%, docs/fidelity.md).
TEST(Fidelity, LeafSpineNvlsAllReduceFlowWithinFivePercentOfPacketNoCc) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential comparison");
  const m::Workload w = allreduce(32, 32u << 20);
  const std::vector<std::string> sets = {"simccl.planner=nccl", "nic.cc=none", "cluster.topology=leaf_spine"};
  const RunResult p = run(&w, "packet", sets);
  const RunResult f = run(&w, "flow", sets);
  EXPECT_EQ(p.fabric.pause_frames, 0u);
  EXPECT_EQ(p.fabric.drops, 0u);
  EXPECT_EQ(p.flows, f.flows);
  EXPECT_LT(rel(iteration(f), iteration(p)), 0.05) << "packet " << iteration(p) << " flow " << iteration(f);
}

// The NCCL planner (ring over 16+ channels, one connection - QPs, UDP
// source ports, ECMP paths - per channel and peer), DCQCN on (the default), 128 GPUs on the
// rail-optimized non-blocking fabric. The flow rung rides the same QPs, so it takes exactly the
// packet level's ECMP paths; where the packet level shows no heavy congestion (no PFC pause,
// hardly any CNP) the two agree within 5% (measured +3.2% at 16 MiB, +2.0% at 32 MiB, docs/fidelity.md; the
// flow rung reports each send completion 2 x 100 ns late, which the NCCL plan's per-channel
// chains of small steps feel). Sequential only: the packet run is the slow part and
// bit-identity across processes is tested below.
TEST(Fidelity, NcclAllReduce128FlowWithinFivePercentOfPacketDcqcn) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential comparison");
  const m::Workload w = allreduce(128, 16u << 20);
  const std::vector<std::string> sets = {"simccl.planner=nccl", "nic.cc=dcqcn"};
  const RunResult p = run(&w, "packet", sets);
  const RunResult f = run(&w, "flow", sets);
  // No heavy congestion at the packet level: no PFC pause, no drop, DCQCN cuts rare (a few
  // CNPs from momentary ECN marks; measured 16 for ~2.4 M data packets).
  EXPECT_EQ(p.fabric.pause_frames, 0u);
  EXPECT_EQ(p.fabric.drops, 0u);
  EXPECT_LT(p.fabric.cnps * 10000, p.fabric.nic_data_packets);
  EXPECT_EQ(p.flows, f.flows);
  EXPECT_LT(rel(iteration(f), iteration(p)), 0.05) << "packet " << iteration(p) << " flow " << iteration(f);
  std::printf("128-GPU 16 MiB AllReduce, NCCL planner, DCQCN: packet %lld ps, flow %lld ps\n",
              static_cast<long long>(iteration(p)), static_cast<long long>(iteration(f)));
}

// The NCCL planner spreads a collective over many channels (24 on 8 x H100 at 32 MiB), all
// leaving a GPU through its one NVLink port at once. The analytical rung serializes a sender's
// own transfers on that port, so no rung may move a ring AllReduce faster than the port:
// time >= 2(n-1)/n x S / R (R = 3.6 Tb/s per direction). Without the port clock each channel got
// the whole link (busbw ~4,400 GB/s, 10x the port). Flow and analytical agree within 5%: the
// only shared resource here is each GPU's port (the NVSwitch is non-blocking).
// (NCCL_ALGO=Ring: by default the cost model picks NVLS there, which moves (1 + 1/n) x S per port
// and direction at cluster.nvls_bandwidth; its bound is checked below.)
TEST(Fidelity, NcclMultiChannelNeverExceedsPortRateAllRungs) {
  const std::uint32_t n = 8;
  const std::uint64_t bytes = 32u << 20;
  const m::Workload w = allreduce(n, bytes);
  // Port bound and rung agreement of the transfers alone: no NCCL launch or per-step latency.
  const std::vector<std::string> sets = {"simccl.planner=nccl", "nccl.NCCL_ALGO=Ring", "simccl.launch_latency=none",
                                         "simccl.step_latency=none"};
  const double bound_ps = 2.0 * (n - 1) / n * static_cast<double>(bytes) * 8.0 / 3.6e12 * 1e12;
  const SimTime f = iteration(run(&w, "flow", sets));
  const SimTime a = iteration(run(&w, "analytical", sets));
  EXPECT_GE(static_cast<double>(f), bound_ps);
  EXPECT_GE(static_cast<double>(a), bound_ps);
  EXPECT_LT(rel(a, f), 0.05) << "flow " << f << " analytical " << a;
  std::printf("8-GPU 32 MiB AllReduce, NCCL planner: port bound %.0f ps, flow %lld ps, analytical %lld ps\n",
              bound_ps, static_cast<long long>(f), static_cast<long long>(a));
  // NVLS (the default choice): no rung beats (1 + 1/n) x S at the NVLS issue rate (306 GB/s).
  const double nvls_bound_ps = (1.0 + 1.0 / n) * static_cast<double>(bytes) / 306e9 * 1e12;
  for (const char* rung : {"packet", "flow", "analytical"}) {
    EXPECT_GE(static_cast<double>(iteration(run(&w, rung, {"simccl.planner=nccl"}))), nvls_bound_ps) << rung;
  }
}

// Incast: 8 senders into one receiver NIC. Packet (FIFO interleaving) and flow (max-min 1/8
// each) both finish when the receiver's link has carried all 8 MiB; analytical ignores sharing
// and is ~8x too optimistic: this is the error source the flow rung closes.
TEST(Fidelity, IncastFlowMatchesPacketAnalyticalDoesNot) {
  const std::uint64_t bytes = 1u << 20;
  const m::Workload w = incast(9, bytes);
  const std::vector<std::string> sets = {"cluster.gpus_per_host=1"};
  const SimTime p = iteration(run(&w, "packet", sets));
  const SimTime f = iteration(run(&w, "flow", sets));
  const SimTime a = iteration(run(&w, "analytical", sets));
  const SimTime drain = static_cast<SimTime>(8 * bytes / 4096) * serialization_ps(4096, 400'000'000'000);
  EXPECT_LT(rel(f, p), 0.05) << "packet " << p << " flow " << f;
  EXPECT_GE(p, drain);
  EXPECT_GE(f, drain);
  EXPECT_LT(a * 6, p);  // no sharing: one flow's time
}

TEST(Fidelity, BitIdenticalAcrossProcessesAndThreads) {
  const int procs = world_procs();
  const std::string trace = fabricsim::testing::data(
      "chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/16npus_1MB/all_reduce");
  const m::Workload inc = incast(9, 1u << 20);
  for (const char* rung : {"flow", "analytical"}) {
    for (const char* planner : {"ring", "nccl"}) {
      SCOPED_TRACE(std::string(rung) + " " + planner);
      const std::vector<std::string> sets = {std::string("simccl.planner=") + planner};
      const auto ref = run(nullptr, rung, sets, MPI_COMM_SELF, 1, trace);
      const auto ref_inc = run(&inc, rung, {"cluster.gpus_per_host=2"}, MPI_COMM_SELF, 1);
      for (unsigned threads : {1u, 2u}) {
        SCOPED_TRACE("threads=" + std::to_string(threads) + " processes=" + std::to_string(procs));
        const auto got = run(nullptr, rung, sets, MPI_COMM_WORLD, threads, trace);
        EXPECT_EQ(got.digest, ref.digest);
        EXPECT_EQ(iteration(got), iteration(ref));
        const auto got_inc = run(&inc, rung, {"cluster.gpus_per_host=2"}, MPI_COMM_WORLD, threads);
        EXPECT_EQ(got_inc.digest, ref_inc.digest);
      }
    }
  }
}

// Must-show 5 on multi-switch fabrics: every rung bit-identical across 1/2/4 processes and 1/2
// threads where flows cross spines and ECMP (and, 3-tier, the core) on an oversubscribed fabric,
// so the network LP of the flow rung sees many concurrent components and re-solves.
// 32 GPUs (4 hosts x 8), leaf-spine with 8 NICs per leaf (4 leaves): a 256 KiB AllToAll (ring
// planner: direct flows of 8 KiB, 2 packets) and a 256 KiB AllReduce (ring or NCCL planner) back
// to back. (Small sizes: under mpiexec every 100 ns lookahead window costs an MPI_Allreduce.)
TEST(Fidelity, BitIdenticalOnOversubscribedClosAllRungs) {
  const int procs = world_procs();
  m::Workload w = allreduce(32, 256u << 10);
  for (auto& p : w.programs) {
    m::WorkNode a = p.front();
    a.name = "alltoall";
    a.op = m::CollOp::kAllToAll;
    p.insert(p.begin(), a);
  }
  const std::vector<std::vector<std::string>> fabrics = {
      {"cluster.topology=leaf_spine", "cluster.nics_per_leaf=8", "cluster.oversubscription=4:1"},
      {"cluster.topology=leaf_spine", "cluster.nics_per_leaf=8", "cluster.tiers=3", "cluster.pods=2",
       "cluster.oversubscription=2:1,2:1"},
  };
  for (const char* rung : kRungs) {
    for (const auto& fabric : fabrics) {
      for (const char* planner : {"ring", "nccl"}) {
        // The packet level with the NCCL planner on a multi-leaf fabric is in tests/run/determinism_test.
        if (std::string(rung) == "packet" && std::string(planner) == "nccl") continue;
        std::vector<std::string> sets = fabric;
        sets.push_back(std::string("simccl.planner=") + planner);
        SCOPED_TRACE(std::string(rung) + " " + fabric.back() + " " + planner);
        const auto ref = run(&w, rung, sets, MPI_COMM_SELF, 1);
        EXPECT_GT(iteration(ref), 0);
        for (unsigned threads : {1u, 2u}) {
          SCOPED_TRACE("threads=" + std::to_string(threads) + " processes=" + std::to_string(procs));
          const auto got = run(&w, rung, sets, MPI_COMM_WORLD, threads);
          EXPECT_EQ(got.digest, ref.digest);
          EXPECT_EQ(iteration(got), iteration(ref));
        }
      }
    }
  }
}

TEST(Fidelity, UnknownFidelityIsInputError) {
  const m::Workload w = incast(2, 4096);
  EXPECT_THROW(run(&w, "bogus", {}), fabricsim::engine::InputError);
}

}  // namespace
