#include "partition/plan.hpp"

#include <algorithm>

namespace fabricsim::partition {

PlacementPlan partition_graph(const SystemGraph& g) {
  PlacementPlan plan;
  plan.edges.reserve(g.links.size());
  for (const SystemLink& l : g.links) plan.edges.push_back({l.a, l.b, l.latency_ps});
  const std::uint32_t scale_up_weight =
      g.scale_out_bps > 0 ? std::max<std::uint32_t>(1, static_cast<std::uint32_t>(g.scale_up_bps / g.scale_out_bps))
                          : 1;
  plan.edge_weight.assign(g.links.size(), 1);
  plan.lp_weight.assign(g.num_lps, 1);
  for (std::size_t i = 0; i < g.links.size(); ++i) {
    if (g.links[i].scale_up) plan.edge_weight[i] = scale_up_weight;
    ++plan.lp_weight[g.links[i].a];
    ++plan.lp_weight[g.links[i].b];
  }
  return plan;
}

PlacementPlan place_system(const SystemGraph& g, const std::string& method, std::uint32_t procs,
                           std::uint32_t threads) {
  PlacementPlan plan = partition_graph(g);
  if (method == "topology") {
    plan.placement = place_blocks(g.num_lps, g.domains, g.loose, procs, threads);
    // Spines and cores stay dealt round robin: they are wired to every leaf of their pod.
    attach_to_neighbors(plan.placement, g.edge_switches, plan.edges);
  } else if (method == "metis") {
    plan.placement = place_metis(g.num_lps, plan.edges, plan.edge_weight, plan.lp_weight, procs, threads, 1000);
  } else {
    plan.placement = read_partition(method, g.num_lps, procs, threads);
  }
  plan.lookahead_ps = lookahead(plan.placement, plan.edges);
  return plan;
}

}  // namespace fabricsim::partition
