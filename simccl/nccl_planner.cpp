#include "simccl/nccl_planner.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>
#include <string>

#include "engine/errors.hpp"
#include "models/core/packet.hpp"
#include "simccl/ring_planner.hpp"

namespace fabricsim::simccl {

using models::CollOp;
using models::CollRequest;
using models::P2pOp;
using models::RankPlan;

namespace {

constexpr std::uint64_t kNcclSteps = 8;  // NCCL_STEPS, src/include/device.h

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }
std::uint32_t mod(std::int64_t a, std::uint32_t n) {
  const std::int64_t m = a % static_cast<std::int64_t>(n);
  return static_cast<std::uint32_t>(m < 0 ? m + n : m);
}
std::uint32_t pow2_up(std::uint32_t v) {
  std::uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

Func func_of(CollOp op) {
  switch (op) {
    case CollOp::kAllReduce: return Func::kAllReduce;
    case CollOp::kAllGather: return Func::kAllGather;
    case CollOp::kReduceScatter: return Func::kReduceScatter;
    case CollOp::kBroadcast: return Func::kBroadcast;
    case CollOp::kReduce: return Func::kReduce;
    case CollOp::kAllToAll: return Func::kAllReduce;  // not tuned; p2p path
  }
  return Func::kAllReduce;
}

std::uint32_t checked_tag(std::uint64_t t) {
  if (t > 0xFFFFFFFFull) {
    throw engine::InputError("<simccl>", "collective size", "the plan needs more than 2^32 messages per rank pair",
                             "use a smaller collective or a larger NCCL_BUFFSIZE");
  }
  return static_cast<std::uint32_t>(t);
}

// Appends ops and returns their indices.
struct Builder {
  RankPlan plan;
  Proto proto = Proto::kSimple;
  std::uint32_t send(std::uint32_t peer, std::uint64_t data, std::uint32_t tag, std::span<const std::uint32_t> deps,
                     std::uint16_t channel, bool relay = false) {
    P2pOp o{true, peer, wire_bytes(proto, data), tag};
    o.payload_bytes = data;
    o.channel = channel;
    o.relay = relay;
    return plan.add(o, deps);
  }
  std::uint32_t recv(std::uint32_t peer, std::uint32_t tag, std::uint16_t channel, bool relay = false) {
    P2pOp o{false, peer, 0, tag};
    o.channel = channel;
    o.relay = relay;
    return plan.add(o);
  }
};

constexpr std::uint32_t kNone = 0xFFFFFFFFu;

}  // namespace

std::uint64_t wire_bytes(Proto p, std::uint64_t data) {
  switch (p) {
    case Proto::kLL: return ceil_div(data, 8) * 16;      // 8 B data + 8 B flags per 16 B line
    case Proto::kLL128: return ceil_div(data, 120) * 128;  // 15 of 16 8-byte words carry data
    case Proto::kSimple: return data;
  }
  return data;
}

TreeLinks dbtree_links(int n, int rank, int tree) {
  auto btree = [n](int r) {
    TreeLinks t;
    if (n <= 1) return t;
    int bit = 1;
    while (bit < n && !(bit & r)) bit <<= 1;
    if (r == 0) {
      t.child0 = bit >> 1;  // root: single child
      return t;
    }
    int up = (r ^ bit) | (bit << 1);
    if (up >= n) up = r ^ bit;
    t.parent = up;
    int low = bit >> 1;
    if (low > 0) {
      t.child0 = r - low;
      int d1 = r + low;
      while (low > 0 && d1 >= n) {
        low >>= 1;
        d1 = low > 0 ? r + low : -1;
      }
      t.child1 = d1;
    }
    return t;
  };
  if (tree == 0) return btree(rank);
  auto map_back = [](int v, auto f) { return v < 0 ? -1 : f(v); };
  if (n % 2 == 1) {  // shift by one
    const TreeLinks t = btree(mod(rank - 1, static_cast<std::uint32_t>(n)));
    auto f = [n](int v) { return static_cast<int>(mod(v + 1, static_cast<std::uint32_t>(n))); };
    return TreeLinks{map_back(t.parent, f), map_back(t.child0, f), map_back(t.child1, f)};
  }
  const TreeLinks t = btree(n - 1 - rank);  // mirror
  auto f = [n](int v) { return n - 1 - v; };
  return TreeLinks{map_back(t.parent, f), map_back(t.child0, f), map_back(t.child1, f)};
}

struct NcclPlanner::CommInfo {
  std::vector<std::uint32_t> ranks;              // global ranks (member index -> rank)
  std::vector<std::vector<std::uint32_t>> nodes;  // members per host, by host then local GPU
  std::vector<std::vector<std::uint32_t>> node_ranks;  // nodes[k] as global ranks (lazy NVLSTree heads)
  std::vector<std::uint32_t> node_of, pos_in_node, local_gpu;
  std::unique_ptr<NcclTuner> tuner;
  int channels = 1;
  // rings[c][i] = member at ring position i; ring_pos[c][member] = its position.
  std::vector<std::vector<std::uint32_t>> rings, ring_pos;
  std::uint32_t member_on(std::uint32_t node, std::uint32_t local) const {
    for (std::uint32_t m : nodes[node]) {
      if (local_gpu[m] == local) return m;
    }
    return kNone;
  }
};

NcclPlanner::NcclPlanner(NcclPlannerConfig cfg) : cfg_(std::move(cfg)) {
  if (cfg_.gpus_per_host == 0) throw engine::InternalError("NcclPlanner: gpus_per_host 0");
}

std::shared_ptr<const NcclPlanner::CommInfo> NcclPlanner::comm(const std::vector<std::uint32_t>& ranks) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = comms_.find(ranks);
  if (it != comms_.end()) return it->second;
  auto ci = std::make_shared<CommInfo>();
  ci->ranks = ranks;
  const auto n = static_cast<std::uint32_t>(ranks.size());
  std::map<std::uint32_t, std::vector<std::uint32_t>> by_host;
  for (std::uint32_t m = 0; m < n; ++m) by_host[ranks[m] / cfg_.gpus_per_host].push_back(m);
  ci->node_of.assign(n, 0);
  ci->pos_in_node.assign(n, 0);
  ci->local_gpu.assign(n, 0);
  for (auto& [host, members] : by_host) {
    std::sort(members.begin(), members.end(), [&](auto a, auto b) { return ranks[a] < ranks[b]; });
    for (std::uint32_t i = 0; i < members.size(); ++i) {
      ci->node_of[members[i]] = static_cast<std::uint32_t>(ci->nodes.size());
      ci->pos_in_node[members[i]] = i;
      ci->local_gpu[members[i]] = ranks[members[i]] % cfg_.gpus_per_host;
    }
    ci->nodes.push_back(members);
    ci->node_ranks.emplace_back();
    for (std::uint32_t x : members) ci->node_ranks.back().push_back(ranks[x]);
  }
  TuningTopology t;
  t.n_ranks = static_cast<int>(n);
  t.n_nodes = static_cast<int>(ci->nodes.size());
  t.ppn = 1;
  for (const auto& nd : ci->nodes) t.ppn = std::max<int>(t.ppn, static_cast<int>(nd.size()));
  t.sm = cfg_.sm;
  t.nvlink_GBps = cfg_.nvlink_GBps;
  t.nic_GBps = cfg_.nic_GBps;
  t.nics_per_node = cfg_.nics_per_host > 0 ? cfg_.nics_per_host : static_cast<int>(cfg_.gpus_per_host);
  t.pci_GBps = cfg_.pci_GBps;
  // NVLS (nvlsSupport): an NVSwitch with multicast under every node's GPUs (fabricsim hosts with
  // > 1 GPU have one; NCCL_TOPO_FILE without NVLink has none) and a rung that models it.
  t.nvswitch_multicast = cfg_.nvls_network && cfg_.gpus_per_host > 1 && cfg_.nvswitch;
  t.no_nvls_reason = !cfg_.nvls_network ? "the network model has no NVSwitch reduction/multicast"
                                        : "NVLS needs the GPUs on an NVSwitch";
  for (const auto& nd : ci->nodes) t.even_nodes = t.even_nodes && nd.size() == ci->nodes.front().size();
  ci->tuner = std::make_unique<NcclTuner>(t, cfg_.settings);
  ci->channels = ci->tuner->comm_channels();
  // Rings: channel c starts node k's segment at position c mod m; even nodes ascend, odd nodes
  // descend, so consecutive nodes hand over between GPUs of the same local index (same rail),
  // the effect of NCCL_CROSS_NIC pairing and ncclTopoPostset's odd-node ring swap (§3.2).
  ci->rings.resize(static_cast<std::size_t>(ci->channels));
  ci->ring_pos.assign(static_cast<std::size_t>(ci->channels), std::vector<std::uint32_t>(n, 0));
  for (int c = 0; c < ci->channels; ++c) {
    auto& ring = ci->rings[static_cast<std::size_t>(c)];
    for (std::size_t k = 0; k < ci->nodes.size(); ++k) {
      const auto& nd = ci->nodes[k];
      const auto m = static_cast<std::uint32_t>(nd.size());
      const std::uint32_t s = static_cast<std::uint32_t>(c) % m;
      for (std::uint32_t i = 0; i < m; ++i) {
        ring.push_back(k % 2 == 0 ? nd[(s + i) % m] : nd[mod(static_cast<std::int64_t>(s) - 1 - i, m)]);
      }
    }
    for (std::uint32_t i = 0; i < n; ++i) ci->ring_pos[static_cast<std::size_t>(c)][ring[i]] = i;
  }
  comms_.emplace(ranks, ci);
  return ci;
}

std::int64_t NcclPlanner::start_latency_ps(const CollRequest& req) const {
  if (!cfg_.launch_latency || req.ranks == nullptr || req.ranks->size() <= 1 || req.bytes == 0) return 0;
  const TuningDecision d = decision(req);
  if (req.op == CollOp::kAllToAll) {
    const bool across = comm(*req.ranks)->nodes.size() > 1;
    return static_cast<std::int64_t>(std::llround(p2p_latency_us(d.proto, across) * 1e6));
  }
  const double us = tuner(*req.ranks).latency(func_of(req.op), d.algo, d.proto);
  return static_cast<std::int64_t>(std::llround(us * 1e6));
}

std::int64_t NcclPlanner::p2p_start_latency_ps(std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) const {
  if (!cfg_.launch_latency || bytes == 0 || src == dst) return 0;
  const Proto p = bytes <= cfg_.settings.p2p_ll_threshold ? Proto::kLL : Proto::kSimple;
  const std::uint32_t g = std::max<std::uint32_t>(1, cfg_.gpus_per_host);
  return static_cast<std::int64_t>(std::llround(p2p_latency_us(p, src / g != dst / g) * 1e6));
}

models::P2pRoute NcclPlanner::p2p_route(std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) const {
  (void)bytes;
  const NcclSettings& st = cfg_.settings;
  const std::uint32_t g = cfg_.gpus_per_host;
  models::P2pRoute r;
  if (st.pxn_disable != 0 || st.p2p_pxn_level <= 0 || g <= 1) return r;
  if (src / g == dst / g || src % g == dst % g) return r;  // same host (NVLink) or same rail
  r.relay = (src / g) * g + dst % g;
  r.chunk_bytes = std::min(st.chunk_size ? st.chunk_size : st.p2p_net_chunksize, st.buffsize_simple / kNcclSteps);
  r.chunk_bytes = std::max<std::uint64_t>(r.chunk_bytes, 1);
  return r;
}

const NcclTuner& NcclPlanner::tuner(const std::vector<std::uint32_t>& ranks) const { return *comm(ranks)->tuner; }

TuningDecision NcclPlanner::decision(const CollRequest& req) const {
  const auto ci = comm(*req.ranks);
  if (req.op == CollOp::kAllToAll) {
    TuningDecision d;
    d.algo = Algo::kRing;  // not tuned: p2p
    const std::uint64_t per_peer = req.bytes / std::max<std::size_t>(1, req.ranks->size());
    d.proto = per_peer <= cfg_.settings.p2p_ll_threshold ? Proto::kLL : Proto::kSimple;
    d.n_channels = ci->channels;
    return d;
  }
  return ci->tuner->decide(func_of(req.op), req.bytes);
}

namespace {

struct ProtoSizes {
  std::uint64_t chunk = 0;  // data bytes per chunk
  std::uint64_t slice = 0;  // data bytes per slice
  std::uint32_t max_slices = 1;
};

// Chunk and slice data sizes (src/enqueue.cc calcCollChunking, src/include/collectives.h).
ProtoSizes proto_sizes(const NcclSettings& s, Algo a, Proto p, CollOp op) {
  const std::uint64_t buff = p == Proto::kLL ? s.buffsize_ll : p == Proto::kLL128 ? s.buffsize_ll128 : s.buffsize_simple;
  const std::uint64_t step = buff / kNcclSteps;
  std::uint64_t step_data = p == Proto::kLL ? step / 2 : p == Proto::kLL128 ? step / 16 * 15 : step;
  step_data = std::max<std::uint64_t>(step_data, 16);
  ProtoSizes z;
  const bool ring_simple = a == Algo::kRing && p == Proto::kSimple &&
                           (op == CollOp::kAllReduce || op == CollOp::kAllGather || op == CollOp::kReduceScatter);
  const std::uint64_t chunk_steps = ring_simple ? kNcclSteps / 2 : 1;
  const std::uint64_t slice_steps = ring_simple ? kNcclSteps / 4 : 1;
  z.chunk = step_data * chunk_steps;
  z.slice = step_data * slice_steps;
  z.max_slices = static_cast<std::uint32_t>(chunk_steps / slice_steps);
  return z;
}

std::uint32_t nslices(std::uint64_t piece, const ProtoSizes& z) {
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(ceil_div(piece, z.slice), 1, z.max_slices));
}

}  // namespace

RankPlan NcclPlanner::plan(const CollRequest& req) const { return plan_impl(req, cfg_.lazy_rings); }

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
  // The heads and the communicator's ranks live in the planner's cached CommInfo (shared by all
  // ranks of the communicator), kept alive by this closure.
  x->materialize = [this, req, ci]() {
    models::CollRequest r = req;
    r.ranks = &ci->ranks;
    return plan_impl(r, false);
  };
  if (total > 0) out.lazy_nvls = std::move(x);
  return true;
}

RankPlan NcclPlanner::plan_impl(const CollRequest& req, bool lazy) const {
  const auto& ranks = *req.ranks;
  const auto n = static_cast<std::uint32_t>(ranks.size());
  if (n <= 1 || req.bytes == 0) return {};
  const auto ci = comm(ranks);
  const std::uint32_t me = req.my_index;
  const std::uint64_t S = req.bytes;
  const TuningDecision d = decision(req);
  Builder b;
  b.proto = d.proto;
  const auto nc = static_cast<std::uint32_t>(std::max(1, d.n_channels));

  if (req.op == CollOp::kAllToAll) {
    // ---- grouped point-to-point (src/enqueue.cc addP2pToPlan, src/init.cc ncclP2pSchedule) ----
    const NcclSettings& st = cfg_.settings;
    const bool multi = ci->nodes.size() > 1;
    std::uint64_t chunk = st.chunk_size ? st.chunk_size : (multi ? st.p2p_net_chunksize : st.p2p_nvl_chunksize);
    chunk = std::min(chunk, st.buffsize_simple / kNcclSteps);
    const auto p2p_channels = pow2_up(static_cast<std::uint32_t>(
        std::clamp(ci->channels, st.min_p2p_nchannels, st.max_p2p_nchannels)));
    // Channels per peer: network peers NCCL_NCHANNELS_PER_NET_PEER or 2 (halved while
    // 2 x nRanks > 4 x p2p channels); NVLink peers 2 x links; the minimum over peers, pow2.
    std::uint32_t per_peer = 2 * static_cast<std::uint32_t>(nvlinks_per_gpu(cfg_.sm));
    if (multi) {
      std::uint32_t net = st.nchannels_per_net_peer ? static_cast<std::uint32_t>(st.nchannels_per_net_peer) : 2;
      if (!st.nchannels_per_net_peer) {
        while (net > 1 && 2 * n > 4 * p2p_channels) net /= 2;
      }
      per_peer = std::min(per_peer, net);
    }
    per_peer = std::min(pow2_up(per_peer), p2p_channels);
    std::uint32_t nch_min = per_peer;
    while (nch_min > 1 && nch_min * n > p2p_channels) nch_min /= 2;
    const std::uint64_t min_part = multi ? chunk / 2 : chunk / 8;
    const std::uint64_t max_part = multi ? chunk : 32 * chunk;
    struct Part {
      std::uint64_t bytes;
    };
    auto parts_of = [&](std::uint64_t bytes) {
      std::uint32_t np = static_cast<std::uint32_t>(std::min<std::uint64_t>(nch_min, std::max<std::uint64_t>(1, ceil_div(bytes, min_part))));
      std::uint64_t part = std::max(min_part, ceil_div(bytes, np));
      while (part > max_part && np <= per_peer / 2) {
        np *= 2;
        part = ceil_div(bytes, np);
      }
      std::vector<Part> out;
      const std::uint64_t pb = std::max<std::uint64_t>(4096, ceil_div(ceil_div(bytes, np), 4096) * 4096);
      std::uint64_t left = bytes;
      for (std::uint32_t i = 0; i < np && (left > 0 || out.empty()); ++i) {
        const std::uint64_t x = std::min(pb, left);
        out.push_back(Part{x});
        left -= x;
      }
      return out;
    };
    const std::uint64_t max_bytes = chunk_bytes(S, n, 0);
    const std::uint64_t C = ceil_div(std::max<std::uint64_t>(max_bytes, 1), chunk) + 1;
    const std::uint64_t P = 64;
    const std::uint64_t idx_max = std::max<std::uint64_t>(ci->nodes.size(), cfg_.gpus_per_host);
    if (idx_max * P * C >= (1ull << 30)) {
      throw engine::InputError("<simccl>", "alltoall size", "too many p2p chunks for the tag space",
                               "use a larger NCCL_P2P_NET_CHUNKSIZE / NCCL_CHUNK_SIZE");
    }
    auto tag = [&](std::uint64_t kind, std::uint64_t idx, std::uint64_t part, std::uint64_t ch) {
      return checked_tag((kind << 30) | ((idx * P + part) * C + ch));
    };
    const bool pxn = multi && st.pxn_disable == 0 && st.p2p_pxn_level > 0;
    // The relay for a send from member s to member d: the member on s's node with d's local GPU.
    auto relay_of = [&](std::uint32_t s, std::uint32_t dm) -> std::uint32_t {
      if (!pxn || ci->node_of[s] == ci->node_of[dm] || ci->local_gpu[s] == ci->local_gpu[dm]) return kNone;
      return ci->member_on(ci->node_of[s], ci->local_gpu[dm]);
    };
    std::uint16_t ch_base = 0;
    for (std::uint32_t delta = 1; delta < n; ++delta, ++ch_base) {
      const std::uint32_t to = (me + delta) % n;
      const std::uint32_t from = (me + n - delta) % n;
      // Send my block for `to`, directly or to the PXN relay.
      {
        const std::uint64_t bytes = chunk_bytes(S, n, to);
        const std::uint32_t relay = relay_of(me, to);
        const auto parts = parts_of(bytes);
        for (std::uint32_t p = 0; p < parts.size(); ++p) {
          std::uint32_t prev = kNone;
          const std::uint64_t nchunks = std::max<std::uint64_t>(1, ceil_div(parts[p].bytes, chunk));
          for (std::uint64_t c = 0; c < nchunks; ++c) {
            const std::uint64_t sz = std::min(chunk, parts[p].bytes - std::min(parts[p].bytes, c * chunk));
            std::uint32_t dep_buf[1] = {prev};
            const std::span<const std::uint32_t> deps(dep_buf, prev != kNone ? 1 : 0);
            const auto chn = static_cast<std::uint16_t>((ch_base + p) % p2p_channels);
            if (relay == kNone) {
              prev = b.send(ranks[to], sz, tag(0, 0, p, c), deps, chn);
            } else {
              prev = b.send(ranks[relay], sz, tag(1, ci->node_of[to], p, c), deps, chn);
            }
          }
        }
      }
      // Receive the block from `from`, directly or from its relay.
      {
        const std::uint64_t bytes = chunk_bytes(S, n, me);
        const std::uint32_t relay = relay_of(from, me);
        const auto parts = parts_of(bytes);
        for (std::uint32_t p = 0; p < parts.size(); ++p) {
          const std::uint64_t nchunks = std::max<std::uint64_t>(1, ceil_div(parts[p].bytes, chunk));
          const auto chn = static_cast<std::uint16_t>((ch_base + p) % p2p_channels);
          for (std::uint64_t c = 0; c < nchunks; ++c) {
            if (relay == kNone) {
              b.recv(ranks[from], tag(0, 0, p, c), chn);
            } else {
              b.recv(ranks[relay], tag(2, ci->local_gpu[from], p, c), chn);
            }
          }
        }
      }
    }
    // PXN relay duty: forward data of local sources s to remote members on my rail.
    if (pxn) {
      const std::uint32_t my_node = ci->node_of[me];
      for (std::uint32_t s : ci->nodes[my_node]) {
        if (s == me) continue;
        for (std::uint32_t dm = 0; dm < n; ++dm) {
          if (relay_of(s, dm) != me) continue;
          const auto parts = parts_of(chunk_bytes(S, n, dm));
          for (std::uint32_t p = 0; p < parts.size(); ++p) {
            std::uint32_t prev = kNone;
            const std::uint64_t nchunks = std::max<std::uint64_t>(1, ceil_div(parts[p].bytes, chunk));
            const auto chn = static_cast<std::uint16_t>(p % p2p_channels);
            for (std::uint64_t c = 0; c < nchunks; ++c) {
              const std::uint64_t sz = std::min(chunk, parts[p].bytes - std::min(parts[p].bytes, c * chunk));
              const std::uint32_t r = b.recv(ranks[s], tag(1, ci->node_of[dm], p, c), chn, true);
              const std::uint32_t deps[2] = {r, prev};
              prev = b.send(ranks[dm], sz, tag(2, ci->local_gpu[s], p, c),
                            std::span<const std::uint32_t>(deps, prev != kNone ? 2 : 1), chn, true);
            }
          }
        }
      }
    }
    return std::move(b.plan);
  }

  if (d.algo == Algo::kNvls) {
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

  if (d.algo == Algo::kNvlsTree) {
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

  const ProtoSizes z = proto_sizes(cfg_.settings, d.algo, d.proto, req.op);

  if (d.algo == Algo::kTree) {
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
      if (lt) {
        models::LazyTree::Channel x;
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
          prev_up = b.send(parent, sz, tu, deps, chn);
          down_deps = {b.recv(parent, tu + 1, chn)};
        }
        for (std::size_t k = 0; k < children.size(); ++k) {
          std::vector<std::uint32_t> deps = down_deps;
          if (prev_down[k] != kNone) deps.push_back(prev_down[k]);
          prev_down[k] = b.send(children[k], sz, tu + 1, deps, chn);
        }
      }
    }
    if (lt) {
      lt->total = static_cast<std::uint32_t>(lazy_ops);
      const Proto proto = d.proto;
      lt->wire = [proto](std::uint64_t data) { return wire_bytes(proto, data); };
      // The communicator's ranks from the planner's cached CommInfo (shared by all ranks of it),
      // not a copy per rank: that was O(ranks) bytes per rank (4 KB per GPU at 1,024 GPUs).
      lt->materialize = [this, req, ci]() {
        models::CollRequest q = req;
        q.ranks = &ci->ranks;
        return plan_impl(q, false);
      };
      RankPlan out;
      if (lazy_ops > 0) out.lazy_tree = std::move(lt);
      return out;
    }
    return std::move(b.plan);
  }

  // ---- Ring family ----
  if (req.op == CollOp::kBroadcast || req.op == CollOp::kReduce) {
    for (std::uint32_t c = 0; c < nc; ++c) {
      const auto& ring = ci->rings[c];
      const auto& pos = ci->ring_pos[c];
      const std::uint32_t p = pos[me], rp = pos[req.root_index % n];
      const std::uint32_t cp = req.op == CollOp::kBroadcast ? mod(static_cast<std::int64_t>(p) - rp, n)
                                                            : mod(static_cast<std::int64_t>(p) - rp - 1, n);
      const std::uint32_t next = ranks[ring[(p + 1) % n]], prev = ranks[ring[(p + n - 1) % n]];
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

  const bool ar = req.op == CollOp::kAllReduce;
  const std::uint32_t steps = ar ? 2 * (n - 1) : n - 1;
  if (lazy) {
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
    r->piece = [ci, pos = std::move(pos), bc = std::move(bc), ar, n, S, nc, chunk, op](
                   std::uint32_t c, std::uint64_t l, std::uint32_t k, bool theirs) -> std::uint64_t {
      const std::uint32_t from = theirs ? (pos[c] + n - 1) % n : pos[c];
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
    const Proto proto = d.proto;
    r->wire = [proto](std::uint64_t data) { return wire_bytes(proto, data); };
    r->materialize = [this, req, ci]() {  // ranks from the shared CommInfo (see the Tree's)
      models::CollRequest q = req;
      q.ranks = &ci->ranks;
      return plan_impl(q, false);
    };
    RankPlan out;
    out.lazy_channels = std::move(r);
    return out;
  }
  for (std::uint32_t c = 0; c < nc; ++c) {
    const auto& ring = ci->rings[c];
    const std::uint32_t p = ci->ring_pos[c][me];
    const std::uint32_t next = ranks[ring[(p + 1) % n]], prev = ranks[ring[(p + n - 1) % n]];
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
          prev_recv.push_back(b.recv(prev, t, chn));
        }
      }
    }
  }
  return std::move(b.plan);
}

}  // namespace fabricsim::simccl
