// `fabricsim run` checkpoint flags and stop signals (docs/checkpoint.md): SIGTERM stops a run with
// one final status line, exit 75 and no output file (SIGUSR1 to mpiexec -n 2: stop_signal_mpi.sh,
// as an MPI singleton cannot start mpiexec itself); checkpoint
// flags on a coarse rung (whose LPs cannot be checkpointed; packet-rung restarts are tested by
// checkpoint_restart.sh), bad flag values, and damaged or foreign
// checkpoints given to --restart are refused with one line, exit 2, and nothing written.
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/checkpoint.hpp"
#include "tests/support/cli.hpp"
#include "tests/support/mpi.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/scratch.hpp"

namespace {

namespace fs = std::filesystem;
using fabricsim::testing::CliOutcome;
using fabricsim::testing::expect_bad_input;
using fabricsim::testing::run_fabricsim;
using fabricsim::testing::run_shell;

/// The 16-GPU AllReduce trace (a packet-level run of well under a second).
std::string small_workload() {
  return fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/16npus_1MB/all_reduce");
}

/// A workload that runs many seconds at the packet rung: 1 GiB AllReduce over 128 GPUs
/// (generated in the test's directory as a SimAI file of one collective).
std::string long_spec(const fs::path& dir) {
  const fs::path w = dir / "ar128.txt";
  std::ofstream(w) << "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 128 checkpoints: 0 checkpoint_initiates: 0\n"
                      "1\n"
                      "ar -1 0 NONE 0 0 NONE 0 0 ALLREDUCE 1073741824 0\n";
  const fs::path s = dir / "long.yaml";
  std::ofstream(s) << "workload:\n  path: " << w.string() << "\n";
  return s.string();
}

class CheckpointCli : public fabricsim::testing::ScratchDirTest {
 protected:
  void SetUp() override {
    fabricsim::testing::ScratchDirTest::SetUp();
    if (fabricsim::testing::world_procs() > 1) GTEST_SKIP() << "runs fabricsim itself; sequential registration only";
  }
  /// Expects the bad-input contract and that nothing but stderr.txt (and `keep`) is in the dir.
  void expect_bad(const std::string& args, const std::vector<std::string>& needles,
                  const std::vector<std::string>& keep = {}) {
    const CliOutcome o = run_fabricsim(args + " -o " + (dir_ / "out.h5").string() + " --summary-json " +
                                           (dir_ / "s.json").string(),
                                       dir_.string());
    expect_bad_input(o, needles, args);
    for (const auto& e : fs::directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      bool ok = name == "stderr.txt";
      for (const auto& k : keep) ok = ok || name == k;
      EXPECT_TRUE(ok) << "left behind: " << e.path();
    }
  }
};

TEST_F(CheckpointCli, HelpListsTheFlags) {
  const CliOutcome h = run_fabricsim("run --help", dir_.string());
  EXPECT_EQ(h.code, 0);
  for (const char* f : {"--checkpoint-at", "--checkpoint-every", "--checkpoint-at-signal", "--checkpoint-dir", "--restart"}) {
    EXPECT_NE(h.out.find(f), std::string::npos) << f;
  }
}

// The packet rung's LPs are checkpointable (checkpoint_restart.sh restarts them); the coarse
// rungs' are not.
TEST_F(CheckpointCli, CoarseRungsRefuseCheckpointFlagsBeforeSimulating) {
  const std::string ck = " --checkpoint-dir " + (dir_ / "ck").string();
  expect_bad("run --workload " + small_workload() + " --fidelity flow --checkpoint-at-signal" + ck,
             {"--checkpoint-at-signal", "flow rung", "cannot be checkpointed"});
  expect_bad("run --workload " + small_workload() + " --fidelity analytical --checkpoint-every 30min" + ck,
             {"--checkpoint-every", "analytical rung", "cannot be checkpointed"});
}

TEST_F(CheckpointCli, BadFlagValuesAreRefused) {
  expect_bad("run --workload " + small_workload() + " --checkpoint-at 1us", {"--checkpoint-dir", "missing"});
  expect_bad("run --workload " + small_workload() + " --checkpoint-at 1us,,2us --checkpoint-dir x", {"--checkpoint-at"});
  expect_bad("run --workload " + small_workload() + " --checkpoint-every 5 --checkpoint-dir x",
             {"--checkpoint-every", "s, min or h"});
  expect_bad("run --workload " + small_workload() + " --checkpoint-every 2ms --checkpoint-dir x", {"--checkpoint-every"});
}

TEST_F(CheckpointCli, RestartRefusesMissingTruncatedAndForeignCheckpoints) {
  const std::string run = "run --workload " + small_workload() + " --restart ";
  expect_bad(run + (dir_ / "nothing").string(), {"manifest.bin", "missing"});
  fs::create_directories(dir_ / "ck");
  std::ofstream(dir_ / "ck" / "manifest.bin") << "FSIMCKPT but far too short";
  expect_bad(run + (dir_ / "ck").string(), {"manifest.bin: header:", "truncated"}, {"ck"});
  // A well-formed manifest of another build: refused naming the build.
  fabricsim::engine::CheckpointHeader h;
  h.kind = fabricsim::engine::CheckpointHeader::kManifest;
  h.build = "0.0.1 (0000000)";
  const std::vector<std::byte> payload(24);
  const auto bytes = fabricsim::engine::encode_checkpoint(h, payload);
  std::ofstream(dir_ / "ck" / "manifest.bin", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  expect_bad(run + (dir_ / "ck").string(), {"manifest.bin: build: written by fabricsim 0.0.1 (0000000)"}, {"ck"});
}

/// Starts `cmd` (which writes stderr to `err`) in the background, waits until the engine runs
/// (the info log's "simulating on" line), sends `sig` to it, and returns its exit status and the
/// wall seconds it took to stop.
CliOutcome signal_run(const std::string& cmd, const fs::path& err, const std::string& sig) {
  const fs::path script = err.parent_path() / "signal.sh";
  std::ofstream(script) << cmd << " &\npid=$!\nfor i in $(seq 1200); do grep -q 'simulating on' '" << err.string()
                        << "' 2>/dev/null && break; sleep 0.05; done\nsleep 1\nkill -" << sig
                        << " $pid\nwait $pid\necho rc=$?\n";
  CliOutcome o = run_shell("bash " + script.string(), err.string());
  fs::remove(script);
  const auto at = o.out.rfind("rc=");
  o.code = at == std::string::npos ? -1 : std::stoi(o.out.substr(at + 3));
  return o;
}

void expect_stopped(const CliOutcome& o, const fs::path& dir) {
  EXPECT_EQ(o.code, 75) << o.err;
  // The last stderr line is the one status line.
  std::string last = o.err;
  while (!last.empty() && last.back() == '\n') last.pop_back();
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  EXPECT_EQ(last.rfind("fabricsim: stopped by a signal at simulated time ", 0), 0u) << o.err;
  EXPECT_NE(last.find(" events; no checkpoint; no output written"), std::string::npos) << last;
  EXPECT_EQ(fabricsim::testing::count_lines(o.err.substr(o.err.find("fabricsim: stopped"))), 1) << o.err;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "stderr.txt" || name == "long.yaml" || name == "ar128.txt") << "left behind: " << e.path();
  }
}

TEST_F(CheckpointCli, SigtermStopsWithOneStatusLineAndNoOutput) {
  const fs::path err = dir_ / "stderr.txt";
  const std::string cmd = fabricsim::testing::fabricsim_binary() + " run " + long_spec(dir_) + " --log-level info -o " +
                          (dir_ / "out.h5").string() + " --summary-json " + (dir_ / "s.json").string() +
                          " --trace " + (dir_ / "t.json").string() + " 2>" + err.string();
  expect_stopped(signal_run(cmd, err, "TERM"), dir_);
}

}  // namespace
