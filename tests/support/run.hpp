#pragma once
// Running a simulation in-process the way the model tests do: quiet, no HDF5 file. Header-only
// because it needs fabricsim_jobs, which only the tests that include it link.
#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

#include "engine/time.hpp"
#include "jobs/run.hpp"
#include "models/core/workload.hpp"

namespace fabricsim::testing {

/// Simulates the in-memory workload `w` (or, when `w` is null, the workload file `path`) on
/// `comm` with `threads` threads, the spec keys `sets` ("key=value", later ones win), without
/// printing or writing results; `keep_flows` keeps the per-flow records in the result.
/// Throws what jobs::run_simulation throws (engine::InputError for bad settings).
inline jobs::RunResult run_quiet(const models::Workload* w, std::vector<std::string> sets, MPI_Comm comm = MPI_COMM_SELF,
                                 unsigned threads = 1, bool keep_flows = false, const std::string& path = "") {
  jobs::RunOptions opt;
  opt.workload_data = w;
  opt.workload = path;
  opt.sets = std::move(sets);
  opt.write_h5 = false;
  opt.quiet = true;
  opt.keep_flows = keep_flows;
  opt.threads = threads;
  return jobs::run_simulation(opt, comm, "test", "test");
}

/// The simulated time of a run (ps): the iteration time of a one-iteration workload.
inline engine::SimTime iteration(const jobs::RunResult& r) { return r.meta.simulated_time_ps; }

}  // namespace fabricsim::testing
