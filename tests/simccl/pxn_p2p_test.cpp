// PXN for workload Send/Recv nodes (../shared/reference/nccl.md §3.4):
// a Send from GPU 1 of host A to GPU 0 of host B (NIC on another rail) goes NVLink 1 -> 0 on
// host A, then over GPU 0's NIC (rail 0) to B's GPU 0, when NCCL_P2P_PXN_LEVEL is 1 or 2 and
// NCCL_PXN_DISABLE=0; directly over GPU 1's NIC otherwise. Checked on the emitted flow records
// (source, destination, bytes, whether the flow crossed a spine: on a rail-optimized fabric the
// same-rail path stays under the rail's leaf, the cross-rail path needs a spine), on the
// receiver's completion time against the closed form, and for bit-identical results on 1, 2 and
// 4 MPI processes and 1 and 2 threads.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "jobs/run.hpp"
#include "models/core/workload.hpp"
#include "tests/support/mpi.hpp"
#include "tests/support/run.hpp"
#include "tests/support/workloads.hpp"

namespace {

using fabricsim::models::NodeType;
using fabricsim::models::WorkNode;
using fabricsim::models::Workload;

constexpr std::uint32_t kGpn = 8;                   // GPUs per host (default cluster)
constexpr std::uint64_t kBytes = 8ull << 20;        // message size
constexpr std::uint64_t kChunk = 128 * 1024;        // NCCL_P2P_NET_CHUNKSIZE default (nccl.md §1.2)
constexpr double kNicBps = 400e9;                   // default cluster.nic_bandwidth
// Default cluster.nvlink_bandwidth (3600 Gb/s) at its data rate: NCCL SM90 20.6 of 25 GB/s per link (topo.h).
constexpr double kNvlBps = 3600e9 * 20.6 / 25;
constexpr std::int64_t kComputePs = 1'000'000;      // 1 us of compute after the receive

// Ranks 0..15 on 2 hosts; rank 1 (host A, GPU 1) sends to rank 8 (host B, GPU 0). Rank 8 then
// computes 1 us (a dependency on the receive); rank 0 (the PXN relay) has its own work: a send
// to rank 4 on its own host, which must not be disturbed in bytes or matching; rank 2 sends to
// rank 10 on its own rail, which needs no relay.
Workload workload() {
  Workload w = fabricsim::testing::world_workload(2 * kGpn, "chakra", "pxn-test");
  using fabricsim::testing::add_p2p;
  add_p2p(w, 1, 8, kBytes, 7);
  WorkNode c;
  c.type = NodeType::kCompute;
  c.duration_ps = kComputePs;
  c.deps = {0};  // the receive
  w.programs[8].push_back(c);
  add_p2p(w, 0, 4, kBytes, 3);   // the relay's own send, over NVLink
  add_p2p(w, 2, 10, kBytes, 5);  // same rail (local GPU 2 on both hosts): direct
  return w;
}

fabricsim::jobs::RunResult run(const std::vector<std::string>& nccl, MPI_Comm comm, unsigned threads,
                               bool keep = true) {
  static const Workload w = workload();
  // The closed forms have no NCCL launch latency and no proxy (proxy_test has its own): off.
  std::vector<std::string> sets = {"cluster.gpus_per_host=8", "cluster.hosts=2", "nic.cc=none",
                                   "simccl.launch_latency=none", "simccl.step_latency=none", "simccl.proxy=none"};
  sets.insert(sets.end(), nccl.begin(), nccl.end());
  return fabricsim::testing::run_quiet(&w, std::move(sets), comm, threads, keep);
}

struct Legs {
  std::uint64_t n = 0, bytes = 0;
  int crossed_spine = 0;
};
Legs legs(const fabricsim::jobs::RunResult& r, std::uint32_t src, std::uint32_t dst) {
  Legs l;
  for (const auto& f : r.flow_records) {
    if (f.src != src || f.dst != dst) continue;
    ++l.n;
    l.bytes += f.bytes;
    l.crossed_spine += f.first_spine >= 0 ? 1 : 0;
  }
  return l;
}

// Receive completion of rank 8 = its finish time minus the compute after it.
double recv_us(const fabricsim::jobs::RunResult& r) {
  return static_cast<double>(r.ranks.at(8).finish_ps - kComputePs) * 1e-6;
}

// Closed form: the message at the NIC rate (line rate, no headers, one flow alone), plus for PXN
// the first chunk's NVLink time (the chunks after it are forwarded while the NIC is busy).
double ideal_us(bool pxn) {
  const double net = static_cast<double>(kBytes) * 8 / kNicBps * 1e6;
  return net + (pxn ? static_cast<double>(kChunk) * 8 / kNvlBps * 1e6 : 0.0);
}

void expect_pxn(const fabricsim::jobs::RunResult& r) {
  const Legs nvl = legs(r, 1, 0), net = legs(r, 0, 8), direct = legs(r, 1, 8);
  EXPECT_EQ(direct.n, 0u);
  EXPECT_EQ(nvl.n, kBytes / kChunk);  // one NVLink flow per chunk
  EXPECT_EQ(nvl.bytes, kBytes);       // bytes conserved on each leg
  EXPECT_EQ(net.n, kBytes / kChunk);
  EXPECT_EQ(net.bytes, kBytes);
  EXPECT_EQ(net.crossed_spine, 0);    // rail 0 -> rail 0: under one leaf
  // The relay's own send to rank 4 is untouched.
  EXPECT_EQ(legs(r, 0, 4).bytes, kBytes);
  EXPECT_EQ(legs(r, 0, 4).n, 1u);
  // 1 + 2 small latencies: 2 NVLink hops (0.1 us), 2 NIC hops (0.5 us), per-packet store and forward.
  EXPECT_GE(recv_us(r), ideal_us(true));
  EXPECT_LE(recv_us(r), ideal_us(true) + 3.0) << recv_us(r);
  std::printf("PXN: receive done at %.3f us (closed form %.3f us + latencies)\n", recv_us(r), ideal_us(true));
}

void expect_direct(const fabricsim::jobs::RunResult& r) {
  const Legs direct = legs(r, 1, 8);
  EXPECT_EQ(legs(r, 1, 0).n, 0u);
  EXPECT_EQ(direct.n, 1u);
  EXPECT_EQ(direct.bytes, kBytes);
  EXPECT_EQ(direct.crossed_spine, 1);  // rail 1 -> rail 0 needs a spine
  EXPECT_GE(recv_us(r), ideal_us(false));
  EXPECT_LE(recv_us(r), ideal_us(false) + 4.0) << recv_us(r);
  std::printf("direct: receive done at %.3f us (closed form %.3f us + latencies)\n", recv_us(r), ideal_us(false));
}

TEST(PxnP2p, RelaysThroughThePeersRailByDefaultAndAtLevel1) {
  FABRICSIM_SEQUENTIAL_ONLY("flow records checked sequentially");
  expect_pxn(run({}, MPI_COMM_SELF, 1));                              // NCCL_P2P_PXN_LEVEL=2 default
  expect_pxn(run({"nccl.NCCL_P2P_PXN_LEVEL=1"}, MPI_COMM_SELF, 1));
  // Smaller chunks: more NVLink/network legs, same bytes.
  const auto r = run({"nccl.NCCL_P2P_NET_CHUNKSIZE=65536"}, MPI_COMM_SELF, 1);
  EXPECT_EQ(legs(r, 1, 0).n, kBytes / 65536);
  EXPECT_EQ(legs(r, 0, 8).bytes, kBytes);
}

TEST(PxnP2p, DirectWhenDisabled) {
  FABRICSIM_SEQUENTIAL_ONLY("flow records checked sequentially");
  expect_direct(run({"nccl.NCCL_PXN_DISABLE=1"}, MPI_COMM_SELF, 1));
  expect_direct(run({"nccl.NCCL_P2P_PXN_LEVEL=0"}, MPI_COMM_SELF, 1));
  // The ring planner has no PXN.
  expect_direct(run({"simccl.planner=ring"}, MPI_COMM_SELF, 1));
}

TEST(PxnP2p, SameRailAndSameHostStayDirect) {
  FABRICSIM_SEQUENTIAL_ONLY("flow records checked sequentially");
  const auto r = run({}, MPI_COMM_SELF, 1);
  const Legs rail = legs(r, 2, 10);  // both local GPU 2
  EXPECT_EQ(rail.n, 1u);
  EXPECT_EQ(rail.bytes, kBytes);
  EXPECT_EQ(rail.crossed_spine, 0);
  EXPECT_EQ(legs(r, 0, 4).n, 1u);    // same host: NVLink, no relay
}

// Coarse rungs (docs/fidelity.md): the flow rung queues a GPU pair's flows in order, so the
// chunk pipeline is kept (within 5% of the packet level); the analytical rung has no queues, so
// the relay forwards the whole message after it arrived: S / NVLink + S / NIC.
TEST(PxnP2p, CoarseRungs) {
  FABRICSIM_SEQUENTIAL_ONLY("flow records checked sequentially");
  const double packet = recv_us(run({}, MPI_COMM_SELF, 1));
  const auto flow = run({"sim.fidelity=flow"}, MPI_COMM_SELF, 1);
  EXPECT_EQ(legs(flow, 1, 0).n, kBytes / kChunk);
  EXPECT_EQ(legs(flow, 0, 8).bytes, kBytes);
  EXPECT_EQ(legs(flow, 1, 8).n, 0u);
  EXPECT_NEAR(recv_us(flow) / packet, 1.0, 0.05) << recv_us(flow);
  const auto ana = run({"sim.fidelity=analytical"}, MPI_COMM_SELF, 1);
  EXPECT_EQ(legs(ana, 1, 0).n, 1u);
  EXPECT_EQ(legs(ana, 1, 0).bytes, kBytes);
  EXPECT_EQ(legs(ana, 0, 8).n, 1u);
  EXPECT_EQ(legs(ana, 0, 8).bytes, kBytes);
  const double saf = static_cast<double>(kBytes) * 8 * (1 / kNvlBps + 1 / kNicBps) * 1e6;
  EXPECT_GE(recv_us(ana), saf);
  EXPECT_LE(recv_us(ana), saf + 3.0) << recv_us(ana);
  std::printf("coarse rungs: flow %.3f us, analytical %.3f us (packet %.3f us)\n", recv_us(flow), recv_us(ana), packet);
}

TEST(PxnP2p, IdenticalAcrossProcessesAndThreads) {
  for (const std::vector<std::string>& nccl : {std::vector<std::string>{}, {"nccl.NCCL_PXN_DISABLE=1"}}) {
    const auto ref = run(nccl, MPI_COMM_SELF, 1, false);
    for (unsigned threads : {1u, 2u}) {
      const auto got = run(nccl, MPI_COMM_WORLD, threads, false);
      EXPECT_EQ(got.digest, ref.digest);
      EXPECT_EQ(got.flows, ref.flows);
      EXPECT_EQ(got.stats.events, ref.stats.events);
      EXPECT_EQ(got.meta.simulated_time_ps, ref.meta.simulated_time_ps);
    }
  }
}

}  // namespace
