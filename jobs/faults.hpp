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

/// What a `faults:` entry's target names.
enum class FaultScope : std::uint8_t {
  kLink,    ///< one link, `NODE-NODE` (link_down, ber, degrade)
  kNic,     ///< a GPU's NIC(s): every link from the GPU to an Ethernet switch (nic_down)
  kSwitch,  ///< an Ethernet switch: every link of the switch (switch_down)
};

/// One parsed `faults:` entry, its target still named by node names ("leaf0", "spine1", "gpu3").
struct FaultEntry {
  models::LinkFault fault;   ///< kind, times, parameters (a, b filled by resolve_faults)
  FaultScope scope = FaultScope::kLink;
  std::string kind;            ///< the kind as written: link_down, ber, degrade, nic_down, switch_down
  std::string node_a, node_b;  ///< the target's ends (node_b empty for kNic, kSwitch), as Topology::node_name spells them
  std::string target;          ///< the target as written
  std::string file;            ///< where the entry came from (spec file or "<cli>")
};

/// Parses the `faults:` node (a YAML sequence of mappings) of spec file `file`.
/// Entry keys: time (required), target (required), kind (link_down | ber | degrade | nic_down |
/// switch_down), until, and per kind: detect + converge (link_down, nic_down, switch_down), ber
/// (ber), rate (degrade). The target is "NODE-NODE" for the link kinds, a GPU ("gpu3") for
/// nic_down and an Ethernet switch ("spine1") for switch_down.
/// @throws engine::InputError naming `faults[i].key` and the fix: unknown or missing key, bad
/// time (negative, unparseable, beyond the simulator's horizon engine::kMaxSimTime), until not
/// after time, BER outside (0, 1), bad rate.
std::vector<FaultEntry> parse_faults(const YAML::Node& node, const std::string& file);

/// Resolves the entries' targets to LP ids in `topo`: one LinkFault per link an entry affects
/// (LinkFault::entry = the entry's index), in entry order; a nic_down or switch_down entry gives
/// one kLinkDown per distinct peer of its GPU (Ethernet links only) or switch.
/// @throws engine::InputError naming `faults[i].target`: an unknown node, two nodes with no link
/// between them, a link with an NVSwitch end, a GPU link under ber or degrade, a nic_down target
/// that is not a GPU with a NIC, a switch_down target that is not an Ethernet switch; a degrade
/// rate not below the link's rate.
std::vector<models::LinkFault> resolve_faults(const std::vector<FaultEntry>& entries, const models::Topology& topo);

}  // namespace fabricsim::jobs
