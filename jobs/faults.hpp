#pragma once
/// @file faults.hpp
/// The spec's `faults:` list (docs/jobs_and_faults.md): each entry a link fault in simulated
/// time. Parsed with the spec; resolved against the topology once it is built.
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "models/core/link_fault.hpp"
#include "models/topology/cluster.hpp"

namespace fabricsim::jobs {

/// One parsed `faults:` entry, its link still named by node names ("leaf0", "spine1").
struct FaultEntry {
  models::LinkFault fault;   ///< kind, times, parameters (a, b filled by resolve_faults)
  std::string node_a, node_b;  ///< the target's two ends, as Topology::node_name spells them
  std::string target;          ///< the target as written
  std::string file;            ///< where the entry came from (spec file or "<cli>")
};

/// Parses the `faults:` node (a YAML sequence of mappings) of spec file `file`.
/// Entry keys: time (required), target (required, "NODE-NODE"), kind (link_down | ber |
/// degrade), until, and per kind: detect + converge (link_down), ber (ber), rate (degrade).
/// @throws engine::InputError naming `faults[i].key` and the fix: unknown or missing key, bad
/// time (negative, unparseable, beyond the simulator's horizon engine::kMaxSimTime), until not
/// after time, BER outside (0, 1), bad rate.
std::vector<FaultEntry> parse_faults(const YAML::Node& node, const std::string& file);

/// Resolves the entries' targets to LP ids in `topo`.
/// @throws engine::InputError naming `faults[i].target`: an unknown node, two nodes with no link
/// between them, or a link that is not between two Ethernet switches; a degrade rate not below
/// the link's rate.
std::vector<models::LinkFault> resolve_faults(const std::vector<FaultEntry>& entries, const models::Topology& topo);

}  // namespace fabricsim::jobs
