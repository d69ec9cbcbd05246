// `fabricsim run` in a batch job (docs/progress.md): stdout and stderr redirected to a file.
// Progress lines and the summary must be in that file while the process still runs, so that a
// job killed later keeps them. The run is held alive at its end deterministically: its summary
// JSON is staged through a FIFO (s.json.tmp), whose opening blocks until the test opens it, so
// "while running" never depends on timing. Also: bad --progress / --progress-interval values.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/cli.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/scratch.hpp"

namespace {

namespace fs = std::filesystem;

/// A run of several seconds (about 5 s on the shared 2-core machine, 32 M events): one training
/// iteration of the 16-GPU quickstart workload at the packet rung, with 1 KiB packets.
std::vector<std::string> long_run_args() {
  return {"run", fabricsim::testing::source_dir() + "/examples/quickstart.yaml", "-o", "/dev/null", "--set",
          "cluster.mtu=1KiB"};
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Complete lines (ending in '\n') of `text` that start with `prefix`.
std::vector<std::string> complete_lines(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // an unfinished last line does not count
    const std::string line = text.substr(pos, nl - pos);
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
    pos = nl + 1;
  }
  return out;
}

class BatchLog : public fabricsim::testing::ScratchDirTest {
 protected:
  /// Starts `fabricsim ARGS --summary-json DIR/s.json` with stdout and stderr in DIR/log.txt
  /// and DIR/s.json.tmp a FIFO; returns its pid.
  pid_t start(std::vector<std::string> args) {
    fifo_ = dir_ / "s.json.tmp";
    log_ = dir_ / "log.txt";
    if (::mkfifo(fifo_.c_str(), 0600) != 0) return -1;
    args.push_back("--summary-json");
    args.push_back((dir_ / "s.json").string());
    const std::string exe = fabricsim::testing::fabricsim_binary();
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0) ::_exit(127);
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
      ::close(fd);
      std::vector<char*> av;
      av.push_back(const_cast<char*>(exe.c_str()));
      for (auto& a : args) av.push_back(a.data());
      av.push_back(nullptr);
      ::execvp(exe.c_str(), av.data());
      ::_exit(127);
    }
    return pid;
  }
  /// Polls the log until `done(text)` holds while the process is alive. Returns false when the
  /// process ended first, or after a generous hang guard (10 min; not a speed assertion).
  template <class F>
  bool wait_alive_until(pid_t pid, F done) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(10);
    while (std::chrono::steady_clock::now() < give_up) {
      int st = 0;
      if (::waitpid(pid, &st, WNOHANG) == pid) {
        exited_ = true;
        return false;
      }
      if (done(read_all(log_))) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  /// Ends the process (SIGKILL) unless it already ended.
  void kill_it(pid_t pid) {
    if (exited_) return;
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
    exited_ = true;
  }
  fs::path fifo_, log_;
  bool exited_ = false;
};

constexpr const char* kProgress = "fabricsim: progress: simulated ";

// (a) --progress=lines: complete progress lines are in the log while the process runs.
TEST_F(BatchLog, ProgressLinesStreamWhileRunning) {
  auto args = long_run_args();
  args.insert(args.end(), {"--progress=lines", "--progress-interval", "200ms"});
  const pid_t pid = start(args);
  ASSERT_GT(pid, 0);
  const bool seen = wait_alive_until(pid, [](const std::string& t) { return !complete_lines(t, kProgress).empty(); });
  const std::string text = read_all(log_);
  kill_it(pid);
  ASSERT_TRUE(seen) << "no complete progress line while running; log:\n" << text;
  const auto lines = complete_lines(text, kProgress);
  for (const auto& l : lines) {
    // "simulated T, P% of work, N events, R events/s, wall W, ETA E": every field, P in 0..100.
    for (const char* f : {"% of work, ", " events, ", " events/s, wall ", ", ETA "}) {
      EXPECT_NE(l.find(f), std::string::npos) << l;
    }
    const std::size_t pct = l.find("% of work");
    const std::size_t start_num = l.rfind(", ", pct) + 2;
    const double p = std::stod(l.substr(start_num, pct - start_num));
    EXPECT_GE(p, 0.0) << l;
    EXPECT_LE(p, 100.0) << l;
  }
  // No carriage-return line in a log.
  EXPECT_EQ(text.find('\r'), std::string::npos);
}

// (b) The summary is flushed before the outputs are written: with the process blocked in
// writing its summary JSON, the log already holds the whole summary; killed there (SIGKILL, no
// exit handlers), the log keeps it. The default mode with stderr in a file is lines.
TEST_F(BatchLog, SummaryInTheLogBeforeExit) {
  auto args = long_run_args();
  args.insert(args.end(), {"--progress-interval", "200ms"});
  const pid_t pid = start(args);
  ASSERT_GT(pid, 0);
  const bool seen =
      wait_alive_until(pid, [](const std::string& t) { return t.find("results digest: ") != std::string::npos; });
  kill_it(pid);
  const std::string text = read_all(log_);
  ASSERT_TRUE(seen) << "the summary was not in the log while the process was blocked writing outputs:\n" << text;
  for (const char* line : {"fabricsim ", "workload:  ", "cluster:   ", "iteration time", "engine: ", "results digest: "}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << " missing from:\n" << text;
  }
  EXPECT_FALSE(complete_lines(text, kProgress).empty()) << "default mode with a redirected stderr is lines:\n" << text;
  EXPECT_FALSE(fs::exists(dir_ / "s.json"));
}

// (c) Bad values: exit 2, one line naming the flag and the fix, nothing simulated.
TEST_F(BatchLog, BadProgressFlags) {
  const std::string spec = fabricsim::testing::source_dir() + "/examples/quickstart.yaml";
  struct Case {
    std::string args;
    std::vector<std::string> mention;
  };
  const std::vector<Case> cases = {
      {"--progress=bogus", {"--progress", "'bogus'", "use --progress=off, --progress=tty or --progress=lines"}},
      {"--progress-interval 0", {"--progress-interval", "'0'", "e.g. 500ms"}},
      {"--progress-interval 0s", {"--progress-interval", "not positive", "e.g. 500ms"}},
      {"--progress-interval=-1s", {"--progress-interval", "negative", "e.g. 500ms"}},
      {"--progress-interval 5", {"--progress-interval", "no unit", "e.g. 500ms"}},
      {"--progress-interval abc", {"--progress-interval", "not a duration", "e.g. 500ms"}},
      {"--progress-interval 3parsecs", {"--progress-interval", "unknown unit 'parsecs'", "e.g. 500ms"}},
  };
  for (const Case& c : cases) {
    const auto o = fabricsim::testing::run_fabricsim("run " + spec + " -o " + (dir_ / "out.h5").string() + " " + c.args,
                                                     dir_.string());
    fabricsim::testing::expect_bad_input(o, c.mention, c.args);
    EXPECT_EQ(o.out, "") << c.args;
    EXPECT_FALSE(fs::exists(dir_ / "out.h5")) << c.args;
  }
}

}  // namespace
