#pragma once
// Shared scaffolding of the bench_* programs: the MPI main with the exit-code contract
// (0 ok, 2 bad input, 3 internal error) and the JSON result writer.
#include <mpi.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/errors.hpp"
#include "engine/mpi_init.hpp"

namespace fabricsim::bench {

/// Writes `j` to `path` (nothing if empty). @returns 0, or 2 with one line on stderr if it fails.
inline int write_json(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return 0;
  std::ofstream f(path);
  f << j.dump(2) << '\n';
  if (!f) {
    std::fprintf(stderr, "<cli>: --json: cannot write '%s'\n", path.c_str());
    return 2;
  }
  return 0;
}

/// MPI_Init_thread(FUNNELED) (engine threads never call MPI), runs `body(rank, nprocs)`, maps
/// InputError to exit 2 (printed by rank 0) and InternalError to MPI_Abort(3), MPI_Finalize.
inline int bench_main(int argc, char** argv, const std::function<int(int, int)>& body) {
  engine::init_mpi(&argc, &argv);
  int rank = 0, nprocs = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
  int rc = 0;
  try {
    rc = body(rank, nprocs);
  } catch (const engine::InputError& e) {
    if (rank == 0) std::fprintf(stderr, "error: %s\n", e.what());
    rc = 2;
  } catch (const engine::InternalError& e) {
    std::fprintf(stderr, "internal error (rank %d): %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Finalize();
  return rc;
}

}  // namespace fabricsim::bench
