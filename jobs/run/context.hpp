#pragma once
/// @file context.hpp
/// Internal to `fabricsim run`: the state the stages of jobs::run_simulation hand on to each
/// other (RunContext), and the stages, in the order run_simulation calls them. Not installed,
/// not included outside jobs/run.cpp and jobs/run/*.cpp.
#include <mpi.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <spdlog/logger.h>

#include "engine/simulator.hpp"
#include "io/flow_digest.hpp"
#include "io/results.hpp"
#include "jobs/generators.hpp"
#include "jobs/run.hpp"
#include "jobs/spec.hpp"
#include "models/flow/flow_model.hpp"
#include "models/packet/switch_lp.hpp"
#include "models/rank/gpu_rank.hpp"
#include "models/topology/cluster.hpp"
#include "partition/plan.hpp"
#include "simccl/planner_factory.hpp"

namespace fabricsim::jobs::run_stages {

/// What the workload generator reported (for the MFU, memory and inference lines of the summary).
struct GenInfo {
  bool used = false;
  GenStats stats;
  double peak_flops = 0;  ///< dense peak of the GPU for the GEMM dtype (FLOP/s)
  std::uint32_t iterations = 1;  ///< workload.generator.iterations
  bool fp8 = false;              ///< the peak is the FP8 one
  InferStats infer;              ///< inference workloads (infer.used)
  std::uint32_t batch = 0, prompt_tokens = 0, output_tokens = 0, replicas = 0;  ///< inference config
  std::uint32_t tp = 1, cp = 1, pp = 1, ep = 1;  ///< the generated job's parallel sizes (DP: replicas)
};

/// Figures derived from the gathered results, shared by the summary text and the summary JSON.
struct RunMetrics {
  /// Per iteration, summed over ranks (ps, as double): compute, communication, exposed
  /// communication; the per-rank means divide by `nr`.
  double comp = 0, commu = 0, exposed = 0;
  double nr = 1;  ///< ranks (at least 1)
  /// Step breakdown per iteration (ps, as double; io::RankRecord::exposed_kind_ps, bubble_ps):
  /// exposed communication per models::CommKind and the bubble summed over ranks, and the
  /// largest rank's value of each (and of compute and exposed communication).
  std::array<double, models::kCommKinds> exposed_kind{}, exposed_kind_max{};
  double bubble = 0, bubble_max = 0, comp_max = 0, exposed_max = 0;
  /// Inference (docs/generators.md "Inference"): decode steps after the prefill, time to first
  /// token, mean time per output token (ps), throughputs in tokens/s over all replicas.
  std::uint32_t decode_steps = 0;
  engine::SimTime ttft = 0, tpot = 0;
  double out_tok_s = 0, prompt_tok_s = 0;
  /// Generated workloads: model TFLOP/s per GPU over the iteration time, and its share of the peak.
  double tflops_per_gpu = 0, mfu = 0;
};

/// One job of a `jobs:` spec as placed on the cluster (jobs/run/multi_job.cpp).
struct JobRun {
  std::string name;
  std::string source;               ///< the job's workload description (workload_desc)
  std::vector<std::uint32_t> hosts; ///< hosts it runs on, in rank order
  std::vector<std::uint32_t> gpus;  ///< gpus[r]: the GPU (= global rank) of the job's rank r
  std::uint32_t group_begin = 0, group_end = 0;  ///< its communicators in the merged workload [begin, end)
  engine::SimTime start_ps = 0;     ///< jobs[i].start
  std::uint32_t iterations = 1;     ///< iterations run: jobs[i].iterations x the generator's iterations
  bool simulated = true;            ///< false: left out of this run (RunOptions::only_job)
};

/// Per-job figures of a finished run (report, summary JSON, RunResult::jobs).
struct JobMetrics {
  engine::SimTime finish_ps = 0;    ///< the job's last rank's finish (ps)
  engine::SimTime iter_ps = 0;      ///< (finish - start) / iterations (ps)
  double compute_ps = 0, comm_ps = 0, exposed_ps = 0;  ///< per rank and iteration, mean (ps)
};

/// Everything one run holds between its stages. Members are filled in stage order; a stage reads
/// only what earlier stages filled. The simulator and the LPs stay put once built (LPs point at
/// the workload, the topology and the planner held here).
struct RunContext {
  RunContext(const RunOptions& o, MPI_Comm c, std::string ver, std::string commit)
      : opt(o), comm(c), version(std::move(ver)), git_commit(std::move(commit)) {}

  const RunOptions& opt;
  MPI_Comm comm;
  std::string version, git_commit;
  double t0 = 0;  ///< wall clock at the start (s, steady clock)
  int rank = 0, nprocs = 1;
  std::shared_ptr<spdlog::logger> log;

  // resolve
  Spec spec;                ///< effective spec (command-line options applied as --set keys)
  bool write_h5 = false;    ///< the HDF5 file is written (a path that is not the null device)

  // load_workloads
  GenInfo gen;
  models::Workload w;
  /// Per-rank GPU compute slowdown (compute.stragglers, compute.straggler_dist); empty when
  /// every rank runs at speed (jobs/run/stragglers.cpp).
  std::vector<double> compute_factor;
  /// compute.throttle: the compute time the windows added, per rank that lost any, by rank (ps;
  /// global after gather()).
  struct ThrottleCost {
    std::uint32_t rank = 0;
    engine::SimTime added_ps = 0;
  };
  std::vector<ThrottleCost> throttle_added;
  /// `jobs:` specs: the jobs as placed (empty for a single-job spec) and each GPU's job (-1: none).
  std::vector<JobRun> jobs;
  std::vector<std::int32_t> job_of_gpu;

  // build_topology
  models::ClusterSpec cspec;
  std::optional<models::Topology> topo;
  models::Fidelity fidelity = models::Fidelity::kPacket;
  models::RingFlows ring_flows{};
  bool net_lp = false;          ///< flow rung: one network LP owns every link
  bool stream_applies = false;  ///< sim.ring_flows: stream changes this run
  engine::LpId net_id = 0;      ///< the network LP's id (num_nodes, after every topology node)

  // fold_replicas (sim.fold: dp)
  models::FoldMap fold;         ///< inactive unless the run is folded
  std::uint64_t fold_switch_flows = 0;  ///< gather: flows of the folded run over switch-to-switch links

  // place
  std::uint32_t part_procs = 1;  ///< processes placed for (validate --processes N, else the run's)
  partition::PlacementPlan plan;

  // make_planner
  simccl::PlannerBuild planned;
  std::vector<std::pair<std::string, std::string>> nccl_env;  ///< NCCL_* taken from the shell

  // build_lps
  bool keep_flow_records = false;
  std::optional<engine::Simulator> sim;
  std::vector<std::unique_ptr<models::GpuRankLp>> gpus;
  /// Ranks of one shared program share its executor index (models::ProgramIndex).
  std::vector<std::shared_ptr<const models::ProgramIndex>> shared_index;
  std::vector<std::unique_ptr<models::SwitchLp>> switches;
  std::unique_ptr<models::FlowNetLp> net;

  // setup_checkpoints
  std::string last_checkpoint;  ///< the checkpoint directory written last ("" if none)
  engine::SimTime last_checkpoint_ps = -1;  ///< its boundary time (ps)

  // simulate
  bool progress_printed = false;  ///< the progress line was printed (set by the engine's callback)
  engine::EngineStats stats;

  // gather
  std::vector<io::RankRecord> local_ranks;  ///< this process's ranks
  std::vector<io::FlowRecord> local_flows;  ///< this process's flow records (when kept)
  io::FlowDigest local_flow_digest;
  /// Flow rung counters summed over every process (gather; --stats): flows the GPUs delivered
  /// themselves (models::FlowSource), flows handed to the network LP, and the network LP's
  /// flows admitted, re-solves, flows re-solved, route look-ups, route misses, route entries.
  /// The network LP lives on one process; the sums make --stats the same on any process count.
  struct FlowCounters {
    std::uint64_t direct = 0, handed = 0, net_flows = 0, solves = 0, resolved = 0;
    std::uint64_t route_lookups = 0, route_misses = 0, route_entries = 0;
  } flow_counters;
  std::vector<engine::SimTime> phase_end;   ///< inference: end of each phase (prefill, decode steps)
  engine::SimTime sim_end = 0;              ///< simulated time: the last rank's finish (ps)
  engine::SimTime iter = 0;                 ///< mean iteration time (ps)
  RunResult res;

  // report
  RunMetrics metrics;
  std::string summary_body;  ///< the summary without its "output:" line (printed before writing)
  std::string json_text;  ///< the summary JSON ("" when not asked for)

  const models::CollectivePlanner& planner() const { return *planned.planner; }
};

/// Wall clock (s, steady clock).
inline double now_s() {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count()) /
         1e6;
}

/// Every process's `local` concatenated in rank order, on every process (MPI_Allgatherv of the
/// bytes). T must be trivially copyable.
template <class T>
std::vector<T> allgather_pod(MPI_Comm comm, const std::vector<T>& local) {
  static_assert(std::is_trivially_copyable_v<T>);
  int size = 1;
  MPI_Comm_size(comm, &size);
  if (size == 1) return local;
  int mine = static_cast<int>(local.size() * sizeof(T));
  std::vector<int> counts(static_cast<std::size_t>(size)), displs(static_cast<std::size_t>(size), 0);
  MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, comm);
  for (int i = 1; i < size; ++i) displs[i] = displs[i - 1] + counts[i - 1];
  std::vector<T> all(static_cast<std::size_t>(displs.back() + counts.back()) / sizeof(T));
  MPI_Allgatherv(local.data(), mine, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, comm);
  return all;
}

/// Tier of the directed link a -> b: 0 NVLink (GPU <-> NVSwitch), 1 NIC (GPU <-> leaf), 2 fabric
/// (switch <-> switch below the core), 3 core (jobs/run/write.cpp).
std::uint32_t link_tier(const models::Topology& t, engine::LpId a, engine::LpId b);
/// "SOURCE (FORMAT, N ranks, M nodes, K communicators)".
std::string workload_desc(const models::Workload& w);
/// One line describing the cluster: hosts x GPUs, fabric shape and switch counts, rates, MTU.
std::string cluster_desc(const models::Topology& t);

// The stages, in run order (jobs/run/*.cpp). Each throws engine::InputError for bad input.

/// rank, log level, effective spec, output paths checked (jobs/run/resolve.cpp).
void resolve(RunContext& c);
/// The workload (generated, read, or RunOptions::workload_data), checked; durations scaled by
/// sim.compute_scale (jobs/run/workload.cpp).
void load_workloads(RunContext& c);
/// The workload of a spec without `jobs:`: generated or read (jobs/run/workload.cpp); fills
/// `info` for generated ones when not null.
models::Workload load_spec_workload(const Spec& spec, GenInfo* info);
/// The checks every workload passes before it runs: communicators, sharing tables, peers and
/// the order of each communicator's collectives. @throws engine::InputError naming the first fault.
void check_workload(const models::Workload& w);
/// `jobs:` specs: places every job (jobs[].placement) and merges their workloads into RunContext::w
/// (rank = GPU, one program per GPU, idle GPUs empty; a job's start as a host op before its
/// first nodes, its iterations back to back), RunContext::jobs and job_of_gpu
/// (jobs/run/multi_job.cpp). @throws engine::InputError for overlapping or impossible placements.
void merge_jobs(RunContext& c);
/// `jobs:` specs with per-job NCCL settings: one planner per job behind one that dispatches by
/// the communicator's (or sender's) job (jobs/run/multi_job.cpp). No-op otherwise.
void make_job_planners(RunContext& c);
/// Per-job figures from the gathered ranks (jobs/run/multi_job.cpp).
std::vector<JobMetrics> job_metrics(const RunContext& c);
/// The summary lines of the jobs (iteration time, alone and slowdown when known, split, busbw).
std::string jobs_summary(const RunContext& c, const std::vector<JobMetrics>& m);
/// The summary JSON's `jobs` list (nlohmann::json as text).
std::string jobs_json(const RunContext& c, const std::vector<JobMetrics>& m);
/// Rank `rank`'s draw of compute.straggler_dist: lognormal, median 1, 99th percentile `p99`
/// (ln factor ~ N(0, (ln p99 / z_0.99)^2)), from a counter-based stream of (seed, rank): the same
/// on any process and thread count.
double lognormal_straggler(std::uint64_t seed, std::uint32_t rank, double p99);
/// The per-rank compute slowdown factors of compute.stragglers and compute.straggler_dist into
/// RunContext::compute_factor; @throws engine::InputError for a straggler rank outside the
/// workload (jobs/run/stragglers.cpp).
void draw_stragglers(RunContext& c);
/// The summary line naming the slowest GPU ("" without stragglers): its rank, factor, and the
/// extra compute time its slowdown added on that rank (compute_ps * (1 - 1/factor), ps).
std::string straggler_summary(const RunContext& c, const std::vector<io::RankRecord>& ranks);
/// The summary's `throttling:` line (compute.throttle): windows, GPUs throttled, compute time
/// added in all and on the rank that lost most. Empty without throttling.
std::string throttle_summary(const RunContext& c);
/// Cluster spec, topology, fidelity and ring-flow mode (jobs/run/topology.cpp).
void build_topology(RunContext& c);
/// sim.fold: dp: checks that the DP replicas are identical and the fabric gives them symmetric,
/// unshared resources, and sets RunContext::fold; @throws engine::InputError naming sim.fold
/// otherwise (jobs/run/fold.cpp, docs/folding.md).
void fold_replicas(RunContext& c);
/// Placement of every LP on (process, thread), its lookahead; saves it when asked
/// (jobs/run/topology.cpp).
void place(RunContext& c);
/// The collective planner and the NCCL settings it took from the environment; checks the
/// workload's plans (jobs/run/lps.cpp).
void make_planner(RunContext& c);
/// `validate`: the description of what a run would be (jobs/run/lps.cpp).
RunResult dry_run_result(const RunContext& c);
/// The engine and this process's LPs (jobs/run/lps.cpp).
void build_lps(RunContext& c);
/// Checkpoint and stop flags (RunOptions::checkpoint_*, restart, stop_flag): refuses them when an
/// LP cannot be checkpointed, restores the --restart checkpoint, installs the engine's
/// RunControl (jobs/run/checkpoint.cpp).
void setup_checkpoints(RunContext& c);
/// The result of a run a stop request ended (RunResult::stopped; jobs/run/checkpoint.cpp).
RunResult stopped_result(RunContext& c);
/// Runs the engine with a progress line; then checks every rank's DAG completed
/// (jobs/run/simulate.cpp).
void simulate(RunContext& c);
/// Gathers ranks, collectives, inference phases, fabric counters, flows and the digest on every
/// process (jobs/run/gather.cpp).
void gather(RunContext& c);
/// Derived figures, summary text and summary JSON (jobs/run/report.cpp).
void report(RunContext& c);
/// Writes the outputs, all or nothing: summary JSON, trace, HDF5 (jobs/run/write.cpp).
void write_outputs(RunContext& c);

}  // namespace fabricsim::jobs::run_stages
