// `fabricsim topo` and topologies end to end through the built binary: figures, export ->
// import, runs on new fabrics, and bad topology input = one line naming the field, exit 2.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/cli.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/scratch.hpp"

namespace {

namespace fs = std::filesystem;

using fabricsim::testing::source_dir;
using Outcome = fabricsim::testing::CliOutcome;

const std::string kSimai = "/tests/data/simai/SimAI/astra-sim-alibabacloud/inputs/topo/";
const std::string kAllReduce16 = "/tests/data/chakra/astra-sim/examples/workload/microbenchmarks/"
                                 "all_reduce/16npus_1MB/all_reduce";

class TopoCli : public fabricsim::testing::ScratchDirTest {
protected:
  Outcome run(const std::string &args) const {
    return fabricsim::testing::run_fabricsim(args, dir_.string());
  }
  void expect_bad(const std::string &args, const std::string &field,
                  const std::string &problem) const {
    fabricsim::testing::expect_bad_input(run(args), {field, problem}, args);
  }
};

TEST_F(TopoCli, PrintsCountsBisectionDiameterAndEcmp) {
  // 2 hosts x 8 GPUs, rail-optimized: 8 leaves (one per rail), 2 spines (= nics_per_leaf).
  const Outcome o = run("topo --gpus 16");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(
      o.out.find("nodes: 28 total: 16 gpu, 2 nvswitch, 8 leaf (tier 1), 2 spine (tier 2), 0 core"),
      std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("links: 48 total: 16 NVLink, 16 NIC, 16 switch-switch"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("bisection bandwidth: 3200 Gb/s"), std::string::npos)
      << o.out; // 16 x 400G / 2
  EXPECT_NE(o.out.find("diameter: 4 hops"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("ECMP width: up to 2 next hops"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("oversubscription 1:1"), std::string::npos) << o.out;
}

TEST_F(TopoCli, SimaiImportExportsAndReimportsToTheSameFigures) {
  const std::string simai = source_dir() + kSimai + "Spectrum-X_16g_8gps_100Gbps_A100";
  const std::string exported = (dir_ / "x.topo").string();
  const Outcome a = run("topo --set cluster.topology_file=" + simai + " --export " + exported);
  ASSERT_EQ(a.code, 0) << a.err;
  // Header: 90 nodes, 2 NVSwitches, 72 switches, 544 links.
  EXPECT_NE(a.out.find("nodes: 90 total: 16 gpu, 2 nvswitch, 8 leaf (tier 1), 64 spine (tier 2)"),
            std::string::npos)
      << a.out;
  EXPECT_NE(a.out.find("links: 544 total"), std::string::npos) << a.out;
  EXPECT_NE(a.out.find("ECMP width: up to 64 next hops"), std::string::npos) << a.out;
  const Outcome b = run("topo --set cluster.topology_file=" + exported);
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(a.out.substr(a.out.find('\n')),
            b.out.substr(b.out.find('\n')).append("exported: " + exported + "\n"));
}

TEST_F(TopoCli, RunsOnNewFabrics) {
  const std::string w =
      " --workload " + source_dir() + kAllReduce16 + " -o " + (dir_ / "o.h5").string();
  for (const std::string &sets :
       {std::string(
            "--set cluster.topology=torus --set cluster.dims=2x2 --set cluster.gpus_per_host=4"),
        std::string("--set cluster.dual_plane=true --set cluster.gpus_per_host=4"),
        std::string("--set cluster.tiers=3 --set cluster.pods=2 --set cluster.gpus_per_host=2 "
                    "--set cluster.nics_per_leaf=2"),
        std::string("--set cluster.nvlink_domain=16 --set cluster.gpus_per_host=4"),
        "--set cluster.topology_file=" + source_dir() + kSimai +
            "Rail_Opti_SingleToR_16g_8gps_200Gbps_H20"}) {
    const Outcome o = run("run " + sets + w + " --quiet");
    EXPECT_EQ(o.code, 0) << sets << "\n" << o.err;
  }
}

TEST_F(TopoCli, RailOnlyTrafficWithoutPathFailsWithOneLine) {
  // The ring planner sends GPU 7 (host 0, rail 7) -> GPU 8 (host 1, rail 0): no rail joins them.
  const Outcome o = run("run --workload " + source_dir() + kAllReduce16 +
                        " --set cluster.topology=rail_only --set simccl.planner=ring -o " +
                        (dir_ / "o.h5").string());
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_NE(o.err.find("cluster.topology: no network path"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(dir_ / "o.h5"));
  const Outcome t = run("topo --gpus 16 --set cluster.topology=rail_only");
  EXPECT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("unreachable: 112 ordered GPU pairs"), std::string::npos)
      << t.out; // 16 x 7 cross-rail, cross-host
}

TEST_F(TopoCli, CommentLinesBeforeTheHeaderAreAllowed) {
  // The bundled TE-CCL mesh starts with five '#' lines (docs/simccl.md runs it): 16 GPUs, each
  // behind its own switch, 64 switch-switch links of the 4x4 mesh (2 directions).
  const Outcome o = run("topo --set cluster.topology_file=" + source_dir() + "/examples/topologies/teccl_mesh4.topo");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("16 gpu"), std::string::npos) << o.out;
  // A comment-only file is still refused by name.
  expect_bad("topo --set cluster.topology_file=" + write("only_comments.topo", "# nothing\n# here\n"), "line 1",
             "unknown topology file format");
}

TEST_F(TopoCli, BadTopologyInputIsOneLineExit2NamingTheField) {
  const std::string head = "fabricsim-topology 1\nnode g0 gpu\nnode g1 gpu\nnode s0 switch 1\n";
  const std::string link = "link g0 s0 400Gbps 1us\nlink g1 s0 400Gbps 1us\n";
  auto file = [&](const std::string &name, const std::string &text) {
    return "topo --set cluster.topology_file=" + write(name, text);
  };
  expect_bad(file("dangling.topo", head + link + "link g0 s7 400Gbps 1us\n"), "line 7",
             "dangling link: node 's7'");
  expect_bad(file("zero_bw.topo", head + "link g0 s0 0Gbps 1us\nlink g1 s0 400Gbps 1us\n"),
             "line 5", "");
  expect_bad(file("zero_lat.topo", head + "link g0 s0 400Gbps 0us\nlink g1 s0 400Gbps 1us\n"),
             "line 5", "zero latency");
  expect_bad(file("dup.topo", head + "node g1 gpu\n" + link), "line 5", "duplicate node 'g1'");
  expect_bad(file("nonic.topo", head + "link g0 s0 400Gbps 1us\n"), "cluster.topology",
             "gpu 1 has no NIC link");
  expect_bad(file("kind.topo", head + "node x0 router\n" + link), "line 5",
             "unknown node kind 'router'");
  expect_bad(file("format.topo", "hello\n"), "line 1", "unknown topology file format");
  expect_bad("topo --set cluster.topology=hypercube", "cluster.topology",
             "'hypercube' is not a topology");
  expect_bad("topo --set cluster.hosts=6 --set cluster.nics_per_leaf=4", "cluster.nics_per_leaf",
             "does not divide");
  expect_bad("topo --set cluster.topology=torus", "cluster.topology", "cluster.dims");
  expect_bad("topo --set cluster.oversubscription=4:0", "cluster.oversubscription", "ratios");
  expect_bad("topo --set cluster.tiers=3 --set cluster.pods=3 --set cluster.hosts=4 --set "
             "cluster.nics_per_leaf=2",
             "cluster.pods", "does not divide");
  expect_bad("topo --set cluster.nic_bandwidth=0Gbps", "cluster.nic_bandwidth", "");
}

} // namespace
