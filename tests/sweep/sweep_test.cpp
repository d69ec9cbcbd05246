// Issue 8: sweep axis expansion (product, zip, names), up-front validation, failing points,
// resume, the aggregate table and the Slurm array script.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/errors.hpp"
#include "jobs/sweep.hpp"
#include "tests/support/cli.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/scratch.hpp"

namespace {

namespace fs = std::filesystem;
using fabricsim::engine::InputError;
using namespace fabricsim::jobs;
using fabricsim::testing::CliOutcome;
using fabricsim::testing::expect_bad_input;
using fabricsim::testing::run_fabricsim;

class SweepTest : public fabricsim::testing::ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    // A 16-rank Chakra AllReduce (1 MB) on 2 hosts x 8 GPUs by default.
    std::ofstream(dir_ / "base.yaml") << "workload:\n  path: "
                                      << fabricsim::testing::data(
                                             "chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/16npus_1MB/all_reduce")
                                      << "\n";
  }
  std::string error_of(const std::string& sweep_file) {
    try {
      (void)load_sweep(sweep_file);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
};

SweepAxis axis(const std::string& name, const std::string& key, const std::vector<std::string>& vals) {
  SweepAxis a;
  a.name = name;
  a.keys = {key};
  for (const auto& v : vals) {
    a.values.push_back({v});
    a.labels.push_back(safe_label(v));
  }
  return a;
}

TEST(SweepExpand, CartesianProductFirstAxisSlowest) {
  const auto pts = expand_axes("s.yaml", {{"sim.seed", "3"}},
                               {axis("nic", "cluster.nic_bandwidth", {"200Gbps", "400Gbps", "800Gbps"}),
                                axis("mtu", "cluster.mtu", {"4KiB", "8KiB"})});
  ASSERT_EQ(pts.size(), 6u);  // 3 x 2
  EXPECT_EQ(pts[0].name, "nic-200Gbps__mtu-4KiB");
  EXPECT_EQ(pts[1].name, "nic-200Gbps__mtu-8KiB");
  EXPECT_EQ(pts[5].name, "nic-800Gbps__mtu-8KiB");
  // Fixed sets first, then one override per axis key.
  ASSERT_EQ(pts[3].sets.size(), 3u);
  EXPECT_EQ(pts[3].sets[0], (std::pair<std::string, std::string>{"sim.seed", "3"}));
  EXPECT_EQ(pts[3].sets[1], (std::pair<std::string, std::string>{"cluster.nic_bandwidth", "400Gbps"}));
  EXPECT_EQ(pts[3].sets[2], (std::pair<std::string, std::string>{"cluster.mtu", "8KiB"}));
  for (std::size_t i = 0; i < pts.size(); ++i) EXPECT_EQ(pts[i].index, i);
}

TEST(SweepExpand, NoAxesIsOneBasePoint) {
  const auto pts = expand_axes("s.yaml", {}, {});
  ASSERT_EQ(pts.size(), 1u);
  EXPECT_EQ(pts[0].name, "base");
}

TEST(SweepExpand, SafeLabels) {
  EXPECT_EQ(safe_label("400Gbps"), "400Gbps");
  EXPECT_EQ(safe_label("1.5"), "1.5");
  EXPECT_EQ(safe_label("/a/b/moe_tp2ep16.txt"), "moe_tp2ep16");
  EXPECT_EQ(safe_label("a b:c*"), "a_b_c_");
  EXPECT_EQ(safe_label(""), "_");
  EXPECT_EQ(safe_label(".."), "_..");
}

TEST(SweepExpand, DuplicateNamesAreAnError) {
  // Two values with the same label ("a_b" after sanitizing) would share an output directory.
  EXPECT_THROW(expand_axes("s.yaml", {}, {axis("x", "compute.scale", {"a b", "a_b"})}), InputError);
}

// A generator axis value that fails a cross-key check (40 heads, TP 3) is refused up front,
// naming the sweep file and the point, before any point runs.
TEST_F(SweepTest, GeneratorCheckOfAPointNamesThePoint) {
  write("gen.yaml", "workload:\n  generator:\n    model: gpt3-13b\n    layers: 4\n    tp: 8\n");
  const std::string sw = write("sw.yaml", "name: t\nbase: gen.yaml\naxes:\n  - name: tp\n    key: workload.generator.tp\n"
                                          "    values: [8, 3]\n");
  const std::string err = error_of(sw);
  EXPECT_EQ(err.rfind(sw + ": point tp-3: workload.generator.tp: 40 attention heads", 0), 0u) << err;
  // Two axes of one name would give two axis_tp columns: refused.
  const std::string dup = write("dup.yaml", "name: t\nbase: gen.yaml\naxes:\n  - name: tp\n    key: workload.generator.tp\n"
                                            "    values: [8]\n  - name: tp\n    key: workload.generator.dp\n"
                                            "    values: [1, 2]\n");
  EXPECT_NE(error_of(dup).find("names another axis too"), std::string::npos) << error_of(dup);
}

TEST_F(SweepTest, ZipAdvancesTogetherAndPathsAreRelativeToTheSweep) {
  const std::string f = write("s.yaml",
                              "base: base.yaml\n"
                              "axes:\n"
                              "  - name: topo\n"
                              "    zip: {cluster.hosts: [4, 2], cluster.gpus_per_host: [4, 8]}\n"
                              "    labels: [small, big]\n"
                              "  - key: cluster.nic_bandwidth\n"
                              "    values: [200Gbps, 400Gbps]\n");
  const Sweep sw = load_sweep(f);
  EXPECT_EQ(sw.name, "s");
  EXPECT_EQ(sw.base_spec, (dir_ / "base.yaml").string());
  ASSERT_EQ(sw.points.size(), 4u);  // zip of 2 x product with 2
  EXPECT_EQ(sw.points[0].name, "topo-small__nic_bandwidth-200Gbps");
  EXPECT_EQ(sw.points[3].name, "topo-big__nic_bandwidth-400Gbps");
  const auto& s3 = sw.points[3].sets;
  ASSERT_EQ(s3.size(), 3u);
  EXPECT_EQ(s3[0].second, "2");
  EXPECT_EQ(s3[1].second, "8");
  EXPECT_EQ(s3[2].second, "400Gbps");
}

TEST_F(SweepTest, ZipWithUnequalListsIsAnError) {
  const std::string f = write("s.yaml",
                              "base: base.yaml\naxes:\n  - zip: {cluster.hosts: [4, 2], cluster.gpus_per_host: [4]}\n");
  const std::string e = error_of(f);
  EXPECT_NE(e.find("cluster.gpus_per_host"), std::string::npos) << e;
  EXPECT_NE(e.find("same length"), std::string::npos) << e;
}

TEST_F(SweepTest, UnknownKeyIsReportedWithPointAndKeyBeforeAnythingRuns) {
  const std::string f = write("s.yaml",
                              "base: base.yaml\naxes:\n  - key: cluster.nic_bandwith\n    values: [200Gbps]\n");
  const std::string e = error_of(f);
  EXPECT_EQ(e.rfind(f + ": point nic_bandwith-200Gbps: cluster.nic_bandwith: unknown key", 0), 0u) << e;
  EXPECT_NE(e.find("did you mean 'cluster.nic_bandwidth'"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << "one line";
}

TEST_F(SweepTest, CliReportsUnknownKeyOnOneLineWithExit2) {
  const std::string f = write("s.yaml", "base: base.yaml\naxes:\n  - key: cluster.nic_bw\n    values: [1Gbps, 2Gbps]\n");
  const CliOutcome o = run_fabricsim("sweep " + f + " --dry-run", dir_.string());
  expect_bad_input(o, {}, "sweep --dry-run");
  EXPECT_EQ(o.err.rfind("fabricsim: error: " + f + ": point nic_bw-1Gbps: cluster.nic_bw: unknown key", 0), 0u) << o.err;
}

TEST_F(SweepTest, UnusableOutputDirectoryIsOneLineExit2) {
  const std::string f = write("s.yaml", "base: base.yaml\naxes:\n  - key: cluster.nic_bandwidth\n    values: [1Gbps, 2Gbps]\n");
  const std::string file = write("not_a_dir", "x\n");
  for (const char* mode : {"--local", "--collect", "--point 0"}) {
    const CliOutcome o = run_fabricsim("sweep " + f + " " + std::string(mode) + " -o " + file, dir_.string());
    expect_bad_input(o, {"is not a directory"}, mode);
    EXPECT_EQ(o.err.rfind("fabricsim: error: <cli>: -o: '", 0), 0u) << o.err;
  }
}

TEST_F(SweepTest, BadValueNamesThePoint) {
  const std::string f = write("s.yaml", "base: base.yaml\naxes:\n  - key: cluster.topology\n    values: [leaf_spine, torus]\n");
  const std::string e = error_of(f);
  EXPECT_NE(e.find("point topology-torus"), std::string::npos) << e;
  EXPECT_NE(e.find("cluster.topology"), std::string::npos) << e;
}

TEST_F(SweepTest, OutputKeysAndDuplicatesAreRejected) {
  EXPECT_NE(error_of(write("a.yaml", "base: base.yaml\naxes:\n  - key: output.h5\n    values: [x.h5]\n")).find("set by the sweep"),
            std::string::npos);
  EXPECT_NE(error_of(write("b.yaml", "base: base.yaml\nset: {sim.seed: 1}\naxes:\n  - key: sim.seed\n    values: [1, 2]\n"))
                .find("appears twice"),
            std::string::npos);
  EXPECT_NE(error_of(write("c.yaml", "base: nope.yaml\n")).find("base"), std::string::npos);
  EXPECT_NE(error_of(write("d.yaml", "base: base.yaml\naxis: []\n")).find("unknown sweep field"), std::string::npos);
}

// Must-show 2: a point that fails at run time records its error line; the others complete; the
// aggregate marks it; a second run resumes (skips done points, retries the failed one).
TEST_F(SweepTest, FailingPointIsRecordedAndOthersComplete) {
  // hosts=1 x 8 GPUs cannot hold the 16-rank workload: a run-time error of that point only.
  const std::string f = write("s.yaml",
                              "base: base.yaml\naxes:\n  - key: cluster.hosts\n    values: [2, 1, 4]\n");
  const Sweep sw = load_sweep(f);
  ASSERT_EQ(sw.points.size(), 3u);
  LocalRunOptions lo;
  lo.exe = fabricsim::testing::fabricsim_binary();
  lo.out_dir = (dir_ / "out").string();
  lo.jobs = 2;
  std::ostringstream log;
  EXPECT_EQ(run_points(sw, lo, {}, log), 1u) << log.str();
  EXPECT_EQ(point_status(lo.out_dir, sw.points[0]).status, "ok");
  EXPECT_EQ(point_status(lo.out_dir, sw.points[2]).status, "ok");
  const PointStatus bad = point_status(lo.out_dir, sw.points[1]);
  EXPECT_EQ(bad.status, "failed");
  EXPECT_EQ(bad.error.rfind("fabricsim: error: ", 0), 0u) << bad.error;
  EXPECT_NE(bad.error.find("cluster.hosts"), std::string::npos) << bad.error;

  const Table t = aggregate(sw, lo.out_dir);
  ASSERT_EQ(t.rows(), 3u);
  const auto& status = std::get<std::vector<std::string>>(t.columns()[t.find("status")].values);
  const auto& err = std::get<std::vector<std::string>>(t.columns()[t.find("error")].values);
  const auto& hosts = std::get<std::vector<std::string>>(t.columns()[t.find("cluster.hosts")].values);
  const auto& iter = std::get<std::vector<std::int64_t>>(t.columns()[t.find("iteration_time_ps")].values);
  EXPECT_EQ(status, (std::vector<std::string>{"ok", "failed", "ok"}));
  EXPECT_EQ(hosts, (std::vector<std::string>{"2", "1", "4"}));
  EXPECT_EQ(err[1], bad.error);
  EXPECT_GT(iter[0], 0);
  EXPECT_EQ(iter[1], -1);
  EXPECT_GE(t.find("busbw_all_reduce_GBps"), 0);
  const std::string csv_path = write_aggregate(sw, lo.out_dir, t);
  EXPECT_TRUE(fs::exists(dir_ / "out" / "aggregate.h5"));
  std::ifstream csv(csv_path);
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("point,index,status,axis_hosts,cluster.hosts,iteration_time_ps", 0), 0u) << header;

  // Resume: done points are skipped (their summary stays byte-identical), the failed one reruns.
  const auto mtime = fs::last_write_time(dir_ / "out" / sw.points[0].name / "summary.json");
  std::ostringstream log2;
  EXPECT_EQ(run_points(sw, lo, {}, log2), 1u);
  EXPECT_NE(log2.str().find("2 point(s) already done"), std::string::npos) << log2.str();
  EXPECT_EQ(fs::last_write_time(dir_ / "out" / sw.points[0].name / "summary.json"), mtime);
}

TEST_F(SweepTest, TimeoutFailsThePoint) {
  const std::string f = write("s.yaml", "base: base.yaml\n");
  const Sweep sw = load_sweep(f);
  LocalRunOptions lo;
  // The launcher prefix runs a child that hangs (the run arguments become ignored "$@").
  lo.exe = "unused";
  lo.launcher = {"/bin/sh", "-c", "sleep 30", "sh"};
  lo.out_dir = (dir_ / "out").string();
  lo.timeout_s = 0.5;
  std::ostringstream log;
  EXPECT_EQ(run_points(sw, lo, {}, log), 1u);
  EXPECT_NE(point_status(lo.out_dir, sw.points[0]).error.find("timed out"), std::string::npos) << log.str();
}

TEST_F(SweepTest, ArrayScriptCoversPendingPointsThrottled) {
  const std::string f = write("s.yaml", "base: base.yaml\naxes:\n  - key: sim.seed\n    values: [1, 2, 3, 4, 5]\n");
  const Sweep sw = load_sweep(f);
  SubmitOptions so;
  so.exe = "/opt/fabricsim";
  so.out_dir = (dir_ / "out").string();
  so.throttle = 2;
  std::string s = array_script(sw, so);
  EXPECT_NE(s.find("#SBATCH --array=0-4%2\n"), std::string::npos) << s;
  EXPECT_NE(s.find("#SBATCH --requeue"), std::string::npos);
  EXPECT_NE(s.find("/slurm/%A_%a.out"), std::string::npos);
  EXPECT_NE(s.find("--point \"$POINT\""), std::string::npos);
  // Points 1 and 2 done: only 0, 3-4 are submitted again.
  for (int i : {1, 2}) {
    fs::create_directories(dir_ / "out" / sw.points[i].name);
    std::ofstream(dir_ / "out" / sw.points[i].name / "summary.json") << "{}";
  }
  s = array_script(sw, so);
  EXPECT_NE(s.find("#SBATCH --array=0,3-4%2\n"), std::string::npos) << s;
  so.ntasks = 4;
  EXPECT_NE(array_script(sw, so).find("--launcher \"srun --mpi=pmix -n $SLURM_NTASKS\""), std::string::npos);
}

TEST(SweepTable, CsvQuotingAndMissingValues) {
  Table t;
  t.strings("name");
  t.ints("n");
  std::size_t r = t.add_row();
  t.strings("name")[r] = "a,\"b\"";
  t.ints("n")[r] = 5;
  r = t.add_row();
  t.strings("name")[r] = "c";
  t.doubles("x");  // added later: earlier rows get NaN -> empty cells
  EXPECT_EQ(t.to_csv(), "name,n,x\n\"a,\"\"b\"\"\",5,\nc,,\n");
}

}  // namespace
