#pragma once
// Helpers shared by the end-to-end tests: paths and temporary workload files.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "models/core/workload.hpp"

namespace fabricsim::testing {

/// An in-memory workload of `n` ranks with only the world communicator and empty programs.
inline models::Workload world_workload(std::uint32_t n) {
  models::Workload w;
  w.source = "<test>";
  w.format = "simai";
  w.ranks = n;
  models::CommGroup g{"world", {}};
  for (std::uint32_t r = 0; r < n; ++r) g.ranks.push_back(r);
  w.groups.push_back(g);
  w.programs.resize(n);
  return w;
}

/// Repository root (ctest sets FABRICSIM_SOURCE_DIR; fall back to this file's location).
inline std::string source_dir() {
  if (const char* d = std::getenv("FABRICSIM_SOURCE_DIR")) return d;
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
}

inline std::string data(const std::string& rel) { return source_dir() + "/tests/data/" + rel; }

/// A per-test scratch directory, the same on every MPI process (rank 0 picks and creates it),
/// removed with its contents when the guard goes out of scope, unless the running test has
/// failed on any process: then it is kept for debugging and named on stderr. Construct and
/// destroy it on every process (both are collective). Tests used to leave one
/// /tmp/fabricsim_NAME_PID directory per run.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long long id = rank == 0 ? static_cast<long long>(::getpid()) : 0;
    MPI_Bcast(&id, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    const auto dir = std::filesystem::temp_directory_path() / ("fabricsim_" + name + "_" + std::to_string(id));
    if (rank == 0) std::filesystem::create_directories(dir);
    MPI_Barrier(MPI_COMM_WORLD);
    path_ = dir.string();
  }
  ~ScratchDir() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    // Every process is done with the directory here; keep it if the test failed anywhere (an
    // exception leaving the test body counts: gtest records it only after this unwinding).
    int failed = ::testing::Test::HasFailure() || std::uncaught_exceptions() > 0 ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank != 0) return;
    if (failed) {
      std::fprintf(stderr, "scratch directory kept (the test failed): %s\n", path_.c_str());
    } else {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  /// The directory's path.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Writes a SimAI MICRO workload with one collective of `bytes` (compute 0) and returns its path.
inline std::string micro_workload(const std::string& dir, const std::string& comm, unsigned long long bytes) {
  const std::string path = dir + "/micro_" + comm + "_" + std::to_string(bytes) + ".txt";
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    std::ofstream f(path);
    f << "MICRO\n1\nmicro_test -1 0 NONE 0 0 NONE 0 0 " << comm << " " << bytes << " 0\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

}  // namespace fabricsim::testing
