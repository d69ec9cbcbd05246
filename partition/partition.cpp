#include "partition/partition.hpp"

#include <algorithm>

#include "engine/errors.hpp"

namespace fabricsim::partition {

engine::Placement place_blocks(std::uint32_t num_lps, const Blocks& blocks,
                               const std::vector<engine::LpId>& loose, std::uint32_t procs,
                               std::uint32_t threads) {
  if (procs == 0 || threads == 0) {
    throw engine::InputError("<cli>", "--threads", "process and thread counts must be >= 1",
                             "pass --threads 1 or more");
  }
  const std::uint64_t units = static_cast<std::uint64_t>(procs) * threads;
  engine::Placement p;
  p.threads = threads;
  p.proc.assign(num_lps, -1);
  p.thread.assign(num_lps, 0);
  auto assign = [&](engine::LpId lp, std::uint64_t unit) {
    if (lp >= num_lps || p.proc[lp] != -1) {
      throw engine::InternalError("partition: LP " + std::to_string(lp) + " placed twice or out of range");
    }
    p.proc[lp] = static_cast<std::int32_t>(unit / threads);
    p.thread[lp] = static_cast<std::uint16_t>(unit % threads);
  };
  const std::uint64_t nb = std::max<std::size_t>(1, blocks.size());
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const std::uint64_t unit = b * units / nb;
    for (engine::LpId lp : blocks[b]) assign(lp, unit);
  }
  for (std::size_t i = 0; i < loose.size(); ++i) assign(loose[i], i % units);
  for (engine::LpId lp = 0; lp < num_lps; ++lp) {
    if (p.proc[lp] == -1) throw engine::InternalError("partition: LP " + std::to_string(lp) + " not placed");
  }
  return p;
}

void attach_to_neighbors(engine::Placement& p, const std::vector<engine::LpId>& affine,
                         const std::vector<Edge>& edges) {
  const std::size_t n = p.proc.size();
  const std::uint32_t threads = std::max<std::uint32_t>(1, p.threads);
  std::uint32_t units = 1;
  for (std::size_t lp = 0; lp < n; ++lp) {
    units = std::max<std::uint32_t>(units, static_cast<std::uint32_t>(p.proc[lp]) * threads + p.thread[lp] + 1);
  }
  std::vector<char> is_affine(n, 0);
  for (engine::LpId lp : affine) {
    if (lp >= n) throw engine::InternalError("partition: affine LP " + std::to_string(lp) + " out of range");
    is_affine[lp] = 1;
  }
  // Neighbour lists of the affine LPs (CSR over the edge list, both directions).
  std::vector<std::uint32_t> deg(n + 1, 0);
  for (const Edge& e : edges) {
    if (is_affine[e.a] && !is_affine[e.b]) ++deg[e.a];
    if (is_affine[e.b] && !is_affine[e.a]) ++deg[e.b];
  }
  std::vector<std::uint32_t> start(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) start[i + 1] = start[i] + deg[i];
  std::vector<engine::LpId> nbr(start[n]);
  std::vector<std::uint32_t> fill(start.begin(), start.end() - 1);
  for (const Edge& e : edges) {
    if (is_affine[e.a] && !is_affine[e.b]) nbr[fill[e.a]++] = e.b;
    if (is_affine[e.b] && !is_affine[e.a]) nbr[fill[e.b]++] = e.a;
  }
  std::vector<std::uint32_t> count(units, 0), held(units, 0);
  for (engine::LpId lp : affine) {
    std::fill(count.begin(), count.end(), 0);
    for (std::uint32_t i = start[lp]; i < start[lp + 1]; ++i) {
      const engine::LpId q = nbr[i];
      ++count[static_cast<std::uint32_t>(p.proc[q]) * threads + p.thread[q]];
    }
    const std::uint32_t best = *std::max_element(count.begin(), count.end());
    std::uint32_t pick = units;
    for (std::uint32_t u = 0; u < units; ++u) {
      if (count[u] == best && (pick == units || held[u] < held[pick])) pick = u;
    }
    ++held[pick];
    p.proc[lp] = static_cast<std::int32_t>(pick / threads);
    p.thread[lp] = static_cast<std::uint16_t>(pick % threads);
  }
}

namespace {
bool is_cut(const engine::Placement& p, const Edge& e) {
  return p.proc[e.a] != p.proc[e.b] || p.thread[e.a] != p.thread[e.b];
}
}  // namespace

engine::SimTime lookahead(const engine::Placement& p, const std::vector<Edge>& edges) {
  engine::SimTime w = engine::kInfinity;
  for (const Edge& e : edges) {
    if (is_cut(p, e)) w = std::min(w, e.latency_ps);
  }
  return w;
}

std::uint64_t cut_edges(const engine::Placement& p, const std::vector<Edge>& edges) {
  std::uint64_t n = 0;
  for (const Edge& e : edges) n += is_cut(p, e) ? 1 : 0;
  return n;
}

}  // namespace fabricsim::partition
