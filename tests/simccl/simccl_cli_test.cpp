// Must-show 7 of issue 4 (part): bad NCCL_ALGO / NCCL_PROTO strings, an NCCL topology XML
// without GPUs and a missing NCCL_TOPO_FILE give one line on stderr and exit 2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace {

struct Outcome {
  int code = -1;
  std::string err;
};

Outcome run_cli(const std::string& args, const std::string& dir) {
  const char* b = std::getenv("FABRICSIM_BINARY");
  const std::string err_file = dir + "/stderr.txt";
  const std::string cmd = std::string(b ? b : "fabricsim") + " " + args + " >/dev/null 2>" + err_file;
  Outcome o;
  const int st = std::system(cmd.c_str());
  o.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(err_file);
  std::stringstream ss;
  ss << e.rdbuf();
  o.err = ss.str();
  return o;
}

TEST(SimcclCli, BadInputsGiveOneLineAndExit2) {
  const auto dir = std::filesystem::temp_directory_path() / ("fabricsim_simccl_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string nogpu = (dir / "nogpu.xml").string();
  std::ofstream(nogpu) << R"(<system version="1"><cpu numaid="0"></cpu></system>)";
  const std::string base = "nccl-tests all_reduce -b 1M -e 1M --set ";
  const std::pair<std::string, std::string> cases[] = {
      {"nccl.NCCL_ALGO=Foo", "NCCL_ALGO: 'Foo'"},
      {"nccl.NCCL_PROTO=LL256", "NCCL_PROTO: 'LL256'"},
      {"nccl.NCCL_ALGO=allreduce:Ring,Banana", "Banana"},
      {"nccl.NCCL_TOPO_FILE=" + nogpu, nogpu + ": NCCL_TOPO_FILE: describes no GPU"},
      {"nccl.NCCL_TOPO_FILE=" + (dir / "missing.xml").string(), "missing.xml: NCCL_TOPO_FILE: cannot read"},
  };
  for (const auto& [set, needle] : cases) {
    const Outcome o = run_cli(base + set, dir.string());
    EXPECT_EQ(o.code, 2) << set << ": " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_EQ(o.err.rfind("fabricsim: error: ", 0), 0u) << o.err;
    EXPECT_NE(o.err.find(needle), std::string::npos) << o.err;
  }
  // The fallback turns the missing file into a warning and a run.
  const Outcome ok = run_cli(base + "nccl.NCCL_TOPO_FILE=" + (dir / "missing.xml").string() +
                                 " --set simccl.topo_fallback=true",
                             dir.string());
  EXPECT_EQ(ok.code, 0) << ok.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
