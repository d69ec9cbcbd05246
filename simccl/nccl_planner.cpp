#include "simccl/nccl_planner.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "engine/errors.hpp"
#include "simccl/nccl_plan_detail.hpp"
#include "simccl/ring_planner.hpp"

namespace fabricsim::simccl {

using models::CollOp;
using models::CollRequest;
using models::RankPlan;
using namespace plan_detail;

namespace {

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
  const std::uint32_t node_gpus = this->node_gpus();
  for (std::uint32_t m = 0; m < n; ++m) by_host[ranks[m] / node_gpus].push_back(m);
  ci->node_of.assign(n, 0);
  ci->pos_in_node.assign(n, 0);
  ci->local_gpu.assign(n, 0);
  for (auto& [host, members] : by_host) {
    std::sort(members.begin(), members.end(), [&](auto a, auto b) { return ranks[a] < ranks[b]; });
    for (std::uint32_t i = 0; i < members.size(); ++i) {
      ci->node_of[members[i]] = static_cast<std::uint32_t>(ci->nodes.size());
      ci->pos_in_node[members[i]] = i;
      ci->local_gpu[members[i]] = ranks[members[i]] % node_gpus;
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
  t.nics_per_node = cfg_.nics_per_host > 0 ? cfg_.nics_per_host : static_cast<int>(node_gpus);
  t.pci_GBps = cfg_.pci_GBps;
  // NVLS (nvlsSupport): an NVSwitch with multicast under every node's GPUs (fabricsim hosts with
  // > 1 GPU have one; NCCL_TOPO_FILE without NVLink has none) and a rung that models it.
  t.nvswitch_multicast = cfg_.nvls_network && node_gpus > 1 && cfg_.nvswitch;
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
  // Ring (with Broadcast / Reduce chains) and Tree plans carry their per-hop latencies as step
  // delays: the launch is the base latency alone. NVLS / NVLSTree keep the whole model latency.
  if (steps_carry_latency(d.algo)) {
    return static_cast<std::int64_t>(std::llround(NcclTuner::base_latency_us(d.algo, d.proto) * 1e6));
  }
  const double us = tuner(*req.ranks).latency(func_of(req.op), d.algo, d.proto);
  return static_cast<std::int64_t>(std::llround(us * 1e6));
}

bool NcclPlanner::steps_carry_latency(Algo a) const {
  return cfg_.step_latency && (a == Algo::kRing || a == Algo::kTree);
}

std::int64_t NcclPlanner::p2p_start_latency_ps(std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) const {
  if (!cfg_.launch_latency || bytes == 0 || src == dst) return 0;
  const Proto p = bytes <= cfg_.settings.p2p_ll_threshold ? Proto::kLL : Proto::kSimple;
  const std::uint32_t g = std::max<std::uint32_t>(1, node_gpus());
  return static_cast<std::int64_t>(std::llround(p2p_latency_us(p, src / g != dst / g) * 1e6));
}

std::int64_t NcclPlanner::proxy_op_ps() const {
  if (!cfg_.proxy) return 0;
  // getNetOverhead (tuning.cc): NCCL_NET_OVERHEAD, else 1 us (Intel, or not x86; fabricsim's
  // hosts are taken as that class, TuningTopology::intel_cpu).
  const double us = cfg_.settings.net_overhead_us >= 0 ? cfg_.settings.net_overhead_us : 1.0;
  return static_cast<std::int64_t>(std::llround(us * 1e6));
}

models::P2pRoute NcclPlanner::p2p_route(std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) const {
  (void)bytes;
  const NcclSettings& st = cfg_.settings;
  const std::uint32_t g = cfg_.gpus_per_host;
  models::P2pRoute r;
  if (st.pxn_disable != 0 || st.p2p_pxn_level <= 0 || g <= 1) return r;
  if (src / g == dst / g || src % g == dst % g) return r;  // same host (NVLink) or same rail
  if (src / node_gpus() == dst / node_gpus()) return r;    // same NVLink domain (MNNVL)
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

std::int64_t NcclPlanner::step_delay_ps(const CommInfo& ci, Algo a, Proto p, std::uint32_t from, std::uint32_t to) const {
  if (!cfg_.step_latency) return 0;
  const std::uint32_t g = std::max<std::uint32_t>(1, node_gpus());
  return static_cast<std::int64_t>(std::llround(ci.tuner->hop_latency_us(a, p, from / g != to / g) * 1e6));
}

RankPlan NcclPlanner::plan(const CollRequest& req) const { return plan_impl(req, cfg_.lazy_rings); }

std::function<RankPlan()> NcclPlanner::materializer(const CollRequest& req, std::shared_ptr<const CommInfo> ci) const {
  return [this, req, ci]() {
    models::CollRequest r = req;
    r.ranks = &ci->ranks;
    return plan_impl(r, false);
  };
}

RankPlan NcclPlanner::plan_impl(const CollRequest& req, bool lazy) const {
  const auto& ranks = *req.ranks;
  const auto n = static_cast<std::uint32_t>(ranks.size());
  if (n <= 1 || req.bytes == 0) return {};
  const TuningDecision d = decision(req);
  const PlanCtx x{req, lazy, comm(ranks), ranks, n, req.my_index, req.bytes, d,
                  static_cast<std::uint32_t>(std::max(1, d.n_channels))};
  if (req.op == CollOp::kAllToAll) return plan_alltoall(x);
  if (d.algo == Algo::kNvls) return plan_nvls(x);
  if (d.algo == Algo::kNvlsTree) return plan_nvls_tree(x);
  if (d.algo == Algo::kTree) return plan_tree(x);
  if (req.op == CollOp::kBroadcast || req.op == CollOp::kReduce) return plan_chain(x);
  return lazy ? plan_ring_lazy(x) : plan_ring(x);
}

}  // namespace fabricsim::simccl
