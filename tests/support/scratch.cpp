#include "tests/support/scratch.hpp"

#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>

namespace fabricsim::testing {

namespace {

int rank_of_world() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

/// `s` with '/' (parameterized tests' names) made '_': one path component.
std::string component(std::string s) {
  std::replace(s.begin(), s.end(), '/', '_');
  return s;
}

/// The running test's name as one path component; "" outside a test.
std::string test_name() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return info == nullptr ? "" : component(info->name());
}

}  // namespace

ScratchDir::ScratchDir(const std::string& name) {
  const int rank = rank_of_world();
  long long id = rank == 0 ? static_cast<long long>(::getpid()) : 0;
  MPI_Bcast(&id, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  const std::string test = test_name();
  const auto dir = std::filesystem::temp_directory_path() /
                   ("fabricsim_" + component(name) + (test.empty() ? "" : "_" + test) + "_" + std::to_string(id));
  if (rank == 0) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  path_ = dir.string();
}

ScratchDir::~ScratchDir() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // Every process is done with the directory here; keep it if the test failed anywhere (an
  // exception leaving the test body counts: gtest records it only after this unwinding).
  int failed = ::testing::Test::HasFailure() || std::uncaught_exceptions() > 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank_of_world() != 0) return;
  if (failed) {
    std::fprintf(stderr, "scratch directory kept (the test failed): %s\n", path_.c_str());
  } else {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
}

std::string ScratchDir::file(const std::string& name, const std::string& text) const {
  const std::string p = (*this / name).string();
  if (rank_of_world() == 0) std::ofstream(p) << text;
  MPI_Barrier(MPI_COMM_WORLD);
  return p;
}

void ScratchDirTest::SetUp() {
  scratch_ = std::make_unique<ScratchDir>(::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name());
  dir_ = scratch_->path();
}

void ScratchDirTest::TearDown() { scratch_.reset(); }

std::string ScratchDirTest::write(const std::string& name, const std::string& text) const {
  return scratch_->file(name, text);
}

}  // namespace fabricsim::testing
