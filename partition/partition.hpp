#pragma once
/// @file partition.hpp
/// Assigns LPs to (MPI process, thread) and derives the lookahead from the cut links.
#include <cstdint>
#include <istream>
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

/// Moves each LP of `affine` (e.g. a leaf switch) to the (process, thread) unit that holds most
/// of its neighbours outside `affine` (its hosts' GPUs), counting one per edge in `edges`, so a
/// leaf's host links stay inside one unit where the topology allows ("leaves with their
/// hosts"). Ties (a rail leaf wired to hosts on every unit) and LPs without such neighbours go to
/// the tied unit holding the fewest affine LPs so far, then the lowest unit. Deterministic: depends
/// only on `p`, `affine` order and `edges`. Precondition: every LP is placed in `p`.
void attach_to_neighbors(engine::Placement& p, const std::vector<engine::LpId>& affine,
                         const std::vector<Edge>& edges);

/// Window width W: minimum latency over edges whose ends are in different (process, thread)
/// units; engine::kInfinity when no edge is cut.
engine::SimTime lookahead(const engine::Placement& p, const std::vector<Edge>& edges);

/// Cut-edge count (between units) for reports.
std::uint64_t cut_edges(const engine::Placement& p, const std::vector<Edge>& edges);

}  // namespace fabricsim::partition

namespace fabricsim::partition {

/// True when this build has METIS (Debian libmetis-dev).
bool have_metis();

/// METIS k-way partition of the LP graph into procs*threads units (unit u = proc*threads +
/// thread), minimising the cut weighted by expected traffic (`edge_weight[i]` for edges[i]) and
/// balancing `lp_weight` (expected events per LP). Links with latency below `min_cut_latency_ps`
/// are contracted first (kept inside one unit), so the window never drops below it. Deterministic
/// (fixed METIS seed). @throws InputError if METIS is missing from this build or fails.
engine::Placement place_metis(std::uint32_t num_lps, const std::vector<Edge>& edges,
                              const std::vector<std::uint32_t>& edge_weight,
                              const std::vector<std::uint32_t>& lp_weight, std::uint32_t procs,
                              std::uint32_t threads, engine::SimTime min_cut_latency_ps);

/// Writes a placement as text: a header line naming the LP count, the run's process count
/// `procs` and thread count, then "lp proc thread" per LP.
/// @throws InputError if the file cannot be written.
void write_partition(const std::string& path, const engine::Placement& p, std::uint32_t procs);

/// Reads a file written by write_partition. @throws InputError (file, line, fix) if it is
/// malformed or was made for another LP, process or thread count (a file made for fewer
/// processes is refused too: the extra processes would hold no LP and sit idle).
engine::Placement read_partition(const std::string& path, std::uint32_t num_lps, std::uint32_t procs,
                                 std::uint32_t threads);

/// As read_partition(path, ...), reading the file's content from `f`; `path` names it in messages.
/// @throws InputError as read_partition(path, ...), except for an unreadable file.
engine::Placement read_partition(std::istream& f, const std::string& path, std::uint32_t num_lps,
                                 std::uint32_t procs, std::uint32_t threads);

/// Human-readable report: lookahead, cut links (between processes and between threads), and
/// expected load (sum of lp_weight) per process and thread with the imbalance max/mean.
std::string partition_report(const engine::Placement& p, const std::vector<Edge>& edges,
                             const std::vector<std::uint32_t>& lp_weight);

}  // namespace fabricsim::partition
