#pragma once
// The MPI process-count guards of tests that run under 1, 2 and 4 processes (fabricsim_add_test
// ... MPI 2 4): sequential-only comparisons skip under mpiexec, multi-process checks skip alone.
#include <gtest/gtest.h>

namespace fabricsim::testing {

/// Processes in MPI_COMM_WORLD (1 for a plain run of the test binary).
int world_procs();

/// This process's rank in MPI_COMM_WORLD.
int world_rank();

}  // namespace fabricsim::testing

/// Skips the running test (GTEST_SKIP with `why`) under more than one MPI process: for
/// comparisons that are run once, sequentially (their cross-process identity is tested apart).
#define FABRICSIM_SEQUENTIAL_ONLY(why) \
  if (::fabricsim::testing::world_procs() > 1) GTEST_SKIP() << (why)

/// Skips the running test (GTEST_SKIP naming the need) under fewer than `n` MPI processes.
#define FABRICSIM_NEEDS_PROCS(n)                   \
  if (::fabricsim::testing::world_procs() < (n)) \
  GTEST_SKIP() << "needs " << (n) << " MPI processes"
