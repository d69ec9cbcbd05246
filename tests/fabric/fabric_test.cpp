// Issue 3 must-shows 1-5 and 7: the packet-level RoCE fabric checked against values each test
// derives itself (store-and-forward closed forms, N*S/B, balls-into-bins expectations) and
// against engine configurations (1, 2, 4 MPI processes; 1 and 2 threads).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "jobs/run.hpp"
#include "tests/fabric/fabric_helpers.hpp"
#include "models/packet/switch_lp.hpp"
#include "models/core/workload.hpp"
#include "tests/support/workloads.hpp"
#include "tests/support/mpi.hpp"
#include "tests/support/run.hpp"

using fabricsim::testing::world_procs;

namespace {

using fabricsim::jobs::RunResult;
using fabricsim::models::NodeType;
using fabricsim::models::WorkNode;
using fabricsim::models::Workload;
using namespace fabricsim::fabric_test;  // Flow, chakra_p2p, run, mean_queue, utilization

constexpr long long kPsPerBit400G = 2'500;  // 1 bit at 400 Gb/s = 2.5 ps (exact in integer ps per byte: 20 ps)
long long ser_ps(long long bytes, long long gbps) { return bytes * 8 * 1000 / gbps; }  // exact for the rates used

// Must-show 1: one flow across k hops; FCT = store-and-forward closed form, to the picosecond.
TEST(Fabric, SingleFlowFctEqualsStoreAndForwardClosedForm) {
  (void)kPsPerBit400G;
  const long long mtu = 4096, header = 82, nic_lat = 500'000, fab_lat = 1'000'000;
  // 2 hosts of 1 GPU under two leaves joined by one spine: GPU -> leaf -> spine -> leaf -> GPU, k = 4 links.
  const std::vector<std::string> base = {
      "cluster.hosts=2", "cluster.gpus_per_host=1", "cluster.topology=leaf_spine", "cluster.nics_per_leaf=1",
      "cluster.spines=1", "cluster.nic_latency=500ns", "cluster.fabric_latency=1us", "cluster.mtu=4KiB",
      "nic.header_bytes=82", "nic.cc=none"};
  {
    // Equal rates R on all k hops, n full packets: FCT = (n + k - 1) * T + sum(latency).
    const long long n = 100, k = 4;
    auto sets = base;
    sets.push_back("cluster.nic_bandwidth=400Gbps");
    sets.push_back("cluster.fabric_bandwidth=400Gbps");
    const RunResult r = run(chakra_p2p(2, {{0, 1, static_cast<unsigned long long>(n * mtu)}}), sets);
    ASSERT_EQ(r.flow_records.size(), 1u);
    const long long t = ser_ps(mtu + header, 400);
    EXPECT_EQ(r.flow_records[0].fct_ps, (n + k - 1) * t + 2 * nic_lat + 2 * fab_lat);
  }
  {
    // NIC hops at 100 Gb/s, fabric hops at 400 Gb/s, and a partial last packet of m bytes.
    // Full packets leave the NIC every T1, cross the fast hops in T2 each and reach the last
    // (100 Gb/s) hop exactly when it finished the previous one: packet n-1 ends there at
    // (n-1)*T1 + 2*T2 + T1 + latencies. The short last packet catches up with it on the fast
    // hops and waits, so the last byte arrives t1(m) later:
    // FCT = (n-1)*T1 + 2*T2 + T1 + t1(m) + sum(latency).
    const long long n = 50, m = 1000;
    auto sets = base;
    sets.push_back("cluster.nic_bandwidth=100Gbps");
    sets.push_back("cluster.fabric_bandwidth=400Gbps");
    const RunResult r = run(chakra_p2p(2, {{0, 1, static_cast<unsigned long long>((n - 1) * mtu + m)}}), sets);
    ASSERT_EQ(r.flow_records.size(), 1u);
    const long long t1 = ser_ps(mtu + header, 100), t1m = ser_ps(m + header, 100), t2 = ser_ps(mtu + header, 400);
    EXPECT_EQ(r.flow_records[0].fct_ps, (n - 1) * t1 + 2 * t2 + t1 + t1m + 2 * nic_lat + 2 * fab_lat);
  }
}

// The incast topology: N senders and 1 receiver, hosts of 1 GPU under one leaf.
std::vector<std::string> incast_sets(unsigned n, bool pfc, const std::string& buffer) {
  return {"cluster.hosts=" + std::to_string(n + 1), "cluster.gpus_per_host=1", "cluster.topology=leaf_spine",
          "cluster.nics_per_leaf=" + std::to_string(n + 1), "cluster.nic_bandwidth=400Gbps",
          "cluster.nic_latency=500ns", "cluster.mtu=4KiB", "nic.header_bytes=82", "nic.cc=none",
          std::string("switch.pfc=") + (pfc ? "true" : "false"), "switch.buffer=" + buffer};
}

/// Bytes of all flow records of `r`.
unsigned long long delivered_bytes(const RunResult& r) {
  unsigned long long bytes = 0;
  for (const auto& f : r.flow_records) bytes += f.bytes;
  return bytes;
}

// Must-show 2: N->1 incast.
TEST(Fabric, IncastWithPfcIsLosslessAndLineRate) {
  const unsigned n = 8;
  const unsigned long long s = 2ull << 20;
  // 1 MiB of buffer (of which ~0.56 MiB is PFC headroom) is far below N x BDP and N x S.
  const RunResult r = run(chakra_p2p(n + 1, fabricsim::testing::incast_flows(n, n, s)), incast_sets(n, true, "1MiB"));
  ASSERT_EQ(r.flow_records.size(), n);
  long long last = 0;
  for (const auto& f : r.flow_records) last = std::max<long long>(last, f.end_ps);
  EXPECT_EQ(delivered_bytes(r), n * s);
  EXPECT_EQ(r.fabric.drops, 0u);
  EXPECT_EQ(r.fabric.retransmits, 0u);
  EXPECT_GT(r.fabric.pause_frames, 0u);  // the buffer is smaller than N x BDP: PFC must act
  // The leaf -> receiver port is the bottleneck: once the first packet is in (one packet time and
  // one latency), it serializes N*S wire bytes back to back, then one more latency.
  const long long pkts = static_cast<long long>(s / 4096), t = ser_ps(4096 + 82, 400);
  const long long ideal = t + 500'000 + static_cast<long long>(n) * pkts * t + 500'000;
  EXPECT_GE(last, ideal);
  EXPECT_LE(std::fabs(static_cast<double>(last - ideal)) / static_cast<double>(ideal), 0.01)
      << "incast completion " << last << " ps vs N*S/B + latency " << ideal << " ps";
}

TEST(Fabric, IncastWithoutPfcDropsAndGoBackNDeliversEverything) {
  const unsigned n = 8;
  const unsigned long long s = 1ull << 20;
  const RunResult r = run(chakra_p2p(n + 1, fabricsim::testing::incast_flows(n, n, s)), incast_sets(n, false, "256KiB"));
  ASSERT_EQ(r.flow_records.size(), n);
  EXPECT_EQ(delivered_bytes(r), n * s);
  EXPECT_GT(r.fabric.drops, 0u);
  EXPECT_GT(r.fabric.retransmits, 0u);
  EXPECT_EQ(r.fabric.pause_frames, 0u);
}

// Must-show 3: PFC head-of-line blocking. Leaf 0 holds senders S1..S4 and the victim's sender V;
// leaf 1 holds the incast receiver R and the victim's receiver D. Leaf-spine links are 8x the
// NIC rate, so the only bottleneck is leaf1 -> R; V -> D shares no bottleneck with the incast.
TEST(Fabric, PfcPausePropagationSlowsAVictimFlow) {
  auto victim_slowdown = [](bool pfc, std::uint64_t* pauses) {
    const std::vector<std::string> sets = {
        "cluster.hosts=7", "cluster.gpus_per_host=1", "cluster.topology=leaf_spine", "cluster.nics_per_leaf=5",
        "cluster.spines=1", "cluster.nic_bandwidth=400Gbps", "cluster.fabric_bandwidth=3200Gbps",
        "cluster.mtu=4KiB", "nic.cc=none", std::string("switch.pfc=") + (pfc ? "true" : "false"),
        "switch.buffer=2MiB"};
    const unsigned long long s = 8ull << 20;
    // GPUs 0-4 under leaf 0 (0-3 = S1..S4, 4 = V), GPUs 5, 6 under leaf 1 (5 = R, 6 = D).
    std::vector<Flow> flows = {{0, 5, s}, {1, 5, s}, {2, 5, s}, {3, 5, s}, {4, 6, s}};
    const RunResult r = run(chakra_p2p(7, flows), sets);
    *pauses = r.fabric.pause_frames;
    for (const auto& f : r.flow_records) {
      if (f.src == 4) return f.slowdown;
    }
    return -1.0;
  };
  std::uint64_t pauses_on = 0, pauses_off = 0;
  const double with_pfc = victim_slowdown(true, &pauses_on);
  const double without = victim_slowdown(false, &pauses_off);
  EXPECT_GT(pauses_on, 0u);
  EXPECT_EQ(pauses_off, 0u);
  EXPECT_GT(with_pfc, 1.5) << "the victim should be held by pauses that spread from leaf 1 to spine to leaf 0";
  EXPECT_LT(without, 1.05) << "without PFC the victim shares no queue with the incast";
}

/// Two flows of `bytes` from hosts 0 and 1 into host 2 (3 hosts of 1 GPU under one leaf, 100 Gb/s
/// NICs) under congestion control `cc`, link samples every 10 us.
RunResult two_into_one(unsigned long long bytes, const std::string& cc) {
  return run(chakra_p2p(3, {{0, 2, bytes}, {1, 2, bytes}}),
             {"cluster.hosts=3", "cluster.gpus_per_host=1", "cluster.topology=leaf_spine", "cluster.nics_per_leaf=3",
              "cluster.nic_bandwidth=100Gbps", "cluster.mtu=4KiB", "nic.cc=" + cc, "output.sample_interval=10us"});
}

// Must-show 4: DCQCN fairness and queue near Kmin; HPCC utilization with a near-empty queue.
TEST(Fabric, DcqcnConvergesToFairShareWithQueueNearKmin) {
  const unsigned long long s = 16ull << 20;
  const RunResult r = two_into_one(s, "dcqcn");
  ASSERT_EQ(r.flow_records.size(), 2u);
  EXPECT_GT(r.fabric.cnps, 0u);
  const double a = static_cast<double>(r.flow_records[0].fct_ps), b = static_cast<double>(r.flow_records[1].fct_ps);
  // Each flow gets B/2 while both run; equal sizes then finish within 10% of each other, and the
  // pair within 10% of 2S/B.
  EXPECT_LT(std::fabs(a - b) / std::max(a, b), 0.10);
  const double fair = 2.0 * static_cast<double>(s) * 8 / 100e9 * 1e12;
  EXPECT_LT(std::max(a, b), 1.10 * fair);
  // Queue over the second half of the shared period: near Kmin (100 KB at 100 Gb/s).
  const long long t_end = static_cast<long long>(std::min(a, b));
  const double q = mean_queue(r, 2, t_end / 2, t_end * 9 / 10);
  std::printf("DCQCN 2 flows on 100G: FCT %.1f us / %.1f us (fair 2S/B %.1f us), mean queue %.0f B (Kmin 100000)\n",
              a * 1e-6, b * 1e-6, fair * 1e-6, q);
  EXPECT_GT(q, 0.3 * 100'000) << "queue " << q;
  EXPECT_LT(q, 100'000 + 0.5 * (400'000 - 100'000)) << "queue " << q;
}

TEST(Fabric, HpccKeepsUtilizationHighAndQueueNearEmpty) {
  const unsigned long long s = 16ull << 20;
  const RunResult r = two_into_one(s, "hpcc");
  ASSERT_EQ(r.flow_records.size(), 2u);
  const long long t_end = std::min(r.flow_records[0].end_ps, r.flow_records[1].end_ps);
  const double u = utilization(r, 2, t_end / 4, t_end * 9 / 10, 100);
  std::printf("HPCC 2 flows on 100G: bottleneck utilization %.4f, mean queue %.0f B\n", u,
              mean_queue(r, 2, t_end / 4, t_end * 9 / 10));
  EXPECT_GE(u, 0.95) << "bottleneck utilization";
  const double q = mean_queue(r, 2, t_end / 4, t_end * 9 / 10);
  EXPECT_LT(q, 20'000) << "HPCC queue should stay near empty (a few packets), got " << q;
}

// Must-show 5: ECMP collisions on a permutation, against the balls-into-bins expectation.
// m leaves of m hosts (1 GPU each), m spines: non-blocking. Host i sends to host i + m, so the m
// flows of leaf j all go to leaf j+1; each picks a spine by hash, and a spine uplink carrying k
// flows delivers B in total. Aggregate throughput fraction = E[non-empty bins] / m
// = 1 - (1 - 1/m)^m for one QP per connection. With q QPs each QP is a ball offering B/q, and a
// bin with k balls delivers min(B, k B / q): E = E[min(1, k/q)] with k ~ Binomial(q m, 1/m).
double binomial_expect_min(unsigned balls, unsigned bins, unsigned q) {
  const double p = 1.0 / bins;
  double e = 0;
  for (unsigned k = 0; k <= balls; ++k) {
    const double logc = std::lgamma(balls + 1.0) - std::lgamma(k + 1.0) - std::lgamma(balls - k + 1.0);
    const double pk = std::exp(logc + k * std::log(p) + (balls - k) * std::log1p(-p));
    e += pk * std::min(1.0, static_cast<double>(k) / q);
  }
  return e;
}

TEST(Fabric, EcmpPermutationMatchesBallsIntoBinsAndQpsOrSprayingRecover) {
  const unsigned m = 8, hosts = m * m;
  const unsigned long long s = 2ull << 20;
  const Workload w = chakra_p2p(hosts, fabricsim::testing::shift_permutation_flows(hosts, m, s));
  auto measure = [&](std::vector<std::string> extra) {
    std::vector<std::string> sets = {
        "cluster.hosts=" + std::to_string(hosts), "cluster.gpus_per_host=1", "cluster.topology=leaf_spine",
        "cluster.nics_per_leaf=" + std::to_string(m), "cluster.spines=" + std::to_string(m),
        "cluster.nic_bandwidth=400Gbps", "cluster.fabric_bandwidth=400Gbps", "cluster.mtu=4KiB", "nic.cc=none",
        "output.sample_interval=1us"};
    sets.insert(sets.end(), extra.begin(), extra.end());
    const RunResult r = run(w, sets);
    EXPECT_EQ(r.flow_records.size(), hosts);
    // Aggregate rate into all receivers while every flow is still active: from 5 us to 0.9 S/B.
    const long long t1 = static_cast<long long>(0.9 * static_cast<double>(s) * 8 / 400e9 * 1e12);
    double total = 0;
    for (unsigned h = 0; h < hosts; ++h) total += utilization(r, h, 5'000'000, t1, 400);
    return total / hosts;
  };
  const double e1 = 1.0 - std::pow(1.0 - 1.0 / m, m);  // 0.656 for m = 8
  const double e4 = binomial_expect_min(4 * m, m, 4);
  const double one_qp = measure({"switch.pfc=false"});
  const double four_qp = measure({"switch.pfc=false", "nic.qps_per_connection=4", "nic.split_data_on_qps=true"});
  const double spray = measure({"switch.pfc=true", "switch.routing=spray"});
  EXPECT_NEAR(one_qp, e1, 0.12) << "1 QP per connection vs balls-into-bins " << e1;
  EXPECT_LT(one_qp, 0.85);
  EXPECT_NEAR(four_qp, e4, 0.10) << "4 QPs vs expectation " << e4;
  EXPECT_GT(four_qp, one_qp + 0.05);
  EXPECT_GT(spray, 0.95);
  std::printf("ECMP permutation, aggregate throughput / (N x B): 1 QP %.3f (balls-into-bins %.3f), 4 QPs %.3f "
              "(expected %.3f), spraying %.3f\n", one_qp, e1, four_qp, e4, spray);
}

// Must-show 7: a 128-GPU AllReduce with DCQCN and PFC on (4:1 oversubscribed, small buffers so
// both act) gives identical results on 1, 2 and 4 MPI processes and 1 and 2 threads.
TEST(Fabric, DcqcnPfcAllReduce128IsIdenticalAcrossEngineConfigurations) {
  Workload w = fabricsim::testing::world_workload(128, "chakra", "<allreduce128>");
  fabricsim::testing::add_collective(w, fabricsim::models::CollOp::kAllReduce, 8ull << 20, "allreduce");
  const std::vector<std::string> sets = {"cluster.topology=leaf_spine", "cluster.nics_per_leaf=16", "cluster.spines=4",
                                         "nic.cc=dcqcn", "switch.pfc=true", "switch.buffer=2MiB",
                                         "switch.ecn_kmin=20KB", "switch.ecn_kmax=80KB"};
  const RunResult ref = run(w, sets);
  EXPECT_GT(ref.fabric.cnps + ref.fabric.pause_frames, 0u) << "congestion control must act in this scenario";
  const int procs = world_procs();
  for (unsigned threads : {1u, 2u}) {
    SCOPED_TRACE("processes=" + std::to_string(procs) + " threads=" + std::to_string(threads));
    const RunResult got = run(w, sets, MPI_COMM_WORLD, threads);
    EXPECT_EQ(got.digest, ref.digest);
    EXPECT_EQ(got.stats.events, ref.stats.events);
    EXPECT_EQ(got.meta.simulated_time_ps, ref.meta.simulated_time_ps);
    EXPECT_EQ(got.fabric.pause_frames, ref.fabric.pause_frames);
    EXPECT_EQ(got.fabric.cnps, ref.fabric.cnps);
    EXPECT_EQ(got.fabric.ecn_marks, ref.fabric.ecn_marks);
  }
}

}  // namespace

namespace {

// Issue 4 must-show 4: NCCL_IB_QPS_PER_CONNECTION = 4 puts a connection's data on 4 QPs with
// distinct RoCEv2 UDP source ports, and on a fabric where ECMP collisions dominate it raises
// AllGather busbw. 64 hosts of 1 GPU, 8 leaves x 8 hosts, 8 spines (non-blocking); the ring
// order strides across leaves (0, 8, 16, ..., 1, 9, ...) so every ring edge crosses the spine
// layer and the 8 edges leaving a leaf collide on spines by hash. One ring (simccl.planner=ring:
// ring order = the communicator's order; one channel, so one connection per ring edge).
TEST(Fabric, QpsPerConnectionSpreadEcmpAndRaiseAllGatherBusbw) {
  for (std::uint32_t k = 0; k < 4; ++k) {
    for (std::uint32_t j = 0; j < k; ++j) {
      EXPECT_NE(fabricsim::models::roce_sport(3, 11, k, 1), fabricsim::models::roce_sport(3, 11, j, 1));
    }
  }
  const unsigned m = 8, hosts = m * m;
  Workload w;
  w.source = "<allgather64>";
  w.format = "chakra";
  w.ranks = hosts;
  w.groups.push_back({"world", {}});
  for (unsigned i = 0; i < m; ++i) {
    for (unsigned j = 0; j < m; ++j) w.groups[0].ranks.push_back(j * m + i);
  }
  w.programs.resize(hosts);
  for (auto& p : w.programs) {
    WorkNode n;
    n.name = "allgather";
    n.type = NodeType::kCollective;
    n.op = fabricsim::models::CollOp::kAllGather;
    n.bytes = 64ull << 20;
    n.group = 0;
    p.push_back(n);
  }
  auto busbw = [&](const std::string& qps, const std::string& split = "0") {
    const RunResult r = run(w, {"cluster.hosts=64", "cluster.gpus_per_host=1", "cluster.topology=leaf_spine",
                                "cluster.nics_per_leaf=8", "cluster.spines=8", "nic.cc=dcqcn",
                                "simccl.planner=ring", "nccl.NCCL_IB_QPS_PER_CONNECTION=" + qps,
                                "nccl.NCCL_IB_SPLIT_DATA_ON_QPS=" + split});
    EXPECT_EQ(r.collectives.size(), 1u);
    return r.collectives.empty() ? 0.0 : r.collectives[0].busbw_GBps;
  };
  const double one = busbw("1"), four = busbw("4"), four_split = busbw("4", "1");
  std::printf("AllGather 64 MiB on 64 x 400G, ring across leaves: busbw 1 QP %.1f GB/s, 4 QPs %.1f GB/s (x%.2f), "
              "4 QPs with NCCL_IB_SPLIT_DATA_ON_QPS=1 %.1f GB/s (x%.2f)\n",
              one, four, four / one, four_split, four_split / one);
  EXPECT_GT(four, 1.15 * one);
  EXPECT_GT(four_split, 1.15 * one);
  EXPECT_LT(four, 50.0 * 1.0001);  // never above the 400 Gb/s NIC
}

}  // namespace

namespace {

// Regression: a 4-byte AllReduce on 8 GPUs of one host splits into empty chunks; empty messages
// (0 wire bytes without headers) take no serialization time and the port must keep sending.
TEST(Fabric, EmptyMessagesDoNotStallAPort) {
  Workload w = fabricsim::testing::world_workload(8, "chakra", "<allreduce4>");
  for (auto& p : w.programs) {
    for (int i = 0; i < 3; ++i) {
      WorkNode n;
      n.name = "allreduce";
      n.type = NodeType::kCollective;
      n.op = fabricsim::models::CollOp::kAllReduce;
      n.bytes = 4;
      n.group = 0;
      if (i > 0) n.deps = {static_cast<std::uint32_t>(i - 1)};
      p.push_back(n);
    }
  }
  for (const char* planner : {"simccl.planner=ring", "simccl.planner=nccl"}) {
    const RunResult r = run(w, {planner});
    EXPECT_EQ(r.collectives.size(), 3u) << planner;
    EXPECT_GT(r.flow_records.size(), 0u);
    for (const auto& c : r.collectives) EXPECT_GT(c.end_ps, c.start_ps);
  }
}

}  // namespace
