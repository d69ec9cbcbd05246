/// @file plan_tree.cpp
/// NcclPlanner's Tree AllReduce: a chain inside each node and NCCL's double binary tree across
/// nodes (src/graph/trees.cc, nccl.md §1.6), reduce up and broadcast down, pipelined per chunk;
/// materialized or in lazy form (models::LazyTree).
#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <vector>

#include "simccl/nccl_plan_detail.hpp"
#include "simccl/nccl_planner.hpp"
#include "simccl/ring_planner.hpp"

namespace fabricsim::simccl {

using models::CollOp;
using models::CollRequest;
using models::RankPlan;
using namespace plan_detail;

RankPlan NcclPlanner::plan_tree(const PlanCtx& x) const {
  const auto& req = x.req;
  const auto& ranks = x.ranks;
  const auto& ci = x.ci;
  const std::uint32_t me = x.me, nc = x.nc;
  const std::uint64_t S = x.S;
  const TuningDecision& d = x.d;
  const bool lazy = x.lazy;
  Builder b;
  b.proto = d.proto;
  const ProtoSizes z = proto_sizes(cfg_.settings, d.algo, d.proto, req.op);
  // ---- Tree AllReduce: chain inside nodes + double binary tree across nodes ----
  const auto nodes = static_cast<int>(ci->nodes.size());
  const int ppn = ci->tuner->topo().ppn;
  const std::uint32_t my_node = ci->node_of[me];
  const auto& nd = ci->nodes[my_node];
  const auto m = static_cast<std::uint32_t>(nd.size());
  const std::uint64_t nch_max = ceil_div(chunk_bytes(S, nc, 0), 4096) + 1;  // chunks are >= 4 KiB
  // Lazy form (models::LazyTree): the same channels, chunks, peers and tags, ops computed by the
  // executor as it reaches them. Falls back to the materialized plan (which reports the error)
  // when a tag or op index would not fit in 32 bits.
  std::shared_ptr<models::LazyTree> lt;
  if (lazy) {
    lt = std::make_shared<models::LazyTree>();
    lt->tag_stride = nch_max + 1;
  }
  std::uint64_t lazy_ops = 0;
  for (std::uint32_t c = 0; c < nc; ++c) {
    const std::uint64_t Bc = chunk_bytes(S, nc, c);
    std::uint64_t chunk = z.chunk;
    if (d.proto == Proto::kLL128) {  // Tree+LL128 chunk shrinking (enqueue.cc)
      const double steps = 1 + std::log2(static_cast<double>(nodes)) + 0.1 * ppn;
      while (static_cast<double>(Bc) / chunk < steps * 64 / ppn && chunk > 131072) chunk /= 2;
      while (static_cast<double>(Bc) / chunk < steps * 16 / ppn && chunk > 32768) chunk /= 2;
    }
    const std::uint64_t nchunks = std::max<std::uint64_t>(1, ceil_div(Bc, chunk));
    const int tree = (ci->channels > 1 && static_cast<int>(c) >= ci->channels / 2) ? 1 : 0;
    const std::uint32_t s = c % m;
    const std::uint32_t q = mod(static_cast<std::int64_t>(ci->pos_in_node[me]) - s, m);  // my chain position
    auto chain_member = [&](std::uint32_t node, std::uint32_t pos) {
      const auto& nn = ci->nodes[node];
      const auto mm = static_cast<std::uint32_t>(nn.size());
      return nn[(c % mm + pos) % mm];
    };
    std::uint32_t parent = kNone;
    std::vector<std::uint32_t> children;
    if (q > 0) parent = ranks[chain_member(my_node, q - 1)];
    if (q + 1 < m) children.push_back(ranks[chain_member(my_node, q + 1)]);
    if (q == 0 && nodes > 1) {
      const TreeLinks tl = dbtree_links(nodes, static_cast<int>(my_node), tree);
      if (tl.parent >= 0) parent = ranks[chain_member(static_cast<std::uint32_t>(tl.parent), 0)];
      for (int ch : {tl.child0, tl.child1}) {
        if (ch >= 0) children.push_back(ranks[chain_member(static_cast<std::uint32_t>(ch), 0)]);
      }
    }
    // Per-hop latency of each edge (step_delay_ps: NVLink inside the node, NET to another node).
    const std::int64_t up_delay = parent == kNone ? 0 : step_delay_ps(*ci, d.algo, d.proto, ranks[me], parent);
    std::vector<std::int64_t> child_delay;
    for (std::uint32_t chd : children) child_delay.push_back(step_delay_ps(*ci, d.algo, d.proto, ranks[me], chd));
    if (lt) {
      models::LazyTree::Channel x;
      x.up_delay_ps = up_delay;
      for (std::size_t k = 0; k < children.size(); ++k) x.child_delay_ps[k] = child_delay[k];
      x.base = static_cast<std::uint32_t>(lazy_ops);
      x.bytes = Bc;
      x.chunk = chunk;
      x.nchunks = static_cast<std::uint32_t>(nchunks);
      x.parent = parent == kNone ? models::LazyTree::kNoPeer : parent;
      x.nchild = static_cast<std::uint32_t>(children.size());
      for (std::uint32_t k = 0; k < x.nchild; ++k) x.child[k] = children[k];
      lazy_ops += nchunks * x.per_chunk();
      const std::uint64_t last_tag = (static_cast<std::uint64_t>(c) * (nch_max + 1) + nchunks) * 2 + 1;
      if (nchunks > 0xFFFFFFFFull || lazy_ops > 0xFFFFFFFFull || last_tag > 0xFFFFFFFFull) {
        return plan_impl(req, false);
      }
      lt->ch.push_back(x);
      continue;
    }
    const auto chn = static_cast<std::uint16_t>(c);
    std::uint32_t prev_up = kNone;
    std::vector<std::uint32_t> prev_down(children.size(), kNone);
    for (std::uint64_t i = 0; i < nchunks; ++i) {
      const std::uint64_t sz = std::min(chunk, Bc - std::min(Bc, i * chunk));
      const std::uint32_t tu = checked_tag((static_cast<std::uint64_t>(c) * (nch_max + 1) + i) * 2);
      std::vector<std::uint32_t> ups;
      for (std::uint32_t chd : children) ups.push_back(b.recv(chd, tu, chn));
      std::vector<std::uint32_t> down_deps = ups;
      if (parent != kNone) {
        std::vector<std::uint32_t> deps = ups;
        if (prev_up != kNone) deps.push_back(prev_up);
        b.delay_ps = up_delay;
        prev_up = b.send(parent, sz, tu, deps, chn);
        down_deps = {b.recv(parent, tu + 1, chn)};
      }
      for (std::size_t k = 0; k < children.size(); ++k) {
        std::vector<std::uint32_t> deps = down_deps;
        if (prev_down[k] != kNone) deps.push_back(prev_down[k]);
        b.delay_ps = child_delay[k];
        prev_down[k] = b.send(children[k], sz, tu + 1, deps, chn);
      }
    }
  }
  if (lt) {
    lt->total = static_cast<std::uint32_t>(lazy_ops);
    const Proto proto = d.proto;
    lt->wire = [proto](std::uint64_t data) { return wire_bytes(proto, data); };
    lt->materialize = materializer(req, ci);
    RankPlan out;
    if (lazy_ops > 0) out.lazy_tree = std::move(lt);
    return out;
  }
  return std::move(b.plan);
}

}  // namespace fabricsim::simccl
