#pragma once
/// @file clos.hpp
/// The folded-Clos engine shared by the rail_optimized, leaf_spine and rail_only kinds: leaves
/// under spines (2 tiers) or pods of leaves and spines under a core layer (3 tiers), single or
/// dual plane, with spine and core counts from cluster.spines or cluster.oversubscription.
#include "models/topology/cluster.hpp"
#include "models/topology/registry.hpp"

namespace fabricsim::models::builders {

/// How NICs are placed on leaves and spines on leaves.
struct ClosShape {
  /// true: NICs fill leaves in GPU order, nics_per_leaf per leaf (leaf_spine); false: rails, NIC j
  /// of each group of nics_per_leaf hosts on rail j's leaf (rail_optimized, rail_only).
  bool nic_major = false;
  /// true: each rail has its own spines and rails never interconnect (rail_only).
  bool rail_only = false;
};

/// The Clos keys (cluster.spines, tiers, pods, oversubscription, core_bandwidth, core_latency,
/// dual_plane), shared by the three Clos kinds.
ParamDecls clos_params();

/// Builds a Clos fabric of the given shape.
/// @throws engine::InputError on sizes that do not fit (key named, with a fix).
TopoGraph build_clos(const ClusterSpec &s, ClosShape shape);

} // namespace fabricsim::models::builders
