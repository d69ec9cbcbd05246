#pragma once
// Running the built fabricsim binary (and shell scripts) from a test, and the bad-input contract
// of the command line: exit 2, one line on stderr starting "fabricsim: error: ".
#include <string>
#include <vector>

namespace fabricsim::testing {

/// What a child process did: its exit status (-1 when it did not exit normally or could not be
/// started), its standard output and its standard error.
struct CliOutcome {
  int code = -1;
  std::string out;
  std::string err;
};

/// Runs shell command line `cmd` (popen): stdout is captured; when `err_file` is given, the
/// caller's `cmd` redirects stderr there and its content becomes `err`.
CliOutcome run_shell(const std::string& cmd, const std::string& err_file = "");

/// Runs `fabricsim ARGS` (fabricsim_binary()) with its stderr in `dir`/stderr.txt; `env` (e.g.
/// "OMP_NUM_THREADS=2") is set for that process only.
CliOutcome run_fabricsim(const std::string& args, const std::string& dir, const std::string& env = "");

/// Newline characters in `s`.
int count_lines(const std::string& s);

/// Expects the bad-input contract of `o`: exit status 2, exactly one line on stderr that starts
/// with "fabricsim: error: " and contains every string of `needles`; `context` names the case in
/// failure messages.
void expect_bad_input(const CliOutcome& o, const std::vector<std::string>& needles, const std::string& context = "");

}  // namespace fabricsim::testing
