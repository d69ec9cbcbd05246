#pragma once
/// @file planner_factory.hpp
/// Builds the collective planner a run uses from the spec's simccl/nccl settings.
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/topology/cluster.hpp"
#include "models/core/comm_plan.hpp"
#include "models/core/workload.hpp"
#include "simccl/nccl_settings.hpp"
#include "simccl/nccl_topo.hpp"

namespace fabricsim::simccl {

/// A planner and the warnings its settings produced (unknown NCCL_* names, ignored settings).
struct PlannerBuild {
  std::unique_ptr<models::CollectivePlanner> planner;
  std::vector<std::string> warnings;
  /// NCCL_IB_QPS_PER_CONNECTION / NCCL_IB_SPLIT_DATA_ON_QPS as NCCL would use them (defaults 1, 0),
  /// for the NIC model (models::NicParams); `qps_given` when the spec or environment set it.
  int ib_qps_per_connection = 1;
  bool ib_split_data_on_qps = false;
  bool qps_given = false;
  /// The node topology the NCCL planner assumed: NCCL_TOPO_FILE, its fallback, or none
  /// (`path` empty and `fallback` false: the cluster spec's one NIC per GPU behind an NVSwitch).
  NcclTopo topo;
  /// NCCL settings taken from the process environment (not overridden by the spec), in name
  /// order: a run records them with its spec (io::RunMeta::spec_text, summary JSON `nccl_env`).
  std::vector<RawSetting> from_env;
};

/// Planner inputs beyond NCCL_* settings (spec `simccl:` keys).
struct PlannerExtras {
  /// simccl.schedule: TE-CCL JSON / MSCCL XML files (paths as given, already resolved against the
  /// spec file); collectives they fit are replayed as given (simccl/custom_planner.hpp).
  std::vector<std::string> schedules;
  /// simccl.topo_fallback: when NCCL_TOPO_FILE cannot be read, plan on NCCL's auto-detected
  /// fallback (flat PCIe: no NVLink) instead of failing.
  bool topo_fallback = false;
  /// simccl.lazy_plans: NCCL ring-family, Tree AllReduce and NVLS / NVLSTree plans in lazy form
  /// (models::LazyChannelRing, LazyTree, LazyNvls: O(channels) memory per rank, plus 1 B per op
  /// for the Tree's and NVLS's executor state); false materializes every op up front. Same
  /// results either way.
  bool lazy_plans = true;
  /// simccl.launch_latency: "nccl" (default) or "none" (NcclPlannerConfig::launch_latency).
  bool launch_latency = true;
  /// simccl.step_latency: "nccl" (default) or "none" (NcclPlannerConfig::step_latency).
  bool step_latency = true;
  /// simccl.proxy: "nccl" (default) or "none" (NcclPlannerConfig::proxy).
  bool proxy = true;
  /// The run's network models NVLink SHARP (every fabricsim rung does); false disables NVLS in
  /// the cost model (NcclPlannerConfig::nvls_network), e.g. for a network model without it.
  bool nvls_network = true;
  /// Where each `nccl:` pair came from (NCCL_* name -> spec file or "<cli>"), for error messages.
  std::map<std::string, std::string> nccl_origin;
};

/// @param kind "nccl" (NcclPlanner) or "ring" (RingPlanner)
/// @param nccl_pairs the spec's `nccl:` section (name, value); merged over the environment
/// @param spec_file label for errors
/// @param gpu_sm compute capability x10 for the cost model
/// @param use_env read NCCL_* from the process environment
/// @param extras custom schedules and topology fallback (`simccl:` spec keys)
/// @throws engine::InputError for bad NCCL_* values, unreadable or invalid schedules.
PlannerBuild make_planner(const std::string& kind, const std::vector<std::pair<std::string, std::string>>& nccl_pairs,
                          const std::string& spec_file, int gpu_sm, const models::ClusterSpec& cluster,
                          bool use_env = true, const PlannerExtras& extras = {});

class NcclPlanner;
/// The NCCL planner inside `p` (itself, or the base of a CustomPlanner); nullptr for others.
const NcclPlanner* nccl_planner_of(const models::CollectivePlanner& p);

/// Runs the NCCL cost model once per distinct (communicator, collective, size) of `w`, so that
/// settings leaving a collective without an algorithm fail before the simulation starts.
/// No-op for other planners. @throws engine::InputError naming NCCL_ALGO/NCCL_PROTO.
void check_workload_plans(const models::CollectivePlanner& planner, const models::Workload& w);

}  // namespace fabricsim::simccl
