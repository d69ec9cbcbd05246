#include "tests/support/cli.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "tests/support/paths.hpp"

namespace fabricsim::testing {

CliOutcome run_shell(const std::string& cmd, const std::string& err_file) {
  CliOutcome o;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return o;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), p) != nullptr) o.out += buf.data();
  const int st = ::pclose(p);
  o.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (!err_file.empty()) o.err = read_text(err_file);
  return o;
}

CliOutcome run_fabricsim(const std::string& args, const std::string& dir, const std::string& env) {
  const std::string err_file = dir + "/stderr.txt";
  return run_shell((env.empty() ? "" : "env " + env + " ") + fabricsim_binary() + " " + args + " 2>" + err_file,
                   err_file);
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += (c == '\n');
  return n;
}

void expect_bad_input(const CliOutcome& o, const std::vector<std::string>& needles, const std::string& context) {
  EXPECT_EQ(o.code, 2) << context << ": " << o.err;
  EXPECT_EQ(count_lines(o.err), 1) << context << ": " << o.err;
  EXPECT_EQ(o.err.rfind("fabricsim: error: ", 0), 0u) << context << ": " << o.err;
  for (const std::string& n : needles) {
    EXPECT_NE(o.err.find(n), std::string::npos) << context << ": '" << n << "' not in: " << o.err;
  }
}

}  // namespace fabricsim::testing
