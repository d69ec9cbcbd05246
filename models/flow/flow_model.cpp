#include "models/flow/flow_model.hpp"

#include <algorithm>
#include <cmath>

#include "engine/errors.hpp"
#include "engine/rng.hpp"
#include "engine/simulator.hpp"
#include "models/packet/nic.hpp"

namespace fabricsim::models {

using engine::Context;
using engine::SimTime;

Fidelity parse_fidelity(const std::string& name, const std::string& file, const std::string& field) {
  if (name == "packet") return Fidelity::kPacket;
  if (name == "flow") return Fidelity::kFlow;
  if (name == "analytical") return Fidelity::kAnalytical;
  throw engine::InputError(file, field, "'" + name + "' is not a fidelity", "use packet, flow or analytical");
}

const char* fidelity_name(Fidelity f) {
  switch (f) {
    case Fidelity::kPacket: return "packet";
    case Fidelity::kFlow: return "flow";
    case Fidelity::kAnalytical: return "analytical";
  }
  return "packet";
}

LinkIndex::LinkIndex(const Topology& topo) : offset_(topo.num_nodes() + 1, 0) {
  for (engine::LpId n = 0; n < topo.num_nodes(); ++n) {
    offset_[n + 1] = offset_[n] + static_cast<std::uint32_t>(topo.ports(n).size());
  }
}

std::vector<double> LinkIndex::capacities(const Topology& topo) const {
  std::vector<double> cap(size());
  for (engine::LpId n = 0; n < topo.num_nodes(); ++n) {
    const auto& ports = topo.ports(n);
    for (std::uint32_t p = 0; p < ports.size(); ++p) cap[link(n, p)] = static_cast<double>(ports[p].rate_bps);
  }
  return cap;
}

FlowPath route_path(const Topology& topo, const LinkIndex* index, std::uint32_t src, std::uint32_t dst,
                    std::uint64_t flow_hash) {
  FlowPath p;
  engine::LpId at = src;
  while (at != dst) {
    if (p.hops == MaxMinSolver::kMaxHops) {
      throw engine::InternalError("flow model: route from gpu " + std::to_string(src) + " to gpu " +
                                  std::to_string(dst) + " longer than 8 hops");
    }
    const std::uint32_t port = topo.route(at, dst, flow_hash);
    const Port& link = topo.ports(at)[port];
    if (index != nullptr) p.link[p.hops] = index->link(at, port);
    p.rate_bps[p.hops] = link.rate_bps;
    p.latency_ps[p.hops] = link.latency_ps;
    if (p.hops == 0) {
      p.mtu_bytes = link.mtu_bytes;
      p.first_port = port;
    }
    ++p.hops;
    at = link.peer;
  }
  return p;
}

TransferTiming transfer_timing(const FlowPath& path, std::uint64_t bytes) {
  TransferTiming t;
  const std::uint64_t mtu = std::max<std::uint32_t>(1, path.mtu_bytes);
  const std::uint64_t last = bytes == 0 ? 0 : (bytes - 1) % mtu + 1;
  t.rest_bytes = bytes - last;
  t.bottleneck_bps = path.rate_bps[0];
  for (std::uint32_t i = 0; i < path.hops; ++i) t.bottleneck_bps = std::min(t.bottleneck_bps, path.rate_bps[i]);
  t.head_ps = path.latency_ps[0];
  if (t.bottleneck_bps == path.rate_bps[0]) {
    // Exactly what the packet-level source port does: whole-ps serialization per packet.
    t.drain_ps = static_cast<SimTime>(t.rest_bytes / mtu) * engine::serialization_ps(mtu, path.rate_bps[0]);
  } else {
    t.drain_ps = engine::serialization_ps(t.rest_bytes, t.bottleneck_bps);
  }
  t.tail_ps = engine::serialization_ps(last, path.rate_bps[0]);
  t.last_first_ps = t.tail_ps;
  for (std::uint32_t i = 1; i < path.hops; ++i) {
    t.tail_ps += engine::serialization_ps(last, path.rate_bps[i]) + path.latency_ps[i];
  }
  t.last_share_ps = engine::serialization_ps(last, t.bottleneck_bps == path.rate_bps[0] ? path.rate_bps[0] : t.bottleneck_bps);
  if (t.rest_bytes > 0 && last < mtu && path.hops > 1) {
    // Packet train through store-and-forward hops (a tandem of FIFO stations): the last packet
    // leaves hop h at t_0 + max over monotone paths through the (packet, hop) grid of the sum of
    // per-packet serializations (plus every hop's latency once). With n - 1 full packets (a_i =
    // ser(MTU, R_i)) and a last one of p < MTU bytes (c_i = ser(p, R_i)) the path turning to the
    // last packet at hop j costs sum_{i<=j} a_i + (n-2) max_{i<=j} a_i + sum_{i>=j} c_i. The
    // drain + tail above is the j = 1 path ((n-1) a_b + sum c_i), exact when p = MTU; a short
    // last packet instead waits behind the full packet before it at each later hop (a 4,097 B
    // flow over 2 equal hops: (2-1) x (ser(4096) - ser(1)) more). train_ps is the difference.
    const std::int64_t n = static_cast<std::int64_t>(t.rest_bytes / mtu) + 1;
    SimTime a_b = 0, c_sum = 0;
    for (std::uint32_t i = 0; i < path.hops; ++i) {
      a_b = std::max(a_b, engine::serialization_ps(mtu, path.rate_bps[i]));
      c_sum += engine::serialization_ps(last, path.rate_bps[i]);
    }
    const SimTime ref = static_cast<SimTime>(n - 1) * a_b + c_sum;
    SimTime a_pre = 0, a_max = 0, c_suf = c_sum, best = ref;
    for (std::uint32_t j = 0; j < path.hops; ++j) {
      const SimTime a = engine::serialization_ps(mtu, path.rate_bps[j]);
      a_pre += a;
      a_max = std::max(a_max, a);
      best = std::max(best, a_pre + static_cast<SimTime>(n - 2) * a_max + c_suf);
      c_suf -= engine::serialization_ps(last, path.rate_bps[j]);
    }
    t.train_ps = best - ref;
    t.tail_ps += t.train_ps;
  }
  return t;
}

std::uint64_t coarse_part_bytes(const Packet& head, const Topology& topo) {
  const std::uint32_t parts = (head.conn & 0xFFu) + 1;
  if (parts == 1) return head.flow_bytes;
  // The MTU of the GPU's port toward dst, as Nic::split_message takes it.
  const std::uint32_t mtu = topo.ports(head.src_rank)[topo.route(head.src_rank, head.dst_rank, 0)].mtu_bytes;
  return Nic::part_bytes(head.flow_bytes, parts, head.conn >> 8 & 0xFFu, mtu);
}

SimTime coarse_offset_ps(const Topology& topo) {
  return std::min(topo.spec().nvlink_latency_ps, topo.spec().nic_latency_ps);
}

std::vector<std::uint32_t> nvls_local_members(const Topology& topo, const std::vector<std::uint32_t>& members,
                                              std::uint32_t gpu) {
  std::vector<std::uint32_t> out;
  const auto& gp = topo.ports(gpu);
  if (gp.empty()) return out;
  for (std::uint32_t m : members) {
    const auto& mp = topo.ports(m);
    if (!mp.empty() && mp[0].peer == gp[0].peer) out.push_back(m);
  }
  return out;
}

namespace {

// NVLS at the analytical rung: the GPU -> NVSwitch transfer alone at min(NVLink, nvls) rate, then
// the NVSwitch -> GPU hop. A reduce contribution is announced to the owner (which counts them,
// GpuRankLp); a multicast arrives at every member.
void start_nvls_analytical(const Topology& topo, const Packet& head, Context& ctx,
                           const std::vector<std::uint32_t>& members, std::vector<SimTime>* port_free) {
  const Port& up = topo.ports(head.src_rank)[0];
  FlowPath path;
  path.hops = 1;
  path.rate_bps[0] = std::min<std::uint64_t>(up.rate_bps, topo.spec().nvls_bps);
  path.latency_ps[0] = up.latency_ps;
  path.mtu_bytes = up.mtu_bytes;
  const std::uint64_t bytes = head.flow_bytes;
  const TransferTiming t = transfer_timing(path, bytes);
  const std::uint64_t last = bytes - t.rest_bytes;
  // The sender's NVLink port clock (port 0), as for its other transfers.
  SimTime now = ctx.now();
  if (port_free != nullptr) {
    if (port_free->empty()) port_free->resize(1, 0);
    now = std::max(now, (*port_free)[0]);
    (*port_free)[0] = now + t.drain_ps + engine::serialization_ps(last, path.rate_bps[0]);
  }
  const SimTime at_switch = now + t.head_ps + t.drain_ps + t.tail_ps;
  auto down = [&](std::uint32_t m) {
    const Port& dp = topo.ports(m)[0];
    const Port& sp = topo.ports(dp.peer)[dp.peer_port];
    return engine::serialization_ps(last, sp.rate_bps) + sp.latency_ps;
  };
  if (coarse_nvls(head) == kNvlsMulticast) {
    for (std::uint32_t m : nvls_local_members(topo, members, head.src_rank)) {
      Packet c = head;
      c.dst_rank = m;
      ctx.send(m, at_switch + down(m), kEvFlowArrive, c);
    }
  } else {
    ctx.send(head.dst_rank, at_switch + down(head.dst_rank), kEvFlowArrive, head);
  }
  ctx.send(ctx.self(), now + t.drain_ps + engine::serialization_ps(last, path.rate_bps[0]), kEvFlowSent, head.flow_id);
}

}  // namespace

void start_coarse_flow(const Topology& topo, Fidelity fidelity, engine::LpId net_lp, const Packet& head,
                       Context& ctx, std::vector<SimTime>* port_free,
                       const std::vector<std::uint32_t>* nvls_members, const FoldMap* fold) {
  if (fidelity == Fidelity::kAnalytical && coarse_nvls(head) != kNvlsNone) {
    if (nvls_members == nullptr) throw engine::InternalError("analytical NVLS flow without members");
    start_nvls_analytical(topo, head, ctx, *nvls_members, port_free);
    return;
  }
  if (fidelity == Fidelity::kFlow) {
    // The network LP routes the whole path; it runs D behind the GPUs (coarse_offset_ps).
    ctx.send(net_lp, ctx.now() + coarse_offset_ps(topo), kEvFlowStart, head);
    return;
  }
  const FlowPath path = route_path(topo, nullptr, head.src_rank, head.dst_rank, head.flow_hash);
  // Analytical: alone on the route beyond the sender; the sender's own port serializes its
  // transfers in the order they are posted (FIFO, as one egress queue would).
  const std::uint64_t bytes = coarse_part_bytes(head, topo);
  const TransferTiming t = transfer_timing(path, bytes);
  SimTime start = ctx.now();
  const SimTime last_ser = engine::serialization_ps(bytes - t.rest_bytes, path.rate_bps[0]);
  if (port_free != nullptr) {
    const std::uint32_t port = path.first_port;
    if (port >= port_free->size()) port_free->resize(port + 1, 0);
    SimTime& free_at = (*port_free)[port];
    start = std::max(start, free_at);
    free_at = start + t.drain_ps + last_ser;
  }
  Packet arrive = head;
  const std::uint32_t to = fold != nullptr ? fold->mirror(arrive) : arrive.dst_rank;
  ctx.send(to, start + t.head_ps + t.drain_ps + t.tail_ps, kEvFlowArrive, arrive);
  ctx.send(ctx.self(), start + t.drain_ps + last_ser, kEvFlowSent, head.flow_id);
}

void FlowSource::post(const Topology& topo, engine::LpId net_lp, const Packet& head, Context& ctx,
                      const FoldMap* fold) {
  const SimTime d = coarse_offset_ps(topo);
  SimTime at = ctx.now();  // when the port is through this GPU's direct single-packet flows
  if (coarse_nvls(head) == kNvlsNone && head.dst_rank != head.src_rank) {
    const std::uint64_t bytes = coarse_part_bytes(head, topo);
    Entry& e = cache_[(head.flow_hash ^ head.dst_rank) & 3u];
    if (e.hash != head.flow_hash || e.dst != head.dst_rank || e.bytes != bytes) {
      e.hash = head.flow_hash;
      e.dst = head.dst_rank;
      e.bytes = bytes;
      // The egress port is route_path's first hop. A flow of more than one packet (beyond that
      // link's MTU: transfer_timing's rest_bytes > 0) always goes to the network LP, so only the
      // port is needed; the whole route and its timing only for a single packet. (An all-to-all
      // rank posts to 15 peers in turn, more than the 4 entries hold: walking whole routes for
      // those was ~2% of a MoE run.)
      const std::uint32_t first = topo.route(head.src_rank, head.dst_rank, head.flow_hash);
      e.port = static_cast<std::uint16_t>(first);
      e.direct = false;
      e.delay_ps = e.ser_ps = 0;
      if (bytes <= topo.ports(head.src_rank)[first].mtu_bytes) {
        const FlowPath path = route_path(topo, nullptr, head.src_rank, head.dst_rank, head.flow_hash);
        const TransferTiming t = transfer_timing(path, bytes);
        const SimTime delay = t.head_ps + t.tail_ps;
        e.delay_ps = static_cast<std::uint32_t>(std::min<SimTime>(delay, 0xFFFFFFFF));
        e.ser_ps = static_cast<std::uint32_t>(std::min<SimTime>(t.last_first_ps, 0xFFFFFFFF));
        // The network LP sends this arrival at t0 + D with delay delay_ps - D; from here it is
        // sent at t0 with delay_ps, which must not undercut the lookahead (<= D, jobs/run.cpp).
        // (Times of 2^32 ps = 4.3 ms and more, ports beyond 65,535: through the network LP.)
        e.direct = t.rest_bytes == 0 && delay >= d && delay > 0 && delay < 0xFFFFFFFF &&
                   t.last_first_ps < 0xFFFFFFFF && path.first_port <= 0xFFFF;
      }
    }
    SimTime& clock = port_free(e.port);
    at = std::max(at, clock);
    if (outstanding_ == 0 && e.direct) {
      // No flow of this GPU is at the network LP, so its port clock there is idle (each of
      // its flows was reported sent D after it left the port): this clock is the whole story.
      clock = at + e.ser_ps;
      ++direct_;
      if (fold != nullptr) {
        Packet arrive = head;
        const std::uint32_t to = fold->mirror(arrive);
        ctx.send(to, at + e.delay_ps, kEvFlowArrive, arrive);
      } else {
        ctx.send(head.dst_rank, at + e.delay_ps, kEvFlowArrive, head);
      }
      ctx.send(ctx.self(), at + e.ser_ps + 2 * d, kEvFlowSent, head.flow_id);
      return;
    }
  }
  ++outstanding_;
  ++net_;
  ctx.send(net_lp, at + d, kEvFlowStart, head);
}

void FlowSource::net_sent() {
  if (outstanding_ == 0) throw engine::InternalError("flow rung: a send report for no outstanding flow");
  --outstanding_;
}

namespace {
// Link capacities plus one virtual link per GPU: its NVLS issue rate (cluster.nvls_bandwidth),
// which every NVLS uplink flow of that GPU also crosses.
std::vector<double> capacities_with_nvls(const Topology& topo, const LinkIndex& index) {
  std::vector<double> cap = index.capacities(topo);
  for (engine::LpId g = 0; g < topo.num_gpus(); ++g) cap.push_back(static_cast<double>(topo.spec().nvls_bps));
  return cap;
}
}  // namespace

FlowNetLp::FlowNetLp(const Topology& topo, engine::LpId id)
    : topo_(topo),
      id_(id),
      index_(topo),
      solver_(capacities_with_nvls(topo, index_)),
      nvls_link0_(index_.size()),
      link_bytes_(index_.size(), 0),
      sent_delay_ps_(coarse_offset_ps(topo)) {
  port_free_.assign(index_.link(topo.num_gpus(), 0), 0);
  nvls_gen_.assign(topo.num_gpus(), 1);
  nvls_next_.assign(topo.num_gpus(), 0);
  // Eight entries per GPU to start (a ring needs one route per GPU); route_of doubles the cache
  // while more than 1/64 of its look-ups miss, up to 64 per GPU and 2^20 entries (a MoE rank keeps
  // ~21 keys in use: EP all-to-all, DP ring, TP, PP; at a fixed 8 per GPU capped at 16,384 a
  // 9,216-GPU MoE iteration missed most look-ups).
  std::size_t n = 64;
  while (n < 8 * std::size_t{topo.num_gpus()} && n < 16384) n *= 2;
  routes_.resize(n);
  route_tags_.assign(n, 0);
  route_cap_ = n;
  while (route_cap_ < 64 * std::size_t{topo.num_gpus()} && route_cap_ < (std::size_t{1} << 20)) route_cap_ *= 2;
}

std::uint64_t FlowNetLp::route_key_hash(const Packet& head) const {
  const std::uint64_t pair = static_cast<std::uint64_t>(head.src_rank) << 32 | head.dst_rank;
  const std::uint64_t msg = static_cast<std::uint64_t>(head.flow_bytes) * 0xC2B2AE3D27D4EB4Full ^
                            static_cast<std::uint64_t>(head.conn) << 40;
  return engine::mix64(pair * 0x9E3779B97F4A7C15ull ^ head.flow_hash ^ msg);
}

void FlowNetLp::prefetch_route(const Packet& head) const {
  const std::uint64_t h = route_key_hash(head);
  const std::size_t base = (h & (routes_.size() / kRouteWays - 1)) * kRouteWays;
  __builtin_prefetch(&route_tags_[base]);
  const char* p = reinterpret_cast<const char*>(&routes_[base]);
  for (std::size_t i = 0; i < kRouteWays * sizeof(RouteEntry); i += 64) __builtin_prefetch(p + i);
}

void FlowNetLp::set_route(RouteEntry& e, const FlowPath& path, std::uint64_t bytes) {
  e.hops = path.hops;
  e.mtu = path.mtu_bytes;
  std::copy(path.link, path.link + path.hops, e.link);
  e.timing = transfer_timing(path, bytes);
}

const FlowNetLp::RouteEntry& FlowNetLp::route_of(const Packet& head, std::uint64_t bytes) {
  // Growth: per max(2^16, twice its entries) look-ups, double while more than 1/64 missed (the entries are recomputed on
  // demand: a pure cache, results do not depend on its size).
  ++route_lookups_total_;
  if (++route_lookups_ >= std::max<std::uint64_t>(std::uint64_t{1} << 16, 2 * routes_.size())) {
    if (route_misses_ * 64 > route_lookups_ && routes_.size() < route_cap_) {
      // Twice the sets; the entries move to their sets in the larger table (no cold start).
      std::vector<RouteEntry> old(routes_.size() * 2);
      std::vector<std::uint32_t> old_tags(old.size(), 0);
      old.swap(routes_);
      old_tags.swap(route_tags_);
      const std::size_t sets = routes_.size() / kRouteWays;
      for (std::size_t i = 0; i < old.size(); ++i) {
        if (old_tags[i] == 0) continue;
        const std::size_t base = (old[i].key_hash & (sets - 1)) * kRouteWays;
        for (std::size_t w = 0; w < kRouteWays; ++w) {
          if (route_tags_[base + w] == 0) {
            route_tags_[base + w] = old_tags[i];
            routes_[base + w] = old[i];
            break;
          }
        }
      }
    }
    route_lookups_ = route_misses_ = 0;
  }
  // Four-way set associative: a miss takes an empty way, else the ways in turn (round robin over
  // all sets: no per-set state to read or write on a hit).
  const std::uint64_t h = route_key_hash(head);
  const std::size_t base = (h & (routes_.size() / kRouteWays - 1)) * kRouteWays;
  const auto tag = static_cast<std::uint32_t>(h >> 32) | 1u;
  std::size_t empty = kRouteWays;
  for (std::size_t w = 0; w < kRouteWays; ++w) {
    const std::uint32_t t = route_tags_[base + w];
    if (t == tag) {
      const RouteEntry& x = routes_[base + w];
      if (x.src == head.src_rank && x.dst == head.dst_rank && x.hash == head.flow_hash && x.bytes == bytes) return x;
    } else if (t == 0 && empty == kRouteWays) {
      empty = w;
    }
  }
  ++route_misses_;
  ++route_misses_total_;
  const std::size_t way = empty < kRouteWays ? empty : static_cast<std::size_t>(route_clock_++ % kRouteWays);
  route_tags_[base + way] = tag;
  RouteEntry& e = routes_[base + way];
  e.key_hash = h;
  const FlowPath path = route_path(topo_, &index_, head.src_rank, head.dst_rank, head.flow_hash);
  e.src = head.src_rank;
  e.dst = head.dst_rank;
  e.hash = head.flow_hash;
  e.bytes = bytes;
  set_route(e, path, bytes);
  if (!canon_.empty()) {
    e.crosses_switches = false;
    for (std::uint32_t i = 0; i < e.hops; ++i) {
      e.crosses_switches = e.crosses_switches || switch_link_[e.link[i]] != 0;
      e.link[i] = canon_[e.link[i]];
    }
  }
  return e;
}

void FlowNetLp::set_fold(const FoldMap* fold) {
  fold_ = fold != nullptr && fold->active() ? fold : nullptr;
  canon_.clear();
  switch_link_.clear();
  if (fold_ == nullptr) return;
  canon_.resize(index_.size());
  switch_link_.assign(index_.size(), 0);
  for (engine::LpId n = 0; n < topo_.num_nodes(); ++n) {
    const auto& ports = topo_.ports(n);
    for (std::uint32_t p = 0; p < ports.size(); ++p) {
      const std::uint32_t l = index_.link(n, p);
      canon_[l] = l;
      if (topo_.kind(n) == NodeKind::kGpu) {
        const std::uint32_t r = fold_->rep(n);
        if (r == n) continue;
        if (topo_.ports(r).size() != ports.size() || topo_.ports(r)[p].rate_bps != ports[p].rate_bps) {
          throw engine::InternalError("fold: gpu " + std::to_string(n) + " and its representative " +
                                      std::to_string(r) + " have different ports");
        }
        canon_[l] = index_.link(r, p);
        continue;
      }
      const engine::LpId peer = ports[p].peer;
      if (topo_.kind(peer) != NodeKind::kGpu) {
        switch_link_[l] = 1;
        continue;
      }
      const std::uint32_t r = fold_->rep(peer);
      if (r == peer) continue;
      // The representative GPU's port with the same index reaches its own switch of this role.
      const Port& rp = topo_.ports(r).at(ports[p].peer_port);
      canon_[l] = index_.link(rp.peer, rp.peer_port);
    }
  }
}

FlowPath FlowNetLp::nvls_path(const Packet& head, std::uint8_t stage) const {
  FlowPath p;
  p.hops = 1;
  if (stage == 1) {
    const Port& up = topo_.ports(head.src_rank)[0];
    if (topo_.kind(up.peer) != NodeKind::kNvSwitch) {
      throw engine::InternalError("flow model: NVLS flow from gpu " + std::to_string(head.src_rank) + " without an NVSwitch");
    }
    p.link[0] = index_.link(head.src_rank, 0);
    p.rate_bps[0] = std::min<std::uint64_t>(up.rate_bps, topo_.spec().nvls_bps);
    p.latency_ps[0] = up.latency_ps;
    p.mtu_bytes = up.mtu_bytes;
  } else {
    const Port& gp = topo_.ports(head.dst_rank)[0];
    const Port& sp = topo_.ports(gp.peer)[gp.peer_port];
    p.link[0] = index_.link(gp.peer, gp.peer_port);
    p.rate_bps[0] = sp.rate_bps;
    p.latency_ps[0] = sp.latency_ps;
    p.mtu_bytes = sp.mtu_bytes;
  }
  return p;
}

FlowNetLp::NvlsKey FlowNetLp::nvls_key(const Packet& head) {
  // A reduction is the owner's (head.dst_rank), a multicast its sender's; their tags differ.
  const std::uint32_t who = coarse_nvls(head) == kNvlsMulticast ? head.src_rank : head.dst_rank;
  return NvlsKey{who, head.group, head.instance, static_cast<std::uint32_t>(head.tag)};
}

void FlowNetLp::nvls_up_started(const Packet& h, SimTime up_latency_ps) {
  if (groups_ == nullptr || h.group >= groups_->size()) {
    throw engine::InternalError("flow model: NVLS flow of unknown communicator " + std::to_string(h.group));
  }
  const bool mc = coarse_nvls(h) == kNvlsMulticast;
  const auto members = nvls_local_members(topo_, (*groups_)[h.group].ranks, h.src_rank);
  NvlsRed& e = nvls_red_[nvls_key(h)];
  if (e.need == 0) e.need = mc ? 1u : static_cast<std::uint32_t>(members.size());
  ++e.started;
  e.up_latency_ps = std::max(e.up_latency_ps, up_latency_ps);
  if (mc) {
    // multimem.st: the switch copies each packet to every member's port as it arrives, so the
    // copies start with the uplink flow (their arrival is bounded by its drain).
    if (e.started != 1) throw engine::InternalError("flow model: NVLS multicast of gpu " + std::to_string(h.src_rank) + " twice");
    for (std::uint32_t m : members) {
      Packet c = h;
      c.dst_rank = m;
      pending_.push_back(Pending{c, true, 2});
    }
    e.down_left = static_cast<std::uint32_t>(members.size());
    e.downs_created = true;
    return;
  }
  // multimem.ld_reduce: packet i of the reduced chunk leaves once packet i of every contribution
  // arrived, so the owner's downlink flow starts once every contribution has started.
  if (h.src_rank == h.dst_rank) {
    e.owner = h;
    e.has_owner = true;
  }
  if (e.started < e.need) return;
  if (!e.has_owner || e.started > e.need) {
    throw engine::InternalError("flow model: NVLS reduction for gpu " + std::to_string(h.dst_rank) + " inconsistent");
  }
  pending_.push_back(Pending{e.owner, true, 2});
  e.down_left = 1;
  e.downs_created = true;
}

void FlowNetLp::nvls_arrive(const NvlsRed& e, const NvlsRed::Down& d, Context& ctx) const {
  // The last packet leaves the switch port when the downlink's share has carried the flow's
  // bytes (d.at_ps) and no earlier than one serialization after the switch has it.
  const FlowPath down = nvls_path(d.head, 2);
  const std::uint64_t bytes = coarse_part_bytes(d.head, topo_);
  const std::uint64_t last = bytes == 0 ? 0 : (bytes - 1) % down.mtu_bytes + 1;
  const SimTime out = std::max(d.at_ps, e.up_done_ps + engine::serialization_ps(last, down.rate_bps[0]));
  // The network LP's clock runs D (sent_delay_ps_) behind the GPUs; both NVLink hops' latencies.
  ctx.send(d.head.dst_rank, out + e.up_latency_ps + d.latency_ps - sent_delay_ps_, kEvFlowArrive, d.head);
}

void FlowNetLp::nvls_forget(std::uint32_t f, bool up) {
  auto* e = act_[f].chunk;
  auto& v = up ? e->up_flows : e->down_flows;
  const auto pos = std::find(v.begin(), v.end(), f);
  if (pos != v.end()) v.erase(pos);
}

void FlowNetLp::nvls_up_drained(const Packet& h, SimTime at_ps, Context& ctx) {
  const auto it = nvls_red_.find(nvls_key(h));
  if (it == nvls_red_.end()) throw engine::InternalError("flow model: NVLS uplink flow of gpu " + std::to_string(h.src_rank) + " never started");
  NvlsRed& e = it->second;
  e.up_done_ps = std::max(e.up_done_ps, at_ps);
  if (++e.drained < e.need) return;
  for (const NvlsRed::Down& d : e.early) nvls_arrive(e, d, ctx);
  e.down_left -= static_cast<std::uint32_t>(e.early.size());
  e.early.clear();
  nvls_maybe_dead(&e, h);
}

void FlowNetLp::nvls_maybe_dead(NvlsRed* e, const Packet& h) {
  // Erased at the instant's end: flows and this instant's cap refresh still point to it.
  if (e->dead || !e->downs_created || e->down_left != 0 || !e->up_flows.empty() || !e->down_flows.empty()) return;
  e->dead = true;
  nvls_dead_.push_back(nvls_key(h));
}

void FlowNetLp::nvls_down_drained(const Packet& h, SimTime at_ps, SimTime down_latency_ps, Context& ctx) {
  const auto it = nvls_red_.find(nvls_key(h));
  if (it == nvls_red_.end() || it->second.down_left == 0) {
    throw engine::InternalError("flow model: NVLS downlink flow to gpu " + std::to_string(h.dst_rank) + " without its chunk");
  }
  NvlsRed& e = it->second;
  const NvlsRed::Down d{h, at_ps, down_latency_ps};
  if (e.drained < e.need) {
    e.early.push_back(d);  // ahead of its supply: reported when the last contribution is in
    return;
  }
  nvls_arrive(e, d, ctx);
  --e.down_left;
  nvls_maybe_dead(&e, h);
}

std::size_t FlowNetLp::NvlsKeyHash::operator()(const NvlsKey& k) const noexcept {
  return static_cast<std::size_t>(engine::mix64((static_cast<std::uint64_t>(k.dst) << 32 | k.group) ^
                                                engine::mix64(static_cast<std::uint64_t>(k.instance) << 32 | k.tag)));
}

std::size_t FlowNetLp::TimeSet::home(SimTime t) const {
  return static_cast<std::size_t>(engine::mix64(static_cast<std::uint64_t>(t))) & (keys_.size() - 1);
}

bool FlowNetLp::TimeSet::insert(SimTime t) {
  if (2 * (size_ + 1) > keys_.size()) {  // grow at half load
    std::vector<SimTime> old(std::max<std::size_t>(64, 2 * keys_.size()), kEmpty);
    old.swap(keys_);
    size_ = 0;
    for (SimTime k : old) {
      if (k != kEmpty) insert(k);
    }
  }
  const std::size_t mask = keys_.size() - 1;
  std::size_t i = home(t);
  while (keys_[i] != kEmpty) {
    if (keys_[i] == t) return false;
    i = (i + 1) & mask;
  }
  keys_[i] = t;
  ++size_;
  return true;
}

void FlowNetLp::TimeSet::erase(SimTime t) {
  if (keys_.empty()) return;
  const std::size_t mask = keys_.size() - 1;
  std::size_t i = home(t);
  while (keys_[i] != t) {
    if (keys_[i] == kEmpty) return;
    i = (i + 1) & mask;
  }
  keys_[i] = kEmpty;
  --size_;
  // Backward shift: move later entries of the probe run into the hole when their home allows.
  for (std::size_t j = (i + 1) & mask; keys_[j] != kEmpty; j = (j + 1) & mask) {
    const std::size_t h = home(keys_[j]);
    if (((j - h) & mask) >= ((j - i) & mask)) {
      keys_[i] = keys_[j];
      keys_[j] = kEmpty;
      i = j;
    }
  }
}

void FlowNetLp::schedule(SimTime t, Context& ctx) {
  if (ticks_.insert(t)) ctx.send(id_, t, kEvNetTick);
}

void FlowNetLp::handle(const engine::Event& ev, Context& ctx) {
  switch (ev.kind) {
    case kEvFlowStart:
      {
        const Packet h = ev.get<Packet>();
        const bool nvls = coarse_nvls(h) != kNvlsNone;
        pending_.push_back(Pending{h, false, static_cast<std::uint8_t>(nvls ? 1 : 0)});
        if (!nvls) prefetch_route(h);  // read at this instant's tick
      }
      // Ticks sort after every GPU event of the same instant (this LP has the largest id), so
      // all flows starting at this instant are solved together.
      schedule(ctx.now(), ctx);
      return;
    case kEvNetTick:
      ticks_.erase(ctx.now());
      tick(ctx);
      return;
    default:
      throw engine::InternalError("flow network: unexpected event kind " + std::to_string(ev.kind));
  }
}

void FlowNetLp::report(std::uint32_t f, Context& ctx) {
  Active& a = act_[f];
  a.reported = true;
  if (a.down) {  // NVLS downlink: its arrival also waits for its supply (nvls_arrive)
    nvls_down_drained(a.head, ctx.now() + a.tail_ps, a.head_ps, ctx);
    return;
  }
  // The first hop's latency beyond D (the offset this LP runs behind the GPUs), then the tail.
  if (!a.nvls) {
    Packet arrive = a.head;
    const std::uint32_t to = fold_ != nullptr ? fold_->mirror(arrive) : arrive.dst_rank;
    ctx.send(to, ctx.now() + a.head_ps - sent_delay_ps_ + a.tail_ps, kEvFlowArrive, arrive);
  }
  ctx.send(a.head.src_rank, ctx.now() + sent_delay_ps_, kEvFlowSent, a.head.flow_id);
  if (a.nvls) nvls_up_drained(a.head, ctx.now() + a.tail_ps, ctx);  // the switch has the last byte
}

void FlowNetLp::drained(std::uint32_t f, Context& ctx) {
  Active& a = act_[f];
  if (!a.reported) report(f, ctx);
  if (a.down) {
    nvls_forget(f, false);
    nvls_maybe_dead(a.chunk, a.head);
  } else {
    if (a.nvls) {
      nvls_forget(f, true);
      nvls_touched_.push_back(a.chunk);  // its downlink flows' cap changes
      nvls_maybe_dead(a.chunk, a.head);
      nvls_emptied_.push_back(a.head.src_rank);
    }
    release_connection(a.head);
  }
}

std::size_t FlowNetLp::QpKeyHash::operator()(const QpKey& k) const noexcept {
  return static_cast<std::size_t>(engine::mix64(k.pair * 0x9E3779B97F4A7C15ull ^ k.qp));
}

FlowNetLp::QpKey FlowNetLp::qp_key(const Packet& head) {
  return QpKey{static_cast<std::uint64_t>(head.src_rank) << 32 | head.dst_rank, coarse_conn_qp(head.conn)};
}

std::size_t FlowNetLp::QpSet::find_slot(const QpKey& k) const {
  const std::size_t mask = keys_.size() - 1;
  std::size_t i = QpKeyHash{}(k) & mask;
  while (used_[i] && !(keys_[i] == k)) i = (i + 1) & mask;
  return i;
}

bool FlowNetLp::QpSet::insert(const QpKey& k) {
  if (2 * (size_ + 1) > keys_.size()) {  // grow at half load
    std::vector<QpKey> old_keys(std::max<std::size_t>(64, 2 * keys_.size()));
    std::vector<std::uint8_t> old_used(old_keys.size(), 0);
    old_keys.swap(keys_);
    old_used.swap(used_);
    for (std::size_t i = 0; i < old_keys.size(); ++i) {
      if (old_used[i]) {
        const std::size_t j = find_slot(old_keys[i]);
        keys_[j] = old_keys[i];
        used_[j] = 1;
      }
    }
  }
  const std::size_t i = find_slot(k);
  if (used_[i]) return false;
  keys_[i] = k;
  used_[i] = 1;
  ++size_;
  return true;
}

void FlowNetLp::QpSet::erase(const QpKey& k) {
  if (keys_.empty()) return;
  const std::size_t mask = keys_.size() - 1;
  std::size_t i = find_slot(k);
  if (!used_[i]) return;
  used_[i] = 0;
  --size_;
  // Backward shift: move later entries of the probe run into the hole when their home allows.
  for (std::size_t j = (i + 1) & mask; used_[j]; j = (j + 1) & mask) {
    const std::size_t home = QpKeyHash{}(keys_[j]) & mask;
    if (((j - home) & mask) >= ((j - i) & mask)) {
      keys_[i] = keys_[j];
      used_[i] = 1;
      used_[j] = 0;
      i = j;
    }
  }
}

void FlowNetLp::release_connection(const Packet& head) {
  const QpKey key = qp_key(head);
  auto it = waiting_.empty() ? waiting_.end() : waiting_.find(key);
  if (it == waiting_.end()) {
    busy_.erase(key);
    return;
  }
  const Packet next = it->second.front();  // starts at this instant; inherits the pair
  pending_.push_back(Pending{next, true, static_cast<std::uint8_t>(coarse_nvls(next) != kNvlsNone ? 1 : 0)});
  it->second.pop_front();
  if (it->second.empty()) waiting_.erase(it);
}

void FlowNetLp::apply_rate(std::uint32_t f, double r, SimTime now) {
  Active& a = act_[f];
  const bool fresh = a.last == now && a.rate == 0;
  if (!fresh && r == a.rate) return;  // unchanged: keep its scheduled drain (no drift)
  if (fresh && !a.shared && r == static_cast<double>(a.first_rate)) {
    a.rate = r;  // alone at the bottleneck rate: the exact per-packet drain set above
  } else {
    if (!fresh) a.rem_bits = std::max(0.0, a.rem_bits - a.rate * static_cast<double>(now - a.last) * 1e-12);
    a.last = now;
    a.rate = r;
    a.shared = true;
    const double ps = a.rem_bits <= 0 ? 0.0 : r > 0 ? std::ceil(a.rem_bits * 1e12 / r) : HUGE_VAL;
    a.drain = now + (ps >= static_cast<double>(engine::kMaxSimTime) ? engine::kMaxSimTime
                                                                   : static_cast<SimTime>(ps));
  }
  ++a.version;
  push_drain(Drain{a.drain, f, a.version, 1});
  if (!a.reported) {
    const SimTime phase = a.down ? std::max<SimTime>(0, a.chunk->phase_ps) : a.phase_ps;
    a.report_at = std::max(now, a.drain - phase);
    if (a.report_at < a.drain) push_drain(Drain{a.report_at, f, a.version, 0});
  }
}

double FlowNetLp::nvls_supply_bps(const NvlsRed& e, SimTime now) const {
  // The reduced stream is as far as its least advanced contribution; it then advances at that
  // contribution's rate (ties: the slowest). A multicast's supply is its one uplink flow.
  double worst = -1, rate = HUGE_VAL;
  for (std::uint32_t u : e.up_flows) {
    const Active& a = act_[u];
    const double rem = a.rem_bits - a.rate * static_cast<double>(now - a.last) * 1e-12;
    if (rem > worst + 1.0) {
      worst = rem;
      rate = a.rate;
    } else if (rem >= worst - 1.0) {
      rate = std::min(rate, a.rate);
    }
  }
  return rate;
}

void FlowNetLp::nvls_cap(std::uint32_t f, SimTime now) {
  double r = solver_.rate(f);
  auto* e = act_[f].chunk;
  if (!e->up_flows.empty()) {
    // Uplink rates are final for this instant here, so a chunk's supply is computed once.
    if (e->supply_at != now) {
      e->supply_bps = nvls_supply_bps(*e, now);
      e->supply_at = now;
    }
    r = std::min(r, e->supply_bps);
  }
  apply_rate(f, r, now);
}

namespace {
constexpr std::uint64_t kNvlsPhaseLevels = 4;  // distinct report offsets per round (nvls_phase)
}  // namespace

void FlowNetLp::nvls_phase() {
  // The packet rung's GPU port serves its active queue pairs round robin, one transfer unit per
  // turn, in the order they became active (models/packet/nic.cpp, Nic::try_tx); NVLS queue pairs are
  // per (owner, channel) and per (channel, communicator) and stay active while the executor keeps
  // them fed. Of N equal transfers sharing the port, the one at position p then sends its last
  // unit (N - 1 - p) unit times (u / R) before the round ends, where the fluid share finishes
  // them all at once (the last one, p = N - 1, at the fluid's instant: the port is busy either
  // way). The fluid keeps its lock-step shares and drains (one re-solve per instant, as
  // before); only the completion is reported that much earlier. Positions persist per queue
  // pair, so consecutive transfers of one queue pair keep their place in the round.
  for (std::uint32_t f : nvls_new_) {
    Active& a = act_[f];
    const std::uint32_t g = a.head.src_rank;
    NvlsPos& pos = nvls_pos_[qp_key(a.head)];
    if (pos.gen != nvls_gen_[g]) pos = NvlsPos{nvls_gen_[g], nvls_next_[g]++};
    const auto n = static_cast<std::uint32_t>(solver_.flows_on(nvls_link0_ + g).size());
    a.phase_ps = 0;
    if (pos.pos + 1 < n) {
      const std::uint64_t bytes = coarse_part_bytes(a.head, topo_);
      std::uint64_t unit = a.mtu;  // Nic::send_nvls's transfer unit
      if (topo_.spec().nvswitch_cut_through) {
        const std::uint64_t floor_unit = std::min<std::uint64_t>(unit, kNvlinkMinUnitBytes);
        const std::uint64_t want = (bytes / kNvlinkUnitsPerPart + kNvlinkMinUnitBytes - 1) / kNvlinkMinUnitBytes * kNvlinkMinUnitBytes;
        unit = std::clamp<std::uint64_t>(want, floor_unit, unit);
      }
      unit = std::min<std::uint64_t>(unit, std::max<std::uint64_t>(bytes, 1));
      // Quantized to kNvlsPhaseLevels steps of the round: every distinct report instant makes
      // the flows the receivers post next start apart (more re-solves downstream).
      const std::uint64_t ahead = n - 1 - pos.pos;
      const std::uint64_t levels = std::min<std::uint64_t>(kNvlsPhaseLevels, n);
      const std::uint64_t q = ahead * levels / n * n / levels;
      a.phase_ps = static_cast<SimTime>(q) * engine::serialization_ps(unit, a.first_rate);
    }
    NvlsRed& e = *a.chunk;
    e.phase_ps = e.phase_ps < 0 ? a.phase_ps : std::min(e.phase_ps, a.phase_ps);
  }
  nvls_new_.clear();
}

void FlowNetLp::push_drain(const Drain& d) {
  if (drains_.size() >= 4 * solver_flows_ + kDrainSlack) compact_drains();
  drains_.push_back(d);
  std::push_heap(drains_.begin(), drains_.end(), DrainGreater{});
}

void FlowNetLp::pop_drain() {
  std::pop_heap(drains_.begin(), drains_.end(), DrainGreater{});
  drains_.pop_back();
}

bool FlowNetLp::drain_current(const Drain& d) const {
  const Active& a = act_[d.f];
  return a.version == d.version && (d.kind == 0 ? !a.reported && a.report_at == d.t : a.drain == d.t);
}

void FlowNetLp::compact_drains() {
  // Every flow has at most one current drain and one current report: at most 2 x solver_flows_
  // entries survive, so the next compaction is at least 2 x solver_flows_ + kDrainSlack pushes away.
  std::erase_if(drains_, [this](const Drain& d) { return !drain_current(d); });
  std::make_heap(drains_.begin(), drains_.end(), DrainGreater{});
}

void FlowNetLp::tick(Context& ctx) {
  const SimTime now = ctx.now();
  seeds_.clear();
  // 1. Flows whose shared bytes are drained at this instant.
  while (!drains_.empty() && drains_.front().t <= now) {
    const auto [t, f, version, kind] = drains_.front();
    pop_drain();
    if (act_[f].version != version) continue;  // rescheduled since
    if (kind == 0) {  // early report (round-robin phase); its bytes keep their share until drained
      if (!act_[f].reported && act_[f].report_at == t) report(f, ctx);
      continue;
    }
    if (act_[f].drain != t) continue;
    drained(f, ctx);
    for (std::uint32_t i = 0; i < solver_.hops(f); ++i) seeds_.push_back(solver_.link(f, i));
    solver_.remove_flow(f);
    --solver_flows_;
    ++act_[f].version;
  }
  // 2. Flows starting now. Flows on the same queue pair (one per NCCL channel, peer and k of
  // nic.qps_per_connection, NVLink included) are served in order, one at a time, as the packet
  // level's QP sends its parts: a later one waits. Flows that waited for their port clock first.
  if (!deferred_.empty() && deferred_.begin()->first.first <= now) {
    std::vector<Pending> fresh;
    fresh.swap(pending_);
    while (!deferred_.empty() && deferred_.begin()->first.first <= now) {
      pending_.push_back(Pending{deferred_.begin()->second, true, 0, true});
      deferred_.erase(deferred_.begin());
    }
    pending_.insert(pending_.end(), fresh.begin(), fresh.end());
  }
  for (std::size_t pi = 0; pi < pending_.size(); ++pi) {
    const Packet head = pending_[pi].head;
    const std::uint8_t stage = pending_[pi].stage;
    const QpKey key = qp_key(head);
    if (stage != 2 && !pending_[pi].owns && !busy_.insert(key)) {
      waiting_[key].push_back(head);
      continue;
    }
    const std::uint64_t bytes = coarse_part_bytes(head, topo_);
    // Ordinary flows: route_path and transfer_timing, cached. NVLS stages: the GPU <-> NVSwitch hop.
    RouteEntry nvls_route;
    const RouteEntry* route = nullptr;
    if (stage == 0) {
      route = &route_of(head, bytes);
    } else {
      set_route(nvls_route, nvls_path(head, stage), bytes);
      route = &nvls_route;
    }
    const RouteEntry& path = *route;
    const TransferTiming& t = path.timing;
    SimTime start = now;
    if (stage == 0 && !pending_[pi].clocked && path.hops > 0 && path.link[0] < port_free_.size()) {
      start = std::max(now, port_free_[path.link[0]]);
      if (start > now && t.rest_bytes != 0) {
        // Its port is still sending single-packet flows: it joins its links' shares after them
        // (keeping its queue pair), as FlowSource would have handed it over. It keeps its turn:
        // single-packet flows admitted meanwhile start no sooner (the clock) and do not delay it.
        deferred_.emplace(std::make_pair(start, deferred_seq_++), head);
        schedule(start, ctx);
        continue;
      }
    }
    ++flows_total_;
    if (path.crosses_switches) ++fold_switch_flows_;
    for (std::uint32_t i = 0; i < path.hops; ++i) link_bytes_[path.link[i]] += bytes;
    if (t.rest_bytes == 0 && stage == 0) {
      // A single packet (or nothing): store-and-forward latency after its turn on the sender's
      // port (port clock: ser(p, R_1) each, in the order admitted, as the packet rung's port
      // sends a GPU's concurrent one-packet messages one after another). It never holds a
      // link's share, which keeps rings of small chunks (one packet per step) as cheap as the
      // analytical rung; beyond the first hop its serialization is not charged to the links.
      // Not for NVLS flows: a GPU issues many single-packet chunks at once (e.g. 128 per loop on
      // 8 GPUs at 2.5 MiB), and each takes its share of the NVLS issue rate and the links.
      if (path.hops > 0 && path.link[0] < port_free_.size()) port_free_[path.link[0]] = start + t.last_first_ps;
      Packet arrive = head;
      const std::uint32_t to = fold_ != nullptr ? fold_->mirror(arrive) : arrive.dst_rank;
      ctx.send(to, start + t.head_ps - sent_delay_ps_ + t.tail_ps, kEvFlowArrive, arrive);
      ctx.send(head.src_rank, start + t.last_first_ps + sent_delay_ps_, kEvFlowSent, head.flow_id);
      release_connection(head);  // may append the next flow of this QP to pending_
      continue;
    }
    // An NVLS uplink also crosses its GPU's virtual NVLS issue link (solver only).
    std::uint32_t links[MaxMinSolver::kMaxHops];
    std::uint32_t nlinks = path.hops;
    for (std::uint32_t i = 0; i < path.hops; ++i) links[i] = path.link[i];
    if (stage == 1) links[nlinks++] = nvls_link0_ + head.src_rank;
    const std::uint32_t f = solver_.add_flow(links, nlinks);
    ++solver_flows_;
    if (f >= act_.size()) act_.resize(f + 1);
    Active& a = act_[f];
    const std::uint32_t version = a.version + 1;
    a = Active{};
    a.version = version;
    a.head = head;
    // Every byte shares, the last packet included: it occupies the first link (and the
    // bottleneck) like the others, so flows of the same QP or port do not overlap it.
    a.rem_bits = static_cast<double>(bytes) * 8.0;
    a.last = now;
    a.tail_ps = t.tail_ps - t.last_share_ps;
    a.head_ps = t.head_ps;
    a.first_rate = t.bottleneck_bps;
    a.mtu = path.mtu;
    a.drain = now + t.drain_ps + t.last_share_ps;  // used if the solver gives it the uncongested rate
    a.nvls = stage == 1 ? coarse_nvls(head) : 0;
    a.down = stage == 2;
    for (std::uint32_t i = 0; i < nlinks; ++i) seeds_.push_back(links[i]);
    if (stage == 1) {
      nvls_up_started(head, t.head_ps);  // may append downlink flows to pending_
      NvlsRed& e = nvls_red_[nvls_key(head)];
      e.up_flows.push_back(f);
      a.chunk = &e;
      nvls_new_.push_back(f);
    } else if (stage == 2) {
      NvlsRed& e = nvls_red_[nvls_key(head)];
      e.down_flows.push_back(f);
      a.chunk = &e;
    }
  }
  pending_.clear();
  if (!nvls_new_.empty()) nvls_phase();
  // 3. Re-solve the components touched, once for this instant.
  if (!seeds_.empty()) {
    solved_.clear();
    resolved_ += solver_.recompute(seeds_, &solved_);
    ++solves_;
    for (std::uint32_t f : solved_) {
      Active& a = act_[f];
      if (a.down) continue;  // below, once its supply's rate is known
      if (a.nvls) nvls_touched_.push_back(a.chunk);
      apply_rate(f, solver_.rate(f), now);
    }
  }
  // NVLS downlink flows: their max-min share, but no faster than their supply (cut-through:
  // the switch cannot forward bytes it does not have yet), for the downlink flows re-solved and
  // those whose supply's rate changed or drained at this instant.
  for (std::uint32_t f : solved_) {
    if (act_[f].down) nvls_cap(f, now);
  }
  for (NvlsRed* e : nvls_touched_) {
    if (e->touched_at == now) continue;
    e->touched_at = now;
    for (std::uint32_t d : e->down_flows) nvls_cap(d, now);
  }
  nvls_touched_.clear();
  for (const NvlsKey& k : nvls_dead_) nvls_red_.erase(k);
  nvls_dead_.clear();
  for (std::uint32_t g : nvls_emptied_) {
    if (solver_.flows_on(nvls_link0_ + g).empty() && nvls_next_[g] != 0) {
      ++nvls_gen_[g];  // a later NVLS burst of this GPU starts a new service order
      nvls_next_[g] = 0;
    }
  }
  nvls_emptied_.clear();
  solved_.clear();
  // 4. Wake up for the next drain.
  while (!drains_.empty() && !drain_current(drains_.front())) pop_drain();
  if (!drains_.empty()) schedule(drains_.front().t, ctx);
}

}  // namespace fabricsim::models
