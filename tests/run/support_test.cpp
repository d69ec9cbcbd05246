// The shared test helpers (tests/support) checked on their own: scratch directories are the same
// on every process and gone afterwards, the shared-folder lookup reports a missing file, the
// shell runner returns exit status and output, the bad-input check fails on a good exit, and the
// workload builders conserve what they are given.
#include <gtest/gtest.h>
#include <gtest/gtest-spi.h>
#include <mpi.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "tests/support/cli.hpp"
#include "tests/support/mpi.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/scratch.hpp"
#include "tests/support/workloads.hpp"

namespace {

namespace fs = std::filesystem;
namespace t = fabricsim::testing;
namespace m = fabricsim::models;

// The same path on every process, gone on every process afterwards (with its contents).
TEST(ScratchDir, RemovedWhenTheGuardGoesOutOfScope) {
  std::string path;
  {
    const t::ScratchDir scratch("scratch_guard");
    path = scratch.path();
    EXPECT_TRUE(fs::is_directory(path));
    if (t::world_rank() == 0) fs::create_directories(fs::path(path) / "sub");
    const std::string f = scratch.file("sub/f.txt", "x");
    EXPECT_EQ(t::read_text(f), "x");
    std::string root = path;
    root.resize(4096, '\0');
    MPI_Bcast(root.data(), 4096, MPI_CHAR, 0, MPI_COMM_WORLD);
    EXPECT_EQ(std::string(root.c_str()), path);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_FALSE(fs::exists(path)) << path;
}

// FABRICSIM_SHARED_DIR names the shared folder; a file that is not there is nullopt (callers
// skip naming it), one that is there comes back as its path.
TEST(Paths, SharedFileFoundOrReportedMissing) {
  const t::ScratchDir scratch("shared");
  scratch.file("present.csv", "a,b\n");
  const char* old = std::getenv("FABRICSIM_SHARED_DIR");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("FABRICSIM_SHARED_DIR", scratch.path().c_str(), 1);
  EXPECT_EQ(t::shared_dir(), scratch.path());
  EXPECT_EQ(t::shared_file("present.csv"), scratch.path() + "/present.csv");
  EXPECT_EQ(t::shared_file("reference/missing.csv"), std::nullopt);
  if (old != nullptr) {
    ::setenv("FABRICSIM_SHARED_DIR", saved.c_str(), 1);
  } else {
    ::unsetenv("FABRICSIM_SHARED_DIR");
  }
  EXPECT_TRUE(fs::is_directory(t::data_dir())) << t::data_dir();
}

TEST(Cli, RunShellGivesExitStatusAndOutput) {
  const t::CliOutcome ok = t::run_shell("printf 'a\\nb\\n'");
  EXPECT_EQ(ok.code, 0);
  EXPECT_EQ(ok.out, "a\nb\n");
  EXPECT_EQ(t::count_lines(ok.out), 2);
  EXPECT_EQ(t::run_shell("exit 3").code, 3);
}

TEST(Cli, ExpectBadInputChecksExitLinesPrefixAndNeedles) {
  t::expect_bad_input(t::CliOutcome{2, "", "fabricsim: error: f.yaml: cluster.mtu: too small\n"}, {"f.yaml", "cluster.mtu"});
  EXPECT_NONFATAL_FAILURE(t::expect_bad_input(t::CliOutcome{0, "", "fabricsim: error: x\n"}, {}), "");
  EXPECT_NONFATAL_FAILURE(t::expect_bad_input(t::CliOutcome{2, "", "fabricsim: error: x\ny\n"}, {}), "");
  EXPECT_NONFATAL_FAILURE(t::expect_bad_input(t::CliOutcome{2, "", "error: x\n"}, {}), "");
  EXPECT_NONFATAL_FAILURE(t::expect_bad_input(t::CliOutcome{2, "", "fabricsim: error: x\n"}, {"absent"}), "");
}

// Incast: n-1 sends into rank 0, every send matched by one receive of the same bytes and tag.
TEST(Workloads, IncastSendsMatchReceives) {
  const m::Workload w = t::incast_workload(5, 1000);
  ASSERT_EQ(w.programs.size(), 5u);
  ASSERT_EQ(w.groups[0].ranks.size(), 5u);
  ASSERT_EQ(w.programs[0].size(), 4u);
  for (std::uint32_t r = 1; r < 5; ++r) {
    ASSERT_EQ(w.programs[r].size(), 1u);
    const m::WorkNode& s = w.programs[r][0];
    const m::WorkNode& v = w.programs[0][r - 1];
    EXPECT_EQ(s.type, m::NodeType::kSend);
    EXPECT_EQ(v.type, m::NodeType::kRecv);
    EXPECT_EQ(s.peer, 0);
    EXPECT_EQ(v.peer, static_cast<std::int32_t>(r));
    EXPECT_EQ(s.tag, v.tag);
    EXPECT_EQ(s.bytes, 1000u);
    EXPECT_EQ(v.bytes, 1000u);
  }
}

// A shift permutation sends once from and once to every rank; a delayed flow's send waits for
// its compute node.
TEST(Workloads, ShiftPermutationAndDelayedSends) {
  const auto flows = t::shift_permutation_flows(8, 3, 64);
  std::set<unsigned> srcs, dsts;
  for (const auto& f : flows) {
    srcs.insert(f.src);
    dsts.insert(f.dst);
    EXPECT_EQ((f.src + 3) % 8, f.dst);
  }
  EXPECT_EQ(srcs.size(), 8u);
  EXPECT_EQ(dsts.size(), 8u);
  const m::Workload w = t::p2p_workload(2, {{0, 1, 10, 500}});
  ASSERT_EQ(w.programs[0].size(), 2u);
  EXPECT_EQ(w.programs[0][0].type, m::NodeType::kCompute);
  EXPECT_EQ(w.programs[0][0].duration_ps, 500);
  EXPECT_EQ(w.programs[0][1].deps, std::vector<std::uint32_t>{0});
  EXPECT_EQ(w.format, "chakra");
}

}  // namespace
