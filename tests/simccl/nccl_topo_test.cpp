// NCCL_TOPO_FILE. Real NCCL topology XML files (tests/data/nccl-topo,
// see tests/data/SOURCES.md) give GPUs, NVLink bandwidth (links x NCCL's per-link bw,
// src/graph/topo.h: SM80 20.0, SM90 20.6 GB/s), NICs (speed Mb/s / 8000) and the GPU each NIC
// shares a PCI switch with; a missing file is an error naming it unless simccl.topo_fallback asks
// for NCCL's flat PCIe fallback, whose lower intra-node bandwidth shows in the AllGather and
// ReduceScatter cost; a file without GPUs is an error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "tests/support/paths.hpp"
#include "tests/support/scratch.hpp"
#include "engine/errors.hpp"
#include "simccl/nccl_planner.hpp"
#include "simccl/nccl_topo.hpp"
#include "simccl/planner_factory.hpp"

namespace {

namespace simccl = fabricsim::simccl;
using fabricsim::engine::InputError;
using fabricsim::testing::data;

// Every GPU has a NIC, the NIC's closest GPU is that GPU (one NIC per GPU: distinct rails).
void expect_rails(const simccl::NcclTopo& t) {
  std::set<int> nics;
  for (std::size_t g = 0; g < t.gpus.size(); ++g) {
    ASSERT_GE(t.gpus[g].nic, 0);
    nics.insert(t.gpus[g].nic);
    EXPECT_EQ(t.nics[static_cast<std::size_t>(t.gpus[g].nic)].gpu, static_cast<int>(g)) << simccl::describe(t);
  }
  EXPECT_EQ(nics.size(), t.gpus.size()) << simccl::describe(t);
}

TEST(NcclTopo, IbmCloudH100FullDump) {
  const auto t = simccl::load_nccl_topo(data("nccl-topo/ibmcloud-h100-8x-topo.xml"), 90);
  EXPECT_FALSE(t.skeleton);
  ASSERT_EQ(t.gpus.size(), 8u);
  ASSERT_EQ(t.nics.size(), 8u);
  EXPECT_EQ(t.cpus, 2);
  for (const auto& g : t.gpus) {
    EXPECT_EQ(g.sm, 90);
    EXPECT_EQ(g.nvlinks, 18);  // 5 + 5 + 4 + 4 links to the 4 NVSwitches
  }
  EXPECT_TRUE(t.nvlink);
  EXPECT_NEAR(t.nvlink_GBps, 18 * 20.6, 1e-9);
  for (const auto& n : t.nics) EXPECT_NEAR(n.speed_GBps, 200000 / 8000.0, 1e-12);  // CX-7 200G
  expect_rails(t);
}

TEST(NcclTopo, SimaiA100FourBondedNics) {
  const auto t = simccl::load_nccl_topo(data("nccl-topo/simai-hgx-a100-8gpu-4cx6-topo.xml"), 90);
  ASSERT_EQ(t.gpus.size(), 8u);
  for (const auto& g : t.gpus) EXPECT_EQ(g.nvlinks, 12);  // 6 NVSwitches x 2 links
  EXPECT_NEAR(t.nvlink_GBps, 12 * 20.0, 1e-9);             // sm 80 in the file
  ASSERT_EQ(t.nics.size(), 5u);  // mlx5_bond_0..4 (bond_0 hangs off the CPU, no GPU switch)
  // GPU 1 shares its PCI switch with mlx5_bond_1 (file lines 24-40).
  EXPECT_EQ(t.nics[static_cast<std::size_t>(t.gpus[1].nic)].name, "mlx5_bond_1");
}

TEST(NcclTopo, AzureSkeletonPairsByPciSwitch) {
  const auto t = simccl::load_nccl_topo(data("nccl-topo/azure-ndv5-topo.xml"), 90);
  EXPECT_TRUE(t.skeleton);
  ASSERT_EQ(t.gpus.size(), 8u);
  ASSERT_EQ(t.nics.size(), 8u);
  EXPECT_FALSE(t.nvlink);  // a skeleton does not describe NVLink
  expect_rails(t);
  // The first virtual switch holds GPU 0001:00:00.0 and NIC 0101:00:00.0.
  EXPECT_EQ(t.nics[static_cast<std::size_t>(t.gpus[0].nic)].busid, "0101:00:00.0");
}

TEST(NcclTopo, NoGpuAndMissingFileAreErrors) {
  const fabricsim::testing::ScratchDir scratch("nccl_topo");
  const std::string dir = scratch.path();
  const std::string nogpu = dir + "/nogpu.xml";
  std::ofstream(nogpu) << R"(<system version="1"><cpu numaid="0"><pci busid="0000:01:00.0" class="0x020000">
    <nic><net name="mlx5_0" dev="0" speed="200000"/></nic></pci></cpu></system>)";
  for (const std::string& path : {nogpu, dir + "/missing.xml"}) {
    try {
      (void)simccl::load_nccl_topo(path, 90);
      ADD_FAILURE() << path;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("NCCL_TOPO_FILE"), std::string::npos) << e.what();
    }
  }
}

TEST(NcclTopo, NvlinkCountsOutsideOneToSixtyFourAreErrors) {
  // One GPU with two nvlink elements; an int-overflowing sum was found by fuzz_nccl_topo
  // (tests/data/bad/fuzz/nccl_topo/bad-nvlink-count-int-overflow.xml).
  const auto xml = [](const std::string& a, const std::string& b) {
    return R"(<system version="1"><cpu numaid="0"><pci busid="0000:01:00.0" class="0x030200"><gpu dev="0" sm="90">)"
           R"(<nvlink target="0000:a0:00.0" count=")" + a + R"(" tclass="0x068000"/>)"
           R"(<nvlink target="0000:a1:00.0" count=")" + b + R"(" tclass="0x068000"/>)"
           R"(</gpu></pci></cpu></system>)";
  };
  EXPECT_EQ(simccl::parse_nccl_topo(xml("12", "6"), "t.xml", 90).gpus.at(0).nvlinks, 18);
  EXPECT_EQ(simccl::parse_nccl_topo(xml("60", "4"), "t.xml", 90).gpus.at(0).nvlinks, 64);
  for (const auto& [a, b] : {std::pair{"15", "2147483647"}, std::pair{"60", "5"}, std::pair{"-3", "2"},
                             std::pair{"0", "2"}}) {
    try {
      (void)simccl::parse_nccl_topo(xml(a, b), "t.xml", 90);
      ADD_FAILURE() << a << " + " << b;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("t.xml: gpu 0 nvlink count: "), std::string::npos) << e.what();
    }
  }
}

fabricsim::models::ClusterSpec node8() {
  fabricsim::models::ClusterSpec c;
  c.gpus_per_host = 8;
  c.hosts = 1;
  return c;
}

double cost_us(const simccl::PlannerBuild& pb, fabricsim::models::CollOp op, std::uint64_t bytes) {
  std::vector<std::uint32_t> world{0, 1, 2, 3, 4, 5, 6, 7};
  fabricsim::models::CollRequest req;
  req.op = op;
  req.bytes = bytes;
  req.ranks = &world;
  return simccl::nccl_planner_of(*pb.planner)->decision(req).time_us;
}

TEST(NcclTopo, MissingFileFailsUnlessFallbackAsked) {
  const std::string missing = "/nonexistent/topo.xml";
  const std::vector<std::pair<std::string, std::string>> pairs{{"NCCL_TOPO_FILE", missing}};
  try {
    (void)simccl::make_planner("nccl", pairs, "spec.yaml", 90, node8(), false);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  simccl::PlannerExtras fb;
  fb.topo_fallback = true;
  const auto with_fb = simccl::make_planner("nccl", pairs, "spec.yaml", 90, node8(), false, fb);
  EXPECT_TRUE(with_fb.topo.fallback);
  ASSERT_FALSE(with_fb.warnings.empty());
  const auto nvlink = simccl::make_planner("nccl", {}, "spec.yaml", 90, node8(), false);
  std::vector<std::uint32_t> world{0, 1, 2, 3, 4, 5, 6, 7};
  // Ring graph bandwidth: NVLink 18 x 20.6 GB/s per GPU vs the PCIe Gen5 48 GB/s of the fallback.
  const auto& t_nvl = simccl::nccl_planner_of(*nvlink.planner)->tuner(world).ring_graph();
  const auto& t_pci = simccl::nccl_planner_of(*with_fb.planner)->tuner(world).ring_graph();
  EXPECT_LE(t_pci.n_channels * t_pci.bw_intra, 48.0 + 1e-9);
  EXPECT_GE(t_nvl.n_channels * t_nvl.bw_intra, 300.0);
  // So a 1 GiB AllGather / ReduceScatter costs at least 300/48 = 6.25x more on the fallback.
  for (auto op : {fabricsim::models::CollOp::kAllGather, fabricsim::models::CollOp::kReduceScatter}) {
    const double slow = cost_us(with_fb, op, 1ull << 30), fast = cost_us(nvlink, op, 1ull << 30);
    EXPECT_GE(slow / fast, 6.0) << slow << " vs " << fast;
  }
}

TEST(NcclTopo, FileSetsTheCostModel) {
  const std::vector<std::pair<std::string, std::string>> pairs{
      {"NCCL_TOPO_FILE", data("nccl-topo/simai-hgx-a100-8gpu-4cx6-topo.xml")}};
  const auto pb = simccl::make_planner("nccl", pairs, "spec.yaml", 80, node8(), false);
  const auto* nccl = simccl::nccl_planner_of(*pb.planner);
  EXPECT_NEAR(nccl->config().nvlink_GBps, 240.0, 1e-9);
  EXPECT_EQ(nccl->config().nics_per_host, 5);
  EXPECT_NEAR(nccl->config().nic_GBps, 25.0, 1e-12);
  // A file of 8 GPUs on a 4-GPU host is an error naming the file.
  auto c = node8();
  c.gpus_per_host = 4;
  EXPECT_THROW((void)simccl::make_planner("nccl", pairs, "spec.yaml", 80, c, false), InputError);
}

}  // namespace

TEST(NcclTopo, SettingsFromTheEnvironmentAreNamedInTheWarnings) {
  // A shell NCCL_* variable changes results without appearing in the spec: the planner says so,
  // and a spec value of the same name wins (and is not reported as from the environment).
  ::setenv("NCCL_PROTO", "Simple", 1);
  ::setenv("NCCL_ALGO", "Tree", 1);
  const auto pb = simccl::make_planner("nccl", {{"NCCL_ALGO", "Ring"}}, "spec.yaml", 90, node8(), true);
  ::unsetenv("NCCL_PROTO");
  ::unsetenv("NCCL_ALGO");
  std::size_t env_lines = 0;
  for (const auto& w : pb.warnings) {
    if (w.rfind("<env>: ", 0) == 0) ++env_lines;
  }
  EXPECT_EQ(env_lines, 1u);
  bool proto = false;
  for (const auto& w : pb.warnings) proto |= w.rfind("<env>: NCCL_PROTO=Simple: ", 0) == 0;
  EXPECT_TRUE(proto);
  const auto quiet = simccl::make_planner("nccl", {}, "spec.yaml", 90, node8(), false);
  for (const auto& w : quiet.warnings) EXPECT_NE(w.rfind("<env>", 0), 0u) << w;
}
