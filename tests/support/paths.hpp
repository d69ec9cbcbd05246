#pragma once
// Where tests find their inputs: the repository, tests/data, the shared reference folder and the
// built fabricsim binary.
#include <filesystem>
#include <optional>
#include <string>

namespace fabricsim::testing {

/// Repository root: $FABRICSIM_SOURCE_DIR (ctest sets it), else derived from this file's location.
std::string source_dir();

/// tests/data as a path.
std::filesystem::path data_dir();

/// The path of `rel` under tests/data, e.g. data("nccl/nccl-validation.csv").
std::string data(const std::string& rel);

/// The shared folder next to the repository: $FABRICSIM_SHARED_DIR (ctest sets it from the CMake
/// variable FABRICSIM_SHARED_DIR, default `${PROJECT_SOURCE_DIR}/../shared`), else
/// source_dir() + "/../shared".
std::string shared_dir();

/// The path of `rel` under shared_dir() when that file exists, else nullopt (callers skip with
/// GTEST_SKIP naming the file).
std::optional<std::string> shared_file(const std::string& rel);

/// The fabricsim binary under test: $FABRICSIM_BINARY (ctest sets it), else "fabricsim" on PATH.
std::string fabricsim_binary();

/// The whole content of file `path` ("" when it cannot be read).
std::string read_text(const std::string& path);

}  // namespace fabricsim::testing
