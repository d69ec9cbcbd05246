#pragma once
/// @file planner_factory.hpp
/// Builds the collective planner a run uses from the spec's simccl/nccl settings.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "models/cluster.hpp"
#include "models/comm_plan.hpp"
#include "models/workload.hpp"

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
};

/// @param kind "nccl" (NcclPlanner) or "ring" (RingPlanner)
/// @param nccl_pairs the spec's `nccl:` section (name, value); merged over the environment
/// @param spec_file label for errors
/// @param gpu_sm compute capability x10 for the cost model
/// @param use_env read NCCL_* from the process environment
/// @throws engine::InputError for bad NCCL_* values.
PlannerBuild make_planner(const std::string& kind, const std::vector<std::pair<std::string, std::string>>& nccl_pairs,
                          const std::string& spec_file, int gpu_sm, const models::ClusterSpec& cluster,
                          bool use_env = true);

/// Runs the NCCL cost model once per distinct (communicator, collective, size) of `w`, so that
/// settings leaving a collective without an algorithm fail before the simulation starts.
/// No-op for other planners. @throws engine::InputError naming NCCL_ALGO/NCCL_PROTO.
void check_workload_plans(const models::CollectivePlanner& planner, const models::Workload& w);

}  // namespace fabricsim::simccl
