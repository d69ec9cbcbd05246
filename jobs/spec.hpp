#pragma once
/// @file spec.hpp
/// The experiment spec (YAML): cluster + workload + sim + output. Every key is declared in one
/// table (kSpecKeys, printed by `fabricsim describe spec` and docs/config.md) with its type,
/// default and unit; unknown keys are errors that suggest the closest known key.
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/topology/cluster.hpp"
#include "io/chakra_reader.hpp"
#include "jobs/faults.hpp"
#include "models/core/fabric_params.hpp"
#include "simccl/planner_factory.hpp"

namespace fabricsim::jobs {

/// One known spec key.
struct SpecKey {
  const char* path;         ///< dotted path, e.g. "cluster.nic_bandwidth"
  const char* type;         ///< "string" | "int" | "auto-int" | "rate" | "time" | "bytes" | "double" | "enum"
  const char* default_text; ///< default as text ("auto" = sized to the workload)
  const char* help;         ///< meaning and unit
};

/// All keys of the spec, in documentation order.
const std::vector<SpecKey>& spec_keys();

struct Spec;

/// One entry of the spec's `jobs:` list (docs/jobs_and_faults.md, "Jobs"). Jobs share the
/// cluster and its fabric; each has its own workload, NCCL settings, start, iterations and
/// placement.
struct JobSpec {
  std::string name;    ///< jobs[i].name (default "job<i>"), unique
  std::string key;     ///< "jobs[i]", for error messages
  /// The job's own workload.* and nccl.* (the rest of the top-level spec copied in); never has jobs.
  std::shared_ptr<const Spec> spec;
  engine::SimTime start_ps = 0;   ///< jobs[i].start: when the job's ranks begin (ps)
  std::uint32_t iterations = 1;   ///< jobs[i].iterations: the workload's DAG run this many times in a row
  /// jobs[i].placement: hosts | packed | spread | random | leaf | pod (jobs/run/multi_job.cpp).
  std::string placement = "packed";
  std::vector<std::uint32_t> hosts;  ///< jobs[i].hosts: explicit host indices (placement hosts)
  std::uint64_t seed = 0;            ///< jobs[i].seed: random placement (default sim.seed + i)
};

/// The parsed, validated spec.
struct Spec {
  std::string file = "<spec>";   ///< where it came from (for error messages)
  std::string text;              ///< effective spec as YAML (after --set), stored in results
  std::string workload_path;     ///< resolved path (relative paths are relative to the spec file)
  std::string workload_format = "auto";  ///< auto | chakra | simai
  std::uint32_t workload_gpus = 0;       ///< world size for SimAI files without all_gpus, or to replicate a rank-0-only Chakra trace to (0 = none)
  std::string comm_groups;               ///< Chakra comm-group JSON (resolved path) or empty
  io::ChakraReadOptions chakra;          ///< workload.chakra.*: Chakra dependency handling
  /// workload.generator.* values as written (key without the prefix -> text), parsed by
  /// jobs/generators (train_config_from_spec); generator_file says where each came from.
  std::map<std::string, std::string> generator, generator_file;
  bool cluster_given = false;            ///< a `cluster:` section exists
  models::ClusterSpec cluster;           ///< with hosts/nics_per_leaf/spines possibly 0 = auto
  models::FabricParams fabric;           ///< switch:, nic:, cc: sections (jobs/fabric_spec.hpp)
  bool hosts_auto = true, nics_per_leaf_auto = true, spines_auto = true;
  double compute_scale = 1.0;
  /// compute.stragglers: (rank, factor) pairs; the rank's GPU compute durations are multiplied
  /// by factor (> 0). Ranks are checked against the world when the workload is known.
  std::vector<std::pair<std::uint32_t, double>> stragglers;
  /// compute.straggler_dist: none | lognormal (seeded by sim.seed; median 1, p99 = straggler_p99).
  std::string straggler_dist = "none";
  double straggler_p99 = 1.0;  ///< compute.straggler_p99: the 99th percentile of the factor (> 1)
  /// compute.throttle: thermal throttling windows. The GPUs of hosts host_lo..host_hi run their
  /// compute `factor` times slower (> 1) in [at_ps, until_ps) (a kernel is stretched by the part
  /// of it that falls in the window). Windows of one host do not overlap.
  struct Throttle {
    std::uint32_t host_lo = 0, host_hi = 0;
    engine::SimTime at_ps = 0, until_ps = 0;
    double factor = 1.0;
  };
  std::vector<Throttle> throttles;
  /// faults: link faults in simulated time (jobs/faults.hpp); packet rung only.
  std::vector<FaultEntry> faults;
  std::uint64_t seed = 1;
  std::uint32_t threads = 1;
  std::string partition = "topology";  ///< sim.partition: topology | metis | a partition file
  std::string save_partition;           ///< sim.save_partition: write the placement used here ("" = no)
  std::string fidelity = "packet";  ///< sim.fidelity: packet | flow | analytical (models/flow/flow_model.hpp)
  /// sim.ring_flows: step | stream (models/flow/ring_stream.hpp; flow and analytical rungs only).
  std::string ring_flows = "step";
  /// sim.fold: none | dp (docs/folding.md; jobs/run/fold.cpp checks when it applies).
  std::string fold = "none";
  std::string output_h5;
  bool output_flows = true;  ///< output.flows: write the HDF5 /flows table (keeps every flow record until then)
  std::string summary_json;
  engine::SimTime sample_interval_ps = 10'000'000;  ///< output.sample_interval: /links, /queues bin width (ps)
  std::string trace_path;                          ///< output.trace: trace-event JSON ("" = none)
  std::uint32_t trace_rank_lo = 0, trace_rank_hi = 15;  ///< output.trace_ranks, inclusive
  /// `nccl:` section: NCCL_* name -> value as written (simccl/nccl_settings.hpp parses them).
  std::vector<std::pair<std::string, std::string>> nccl;
  std::string planner = "nccl";  ///< simccl.planner: nccl | ring
  int gpu_sm = 90;               ///< simccl.gpu_sm: compute capability x10 for the NCCL cost model
  /// simccl.schedule (custom TE-CCL/MSCCL schedules, resolved paths), simccl.topo_fallback.
  simccl::PlannerExtras simccl_extras;
  /// `jobs:` list: several jobs sharing the cluster; empty for a single-job spec (the
  /// top-level workload is the only job).
  std::vector<JobSpec> jobs;
  /// Keys given with --set (full dotted names), in order.
  std::vector<std::string> cli_keys;
  /// Where `key` came from for an error message: "<cli>" if it was given with --set, else `file`.
  std::string file_of(const std::string& key) const;
  /// As file_of, for a check that involves several keys: "<cli>" if any of them was given
  /// with --set (the command line changed the spec into what fails), else `file`.
  std::string file_of_any(std::initializer_list<const char*> keys) const;
};

/// Loads `path` (may be empty: all defaults), applies `sets` ("a.b=value"), validates.
/// @throws engine::InputError naming the file and key, with a fix (closest key for typos).
Spec load_spec(const std::string& path, const std::vector<std::string>& sets);

/// As load_spec, with the YAML `text` as the content of `path` (not read; relative paths in it
/// are resolved against path's folder, and messages name it). @throws engine::InputError as load_spec.
Spec parse_spec(const std::string& text, const std::string& path, const std::vector<std::string>& sets);

/// Checks that every `--set` entry is "key=value" with a known key, without applying it (so a
/// command running many specs, e.g. `regress`, refuses a typo before anything runs).
/// @throws engine::InputError ("<cli>", naming the key and the closest known one) as load_spec.
void check_set_keys(const std::vector<std::string>& sets);

/// `text` (an effective spec as YAML, Spec::text) with each (NCCL name, value) of `entries` added
/// to its `nccl:` map, followed by a comment naming them as taken from the environment: the
/// recorded spec then reproduces a run that NCCL_* environment variables changed.
/// @throws engine::InputError only if `text` is not YAML (never for a Spec::text).
std::string spec_text_with_env_nccl(const std::string& text,
                                    const std::vector<std::pair<std::string, std::string>>& entries);

/// Fills the auto cluster fields for `ranks` GPUs and checks the cluster can hold them.
/// @throws engine::InputError if ranks exceed the cluster's GPUs.
models::ClusterSpec resolve_cluster(const Spec& spec, std::uint32_t ranks);

/// Levenshtein distance (for "did you mean").
std::size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace fabricsim::jobs
