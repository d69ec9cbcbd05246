// Issue 8: `fabricsim regress` passes against its own rebaselined references, fails (drift) on a
// changed parameter, and honours per-metric tolerances. Runs sequentially and on 2 MPI processes.
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/errors.hpp"
#include "jobs/regress.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/scratch.hpp"
#include "tests/support/mpi.hpp"

using fabricsim::testing::world_rank;

namespace {

namespace fs = std::filesystem;
using namespace fabricsim::jobs;

// Writes the suite into `dir` (a ScratchDir of the test) and returns `dir`.
std::string make_suite(const std::string& dir, const std::string& extra_case_fields) {
  const int rank = world_rank();
  if (rank == 0) {
    fs::remove_all(fs::path(dir) / "references");
    std::ofstream(fs::path(dir) / "suite.yaml")
        << "name: t\ntolerances: {iteration_time_ps: 0}\ncases:\n"
        << "  - name: ar16\n    workload: "
        << fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/16npus_1MB/all_reduce")
        << "\n" << extra_case_fields
        << "  - name: rs4\n    workload: "
        << fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/reduce_scatter/4npus_1MB/reduce_scatter")
        << "\n    set: {cluster.gpus_per_host: 1}\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return dir;
}

TEST(Regress, WithinIsRelative) {
  EXPECT_TRUE(within(100, 100, 0));
  EXPECT_FALSE(within(100, 100.5, 1e-3));
  EXPECT_TRUE(within(100, 100.05, 1e-3));
  EXPECT_TRUE(within(0, 0, 0));
  EXPECT_FALSE(within(0, 1e-3, 1e-4));
}

TEST(Regress, PassThenDriftOnChangedParameter) {
  const fabricsim::testing::ScratchDir scratch("regress_drift");
  const std::string dir = make_suite(scratch.path(), "");
  const RegressSuite s = load_suite(dir);
  ASSERT_EQ(s.cases.size(), 2u);
  RegressOptions opt;
  // No references yet: bad input (exit 2), naming the fix.
  try {
    (void)run_regress(s, opt, MPI_COMM_WORLD);
    ADD_FAILURE() << "expected InputError";
  } catch (const fabricsim::engine::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--rebaseline"), std::string::npos) << e.what();
  }
  opt.rebaseline = true;
  const RegressReport base = run_regress(s, opt, MPI_COMM_WORLD);
  EXPECT_EQ(base.errors, 0u) << base.text;
  EXPECT_TRUE(fs::exists(fs::path(dir) / "references" / "ar16.json"));
  opt.rebaseline = false;
  const RegressReport same = run_regress(s, opt, MPI_COMM_WORLD);
  EXPECT_EQ(same.drifted, 0u) << same.text;
  EXPECT_EQ(same.errors, 0u) << same.text;
  EXPECT_NE(same.text.find("PASS"), std::string::npos);
  // A slower NIC must change the 16-rank AllReduce (it crosses hosts) and be flagged.
  opt.sets = {"cluster.nic_bandwidth=100Gbps"};
  const RegressReport slow = run_regress(s, opt, MPI_COMM_WORLD);
  EXPECT_GT(slow.drifted, 0u) << slow.text;
  EXPECT_NE(slow.text.find("DRIFT"), std::string::npos);
  EXPECT_NE(slow.text.find("FAIL"), std::string::npos);
}

TEST(Regress, ToleranceAbsorbsSmallChange) {
  // 400 -> 399 Gbps changes times by ~0.25%: drift at tolerance 0, none at 5 %.
  const fabricsim::testing::ScratchDir scratch("regress_tolerance");
  const std::string dir = make_suite(scratch.path(), "    tolerances: {iteration_time_ps: 0.05, comm_ps_mean: 0.05, exposed_comm_ps_mean: 0.05, "
                                     "busbw_all_reduce_GBps: 0.05, events: 0.05}\n");
  const RegressSuite s = load_suite(dir);
  RegressOptions opt;
  opt.rebaseline = true;
  (void)run_regress(s, opt, MPI_COMM_WORLD);
  opt.rebaseline = false;
  opt.sets = {"cluster.nic_bandwidth=399Gbps"};
  opt.only = {"ar16"};
  const RegressReport r = run_regress(s, opt, MPI_COMM_WORLD);
  EXPECT_EQ(r.drifted, 0u) << r.text;
  EXPECT_EQ(tolerance_of(s, s.cases[0], "iteration_time_ps"), 0.05);
  EXPECT_EQ(tolerance_of(s, s.cases[1], "iteration_time_ps"), 0.0);  // suite-wide
  EXPECT_EQ(tolerance_of(s, s.cases[1], "flows"), 1e-9);              // default
}

TEST(Regress, BadSuiteIsInputError) {
  const fabricsim::testing::ScratchDir scratch("regress_bad");
  const std::string dir = scratch.path();
  scratch.file("suite.yaml", "name: x\ncases:\n  - name: a b\n    workload: w\n");
  EXPECT_THROW(load_suite(dir), fabricsim::engine::InputError);
  EXPECT_THROW(load_suite(dir + "/missing"), fabricsim::engine::InputError);
}

}  // namespace
