// The GPU's proxy thread (simccl.proxy, CollectivePlanner::proxy_op_ps): every message that leaves
// a GPU's NVLink domain is posted by that GPU's proxy, and every such message that arrives is
// noticed by the receiver's proxy, one operation at a time, first come first served, each taking
// NCCL's network overhead o (getNetOverhead, NCCL 2.28 src/graph/tuning.cc: NCCL_NET_OVERHEAD in
// ns, else 1 us; nccl.md §2.2). Closed forms on an idle fabric, 2 hosts x 8 GPUs:
//  * one message across hosts: its receive completes exactly 2o later than without the proxy
//    (posted o late, noticed o after its last byte), on every rung;
//  * k messages that one GPU makes ready at the same instant for k GPUs of the other host: the
//    proxy posts them at o, 2o, ..., ko (flow start times);
//  * a message inside the host never waits for the proxy.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "jobs/run.hpp"
#include "tests/support/mpi.hpp"
#include "tests/support/run.hpp"
#include "tests/support/workloads.hpp"

namespace {

using fabricsim::models::Workload;
constexpr std::uint64_t kBytes = 1ull << 20;

fabricsim::jobs::RunResult run(const Workload& w, const std::vector<std::string>& extra, MPI_Comm comm = MPI_COMM_SELF,
                               unsigned threads = 1) {
  std::vector<std::string> sets = {"cluster.gpus_per_host=8", "cluster.hosts=2", "nic.cc=none",
                                   "simccl.launch_latency=none", "simccl.step_latency=none"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return fabricsim::testing::run_quiet(&w, std::move(sets), comm, threads, true);
}

// Rank 1 -> rank 9 (same rail: direct), rank 2 -> rank 3 (same host: NVLink).
Workload pair() {
  Workload w = fabricsim::testing::world_workload(16, "chakra", "proxy-pair");
  fabricsim::testing::add_p2p(w, 1, 9, kBytes, 7);
  fabricsim::testing::add_p2p(w, 2, 3, kBytes, 8);
  return w;
}

// Rank 0 -> ranks 8, 9, 10, 11 (four messages ready at t = 0 on one GPU; one NIC with PXN off).
Workload fan_out() {
  Workload w = fabricsim::testing::world_workload(16, "chakra", "proxy-fan");
  for (std::uint32_t d = 8; d < 12; ++d) fabricsim::testing::add_p2p(w, 0, d, kBytes, static_cast<std::int64_t>(d));
  return w;
}

long long finish(const fabricsim::jobs::RunResult& r, std::uint32_t rank) { return r.ranks.at(rank).finish_ps; }

TEST(Proxy, OneNetworkMessagePaysOnePostAndOneNotice) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const Workload w = pair();
  for (const char* rung : {"packet", "flow", "analytical"}) {
    const std::string fid = std::string("sim.fidelity=") + rung;
    const auto none = run(w, {fid, "simccl.proxy=none"});
    const auto nccl = run(w, {fid});  // the default
    const auto slow = run(w, {fid, "nccl.NCCL_NET_OVERHEAD=2500"});
    EXPECT_EQ(finish(nccl, 9) - finish(none, 9), 2 * 1'000'000) << rung;  // 2 x 1 us
    EXPECT_EQ(finish(slow, 9) - finish(none, 9), 2 * 2'500'000) << rung;  // 2 x 2.5 us
    EXPECT_EQ(finish(nccl, 3), finish(none, 3)) << rung;                  // NVLink: no proxy
  }
}

TEST(Proxy, PostsOneAtATimeFirstComeFirstServed) {
  FABRICSIM_SEQUENTIAL_ONLY("flow records checked sequentially");
  // PXN off: every message leaves over rank 0's own NIC (else ranks 1-3 relay those to 9-11).
  const auto r = run(fan_out(), {"sim.fidelity=flow", "nccl.NCCL_PXN_DISABLE=1"});
  std::vector<long long> starts;
  for (const auto& f : r.flow_records) {
    if (f.src == 0) starts.push_back(f.start_ps);
  }
  std::sort(starts.begin(), starts.end());
  ASSERT_EQ(starts.size(), 4u);
  for (std::size_t i = 0; i < starts.size(); ++i) EXPECT_EQ(starts[i], static_cast<long long>(i + 1) * 1'000'000);
}

TEST(Proxy, IdenticalAcrossProcessesAndThreads) {
  const Workload w = fan_out();
  for (const char* rung : {"packet", "flow"}) {
    const std::string fid = std::string("sim.fidelity=") + rung;
    const auto ref = run(w, {fid});
    for (unsigned threads : {1u, 2u}) {
      const auto got = run(w, {fid}, MPI_COMM_WORLD, threads);
      EXPECT_EQ(got.digest, ref.digest) << rung;
      EXPECT_EQ(got.meta.simulated_time_ps, ref.meta.simulated_time_ps) << rung;
    }
  }
}

}  // namespace
