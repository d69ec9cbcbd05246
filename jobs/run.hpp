#pragma once
/// @file run.hpp
/// `fabricsim run`: spec -> workload -> topology -> partition -> engine -> results.
#include <mpi.h>

#include <csignal>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/simulator.hpp"
#include "io/chakra_reader.hpp"
#include "io/results.hpp"
#include "jobs/progress.hpp"
#include "models/core/workload.hpp"

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
  bool quiet = false;                  ///< --quiet: no summary on stdout (and log level error)
  /// --log-level: error | warn (default: reader/NCCL warnings) | info (phases with wall times,
  /// sizes) | debug (also partition and fabric details). Rank 0 logs to stderr.
  std::string log_level = "warn";
  bool write_h5 = true;                ///< false: no HDF5 file (tests, nccl-tests, ladder)
  /// `fabricsim validate`: every check of a run (spec, workload, output paths, topology,
  /// partition, planner and its NCCL settings, schedules, plans) on the same code path, then stop
  /// before the engine is built; nothing is written. RunResult::summary_text holds the
  /// description. The HDF5 path is checked only when output.h5 was given (spec or --set).
  bool dry_run = false;
  /// `fabricsim validate --processes N`: check the partition (a sim.partition file, or the
  /// topology/metis placement and its lookahead) for a run on N MPI processes instead of the
  /// processes validate itself runs on (0: those). Only with dry_run.
  std::uint32_t validate_processes = 0;
  /// In-memory workload (e.g. `fabricsim nccl-tests`); when set, --workload/workload.path are not read.
  const models::Workload* workload_data = nullptr;
  /// Keep every flow record in RunResult::flow_records (tests, small runs).
  bool keep_flows = false;
  // Checkpoints and stop requests (docs/checkpoint.md).
  std::vector<engine::SimTime> checkpoint_at;  ///< --checkpoint-at: simulated times (ps)
  double checkpoint_every_s = 0;               ///< --checkpoint-every: wall seconds (0 = off)
  bool checkpoint_at_signal = false;           ///< --checkpoint-at-signal
  std::string checkpoint_dir;                  ///< --checkpoint-dir: where checkpoints go
  std::string restart;                         ///< --restart: checkpoint to continue from
  /// Set by a signal handler (engine/stop_signal.hpp): stop at the next window boundary.
  const volatile std::sig_atomic_t* stop_flag = nullptr;
  /// Progress on stderr during the simulation (rank 0; docs/progress.md). Off by default here;
  /// `fabricsim run` sets it from --progress / --progress-interval. Every process must pass the
  /// same mode (off or not): the reports are collective.
  ProgressOptions progress;
  /// Rank 0 prints the summary on stdout and flushes it as soon as it is known, before the
  /// output files are written (`fabricsim run` without --quiet); the "output:" line follows
  /// once they are in place. RunResult::summary_text holds the whole text either way.
  bool print_summary = false;
  /// `fabricsim run --isolated` (`jobs:` specs): first runs each job alone on the same placement
  /// (the other jobs' GPUs idle, nothing written), then the jobs together; the summary, the JSON
  /// and RunResult::jobs give each job's alone iteration time and slowdown.
  bool isolated = false;
  /// Internal to --isolated: simulate only job `only_job` of the spec's jobs (-1: all) and write nothing.
  int only_job = -1;
  /// Internal to --isolated: each job's iteration time alone (ps), filled before the joint run.
  std::vector<engine::SimTime> alone_iter_ps;
};

/// One job's results (`jobs:` specs; docs/jobs_and_faults.md).
struct JobResult {
  std::string name;
  std::vector<std::uint32_t> gpus;     ///< its GPUs, in rank order
  engine::SimTime start_ps = 0;        ///< jobs[i].start
  std::uint32_t iterations = 1;
  engine::SimTime finish_ps = 0;       ///< its last rank's finish (ps)
  engine::SimTime iteration_ps = 0;    ///< (finish - start) / iterations (ps)
  engine::SimTime alone_iteration_ps = -1;  ///< the same job alone (--isolated), -1 if not run
  double compute_ps = 0, comm_ps = 0, exposed_comm_ps = 0;  ///< per rank and iteration, mean (ps)
};

/// Packet-fabric counters summed over all switches and NICs. Zero at coarse rungs.
struct FabricTotals {
  std::uint64_t switch_packets = 0;    ///< packets forwarded by switches (packet hops out of switches)
  std::uint64_t nic_data_packets = 0;  ///< data packets sent by NICs and NVLink ports (incl. retransmissions)
  std::uint64_t pause_frames = 0;      ///< PFC XOFF frames sent by switches
  std::uint64_t resume_frames = 0;     ///< PFC XON frames sent
  std::uint64_t switch_paused_ps = 0;  ///< total egress-port time paused by PFC at switches (ps)
  std::uint64_t nic_paused_ps = 0;     ///< total NIC-port time paused by PFC (ps)
  std::uint64_t nic_pauses = 0;        ///< XOFF frames received by NICs
  std::uint64_t ecn_marks = 0;
  std::uint64_t drops = 0;             ///< packets dropped at switches (all causes)
  std::uint64_t headroom_drops = 0;    ///< lossless packets dropped on PFC headroom overflow
  std::uint64_t retransmits = 0;       ///< data packets sent again (go-back-N)
  std::uint64_t timeouts = 0;          ///< retransmission timeouts
  std::uint64_t nacks = 0;
  std::uint64_t cnps = 0;              ///< CNPs sent by DCQCN notification points
  std::uint64_t acks = 0;
  std::uint64_t max_buffer_bytes = 0;  ///< largest shared-buffer occupancy of any switch
  std::uint64_t nvls_absorbed = 0;     ///< NVLS reduce contributions that ended in an NVSwitch (packets)
  std::uint64_t nvls_copies = 0;       ///< NVLS multicast copies an NVSwitch sent (packets)
  std::uint64_t down_drops = 0;        ///< of drops: lossy packets at a port whose link was down (faults)
  std::uint64_t ber_drops = 0;         ///< of drops: frames lost to a link's bit-error rate (faults)
  std::uint64_t retransmit_bytes = 0;  ///< payload bytes of the retransmitted data packets
  std::uint64_t link_retransmits = 0;  ///< link-level retry units sent again (switch.link_retry)
  std::uint64_t link_retransmit_bytes = 0;  ///< their wire bytes
  std::uint64_t qp_ctx_hits = 0;    ///< NIC QP-context cache hits (nic.qp_cache; 0 when unlimited)
  std::uint64_t qp_ctx_misses = 0;  ///< NIC QP-context cache misses, each a nic.qp_miss_latency fetch
};

/// Everything a run produced (on every process; tables are global after gathering).
struct RunResult {
  io::RunMeta meta;
  engine::EngineStats stats;
  std::vector<io::RankRecord> ranks;              ///< all ranks, by rank
  std::vector<io::CollectiveRecord> collectives;  ///< all collectives, by (group, instance)
  std::uint64_t flows = 0;                        ///< number of flow records
  /// Training iterations the workload runs (workload.generator.iterations; 1 for trace files,
  /// which hold what they hold). Iteration time, per-rank compute/communication and MFU are per
  /// iteration: the simulated time and the sums divided by this.
  std::uint32_t iterations = 1;
  /// Inference workloads (workload.generator.mode inference): time to first token and time per
  /// output token (ps; docs/generators.md "Inference"); -1 otherwise (tpot_ps also with one output token).
  std::int64_t ttft_ps = -1, tpot_ps = -1;
  std::string digest;                             ///< hash of collective + flow tables
  std::string output_h5;                          ///< written file ("" if none)
  std::string summary_text;                       ///< the printed summary
  FabricTotals fabric;                            ///< packet-fabric counters
  std::vector<io::FlowRecord> flow_records;       ///< all flows (only with RunOptions::keep_flows)
  std::vector<io::LinkBinRecord> link_records;    ///< all link bins (only with keep_flows)
  std::vector<io::QueueBinRecord> queue_records;  ///< all queue bins (only with keep_flows)
  /// A stop request (RunOptions::stop_flag) ended the run early: nothing was gathered or written;
  /// stopped_at_ps is the window boundary reached, stats.events the events handled so far and
  /// checkpoint the checkpoint written there ("" if none).
  bool stopped = false;
  engine::SimTime stopped_at_ps = 0;
  std::string checkpoint;
  std::vector<JobResult> jobs;  ///< `jobs:` specs: per job, in spec order (empty otherwise)
  /// Packet rung: per directed switch egress link with traffic, marks, pauses or drops, its
  /// totals over the run, by link_id (HDF5 /link_totals).
  std::vector<io::LinkTotalRecord> link_totals;
};

/// Loads the workload named by a path: a Chakra ET prefix / .et file or a SimAI/AICB text file.
/// `chakra` sets how Chakra ET dependencies are read (spec keys workload.chakra.*).
/// @throws engine::InputError for a missing path, unknown format or malformed content.
models::Workload load_workload(const std::string& path, const std::string& format,
                               std::uint32_t gpus, const std::string& comm_groups,
                               const io::ChakraReadOptions& chakra = {});

/// Runs one simulation collectively on `comm`. Writes the HDF5 file (atomically) and the summary
/// JSON if asked. @throws engine::InputError (exit 2) or engine::InternalError (exit 3); on error
/// no output file is left.
RunResult run_simulation(const RunOptions& opt, MPI_Comm comm, const std::string& version,
                         const std::string& git_commit);

/// Checks a spec and its workload exactly as run_simulation does, without simulating
/// (`fabricsim validate`; RunOptions::dry_run on `comm`). A partition file is checked against the
/// process count of `comm`, as a run on it would.
/// @returns the description ("workload: ...\ncluster: ...\n"). @throws engine::InputError with
/// the line `run` would give for the same spec.
std::string validate_only(const RunOptions& opt, MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace fabricsim::jobs
