#include "app/results_script.hpp"

#include <mpi.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "app/commands.hpp"
#include "engine/errors.hpp"

#ifndef FABRICSIM_PYTHON_DIR
#define FABRICSIM_PYTHON_DIR ""
#endif

namespace fabricsim::app {

namespace fs = std::filesystem;

void require_h5_file(const std::string& path, const std::string& field) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    throw engine::InputError(path, field, "no such file", "give the HDF5 file written by fabricsim run -o");
  }
}

int run_results_script(const std::vector<std::string>& args) {
  const char* py_env = std::getenv("FABRICSIM_PYTHON");
  const std::string python = py_env && *py_env ? py_env : "/usr/bin/python3";
  const char* dir_env = std::getenv("FABRICSIM_PYTHON_DIR");
  const std::string script =
      std::string(dir_env && *dir_env ? dir_env : FABRICSIM_PYTHON_DIR) + "/fabricsim_results.py";
  std::error_code ec;
  if (!fs::exists(python, ec)) {
    throw engine::InputError("<env>", "FABRICSIM_PYTHON", python + " does not exist",
                             "install python3 with python3-h5py (scripts/setup.sh) or set FABRICSIM_PYTHON");
  }
  if (!fs::is_regular_file(script, ec)) {
    throw engine::InputError("<env>", "FABRICSIM_PYTHON_DIR", script + " does not exist",
                             "set FABRICSIM_PYTHON_DIR to the source tree's io/python directory");
  }
  int rc = 0;
  if (is_root()) {
    std::vector<std::string> argv_s{python, script};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    int status = 0;
    if (pid < 0 || ::waitpid(pid, &status, 0) < 0) {
      rc = 3;
    } else if (WIFEXITED(status)) {
      rc = WEXITSTATUS(status) == 127 ? 3 : WEXITSTATUS(status);
    } else {
      rc = 3;
    }
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return rc;
}

}  // namespace fabricsim::app
