#pragma once
/// @file topology_stats.hpp
/// Summary figures of a built topology for `fabricsim topo`: node and link counts, per-tier
/// oversubscription, bisection bandwidth, diameter, ECMP width (docs/topology.md, "topo").
#include <cstdint>
#include <string>
#include <vector>

#include "models/topology/cluster.hpp"

namespace fabricsim::models {

/// Capacity of one switch tier (rates summed over links, one direction, bits/s).
struct TierCapacity {
  std::uint32_t tier = 0;        ///< 1 leaf, 2 spine, 3 core, ...
  std::uint32_t switches = 0;    ///< switches in the tier
  std::uint64_t down_bps = 0;    ///< links to lower tiers (GPUs are tier 0)
  std::uint64_t up_bps = 0;      ///< links to higher tiers
  std::uint64_t lateral_bps = 0; ///< links inside the tier (torus/mesh)
};

/// Figures printed by `fabricsim topo`.
struct TopologyStats {
  std::uint32_t nodes[5] = {0, 0, 0, 0, 0};                                   ///< per NodeKind
  std::uint64_t links = 0, nvlink_links = 0, nic_links = 0, fabric_links = 0; ///< undirected
  std::vector<TierCapacity> tiers;     ///< tiers 1.. in order
  std::uint64_t nic_bps = 0;           ///< sum of all GPU NIC port rates
  bool clos = false;                   ///< every switch-switch link joins adjacent tiers
  std::uint64_t bisection_bps = 0;     ///< see bisection_method
  std::string bisection_method;        ///< how bisection_bps was computed
  std::uint32_t diameter_hops = 0;     ///< max GPU-to-GPU fabric hops over reachable pairs
  std::uint64_t unreachable_pairs = 0; ///< ordered GPU pairs in different domains without a path
  std::uint32_t switch_ecmp = 0;       ///< largest next-hop set at a switch
  std::uint32_t gpu_ecmp = 0;          ///< largest NIC-port set at a GPU
  std::uint32_t classes = 0;           ///< routing classes
  std::size_t routing_bytes = 0;       ///< routing-table memory
};

/// Computes the figures; O(classes^2 + links).
TopologyStats topology_stats(const Topology &topo);

/// Multi-line human-readable report of `s` for `topo`.
std::string format_topology_stats(const Topology &topo, const TopologyStats &s);

} // namespace fabricsim::models
