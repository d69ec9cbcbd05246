/// @file plan_ring.cpp
/// NcclPlanner's ring family: Ring AllReduce / AllGather / ReduceScatter (per channel a
/// rail-aligned ring, loops of nRanks chunks sent in slices), materialized or in lazy form
/// (models::LazyChannelRing), and Broadcast / Reduce as a pipelined chain along the ring.
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

RankPlan NcclPlanner::plan_chain(const PlanCtx& x) const {
  const auto& req = x.req;
  const auto& ranks = x.ranks;
  const auto& ci = x.ci;
  const std::uint32_t n = x.n, me = x.me, nc = x.nc;
  const std::uint64_t S = x.S;
  const TuningDecision& d = x.d;
  const ProtoSizes z = proto_sizes(cfg_.settings, d.algo, d.proto, req.op);
  Builder b;
  b.proto = d.proto;
  for (std::uint32_t c = 0; c < nc; ++c) {
    const auto& ring = ci->rings[c];
    const auto& pos = ci->ring_pos[c];
    const std::uint32_t p = pos[me], rp = pos[req.root_index % n];
    const std::uint32_t cp = req.op == CollOp::kBroadcast ? mod(static_cast<std::int64_t>(p) - rp, n)
                                                          : mod(static_cast<std::int64_t>(p) - rp - 1, n);
    const std::uint32_t next = ranks[ring[(p + 1) % n]], prev = ranks[ring[(p + n - 1) % n]];
    b.delay_ps = step_delay_ps(*ci, d.algo, d.proto, ranks[me], next);
    const std::uint64_t Bc = chunk_bytes(S, nc, c);
    const std::uint64_t nchunks = std::max<std::uint64_t>(1, ceil_div(Bc, z.chunk));
    const std::uint64_t stride = ceil_div(chunk_bytes(S, nc, 0), z.chunk) + 1;
    const auto chn = static_cast<std::uint16_t>(c);
    std::uint32_t prev_send = kNone;
    for (std::uint64_t i = 0; i < nchunks; ++i) {
      const std::uint64_t sz = std::min(z.chunk, Bc - std::min(Bc, i * z.chunk));
      const std::uint32_t t = checked_tag(c * stride + i);
      std::uint32_t deps[2];
      std::size_t nd = 0;
      if (cp > 0) deps[nd++] = b.recv(prev, t, chn);
      if (cp + 1 < n) {
        if (prev_send != kNone) deps[nd++] = prev_send;
        prev_send = b.send(next, sz, t, std::span<const std::uint32_t>(deps, nd), chn);
      }
    }
  }
  return std::move(b.plan);
}

RankPlan NcclPlanner::plan_ring_lazy(const PlanCtx& x) const {
  const auto& req = x.req;
  const auto& ranks = x.ranks;
  const auto& ci = x.ci;
  const std::uint32_t n = x.n, me = x.me, nc = x.nc;
  const std::uint64_t S = x.S;
  const TuningDecision& d = x.d;
  const ProtoSizes z = proto_sizes(cfg_.settings, d.algo, d.proto, req.op);
  const bool ar = req.op == CollOp::kAllReduce;
  const std::uint32_t steps = ar ? 2 * (n - 1) : n - 1;
  // The same chain as below, produced step by step by the executor (models::LazyChannelRing).
  auto r = std::make_shared<models::LazyChannelRing>();
  r->channels = nc;
  r->steps = steps;
  r->max_slices = z.max_slices;
  r->slice_bytes = std::max<std::uint64_t>(1, z.slice);
  r->max_loops = std::max<std::uint64_t>(1, ceil_div(ar ? chunk_bytes(S, nc, 0) : chunk_bytes(chunk_bytes(S, n, 0), nc, 0),
                                                    ar ? z.chunk * n : z.chunk));
  std::vector<std::uint32_t> pos(nc);
  std::vector<std::uint64_t> bc(nc);
  for (std::uint32_t c = 0; c < nc; ++c) {
    const auto& ring = ci->rings[c];
    const std::uint32_t p = ci->ring_pos[c][me];
    pos[c] = p;
    r->next.push_back(ranks[ring[(p + 1) % n]]);
    r->prev.push_back(ranks[ring[(p + n - 1) % n]]);
    if (cfg_.step_latency) r->recv_delay_ps.push_back(step_delay_ps(*ci, d.algo, d.proto, r->prev.back(), ranks[me]));
    bc[c] = chunk_bytes(S, nc, c);
    const std::uint64_t loop = ar ? z.chunk * n : z.chunk;
    std::uint64_t nloops = 1;
    if (ar) {
      nloops = std::max<std::uint64_t>(1, ceil_div(bc[c], loop));
    } else {
      for (std::uint32_t mbr = 0; mbr < n; ++mbr) {
        nloops = std::max(nloops, ceil_div(chunk_bytes(chunk_bytes(S, n, mbr), nc, c), z.chunk));
      }
    }
    r->nloops.push_back(nloops);
    // One past the channel's last tag; beyond 32 bits the materialized path reports the error.
    if (((c * (r->max_loops + 1) + nloops) * steps) * z.max_slices > (1ull << 32)) return plan_impl(req, false);
  }
  const CollOp op = req.op;
  const std::uint64_t chunk = z.chunk;
  // The piece the member at ring position `from` sends at (c, l, k).
  const auto piece_at = [ci, bc = std::move(bc), ar, n, S, nc, chunk, op](std::uint32_t c, std::uint64_t l, std::uint32_t k,
                                                                          std::uint32_t from) -> std::uint64_t {
    if (ar) {
      const std::uint64_t loop = chunk * n;
      const std::uint64_t L = std::min(loop, bc[c] - std::min(bc[c], l * loop));
      const std::uint32_t slot = k < n - 1 ? mod(static_cast<std::int64_t>(from) - k, n)
                                           : mod(static_cast<std::int64_t>(from) + 1 - (k - (n - 1)), n);
      return chunk_bytes(L, n, slot);
    }
    const std::uint32_t slot = op == CollOp::kAllGather ? mod(static_cast<std::int64_t>(from) - k, n)
                                                        : mod(static_cast<std::int64_t>(from) - k - 1, n);
    const std::uint64_t share = chunk_bytes(chunk_bytes(S, n, ci->rings[c][slot]), nc, c);
    return std::min(chunk, share - std::min(share, l * chunk));
  };
  r->piece = [piece_at, pos = std::move(pos), n](std::uint32_t c, std::uint64_t l, std::uint32_t k,
                                                 bool theirs) -> std::uint64_t {
    return piece_at(c, l, k, theirs ? (pos[c] + n - 1) % n : pos[c]);
  };
  r->member_piece = [piece_at, ci](std::uint32_t c, std::uint64_t l, std::uint32_t k, std::uint32_t m) -> std::uint64_t {
    return piece_at(c, l, k, ci->ring_pos[c][m]);
  };
  const Proto proto = d.proto;
  r->wire = [proto](std::uint64_t data) { return wire_bytes(proto, data); };
  r->materialize = materializer(req, ci);
  RankPlan out;
  out.lazy_channels = std::move(r);
  return out;
}

RankPlan NcclPlanner::plan_ring(const PlanCtx& x) const {
  const auto& req = x.req;
  const auto& ranks = x.ranks;
  const auto& ci = x.ci;
  const std::uint32_t n = x.n, me = x.me, nc = x.nc;
  const std::uint64_t S = x.S;
  const TuningDecision& d = x.d;
  const ProtoSizes z = proto_sizes(cfg_.settings, d.algo, d.proto, req.op);
  Builder b;
  b.proto = d.proto;
  const bool ar = req.op == CollOp::kAllReduce;
  const std::uint32_t steps = ar ? 2 * (n - 1) : n - 1;
  for (std::uint32_t c = 0; c < nc; ++c) {
    const auto& ring = ci->rings[c];
    const std::uint32_t p = ci->ring_pos[c][me];
    const std::uint32_t next = ranks[ring[(p + 1) % n]], prev = ranks[ring[(p + n - 1) % n]];
    // The hop latency is the receiver's: each receive completes step_delay_ps after its message
    // arrived (models::LazyChannelRing::recv_delay_ps); the sends of a channel go back to back.
    const std::int64_t hop = step_delay_ps(*ci, d.algo, d.proto, prev, ranks[me]);
    // Bytes of the piece that the rank at ring position `from` sends at step k of loop l.
    const std::uint64_t Bc = chunk_bytes(S, nc, c);
    const std::uint64_t loop = ar ? z.chunk * n : z.chunk;
    std::uint64_t nloops = 1;
    if (ar) {
      nloops = std::max<std::uint64_t>(1, ceil_div(Bc, loop));
    } else {
      for (std::uint32_t mbr = 0; mbr < n; ++mbr) {
        nloops = std::max(nloops, ceil_div(chunk_bytes(chunk_bytes(S, n, mbr), nc, c), z.chunk));
      }
    }
    const std::uint64_t max_loops = std::max<std::uint64_t>(1, ceil_div(ar ? chunk_bytes(S, nc, 0) : chunk_bytes(chunk_bytes(S, n, 0), nc, 0), loop));
    auto piece = [&](std::uint64_t l, std::uint32_t k, std::uint32_t from) -> std::uint64_t {
      if (ar) {
        const std::uint64_t L = std::min(loop, Bc - std::min(Bc, l * loop));
        const std::uint32_t slot = k < n - 1 ? mod(static_cast<std::int64_t>(from) - k, n)
                                             : mod(static_cast<std::int64_t>(from) + 1 - (k - (n - 1)), n);
        return chunk_bytes(L, n, slot);
      }
      const std::uint32_t slot = req.op == CollOp::kAllGather ? mod(static_cast<std::int64_t>(from) - k, n)
                                                              : mod(static_cast<std::int64_t>(from) - k - 1, n);
      const std::uint64_t share = chunk_bytes(chunk_bytes(S, n, ring[slot]), nc, c);
      return std::min(z.chunk, share - std::min(share, l * z.chunk));
    };
    const auto chn = static_cast<std::uint16_t>(c);
    std::uint32_t prev_send = kNone;
    std::vector<std::uint32_t> prev_recv;  // receives of the previous step, by slice
    for (std::uint64_t l = 0; l < nloops; ++l) {
      prev_recv.clear();
      for (std::uint32_t k = 0; k < steps; ++k) {
        const std::uint64_t mine = piece(l, k, p);
        const std::uint32_t ns = nslices(mine, z);
        for (std::uint32_t j = 0; j < ns; ++j) {
          const std::uint32_t t = checked_tag(((c * (max_loops + 1) + l) * steps + k) * z.max_slices + j);
          std::uint32_t deps[2];
          std::size_t nd = 0;
          if (k > 0 && j < prev_recv.size()) deps[nd++] = prev_recv[j];
          if (prev_send != kNone) deps[nd++] = prev_send;
          prev_send = b.send(next, chunk_bytes(mine, ns, j), t, std::span<const std::uint32_t>(deps, nd), chn);
        }
        const std::uint64_t theirs = piece(l, k, (p + n - 1) % n);
        const std::uint32_t nr = nslices(theirs, z);
        prev_recv.clear();
        for (std::uint32_t j = 0; j < nr; ++j) {
          const std::uint32_t t = checked_tag(((c * (max_loops + 1) + l) * steps + k) * z.max_slices + j);
          prev_recv.push_back(b.recv(prev, t, chn, false, hop));
        }
      }
    }
  }
  return std::move(b.plan);
}

}  // namespace fabricsim::simccl
