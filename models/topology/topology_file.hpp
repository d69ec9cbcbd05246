#pragma once
/// @file topology_file.hpp
/// Topology files: the fabricsim text format (read and written) and SimAI's ns-3 topology format
/// (read). docs/topology.md specifies both.
#include <string>

#include "models/topology/cluster.hpp"

namespace fabricsim::models {

/// Reads `spec.topology_file`, detecting the format from its first token ("fabricsim-topology"
/// or a number = SimAI ns-3). MTUs come from the spec (cluster.mtu for Ethernet links,
/// cluster.nvlink_mtu for NVLink links) unless the file gives one per link.
/// @throws engine::InputError (file, "line N", problem, fix) on any bad record.
TopoGraph read_topology_file(const ClusterSpec &spec);

/// Parses topology file content `text` (from `path`, for messages) as read_topology_file does:
/// the format from the first token outside '#' comment lines.
/// @throws engine::InputError on any bad record or an unknown format.
TopoGraph parse_topology_text(const std::string &text, const std::string &path, const ClusterSpec &spec);

/// Parses fabricsim text-format content `text` (from `path`, for messages).
/// @throws engine::InputError on dangling links, duplicate nodes, zero rate/latency, unknown kinds.
TopoGraph parse_fabricsim_topology(const std::string &text, const std::string &path,
                                   const ClusterSpec &spec);

/// Parses SimAI ns-3 topology content `text` (from `path`, for messages): header
/// `nodes gpus_per_server nvswitches switches links gpu_type`, the NVSwitch ids, the switch ids,
/// then `src dst rate delay error_rate` per link. Switch tiers are BFS distances from the GPUs.
/// @throws engine::InputError on counts that disagree with the header, bad ids or units.
TopoGraph parse_simai_topology(const std::string &text, const std::string &path,
                               const ClusterSpec &spec);

/// The fabricsim text format of a built topology: reading it back gives an identical Topology
/// (same LP order, ports, rates, latencies, MTUs). `comment` goes on a `#` line after the header.
std::string topology_to_text(const Topology &topo, const std::string &comment);

} // namespace fabricsim::models
