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
