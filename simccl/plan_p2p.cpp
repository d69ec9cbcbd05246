/// @file plan_p2p.cpp
/// NcclPlanner's AllToAll: grouped point-to-point with PXN relays (src/enqueue.cc addP2pToPlan,
/// src/init.cc ncclP2pSchedule; nccl.md §3.4).
#include <algorithm>
#include <span>
#include <vector>

#include "engine/errors.hpp"
#include "simccl/nccl_plan_detail.hpp"
#include "simccl/nccl_planner.hpp"
#include "simccl/ring_planner.hpp"

namespace fabricsim::simccl {

using models::RankPlan;
using namespace plan_detail;

namespace {

/// How one AllToAll is cut: p2p chunk size, channels, per-peer parts, tags and PXN relays.
struct P2pLayout {
  const NcclPlanner::CommInfo* ci = nullptr;
  std::uint64_t chunk = 0;          ///< p2p chunk data bytes
  std::uint32_t p2p_channels = 1;   ///< channels the p2p operations spread over (power of two)
  std::uint32_t per_peer = 1;       ///< most channel parts per peer
  std::uint32_t nch_min = 1;        ///< channel parts per peer to start from
  std::uint64_t min_part = 0, max_part = 0;
  std::uint64_t C = 0;              ///< chunk slots per part in the tag
  std::uint64_t P = 64;             ///< part slots per index in the tag
  bool pxn = false;                 ///< PXN relays in use

  /// Parts (data bytes each) of a `bytes` message to one peer.
  std::vector<std::uint64_t> parts_of(std::uint64_t bytes) const {
    std::uint32_t np = static_cast<std::uint32_t>(std::min<std::uint64_t>(nch_min, std::max<std::uint64_t>(1, ceil_div(bytes, min_part))));
    std::uint64_t part = std::max(min_part, ceil_div(bytes, np));
    while (part > max_part && np <= per_peer / 2) {
      np *= 2;
      part = ceil_div(bytes, np);
    }
    std::vector<std::uint64_t> out;
    const std::uint64_t pb = std::max<std::uint64_t>(4096, ceil_div(ceil_div(bytes, np), 4096) * 4096);
    std::uint64_t left = bytes;
    for (std::uint32_t i = 0; i < np && (left > 0 || out.empty()); ++i) {
      const std::uint64_t x = std::min(pb, left);
      out.push_back(x);
      left -= x;
    }
    return out;
  }
  /// Tag of chunk `ch` of part `part`: kind 0 direct, 1 to a relay (idx = destination node),
  /// 2 from a relay (idx = source local GPU).
  std::uint32_t tag(std::uint64_t kind, std::uint64_t idx, std::uint64_t part, std::uint64_t ch) const {
    return checked_tag((kind << 30) | ((idx * P + part) * C + ch));
  }
  /// The relay for a send from member s to member dm: the member on s's node with dm's local GPU.
  std::uint32_t relay_of(std::uint32_t s, std::uint32_t dm) const {
    if (!pxn || ci->node_of[s] == ci->node_of[dm] || ci->local_gpu[s] == ci->local_gpu[dm]) return kNone;
    return ci->member_on(ci->node_of[s], ci->local_gpu[dm]);
  }
};

/// The layout of an AllToAll of S bytes over n members (chunk size and channel counts from
/// NCCL's p2p settings, nccl.md §3.4). @throws engine::InputError when the tags do not fit.
P2pLayout p2p_layout(const NcclSettings& st, const NcclPlanner::CommInfo& ci, int sm, std::uint32_t gpus_per_host,
                     std::uint32_t n, std::uint64_t S) {
  P2pLayout L;
  L.ci = &ci;
  const bool multi = ci.nodes.size() > 1;
  L.chunk = st.chunk_size ? st.chunk_size : (multi ? st.p2p_net_chunksize : st.p2p_nvl_chunksize);
  L.chunk = std::min(L.chunk, st.buffsize_simple / kNcclSteps);
  L.p2p_channels = pow2_up(static_cast<std::uint32_t>(std::clamp(ci.channels, st.min_p2p_nchannels, st.max_p2p_nchannels)));
  // Channels per peer: network peers NCCL_NCHANNELS_PER_NET_PEER or 2 (halved while
  // 2 x nRanks > 4 x p2p channels); NVLink peers 2 x links; the minimum over peers, pow2.
  std::uint32_t per_peer = 2 * static_cast<std::uint32_t>(nvlinks_per_gpu(sm));
  if (multi) {
    std::uint32_t net = st.nchannels_per_net_peer ? static_cast<std::uint32_t>(st.nchannels_per_net_peer) : 2;
    if (!st.nchannels_per_net_peer) {
      while (net > 1 && 2 * n > 4 * L.p2p_channels) net /= 2;
    }
    per_peer = std::min(per_peer, net);
  }
  L.per_peer = std::min(pow2_up(per_peer), L.p2p_channels);
  L.nch_min = L.per_peer;
  while (L.nch_min > 1 && L.nch_min * n > L.p2p_channels) L.nch_min /= 2;
  L.min_part = multi ? L.chunk / 2 : L.chunk / 8;
  L.max_part = multi ? L.chunk : 32 * L.chunk;
  const std::uint64_t max_bytes = chunk_bytes(S, n, 0);
  L.C = ceil_div(std::max<std::uint64_t>(max_bytes, 1), L.chunk) + 1;
  const std::uint64_t idx_max = std::max<std::uint64_t>(ci.nodes.size(), gpus_per_host);
  if (idx_max * L.P * L.C >= (1ull << 30)) {
    throw engine::InputError("<simccl>", "alltoall size", "too many p2p chunks for the tag space",
                             "use a larger NCCL_P2P_NET_CHUNKSIZE / NCCL_CHUNK_SIZE");
  }
  L.pxn = multi && st.pxn_disable == 0 && st.p2p_pxn_level > 0;
  return L;
}

/// PXN relay duty of member `me`: forward the data of the other local sources to the remote
/// members on my rail (receive each chunk, then send it on, in order per part).
void relay_duty(const P2pLayout& L, const NcclPlanner::CommInfo& ci, const std::vector<std::uint32_t>& ranks,
                std::uint32_t n, std::uint32_t me, std::uint64_t S, Builder& b) {
  const std::uint64_t chunk = L.chunk;
  const std::uint32_t my_node = ci.node_of[me];
  for (std::uint32_t s : ci.nodes[my_node]) {
    if (s == me) continue;
    for (std::uint32_t dm = 0; dm < n; ++dm) {
      if (L.relay_of(s, dm) != me) continue;
      const auto parts = L.parts_of(chunk_bytes(S, n, dm));
      for (std::uint32_t p = 0; p < parts.size(); ++p) {
        std::uint32_t prev = kNone;
        const std::uint64_t nchunks = std::max<std::uint64_t>(1, ceil_div(parts[p], chunk));
        const auto chn = static_cast<std::uint16_t>(p % L.p2p_channels);
        for (std::uint64_t c = 0; c < nchunks; ++c) {
          const std::uint64_t sz = std::min(chunk, parts[p] - std::min(parts[p], c * chunk));
          const std::uint32_t r = b.recv(ranks[s], L.tag(1, ci.node_of[dm], p, c), chn, true);
          const std::uint32_t deps[2] = {r, prev};
          prev = b.send(ranks[dm], sz, L.tag(2, ci.local_gpu[s], p, c),
                        std::span<const std::uint32_t>(deps, prev != kNone ? 2 : 1), chn, true);
        }
      }
    }
  }
}

}  // namespace

RankPlan NcclPlanner::plan_alltoall(const PlanCtx& x) const {
  const auto& ranks = x.ranks;
  const auto& ci = *x.ci;
  const std::uint32_t n = x.n, me = x.me;
  const std::uint64_t S = x.S;
  Builder b;
  b.proto = x.d.proto;
  const P2pLayout L = p2p_layout(cfg_.settings, ci, cfg_.sm, node_gpus(), n, S);
  const std::uint64_t chunk = L.chunk;
  std::uint16_t ch_base = 0;
  for (std::uint32_t delta = 1; delta < n; ++delta, ++ch_base) {
    const std::uint32_t to = (me + delta) % n;
    const std::uint32_t from = (me + n - delta) % n;
    // Send my block for `to`, directly or to the PXN relay.
    {
      const std::uint64_t bytes = chunk_bytes(S, n, to);
      const std::uint32_t relay = L.relay_of(me, to);
      const auto parts = L.parts_of(bytes);
      for (std::uint32_t p = 0; p < parts.size(); ++p) {
        std::uint32_t prev = kNone;
        const std::uint64_t nchunks = std::max<std::uint64_t>(1, ceil_div(parts[p], chunk));
        for (std::uint64_t c = 0; c < nchunks; ++c) {
          const std::uint64_t sz = std::min(chunk, parts[p] - std::min(parts[p], c * chunk));
          std::uint32_t dep_buf[1] = {prev};
          const std::span<const std::uint32_t> deps(dep_buf, prev != kNone ? 1 : 0);
          const auto chn = static_cast<std::uint16_t>((ch_base + p) % L.p2p_channels);
          if (relay == kNone) {
            prev = b.send(ranks[to], sz, L.tag(0, 0, p, c), deps, chn);
          } else {
            prev = b.send(ranks[relay], sz, L.tag(1, ci.node_of[to], p, c), deps, chn);
          }
        }
      }
    }
    // Receive the block from `from`, directly or from its relay.
    {
      const std::uint64_t bytes = chunk_bytes(S, n, me);
      const std::uint32_t relay = L.relay_of(from, me);
      const auto parts = L.parts_of(bytes);
      for (std::uint32_t p = 0; p < parts.size(); ++p) {
        const std::uint64_t nchunks = std::max<std::uint64_t>(1, ceil_div(parts[p], chunk));
        const auto chn = static_cast<std::uint16_t>((ch_base + p) % L.p2p_channels);
        for (std::uint64_t c = 0; c < nchunks; ++c) {
          if (relay == kNone) {
            b.recv(ranks[from], L.tag(0, 0, p, c), chn);
          } else {
            b.recv(ranks[relay], L.tag(2, ci.local_gpu[from], p, c), chn);
          }
        }
      }
    }
  }
  if (L.pxn) relay_duty(L, ci, ranks, n, me, S, b);
  return std::move(b.plan);
}

}  // namespace fabricsim::simccl
