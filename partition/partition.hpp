#pragma once
/// @file partition.hpp
/// Assigns LPs to (MPI process, thread) and derives the lookahead from the cut links.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/simulator.hpp"

namespace fabricsim::partition {

/// An undirected LP-graph edge with its latency (the only source of lookahead).
struct Edge {
  engine::LpId a = 0;
  engine::LpId b = 0;
  engine::SimTime latency_ps = 0;
};

/// Blocks of LPs to keep together (a host's GPUs and NVSwitch; a leaf), in order. Every LP must
/// appear in exactly one block.
using Blocks = std::vector<std::vector<engine::LpId>>;

/// Topology-aware default: `blocks` are dealt to the procs*threads units in contiguous runs
/// (block b goes to unit b*U/B), unit u = proc*threads + thread. `loose` LPs (e.g. spines) are
/// dealt round-robin. Deterministic. @throws InputError if procs or threads is 0.
engine::Placement place_blocks(std::uint32_t num_lps, const Blocks& blocks,
                               const std::vector<engine::LpId>& loose, std::uint32_t procs,
                               std::uint32_t threads);

/// Window width W: minimum latency over edges whose ends are in different (process, thread)
/// units; engine::kInfinity when no edge is cut.
engine::SimTime lookahead(const engine::Placement& p, const std::vector<Edge>& edges);

/// Cut-edge count (between units) for reports.
std::uint64_t cut_edges(const engine::Placement& p, const std::vector<Edge>& edges);

}  // namespace fabricsim::partition
