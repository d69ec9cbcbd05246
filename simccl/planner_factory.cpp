#include "simccl/planner_factory.hpp"

#include <set>
#include <tuple>

#include "engine/errors.hpp"
#include "simccl/custom_planner.hpp"
#include "simccl/nccl_planner.hpp"
#include "simccl/ring_planner.hpp"

namespace fabricsim::simccl {

namespace {

// NCCL_TOPO_FILE: what the cost model assumes about a node (GPU count, NVLink bandwidth, NICs).
void apply_topo_file(NcclPlannerConfig& cfg, const PlannerExtras& extras, PlannerBuild& out) {
  const std::string& path = cfg.settings.topo_file;
  try {
    out.topo = load_nccl_topo(path, cfg.sm);
  } catch (const engine::InputError& e) {
    const bool unreadable = std::string(e.what()).find("cannot read") != std::string::npos;
    if (!extras.topo_fallback || !unreadable) throw;
    // NCCL warns and detects the machine; simccl's stand-in is a flat PCIe node (no NVLink).
    out.topo = fallback_nccl_topo(static_cast<int>(cfg.gpus_per_host), static_cast<int>(cfg.gpus_per_host), cfg.nic_GBps);
    out.warnings.push_back(path + ": NCCL_TOPO_FILE: cannot read the NCCL topology file; simccl.topo_fallback: "
                                  "planning on a flat PCIe node without NVLink");
  }
  const NcclTopo& t = out.topo;
  if (t.gpus.size() != cfg.gpus_per_host) {
    throw engine::InputError(path, "NCCL_TOPO_FILE",
                             "describes " + std::to_string(t.gpus.size()) + " GPUs per node but the cluster has " +
                                 std::to_string(cfg.gpus_per_host),
                             "set cluster.gpus_per_host: " + std::to_string(t.gpus.size()) + " or use a matching file");
  }
  if (t.nvlink) {
    cfg.nvlink_GBps = t.nvlink_GBps;
  } else if (!t.skeleton) {
    cfg.nvswitch = false;
    // No NVLink: intra-node rings run over PCIe (NCCL's P2P/SHM paths), the GPU's PCIe rate
    // (Gen4 x16 24 GB/s before Hopper, Gen5 48 GB/s; src/graph/topo.h PCI_BW as in the tuner).
    cfg.nvlink_GBps = cfg.sm >= 90 ? 48.0 : 24.0;
  }
  if (!t.nics.empty()) cfg.nics_per_host = static_cast<int>(t.nics.size());
  double nic = 0;
  for (const auto& n : t.nics) nic = nic == 0 ? n.speed_GBps : std::min(nic, n.speed_GBps);
  if (nic > 0) cfg.nic_GBps = nic;
}

}  // namespace

PlannerBuild make_planner(const std::string& kind, const std::vector<std::pair<std::string, std::string>>& nccl_pairs,
                          const std::string& spec_file, int gpu_sm, const models::ClusterSpec& cluster,
                          bool use_env, const PlannerExtras& extras) {
  PlannerBuild out;
  NcclPlannerConfig cfg;
  cfg.settings = load_nccl_settings(nccl_pairs, spec_file, use_env, &extras.nccl_origin);
  check_nccl_settings_for_cluster(cfg.settings, cluster.gpus_per_host, cluster.domain_size(), cluster.hosts);
  out.warnings = cfg.settings.warnings;
  // A setting taken from the shell changes results without appearing in the spec: say so, so a
  // run can be reproduced from its log (the spec's nccl: section wins over the environment).
  for (const auto& a : cfg.settings.applied) {
    if (a.origin == "<env>") {
      out.from_env.push_back(a);
      out.warnings.push_back("<env>: " + a.name + "=" + a.value +
                             ": NCCL setting taken from the environment (recorded in the results' spec_text; put it in the spec's nccl: section to keep it)");
    }
  }
  // The transport settings apply to the NIC whichever planner plans the collectives.
  out.ib_qps_per_connection = cfg.settings.ib_qps_per_connection;
  out.ib_split_data_on_qps = cfg.settings.ib_split_data_on_qps != 0;
  for (const auto& a : cfg.settings.applied) {
    if (a.name == "NCCL_IB_QPS_PER_CONNECTION" || a.name == "NCCL_IB_SPLIT_DATA_ON_QPS") out.qps_given = true;
  }
  if (kind == "ring") {
    out.planner = std::make_unique<RingPlanner>();
  } else {
    cfg.gpus_per_host = cluster.gpus_per_host;
    if (cluster.domain_size() > cluster.gpus_per_host) cfg.nvlink_domain = cluster.domain_size();
    cfg.sm = gpu_sm;
    // The cost model's per-GPU NVLink bandwidth is the data rate the simulated links carry
    // (ncclTopoGetSystem sums NCCL's per-link bandwidth over the GPU's links; the link count
    // follows from the cluster's rate: H100 450 GB/s x 0.824 = 18 x 20.6 = 370.8 GB/s).
    cfg.nvlink_GBps = static_cast<double>(cluster.nvlink_bps) * cluster.nvlink_efficiency / 8e9;
    cfg.nic_GBps = static_cast<double>(cluster.nic_bps) / 8e9;  // NCCL: speed (Mb/s) / 8000
    cfg.launch_latency = extras.launch_latency;
    cfg.step_latency = extras.step_latency;
    cfg.proxy = extras.proxy;
    cfg.nvls_network = extras.nvls_network;
    if (!cfg.settings.topo_file.empty()) apply_topo_file(cfg, extras, out);
    cfg.lazy_rings = extras.lazy_plans;
    out.planner = std::make_unique<NcclPlanner>(std::move(cfg));
  }
  if (!extras.schedules.empty()) {
    std::vector<CustomSchedule> schedules;
    for (const auto& path : extras.schedules) schedules.push_back(load_custom_schedule(path));
    out.planner = std::make_unique<CustomPlanner>(std::move(out.planner), std::move(schedules));
  }
  return out;
}

const NcclPlanner* nccl_planner_of(const models::CollectivePlanner& p) {
  if (const auto* c = dynamic_cast<const CustomPlanner*>(&p)) return nccl_planner_of(c->base());
  return dynamic_cast<const NcclPlanner*>(&p);
}

void check_workload_plans(const models::CollectivePlanner& planner, const models::Workload& w) {
  const auto* nccl = nccl_planner_of(planner);
  if (nccl == nullptr) return;
  const auto* custom = dynamic_cast<const CustomPlanner*>(&planner);
  std::set<std::tuple<std::int32_t, models::CollOp, std::uint64_t>> seen;
  for (std::uint32_t r = 0; r < w.ranks; ++r) {
    for (const auto& node : w.program(r)) {
      if (node.type != models::NodeType::kCollective || node.bytes == 0) continue;
      const std::int32_t group = w.group_of(r, node);
      if (!seen.emplace(group, node.op, node.bytes).second) continue;
      const auto& ranks = w.groups[static_cast<std::size_t>(group)].ranks;
      if (ranks.size() <= 1) continue;
      models::CollRequest req;
      req.op = node.op;
      req.bytes = node.bytes;
      req.ranks = &ranks;
      if (custom != nullptr && custom->match(req) != nullptr) continue;  // replayed, not tuned
      (void)nccl->decision(req);  // throws engine::InputError when NCCL_ALGO/PROTO leave nothing
    }
  }
}

}  // namespace fabricsim::simccl
