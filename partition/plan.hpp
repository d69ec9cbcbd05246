#pragma once
/// @file plan.hpp
/// The placement policy of a simulated system: the LP graph the partitioner works on (edges,
/// traffic weights, load weights) and the choice among topology-aware, METIS and file placement.
/// Independent of the models: the caller describes its system as plain data (SystemGraph).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/simulator.hpp"
#include "partition/partition.hpp"

namespace fabricsim::partition {

/// One undirected link of the simulated system as the placement sees it.
struct SystemLink {
  engine::LpId a = 0;
  engine::LpId b = 0;
  engine::SimTime latency_ps = 0;  ///< propagation delay: bounds the lookahead when the link is cut
  /// The link belongs to a scale-up domain (NVLink GPU <-> NVSwitch): it carries more traffic
  /// than a scale-out link in proportion to SystemGraph::scale_up_bps / scale_out_bps.
  bool scale_up = false;
};

/// The simulated system in plain terms, built by the caller from its topology.
struct SystemGraph {
  std::uint32_t num_lps = 0;  ///< LP ids [0, num_lps)
  /// Scale-up domains in order, each the LPs kept in one unit by the topology placement (its
  /// GPUs, then its NVSwitch when it has one).
  Blocks domains;
  /// LPs outside every domain (Ethernet switches in LP order, then a flow-network LP), dealt
  /// round-robin by the topology placement.
  std::vector<engine::LpId> loose;
  /// The LPs of `loose` at the edge of the fabric (leaves, ToRs, rail switches): the topology
  /// placement moves each to the unit holding most of its hosts' GPUs (attach_to_neighbors).
  std::vector<engine::LpId> edge_switches;
  /// Every link, in a fixed order (the order decides METIS's input and tie-breaks).
  std::vector<SystemLink> links;
  std::uint64_t scale_up_bps = 0;   ///< rate of a scale-up (NVLink) link, bits/s
  std::uint64_t scale_out_bps = 0;  ///< rate of a scale-out (NIC) link, bits/s; 0: unknown
};

/// A placement with the graph it was made on (for the lookahead and the partition report).
struct PlacementPlan {
  engine::Placement placement;
  std::vector<Edge> edges;                ///< SystemGraph::links as partition edges, same order
  std::vector<std::uint32_t> edge_weight; ///< expected traffic of edges[i] (scale-out link = 1)
  std::vector<std::uint32_t> lp_weight;   ///< expected events of an LP: 1 + its number of links
  engine::SimTime lookahead_ps = 0;       ///< lookahead(placement, edges); kInfinity: nothing cut
};

/// Expected traffic and load of the system's LP graph: a scale-up link weighs
/// scale_up_bps / scale_out_bps (at least 1; 1 when scale_out_bps is 0), every other link 1
/// (traffic in proportion to bandwidth); an LP weighs 1 plus its number of links (its events
/// grow with its ports). Fills edges, edge_weight and lp_weight of the result.
PlacementPlan partition_graph(const SystemGraph& g);

/// Places the system on procs*threads units by `method`: "topology" (domains kept together and
/// dealt in contiguous runs, loose LPs round-robin, then edge switches attached to their hosts),
/// "metis" (METIS on the weighted graph; links below 1 ns stay inside one unit, so the window
/// never drops below it), or else the path of a partition file (read_partition).
/// @throws engine::InputError as place_blocks, place_metis or read_partition do.
PlacementPlan place_system(const SystemGraph& g, const std::string& method, std::uint32_t procs,
                           std::uint32_t threads);

}  // namespace fabricsim::partition
