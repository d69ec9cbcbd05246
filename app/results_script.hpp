#pragma once
// Runs io/python/fabricsim_results.py (h5py + matplotlib) for `fabricsim report` and `compare`.
#include <string>
#include <vector>

namespace fabricsim::app {

/// Runs `PYTHON fabricsim_results.py args...` on MPI rank 0 (stdout/stderr inherited) and returns
/// its exit status on every process (0 ok, 2 bad input, 3 internal error). PYTHON is
/// $FABRICSIM_PYTHON or /usr/bin/python3 (Debian's python3-h5py/-matplotlib); the script is
/// $FABRICSIM_PYTHON_DIR/fabricsim_results.py or the source tree's io/python/ copy.
/// @throws engine::InputError if the interpreter or the script is missing.
int run_results_script(const std::vector<std::string>& args);

/// @throws engine::InputError (field `field`) if `path` is not an existing regular file.
void require_h5_file(const std::string& path, const std::string& field);

}  // namespace fabricsim::app
