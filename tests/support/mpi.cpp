#include "tests/support/mpi.hpp"

#include <mpi.h>

namespace fabricsim::testing {

int world_procs() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

}  // namespace fabricsim::testing
