#pragma once
/// @file run.hpp
/// `fabricsim run`: spec -> workload -> topology -> partition -> engine -> results.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/simulator.hpp"
#include "io/results.hpp"
#include "models/workload.hpp"

namespace fabricsim::jobs {

/// Command-line options of `fabricsim run` (they override the spec's keys).
struct RunOptions {
  std::string spec_path;               ///< may be empty (all defaults)
  std::vector<std::string> sets;       ///< --set key=value
  std::string workload;                ///< --workload (overrides workload.path)
  std::uint32_t gpus = 0;              ///< --gpus (overrides workload.gpus)
  std::string out_h5;                  ///< -o
  std::string summary_json;            ///< --summary-json
  std::uint32_t threads = 0;           ///< --threads (0 = spec / OMP_NUM_THREADS / 1)
  bool stats = false;                  ///< --stats
  bool quiet = false;                  ///< --quiet: no summary on stdout
  bool write_h5 = true;                ///< false for `validate`
  /// In-memory workload (e.g. `fabricsim nccl-tests`); when set, --workload/workload.path are not read.
  const models::Workload* workload_data = nullptr;
};

/// Everything a run produced (on every process; tables are global after gathering).
struct RunResult {
  io::RunMeta meta;
  engine::EngineStats stats;
  std::vector<io::RankRecord> ranks;              ///< all ranks, by rank
  std::vector<io::CollectiveRecord> collectives;  ///< all collectives, by (group, instance)
  std::uint64_t flows = 0;                        ///< number of flow records
  std::string digest;                             ///< hash of collective + flow tables
  std::string output_h5;                          ///< written file ("" if none)
  std::string summary_text;                       ///< the printed summary
};

/// Loads the workload named by a path: a Chakra ET prefix / .et file or a SimAI/AICB text file.
/// @throws engine::InputError for a missing path, unknown format or malformed content.
models::Workload load_workload(const std::string& path, const std::string& format,
                               std::uint32_t gpus, const std::string& comm_groups);

/// Runs one simulation collectively on `comm`. Writes the HDF5 file (atomically) and the summary
/// JSON if asked. @throws engine::InputError (exit 2) or engine::InternalError (exit 3); on error
/// no output file is left.
RunResult run_simulation(const RunOptions& opt, MPI_Comm comm, const std::string& version,
                         const std::string& git_commit);

/// Parses and checks a spec and its workload without simulating (`fabricsim validate`).
/// @returns a one-paragraph description. @throws engine::InputError.
std::string validate_only(const RunOptions& opt);

}  // namespace fabricsim::jobs
