#pragma once
// Per-test scratch directories under the system temporary directory.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

namespace fabricsim::testing {

/// A fresh, empty scratch directory for one test, the same on every MPI process (rank 0 picks,
/// empties and creates it): <tmp>/fabricsim_<name>_<test name>_<pid of rank 0>. Removed with its
/// contents when the guard goes out of scope, unless the running test has failed on any process:
/// then it is kept for debugging and named on stderr. Construction, destruction and file() are
/// collective over MPI_COMM_WORLD (call them on every process).
class ScratchDir {
 public:
  /// Creates the directory; `name` tells tests of one binary apart (letters, digits, '_').
  explicit ScratchDir(const std::string& name);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  /// The directory's path.
  const std::string& path() const { return path_; }

  /// The path of `name` inside the directory (nothing is created).
  std::filesystem::path operator/(const std::string& name) const { return std::filesystem::path(path_) / name; }

  /// Writes `text` to file `name` in the directory (rank 0 writes, all wait) and returns its path.
  std::string file(const std::string& name, const std::string& text) const;

 private:
  std::string path_;
};

/// A gtest fixture with a ScratchDir per test, named after the test suite and test: `dir_` is
/// its path from SetUp to TearDown (kept if the test failed, like ScratchDir).
class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  /// Writes `text` to file `name` in the directory and returns its path.
  std::string write(const std::string& name, const std::string& text) const;

  std::filesystem::path dir_;

 private:
  std::unique_ptr<ScratchDir> scratch_;
};

}  // namespace fabricsim::testing
