// Ring AllReduce time on an uncongested fabric against the closed form.
//
// The ring (reduce-scatter then all-gather) has 2(N-1) steps; in each step every rank sends one
// chunk C = S/N to its successor and the successor's next send waits for that chunk. On an
// uncongested store-and-forward path of h links with rates B_1..B_h and latencies L_1..L_h, a
// chunk of C bytes cut into MTU packets is fully received after
//     t_edge = C/B_1 + sum_{j=2..h} MTU/B_j + sum_j L_j
// (the first link serializes the whole chunk; every later store-and-forward hop adds one packet's
// serialization). With cluster.nvswitch_cut_through NVSwitches forward cut-through, so an NVLink edge is C/B + 2L whatever the
// NVLink transfer unit: the NVLink cases run with 4 KiB and with 64 KiB units and must agree.
// Two bounds, and the collective ends at the larger:
//  * dependency bound: rank i's step-k send waits for its step-(k-1) receive, so the collective
//    ends after the slowest run of 2(N-1) consecutive ring edges:
//    T_dep = max_i sum_{k=0}^{2N-3} t_edge((i+k) mod N);
//  * port bound: every rank pushes all 2(N-1) chunks through its one outgoing first link, so
//    T_port = max_e [2(N-1) * C/B_1(e) + t_edge(e) - C/B_1(e)] (the last chunk's tail).
// With equal edges T_dep = 2(N-1) * t_edge = 2(N-1)/N * S/B + 2(N-1) * (latency terms), the
// textbook form; with one slow link (NIC between two NVLink islands) T_port governs:
// 2(N-1)/N * S/B_bottleneck + one step's latency terms.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "jobs/run.hpp"
#include "tests/support/scratch.hpp"
#include "tests/support/workloads.hpp"

namespace {

struct Case {
  unsigned n;
  unsigned gpus_per_host;
  unsigned long long bytes;
  unsigned nvlink_mtu = 4096;
};

double first_link_rate(bool same_host) { return same_host ? 3600e9 / 8 : 400e9 / 8; }

double edge_time_s(bool same_host, double chunk) {
  // Spec values used below: NIC 400 Gb/s, 500 ns; NVLink 3600 Gb/s, 100 ns; MTU 4096 B; one leaf.
  // NVLink: GPU -> NVSwitch -> GPU, the NVSwitch cuts through (no unit serialization added).
  const double mtu = 4096;
  if (same_host) return chunk / (3600e9 / 8) + 2 * 100e-9;
  return chunk / (400e9 / 8) + mtu / (400e9 / 8) + 2 * 500e-9;
}

class RingClosedForm : public ::testing::TestWithParam<Case> {};

TEST_P(RingClosedForm, MatchesWithinOnePercent) {
  const Case c = GetParam();
  const fabricsim::testing::ScratchDir scratch("ring");
  const std::string dir = scratch.path();
  fabricsim::jobs::RunOptions opt;
  opt.workload = fabricsim::testing::micro_workload(dir, "ALLREDUCE", c.bytes);
  opt.gpus = c.n;
  opt.write_h5 = false;
  opt.sets = {"cluster.gpus_per_host=" + std::to_string(c.gpus_per_host), "cluster.topology=leaf_spine",
              "cluster.nics_per_leaf=64", "cluster.nic_bandwidth=400Gbps", "cluster.nic_latency=500ns",
              "cluster.nvlink_bandwidth=3600Gbps", "cluster.nvlink_efficiency=1", "cluster.nvlink_latency=100ns", "cluster.mtu=4KiB",
              "cluster.nvlink_mtu=" + std::to_string(c.nvlink_mtu), "cluster.nvswitch_cut_through=true",
              // NCCL planner forced to one Ring/Simple channel; a 16 GiB buffer makes every ring
              // step a single message (slice = 2 x NCCL_BUFFSIZE/8 >= S/N), as the closed form assumes.
              "nccl.NCCL_ALGO=Ring", "nccl.NCCL_PROTO=Simple", "nccl.NCCL_MAX_NCHANNELS=1",
              "nccl.NCCL_BUFFSIZE=17179869184",
              // The closed form has no NCCL latency (launch, per-step hop, proxy): off.
              "simccl.launch_latency=none", "simccl.step_latency=none", "simccl.proxy=none"};
  const auto res = fabricsim::jobs::run_simulation(opt, MPI_COMM_WORLD, "test", "test");
  ASSERT_EQ(res.collectives.size(), 1u);
  const auto& rec = res.collectives[0];
  EXPECT_EQ(rec.op, "all_reduce");
  EXPECT_EQ(rec.ranks, c.n);
  EXPECT_EQ(rec.bytes, c.bytes);

  const double chunk = static_cast<double>(c.bytes) / c.n;
  std::vector<double> edge(c.n);
  double expected = 0;
  for (unsigned i = 0; i < c.n; ++i) {
    const bool same = i / c.gpus_per_host == ((i + 1) % c.n) / c.gpus_per_host;
    edge[i] = edge_time_s(same, chunk);
    const double first = chunk / first_link_rate(same);
    expected = std::max(expected, 2.0 * (c.n - 1) * first + edge[i] - first);  // port bound
  }
  for (unsigned i = 0; i < c.n; ++i) {
    double t = 0;
    for (unsigned k = 0; k < 2 * (c.n - 1); ++k) t += edge[(i + k) % c.n];
    expected = std::max(expected, t);  // dependency bound
  }
  const double simulated = static_cast<double>(rec.end_ps - rec.start_ps) * 1e-12;
  EXPECT_NEAR(simulated / expected, 1.0, 0.01) << "simulated " << simulated << " s, closed form " << expected << " s";
  // Bytes conservation: the flows of a ring AllReduce carry 2(N-1)/N * S per rank.
  EXPECT_EQ(res.flows, 2ull * (c.n - 1) * c.n);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, RingClosedForm,
    ::testing::Values(Case{4, 1, 1ull << 20}, Case{4, 1, 64ull << 20},   // NIC-only ring, one leaf
                      Case{8, 8, 1ull << 20}, Case{8, 8, 64ull << 20},   // NVLink-only ring
                      Case{8, 8, 1ull << 20, 65536}, Case{8, 8, 64ull << 20, 65536},  // 64 KiB NVLink unit
                      Case{16, 8, 64ull << 20, 65536},
                      Case{16, 8, 1ull << 20}, Case{16, 8, 64ull << 20}, // mixed: 2 hosts, NVLink + NIC
                      Case{16, 1, 1ull << 20}),                          // 16 hosts behind one leaf
    [](const auto& info) {
      std::ostringstream name;
      name << 'N' << info.param.n << "_G" << info.param.gpus_per_host << '_' << (info.param.bytes >> 20) << "MiB";
      if (info.param.nvlink_mtu != 4096) name << "_nvu" << (info.param.nvlink_mtu >> 10) << "KiB";
      return name.str();
    });

}  // namespace
