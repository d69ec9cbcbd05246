#include "simccl/planner_factory.hpp"

#include <set>
#include <tuple>

#include "engine/errors.hpp"
#include "simccl/nccl_planner.hpp"
#include "simccl/ring_planner.hpp"

namespace fabricsim::simccl {

PlannerBuild make_planner(const std::string& kind, const std::vector<std::pair<std::string, std::string>>& nccl_pairs,
                          const std::string& spec_file, int gpu_sm, const models::ClusterSpec& cluster,
                          bool use_env) {
  PlannerBuild out;
  NcclPlannerConfig cfg;
  cfg.settings = load_nccl_settings(nccl_pairs, spec_file, use_env);
  out.warnings = cfg.settings.warnings;
  // The transport settings apply to the NIC whichever planner plans the collectives.
  out.ib_qps_per_connection = cfg.settings.ib_qps_per_connection;
  out.ib_split_data_on_qps = cfg.settings.ib_split_data_on_qps != 0;
  for (const auto& a : cfg.settings.applied) {
    if (a.name == "NCCL_IB_QPS_PER_CONNECTION" || a.name == "NCCL_IB_SPLIT_DATA_ON_QPS") out.qps_given = true;
  }
  if (kind == "ring") {
    out.planner = std::make_unique<RingPlanner>();
    return out;
  }

  cfg.gpus_per_host = cluster.gpus_per_host;
  cfg.sm = gpu_sm;
  cfg.nic_GBps = static_cast<double>(cluster.nic_bps) / 8e9;  // NCCL: speed (Mb/s) / 8000
  out.planner = std::make_unique<NcclPlanner>(std::move(cfg));
  return out;
}

void check_workload_plans(const models::CollectivePlanner& planner, const models::Workload& w) {
  const auto* nccl = dynamic_cast<const NcclPlanner*>(&planner);
  if (nccl == nullptr) return;
  std::set<std::tuple<std::int32_t, models::CollOp, std::uint64_t>> seen;
  for (const auto& prog : w.programs) {
    for (const auto& node : prog) {
      if (node.type != models::NodeType::kCollective || node.bytes == 0) continue;
      if (!seen.emplace(node.group, node.op, node.bytes).second) continue;
      const auto& ranks = w.groups[static_cast<std::size_t>(node.group)].ranks;
      if (ranks.size() <= 1) continue;
      models::CollRequest req;
      req.op = node.op;
      req.bytes = node.bytes;
      req.ranks = &ranks;
      (void)nccl->decision(req);  // throws engine::InputError when NCCL_ALGO/PROTO leave nothing
    }
  }
}

}  // namespace fabricsim::simccl
