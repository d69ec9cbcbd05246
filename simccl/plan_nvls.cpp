/// @file plan_nvls.cpp
/// NcclPlanner's NVLS and NVLSTree plans (nccl.md §1.4, §1.6): reduction and multicast through
/// the NVSwitch, materialized or in lazy form (models::LazyNvls).
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

bool NcclPlanner::lazy_nvls(const CollRequest& req, const std::shared_ptr<const CommInfo>& ci, Proto proto,
                            std::uint32_t nc, std::uint64_t S, std::uint64_t loop, std::uint64_t max_loops,
                            const std::uint32_t* heads, std::uint32_t m, std::uint32_t q, std::uint32_t tags_per_loop,
                            bool reduce, bool mcast, const models::LazyNvls::Links links[2], RankPlan& out) const {
  auto x = std::make_shared<models::LazyNvls>();
  x->heads = heads;
  x->m = m;
  x->q = q;
  x->me = (*req.ranks)[req.my_index];
  x->loop = loop;
  x->tag_loops = max_loops;
  x->tags_per_loop = tags_per_loop;
  x->reduce = reduce;
  x->mcast = mcast;
  x->window = static_cast<std::uint32_t>(kNcclSteps);
  x->links[0] = links[0];
  x->links[1] = links[1];
  std::uint64_t total = 0;
  for (std::uint32_t c = 0; c < nc; ++c) {
    models::LazyNvls::Channel k;
    k.base = static_cast<std::uint32_t>(total);
    k.bytes = chunk_bytes(S, nc, c);
    const std::uint64_t nloops = ceil_div(k.bytes, loop);
    // Beyond 32-bit op indices or tags the materialized plan reports the error.
    if (nloops > 0xFFFFFFFFull || (c * max_loops + nloops) * tags_per_loop > 0xFFFFFFFFull) return false;
    k.nloops = static_cast<std::uint32_t>(nloops);
    x->ch.push_back(k);
    const models::LazyNvls::Links& t = links[c % 2];
    if (nloops > 0) {
      total += (nloops - 1) * x->full_loop_ops(t) + x->loop_ops(t, k.bytes - (nloops - 1) * loop);
    }
    if (total > 0xFFFFFFFFull) return false;
  }
  x->total = static_cast<std::uint32_t>(total);
  x->wire = [proto](std::uint64_t data) { return wire_bytes(proto, data); };
  // The heads live in the planner's cached CommInfo (shared by all ranks of the communicator),
  // kept alive by the closure.
  x->materialize = materializer(req, ci);
  if (total > 0) out.lazy_nvls = std::move(x);
  return true;
}

RankPlan NcclPlanner::plan_nvls(const PlanCtx& x) const {
  const auto& req = x.req;
  const auto& ranks = x.ranks;
  const auto& ci = x.ci;
  const std::uint32_t n = x.n, me = x.me, nc = x.nc;
  const std::uint64_t S = x.S;
  const TuningDecision& d = x.d;
  const bool lazy = x.lazy;
  Builder b;
  b.proto = d.proto;
  // ---- NVLS AllReduce / ReduceScatter / AllGather (single node; nccl.md §1.4/1.6) ----
  // AllReduce: reduce into the switch, the owner multicasts the result. ReduceScatter: the
  // reduce half (the owner keeps its chunks). AllGather: the multicast half (each rank
  // multicasts its own chunks).
  const bool reduce = req.op != CollOp::kAllGather;
  const bool mcast = req.op != CollOp::kReduceScatter;
  // Chunk: NCCL_NVLS_CHUNKSIZE, then 64K / 32K / 16K while the call is small against
  // 64 / 8 / 2 x channels x heads x chunk (enqueue.cc calcCollChunking).
  std::uint64_t chunk = std::max<std::uint64_t>(cfg_.settings.nvls_chunksize, 1);
  const std::uint64_t grid = static_cast<std::uint64_t>(nc) * n;
  if (S < 64 * grid * chunk && chunk > 65536) chunk = 65536;
  if (S < 8 * grid * chunk && chunk > 32768) chunk = 32768;
  if (S < 2 * grid * chunk && chunk > 16384) chunk = 16384;
  const std::uint64_t loop = static_cast<std::uint64_t>(n) * chunk;
  const std::uint64_t max_loops = ceil_div(chunk_bytes(S, nc, 0), loop) + 1;
  if (lazy) {
    models::LazyNvls::Links none[2];
    RankPlan out;
    if (lazy_nvls(req, ci, d.proto, nc, S, loop, max_loops, ci->ranks.data(), n, me, 2, reduce, mcast, none, out)) {
      return out;
    }
    return plan_impl(req, false);
  }
  // Step window (models::LazyNvls): a send of loop l >= NCCL_STEPS also waits for its
  // connection's send of loop l - NCCL_STEPS; win_* hold the last NCCL_STEPS loops' sends.
  std::vector<std::uint32_t> win_red(kNcclSteps * n), win_mc(kNcclSteps);
  for (std::uint32_t c = 0; c < nc; ++c) {
    const std::uint64_t Bc = chunk_bytes(S, nc, c);
    const std::uint64_t nloops = ceil_div(Bc, loop);
    const auto chn = static_cast<std::uint16_t>(c);
    std::fill(win_red.begin(), win_red.end(), kNone);
    std::fill(win_mc.begin(), win_mc.end(), kNone);
    for (std::uint64_t l = 0; l < nloops; ++l) {
      const std::uint64_t block = std::min(loop, Bc - l * loop);
      const std::uint32_t tr = checked_tag((static_cast<std::uint64_t>(c) * max_loops + l) * 2);
      const std::uint32_t tm = tr + 1;
      const std::uint64_t w = l % kNcclSteps;
      for (std::uint32_t s = 0; reduce && s < n; ++s) {
        const std::uint64_t sb = chunk_bytes(block, n, s);
        if (sb == 0) continue;
        std::uint32_t& prev = win_red[w * n + s];
        const std::uint32_t o = b.send(ranks[s], sb, tr, std::span<const std::uint32_t>(&prev, prev != kNone ? 1 : 0), chn);
        b.plan.ops[o].nvls = models::kNvlsReduce;
        prev = o;
      }
      const std::uint64_t mine = chunk_bytes(block, n, me);
      if (mine > 0) {
        const std::uint32_t r = reduce ? b.recv(ranks[me], tr, chn) : kNone;
        if (mcast) {
          std::uint32_t deps[2];
          std::size_t nd = 0;
          if (reduce) deps[nd++] = r;
          if (win_mc[w] != kNone) deps[nd++] = win_mc[w];
          const std::uint32_t o = b.send(ranks[me], mine, tm, std::span<const std::uint32_t>(deps, nd), chn);
          b.plan.ops[o].nvls = models::kNvlsMulticast;
          win_mc[w] = o;
        }
      }
      for (std::uint32_t s = 0; mcast && s < n; ++s) {
        if (chunk_bytes(block, n, s) > 0) b.recv(ranks[s], tm, chn);
      }
    }
  }
  return std::move(b.plan);
}

RankPlan NcclPlanner::plan_nvls_tree(const PlanCtx& x) const {
  const auto& req = x.req;
  const auto& ranks = x.ranks;
  const auto& ci = x.ci;
  const std::uint32_t me = x.me, nc = x.nc;
  const std::uint64_t S = x.S;
  const TuningDecision& d = x.d;
  const bool lazy = x.lazy;
  Builder b;
  b.proto = d.proto;
  // ---- NVLSTree AllReduce (nccl.md §1.6): per channel, loops of m chunks (m ranks per node);
  // chunk h of a loop is reduced into local rank h through the NVSwitch, local ranks h of all
  // nodes reduce and broadcast it over the double binary tree of nodes (channel c: tree c % 2),
  // and each multicasts the result into its node. Chunk: NCCL_NVLS_CHUNKSIZE, at most 64 KiB
  // from 4 nodes on (NCCL_NVLSTREE_MAX_CHUNKSIZE), halved to 32 KiB for small calls
  // (simplified from calcCollChunking's thresholds).
  const auto nn = static_cast<std::uint32_t>(ci->nodes.size());
  const auto m = static_cast<std::uint32_t>(ci->nodes.front().size());
  const std::uint32_t my_node = ci->node_of[me];
  const std::uint32_t q = ci->pos_in_node[me];
  std::uint64_t chunk = std::max<std::uint64_t>(cfg_.settings.nvls_chunksize, 1);
  if (nn >= 4) chunk = std::min<std::uint64_t>(chunk, 65536);
  while (S < 4ull * nc * m * chunk && chunk > 32768) chunk /= 2;
  const std::uint64_t loop = static_cast<std::uint64_t>(m) * chunk;
  const std::uint64_t max_loops = ceil_div(chunk_bytes(S, nc, 0), loop) + 1;
  auto head = [&](std::uint32_t node, std::uint32_t h) { return ranks[ci->nodes[node][h]]; };
  if (lazy) {
    models::LazyNvls::Links links[2];
    for (int tree = 0; tree < 2; ++tree) {
      const TreeLinks tl = dbtree_links(static_cast<int>(nn), static_cast<int>(my_node), tree);
      auto& x = links[tree];
      if (tl.parent >= 0) x.parent = head(static_cast<std::uint32_t>(tl.parent), q);
      for (int chd : {tl.child0, tl.child1}) {
        if (chd >= 0) x.child[x.nchild++] = head(static_cast<std::uint32_t>(chd), q);
      }
    }
    RankPlan out;
    if (ci->node_ranks[my_node].size() == m &&
        lazy_nvls(req, ci, d.proto, nc, S, loop, max_loops, ci->node_ranks[my_node].data(), m, q, 4, true, true,
                  links, out)) {
      return out;
    }
    return plan_impl(req, false);
  }
  // Step window (models::LazyNvls): a send of loop l >= NCCL_STEPS also waits for its
  // connection's send of loop l - NCCL_STEPS (reduce send to head h, send up, send down to
  // child k, multicast); win_* hold the last NCCL_STEPS loops' sends.
  std::vector<std::uint32_t> win_red(kNcclSteps * m), win_own(kNcclSteps * 4);
  for (std::uint32_t c = 0; c < nc; ++c) {
    const std::uint64_t Bc = chunk_bytes(S, nc, c);
    const std::uint64_t nloops = ceil_div(Bc, loop);
    const auto chn = static_cast<std::uint16_t>(c);
    const TreeLinks tl = dbtree_links(static_cast<int>(nn), static_cast<int>(my_node), static_cast<int>(c % 2));
    std::fill(win_red.begin(), win_red.end(), kNone);
    std::fill(win_own.begin(), win_own.end(), kNone);
    for (std::uint64_t l = 0; l < nloops; ++l) {
      const std::uint64_t block = std::min(loop, Bc - l * loop);
      const std::uint32_t tr = checked_tag((static_cast<std::uint64_t>(c) * max_loops + l) * 4);
      const std::uint32_t tu = tr + 1, td = tr + 2, tm = tr + 3;
      const std::uint64_t w = l % kNcclSteps;
      for (std::uint32_t h = 0; h < m; ++h) {
        const std::uint64_t sb = chunk_bytes(block, m, h);
        if (sb == 0) continue;
        std::uint32_t& prev = win_red[w * m + h];
        const std::uint32_t o = b.send(head(my_node, h), sb, tr, std::span<const std::uint32_t>(&prev, prev != kNone ? 1 : 0), chn);
        b.plan.ops[o].nvls = models::kNvlsReduce;
        prev = o;
      }
      const std::uint64_t mine = chunk_bytes(block, m, q);
      if (mine > 0) {
        // Connection k of the own chunk's sends: 0 up, 1 and 2 down to the children, 3 multicast.
        auto windowed = [&](std::uint32_t peer, std::uint32_t tag, std::vector<std::uint32_t> deps, int k) {
          std::uint32_t& prev = win_own[w * 4 + static_cast<std::uint64_t>(k)];
          if (prev != kNone) deps.push_back(prev);
          prev = b.send(peer, mine, tag, deps, chn);
          return prev;
        };
        std::vector<std::uint32_t> deps = {b.recv(ranks[me], tr, chn)};
        for (int ch : {tl.child0, tl.child1}) {
          if (ch >= 0) deps.push_back(b.recv(head(static_cast<std::uint32_t>(ch), q), tu, chn));
        }
        if (tl.parent >= 0) {
          windowed(head(static_cast<std::uint32_t>(tl.parent), q), tu, deps, 0);
          deps = {b.recv(head(static_cast<std::uint32_t>(tl.parent), q), td, chn)};
        }
        int k = 1;
        for (int ch : {tl.child0, tl.child1}) {
          if (ch >= 0) windowed(head(static_cast<std::uint32_t>(ch), q), td, deps, k++);
        }
        const std::uint32_t o = windowed(ranks[me], tm, deps, 3);
        b.plan.ops[o].nvls = models::kNvlsMulticast;
      }
      for (std::uint32_t h = 0; h < m; ++h) {
        if (chunk_bytes(block, m, h) > 0) b.recv(head(my_node, h), tm, chn);
      }
    }
  }
  return std::move(b.plan);
}

}  // namespace fabricsim::simccl
