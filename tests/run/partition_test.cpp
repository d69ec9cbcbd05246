// Topology-aware placement ("a host's GPUs, NICs and NVSwitch together; leaves with
// their hosts"): leaves join the unit that holds their hosts; rail leaves wired to hosts on every
// unit are spread evenly. Expected units and cut counts are worked out by hand for each graph.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/errors.hpp"

#include "partition/partition.hpp"
#include "partition/plan.hpp"

namespace {

using fabricsim::engine::LpId;
using fabricsim::partition::Edge;

// LPs 0..7: GPUs of 4 hosts (2 GPUs each); 8..11: leaves; 12: spine.
TEST(Partition, LeafJoinsTheUnitOfItsHosts) {
  fabricsim::partition::Blocks blocks = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  // Leaf 8 serves hosts 0-1, leaf 9 hosts 2-3; leaves 10 and 11 are extra ToRs of hosts 2-3 and 0-1
  // (dealt round robin, leaves 8 and 10 would land on unit 0 and 9 and 11 on unit 1).
  const std::vector<LpId> leaves = {8, 9, 10, 11};
  std::vector<Edge> edges;
  auto wire = [&](LpId leaf, std::vector<LpId> gpus) {
    for (LpId g : gpus) edges.push_back({g, leaf, 1000});
    edges.push_back({leaf, 12, 1000});
  };
  wire(8, {0, 1, 2, 3});
  wire(9, {4, 5, 6, 7});
  wire(10, {4, 5, 6, 7});
  wire(11, {0, 1, 2, 3});
  std::vector<LpId> loose = leaves;
  loose.push_back(12);
  auto p = fabricsim::partition::place_blocks(13, blocks, loose, 2, 1);
  const auto cut_before = fabricsim::partition::cut_edges(p, edges);
  fabricsim::partition::attach_to_neighbors(p, leaves, edges);
  EXPECT_EQ(p.proc[8], 0);
  EXPECT_EQ(p.proc[9], 1);
  EXPECT_EQ(p.proc[10], 1);
  EXPECT_EQ(p.proc[11], 0);
  // Only leaf-spine links of the two leaves away from the spine's unit remain cut.
  const int spine = p.proc[12];
  int expect = 0;
  for (LpId l : leaves) expect += p.proc[l] != spine ? 1 : 0;
  EXPECT_EQ(fabricsim::partition::cut_edges(p, edges), static_cast<std::uint64_t>(expect));
  EXPECT_EQ(expect, 2);
  EXPECT_LT(fabricsim::partition::cut_edges(p, edges), cut_before);
}

// Rail leaves: leaf r is wired to GPU r of every host, hosts split over 2 processes x 2 threads.
// Every unit holds one host, so every leaf ties; they are spread one per unit in order.
TEST(Partition, RailLeavesTieAndSpreadEvenly) {
  fabricsim::partition::Blocks blocks = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}};
  std::vector<LpId> leaves = {16, 17, 18, 19};
  std::vector<Edge> edges;
  for (LpId r = 0; r < 4; ++r) {
    for (LpId h = 0; h < 4; ++h) edges.push_back({h * 4 + r, 16 + r, 1000});
  }
  auto p = fabricsim::partition::place_blocks(20, blocks, leaves, 2, 2);
  fabricsim::partition::attach_to_neighbors(p, leaves, edges);
  std::vector<int> per_unit(4, 0);
  for (LpId l : leaves) ++per_unit[p.proc[l] * 2 + p.thread[l]];
  EXPECT_EQ(per_unit, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(p.proc[16] * 2 + p.thread[16], 0);
  EXPECT_EQ(p.proc[19] * 2 + p.thread[19], 3);
}

// A partition file is reused only by a run with the same LP, process and thread counts: one
// saved for 2 processes on a 4-process run would leave processes 2 and 3 without an LP.
TEST(Partition, FileRoundTripsAndRefusesOtherProcessCounts) {
  fabricsim::engine::Placement p;
  p.threads = 1;
  p.proc = {0, 1, 0, 1, 1};
  p.thread = {0, 0, 0, 0, 0};
  const std::string file = ::testing::TempDir() + "fabricsim_partition_roundtrip.txt";
  fabricsim::partition::write_partition(file, p, 2);
  const auto back = fabricsim::partition::read_partition(file, 5, 2, 1);
  EXPECT_EQ(back.proc, p.proc);
  EXPECT_EQ(back.thread, p.thread);
  for (std::uint32_t procs : {1u, 3u, 4u}) {
    try {
      (void)fabricsim::partition::read_partition(file, 5, procs, 1);
      ADD_FAILURE() << "a 2-process partition was accepted by a " << procs << "-process run";
    } catch (const fabricsim::engine::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("2 processes"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW((void)fabricsim::partition::read_partition(file, 6, 2, 1), fabricsim::engine::InputError);
  EXPECT_THROW((void)fabricsim::partition::read_partition(file, 5, 2, 2), fabricsim::engine::InputError);
  std::filesystem::remove(file);
}

// Two 2-GPU domains (GPUs 0,1 + NVSwitch 4; GPUs 2,3 + NVSwitch 5), leaves 6, 7, spine 8. NVLink
// 900 Gb/s over NIC 400 Gb/s: a scale-up link weighs floor(900/400) = 2, every other link 1; an
// LP weighs 1 + its link count (GPU: NVSwitch + leaf = 3; NVSwitch: 2 GPUs = 3; leaf: 2 GPUs +
// spine = 4; spine: 2 leaves = 3). Topology placement on 2 units: domain d on unit d, loose
// leaves/spine dealt 0,1,0, then each leaf moved to the unit holding most of its non-leaf
// neighbours (leaf 6: GPU 0 and spine 8 on unit 0, GPU 2 on unit 1; leaf 7 likewise: unit 0).
TEST(Partition, SystemGraphWeightsAndTopologyPlacement) {
  fabricsim::partition::SystemGraph g;
  g.num_lps = 9;
  g.domains = {{0, 1, 4}, {2, 3, 5}};
  g.loose = {6, 7, 8};
  g.edge_switches = {6, 7};
  g.links = {{0, 4, 100, true}, {1, 4, 100, true}, {2, 5, 100, true}, {3, 5, 100, true},
             {0, 6, 500, false}, {2, 6, 500, false}, {1, 7, 500, false}, {3, 7, 500, false},
             {6, 8, 700, false}, {7, 8, 700, false}};
  g.scale_up_bps = 900'000'000'000ull;
  g.scale_out_bps = 400'000'000'000ull;
  const auto plan = fabricsim::partition::place_system(g, "topology", 2, 1);
  EXPECT_EQ(plan.edge_weight, (std::vector<std::uint32_t>{2, 2, 2, 2, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(plan.lp_weight, (std::vector<std::uint32_t>{3, 3, 3, 3, 3, 3, 4, 4, 3}));
  EXPECT_EQ(plan.placement.proc, (std::vector<std::int32_t>{0, 0, 1, 1, 0, 1, 0, 0, 0}));
  // Cut: GPU 2 - leaf 6 and GPU 3 - leaf 7, 500 ps each.
  EXPECT_EQ(plan.lookahead_ps, 500);
  EXPECT_EQ(fabricsim::partition::cut_edges(plan.placement, plan.edges), 2u);
  g.scale_out_bps = 0;  // unknown NIC rate: every link weighs 1
  EXPECT_EQ(fabricsim::partition::partition_graph(g).edge_weight, std::vector<std::uint32_t>(10, 1));
}

}  // namespace
