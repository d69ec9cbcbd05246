// NVLink SHARP (NVLS) at the packet rung: the NVSwitch reduces (multimem.ld_reduce) and
// multicasts (multimem.st), so an NVLS AllReduce of S bytes on n GPUs moves (1 + 1/n) x S through
// each GPU port per direction: up, every chunk once into the reduction plus the owned chunk's
// multicast (S + S/n); down, the owned chunk reduced plus every chunk by multicast (S/n + S).
// Asserted here:
//  * per-GPU NVLink bytes (payload, both directions) equal (1 + 1/n) x S exactly, also for
//    node-local communicators of 4 GPUs that run at the same time on two hosts;
//  * the time of an uncongested NVLS AllReduce lies between its closed-form bounds;
//  * the flow rung within 3% of the packet rung;
//  * bit-identical results on 1, 2 and 4 MPI processes x 1 and 2 threads, at every rung.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "jobs/nccl_tests.hpp"
#include "jobs/run.hpp"
#include "models/core/workload.hpp"
#include "tests/support/mpi.hpp"
#include "tests/support/run.hpp"

namespace {

using fabricsim::jobs::RunResult;
using fabricsim::models::Workload;

// `hosts` x `gph` GPUs; every rank runs one AllReduce of `bytes` on its host's communicator.
Workload per_host_allreduce(unsigned hosts, unsigned gph, std::uint64_t bytes) {
  Workload w = fabricsim::jobs::nccl_tests_workload("all_reduce", hosts * gph, bytes, 0);
  for (unsigned h = 0; h < hosts; ++h) {
    fabricsim::models::CommGroup g;
    g.name = "node" + std::to_string(h);
    for (unsigned i = 0; i < gph; ++i) g.ranks.push_back(h * gph + i);
    w.groups.push_back(g);
  }
  for (unsigned r = 0; r < hosts * gph; ++r) w.programs[r][0].group = static_cast<std::int32_t>(1 + r / gph);
  return w;
}

RunResult run(const Workload& w, unsigned hosts, unsigned gph, std::vector<std::string> sets, MPI_Comm comm,
              unsigned threads, bool keep) {
  sets.push_back("cluster.gpus_per_host=" + std::to_string(gph));
  sets.push_back("cluster.hosts=" + std::to_string(hosts));
  // The closed forms here are the transfers alone: no NCCL launch or per-step latency.
  sets.push_back("simccl.launch_latency=none");
  sets.push_back("simccl.step_latency=none");
  return fabricsim::testing::run_quiet(&w, std::move(sets), comm, threads, keep);
}

// NVLink payload bytes out of (up) and into (down) each GPU, from the link samples.
void nvlink_bytes(const RunResult& r, unsigned gpus, std::vector<std::uint64_t>& up, std::vector<std::uint64_t>& down) {
  up.assign(gpus, 0);
  down.assign(gpus, 0);
  for (const auto& l : r.link_records) {
    if (l.tier != 0) continue;
    if (l.from_node < gpus) up[l.from_node] += l.bytes;
    if (l.to_node < gpus) down[l.to_node] += l.bytes;
  }
}

TEST(Nvls, PortBytesAreOnePlusOneOverNPerDirection) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential only");
  const std::uint64_t S = 8ull << 20;
  const Workload w = fabricsim::jobs::nccl_tests_workload("all_reduce", 8, S, 0);
  const RunResult r = run(w, 1, 8, {}, MPI_COMM_SELF, 1, true);
  ASSERT_EQ(r.collectives.size(), 1u);
  EXPECT_EQ(r.collectives[0].algorithm, "NVLS");  // the cost model's choice at 8 MiB on 8 x H100
  std::vector<std::uint64_t> up, down;
  nvlink_bytes(r, 8, up, down);
  for (unsigned g = 0; g < 8; ++g) {
    EXPECT_EQ(up[g], S + S / 8) << "gpu " << g;
    EXPECT_EQ(down[g], S + S / 8) << "gpu " << g;
  }
  // Switch counters: each shard packet is reduced from 8 contributions (7 end in the switch) and
  // then multicast as the same packets to 8 ports, so absorbed : copies = 7 : 8.
  EXPECT_GT(r.fabric.nvls_copies, 0u);
  EXPECT_EQ(r.fabric.nvls_absorbed * 8, r.fabric.nvls_copies * 7);
  // Two hosts of 4 GPUs, one 4-GPU communicator each, NVLS forced (for 4 ranks NCCL's model
  // prefers the ring: NVLS busBw 4 x min(60 x 0.85 x 3/4 x 2, 60) = 240 < ring 360): per GPU
  // (1 + 1/4) x S.
  const Workload w2 = per_host_allreduce(2, 4, S);
  const RunResult r2 = run(w2, 2, 4, {"nccl.NCCL_ALGO=NVLS"}, MPI_COMM_SELF, 1, true);
  ASSERT_EQ(r2.collectives.size(), 2u);
  nvlink_bytes(r2, 8, up, down);
  for (unsigned g = 0; g < 8; ++g) {
    EXPECT_EQ(up[g], S + S / 4) << "gpu " << g;
    EXPECT_EQ(down[g], S + S / 4) << "gpu " << g;
  }
  // NCCL_NVLS_ENABLE=0: the ring (Simple: no line overhead) moves 2(n-1)/n x S per direction.
  const RunResult ring = run(w, 1, 8, {"nccl.NCCL_NVLS_ENABLE=0", "nccl.NCCL_PROTO=Simple"}, MPI_COMM_SELF, 1, true);
  EXPECT_NE(ring.collectives[0].algorithm, "NVLS");
  EXPECT_EQ(ring.fabric.nvls_copies + ring.fabric.nvls_absorbed, 0u);
  nvlink_bytes(ring, 8, up, down);
  EXPECT_EQ(up[0], 2 * 7 * S / 8);
}

// NVLSTree (2 nodes x 8, NCCL_ALGO=NVLSTree): per node NVLS as above, (1 + 1/8) x S through
// each NVLink per direction; chunk h of every loop crosses the network once up and once down the
// tree between the nodes' GPUs h (2 nodes: each tree has one edge), so every GPU's NIC sends S/8
// (it is the child in half of the channels' trees and the parent in the other half).
TEST(Nvls, NvlsTreePortBytes) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential only");
  const std::uint64_t S = 64ull << 20;
  const Workload w = fabricsim::jobs::nccl_tests_workload("all_reduce", 16, S, 0);
  const RunResult r = run(w, 2, 8, {"nccl.NCCL_ALGO=NVLSTree", "nic.cc=none"}, MPI_COMM_SELF, 1, true);
  ASSERT_EQ(r.collectives.size(), 1u);
  EXPECT_EQ(r.collectives[0].algorithm, "NVLSTree");
  std::vector<std::uint64_t> up, down, nic(16, 0);
  nvlink_bytes(r, 16, up, down);
  for (const auto& l : r.link_records) {
    if (l.tier == 1 && l.from_node < 16) nic[l.from_node] += l.bytes;
  }
  for (unsigned g = 0; g < 16; ++g) {
    EXPECT_EQ(up[g], S + S / 8) << g;
    EXPECT_EQ(down[g], S + S / 8) << g;
    EXPECT_EQ(nic[g], S / 8) << g;
  }
}

// NVLS ReduceScatter (the reduce half) and AllGather (the multicast half), forced with
// NCCL_ALGO=NVLS (NCCL's model prefers the ring for them on 8 x H100). nccl-tests sizes S are the
// whole buffer: ReduceScatter sends S into the switch and receives its S/n reduced;
// AllGather multicasts its S/n and receives all S.
TEST(Nvls, ReduceScatterAndAllGatherPortBytes) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential only");
  const std::uint64_t S = 16ull << 20;
  std::vector<std::uint64_t> up, down;
  for (const char* coll : {"reduce_scatter", "all_gather"}) {
    SCOPED_TRACE(coll);
    const Workload w = fabricsim::jobs::nccl_tests_workload(coll, 8, S, 0);
    const RunResult r = run(w, 1, 8, {"nccl.NCCL_ALGO=NVLS"}, MPI_COMM_SELF, 1, true);
    ASSERT_EQ(r.collectives.size(), 1u);
    EXPECT_EQ(r.collectives[0].algorithm, "NVLS");
    nvlink_bytes(r, 8, up, down);
    const bool rs = std::string(coll) == "reduce_scatter";
    for (unsigned g = 0; g < 8; ++g) {
      EXPECT_EQ(up[g], rs ? S : S / 8) << g;
      EXPECT_EQ(down[g], rs ? S / 8 : S) << g;
    }
    // Uncongested: the busier direction at its rate (RS: S up at 306 GB/s; AG: S down at the
    // NVLink data rate, 450 GB/s x 20.6/25 = 370.8: NCCL's SM90 per-link bandwidth, topo.h).
    const double t = static_cast<double>(r.collectives[0].end_ps - r.collectives[0].start_ps) * 1e-12;
    const double lo = rs ? static_cast<double>(S) / 306e9 : static_cast<double>(S) / (450e9 * 20.6 / 25);
    EXPECT_GE(t, lo);
    EXPECT_LE(t, lo * 1.1);
  }
}

// Closed form: every GPU port carries (1 + 1/n) x S per direction, and the GPU issues NVLS
// traffic at R = cluster.nvls_bandwidth (below the 450 GB/s link), so
//   T >= (1 + 1/n) S / R.
// The pipeline adds a fill (the first chunk's reduction before any multicast) and a drain (the
// last loop's multicasts, nChannels x n x chunk bytes into each GPU at the link rate B) plus the
// NVLink latencies of both phases:
//   T <= (1 + 1/n) S / R + nCh n chunk / B + chunk / R + 4 L.
// Checked on 8 GPUs at 256 MiB (16 channels, 128 KiB chunks: 16 loops per channel) and with a
// slower NVLS rate.
TEST(Nvls, UncongestedTimeWithinItsClosedFormBounds) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential only");
  const double S = 256.0 * (1 << 20), n = 8, B = 450e9, L = 100e-9, chunk = 128 * 1024, nch = 16;
  for (double R : {306e9, 200e9}) {
    const Workload w = fabricsim::jobs::nccl_tests_workload("all_reduce", 8, static_cast<std::uint64_t>(S), 0);
    const RunResult r = run(w, 1, 8, {"cluster.nvls_bandwidth=" + std::to_string(static_cast<long long>(R * 8 / 1e9)) + "Gbps"},
                            MPI_COMM_SELF, 1, false);
    ASSERT_EQ(r.collectives.size(), 1u);
    ASSERT_EQ(r.collectives[0].algorithm, "NVLS");
    const double t = static_cast<double>(r.collectives[0].end_ps - r.collectives[0].start_ps) * 1e-12;
    const double lo = (1 + 1 / n) * S / R;
    const double hi = lo + nch * n * chunk / B + chunk / R + 4 * L;
    EXPECT_GE(t, lo) << R;
    EXPECT_LE(t, hi) << R;
    std::printf("NVLS 256 MiB at R = %.0f GB/s: %.2f us, bounds [%.2f, %.2f] us\n", R / 1e9, t * 1e6, lo * 1e6, hi * 1e6);
  }
}

// The flow rung models the same reduction and multicast (the network LP counts each chunk's
// contributions and starts the reduced chunk's downlink flow once all have started, its arrival
// no earlier than the last one's drain; a multicast's member downlink flows start with its
// uplink flow; NVLS uplink flows also
// cross a virtual per-GPU link of capacity cluster.nvls_bandwidth), at message rather than packet
// granularity: within 3% of the packet rung at 256 MiB and 1 GiB, and inside the same bounds.
TEST(Nvls, FlowRungAgreesWithPacketRung) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential only");
  for (std::uint64_t S : {256ull << 20, 1ull << 30}) {
    const Workload w = fabricsim::jobs::nccl_tests_workload("all_reduce", 8, S, 0);
    const RunResult p = run(w, 1, 8, {}, MPI_COMM_SELF, 1, false);
    const RunResult f = run(w, 1, 8, {"sim.fidelity=flow"}, MPI_COMM_SELF, 1, false);
    ASSERT_EQ(f.collectives.size(), 1u);
    EXPECT_EQ(f.collectives[0].algorithm, "NVLS");
    const double tp = static_cast<double>(p.collectives[0].end_ps - p.collectives[0].start_ps);
    const double tf = static_cast<double>(f.collectives[0].end_ps - f.collectives[0].start_ps);
    EXPECT_NEAR(tf / tp, 1.0, 0.03) << S;
    EXPECT_GE(tf * 1e-12, (1 + 1.0 / 8) * static_cast<double>(S) / 306e9);
    std::printf("NVLS %llu B: packet %.2f us, flow %.2f us\n", static_cast<unsigned long long>(S), tp * 1e-6, tf * 1e-6);
  }
}

// Medium sizes, where a call is only one or a few loops of chunks per channel. The NVSwitch
// forwards a reduced packet as soon as every member's copy of it arrived and copies a multicast
// packet as it arrives (cut-through per packet), so the flow rung starts a chunk's downlink
// flows with their uplink flows and holds each arrival until its supply drained plus one
// packet. Before that (store-and-forward per chunk) the flow rung was 13.9% slower at 2 MiB and
// above the closed-form ceiling below. Two independent checks per size:
//  * the closed-form bounds of UncongestedTimeWithinItsClosedFormBounds, with the chunk the
//    planner uses at that size (NCCL_NVLS_CHUNKSIZE 128 KiB, then 64/32/16 KiB while
//    S < 64/8/2 x channels x n x chunk; enqueue.cc calcCollChunking);
//  * within 5% of the packet rung (flow within 5% of packet where the
//    packet level shows no heavy congestion; NVLink has none, the remaining difference is fluid
//    sharing against per-packet round robin at the GPU port).
TEST(Nvls, FlowRungPipelinesTheSwitchAtMediumSizes) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential only");
  const double n = 8, R = 306e9, B = 450e9, L = 100e-9, nch = 16;
  // 2.5 MiB: the second loop's chunks are single 4 KiB units; 3 MiB: the second loop's
  // contributions start while the first loop's multicasts are still being issued.
  for (std::uint64_t S : {2ull << 20, 5ull << 19, 3ull << 20, 8ull << 20, 32ull << 20}) {
    double chunk = 128 * 1024;
    for (double c : {65536.0, 32768.0, 16384.0}) {
      const double k = c == 65536.0 ? 64 : c == 32768.0 ? 8 : 2;
      if (static_cast<double>(S) < k * nch * n * chunk && chunk > c) chunk = c;
    }
    const Workload w = fabricsim::jobs::nccl_tests_workload("all_reduce", 8, S, 0);
    const RunResult p = run(w, 1, 8, {}, MPI_COMM_SELF, 1, false);
    const RunResult f = run(w, 1, 8, {"sim.fidelity=flow"}, MPI_COMM_SELF, 1, false);
    ASSERT_EQ(f.collectives.size(), 1u);
    ASSERT_EQ(f.collectives[0].algorithm, "NVLS");
    ASSERT_EQ(p.collectives[0].algorithm, "NVLS");
    const double tp = static_cast<double>(p.collectives[0].end_ps - p.collectives[0].start_ps) * 1e-12;
    const double tf = static_cast<double>(f.collectives[0].end_ps - f.collectives[0].start_ps) * 1e-12;
    const double lo = (1 + 1 / n) * static_cast<double>(S) / R;
    const double hi = lo + nch * n * chunk / B + chunk / R + 4 * L;
    EXPECT_GE(tf, lo) << S;
    EXPECT_LE(tf, hi) << S;
    EXPECT_NEAR(tf / tp, 1.0, 0.05) << S;
    std::printf("NVLS %llu B (chunk %.0f): packet %.3f us, flow %.3f us (%+.1f%%), bounds [%.2f, %.2f] us\n",
                static_cast<unsigned long long>(S), chunk, tp * 1e6, tf * 1e6, (tf / tp - 1) * 100, lo * 1e6, hi * 1e6);
  }
}

// NVLSTree (each node reduces into its heads through the NVSwitch, the heads exchange over the
// double binary tree of nodes, each multicasts into its node): the flow rung within 5% of the
// packet rung on 2 nodes x 8 GPUs at 8 and 32 MiB (before the cut-through switch stage: +11.4%
// and +18.5%). Same reason for the tolerance as above; the packet rung is not congested (no PFC
// pause; ECN marks, if any, a handful against the ~10^5 packets). From 4 nodes on (a tree with
// interior nodes) the flow rung is still 6-11% slow: docs/fidelity.md, "NVLS at the flow rung".
TEST(Nvls, FlowRungNvlsTreeWithinFivePercent) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential only");
  struct Case {
    unsigned hosts;
    std::uint64_t bytes;
  };
  // 4 hosts: interior tree nodes amplify the lock-step of a fluid share (+6.2% before the
  // round-robin phase of FlowNetLp::nvls_phase; 2 hosts have no interior node).
  for (const Case& c : {Case{2, 8ull << 20}, Case{2, 32ull << 20}, Case{4, 32ull << 20}}) {
    const std::uint64_t S = c.bytes;
    const Workload w = fabricsim::jobs::nccl_tests_workload("all_reduce", 8 * c.hosts, S, 0);
    const RunResult p = run(w, c.hosts, 8, {}, MPI_COMM_SELF, 1, false);
    const RunResult f = run(w, c.hosts, 8, {"sim.fidelity=flow"}, MPI_COMM_SELF, 1, false);
    ASSERT_EQ(p.collectives.size(), 1u);
    ASSERT_EQ(p.collectives[0].algorithm, "NVLSTree");
    ASSERT_EQ(f.collectives[0].algorithm, "NVLSTree");
    EXPECT_EQ(p.fabric.pause_frames, 0u) << S;  // the premise: no congestion at the packet level
    EXPECT_LE(p.fabric.ecn_marks * 1000, p.fabric.switch_packets) << S;
    const double tp = static_cast<double>(p.collectives[0].end_ps - p.collectives[0].start_ps);
    const double tf = static_cast<double>(f.collectives[0].end_ps - f.collectives[0].start_ps);
    EXPECT_NEAR(tf / tp, 1.0, 0.05) << S;
    std::printf("NVLSTree %ux8 %llu B: packet %.3f us, flow %.3f us (%+.1f%%)\n", c.hosts, static_cast<unsigned long long>(S),
                tp * 1e-6, tf * 1e-6, (tf / tp - 1) * 100);
  }
}

TEST(Nvls, IdenticalAcrossProcessesAndThreads) {
  struct Case {
    const char* name;
    unsigned hosts, gph;
    std::uint64_t bytes;
  };
  for (const char* rung : {"packet", "flow", "analytical"})
  for (const Case& c : {Case{"node8_3MiB", 1, 8, 3u << 20}, Case{"two_nodes_of_4_5MiB", 2, 4, (5u << 20) + 12},
                        Case{"nvlstree_2x4_6MiB", 2, 4, 6u << 20}}) {
    SCOPED_TRACE(std::string(c.name) + " " + rung);
    const bool tree = std::string(c.name).rfind("nvlstree", 0) == 0;
    const Workload w = c.hosts == 1 || tree ? fabricsim::jobs::nccl_tests_workload("all_reduce", c.hosts * c.gph, c.bytes, 0)
                                            : per_host_allreduce(c.hosts, c.gph, c.bytes);
    const std::vector<std::string> sets = {tree ? "nccl.NCCL_ALGO=NVLSTree" : "nccl.NCCL_ALGO=NVLS",
                                           std::string("sim.fidelity=") + rung};
    const RunResult ref = run(w, c.hosts, c.gph, sets, MPI_COMM_SELF, 1, false);
    ASSERT_EQ(ref.collectives.size(), tree ? 1u : c.hosts);
    EXPECT_EQ(ref.collectives[0].algorithm, tree ? "NVLSTree" : "NVLS");
    for (unsigned threads : {1u, 2u}) {
      const RunResult got = run(w, c.hosts, c.gph, sets, MPI_COMM_WORLD, threads, false);
      EXPECT_EQ(got.digest, ref.digest);
      EXPECT_EQ(got.flows, ref.flows);
      EXPECT_EQ(got.stats.events, ref.stats.events);
      EXPECT_EQ(got.meta.simulated_time_ps, ref.meta.simulated_time_ps);
    }
  }
}

}  // namespace
