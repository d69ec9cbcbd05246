#include "models/packet/switch_lp.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <tuple>

#include "engine/errors.hpp"
#include "engine/rng.hpp"
#include "engine/simulator.hpp"
#include "engine/units.hpp"

namespace fabricsim::models {

using engine::Context;
using engine::SimTime;

void PacketRing::grow() {
  std::vector<WirePacket> bigger(buf_.empty() ? 16 : buf_.size() * 2);
  for (std::uint32_t i = 0; i < size_; ++i) bigger[i] = buf_[(head_ + i) & (buf_.size() - 1)];
  buf_ = std::move(bigger);
  head_ = 0;
}

std::uint64_t roce_flow_hash(std::uint32_t src, std::uint32_t dst, std::uint16_t sport) {
  return engine::mix64((static_cast<std::uint64_t>(src) << 32 | dst) * 0x9E3779B97F4A7C15ull ^
                       (static_cast<std::uint64_t>(sport) << 17 | 4791u));
}

std::uint16_t roce_sport(std::uint32_t src, std::uint32_t dst, std::uint32_t qp_index, std::uint64_t seed) {
  const std::uint64_t h = engine::mix64(seed * 0xD6E8FEB86659FD93ull ^
                                        (static_cast<std::uint64_t>(src) << 40) ^
                                        (static_cast<std::uint64_t>(dst) << 12) ^ qp_index);
  return static_cast<std::uint16_t>(49152u + h % 16384u);
}

SwitchLp::SwitchLp(const Topology& topo, engine::LpId id, const FabricParams& params, bool lossless_unbounded)
    : topo_(topo), id_(id), params_(params), ports_(topo.ports(id)), unbounded_(lossless_unbounded),
      int_(cc::traits(params.nic.cc).wants_int) {
  const std::size_t n = ports_.size();
  queue_ = BlockFifos<std::uint32_t>(n * kNumClasses);
  qbytes_.assign(n * kNumClasses, 0);
  paused_.assign(n * kNumClasses, 0);
  busy_until_.assign(n, 0);
  free_pending_.assign(n, 0);
  tx_bytes_.assign(n, 0);
  paused_since_.assign(n, 0);
  kmin_.assign(n, 0);
  kmax_.assign(n, 0);
  ing_shared_.assign(n, 0);
  ing_hdrm_.assign(n, 0);
  headroom_.assign(n, 0);
  xoff_sent_.assign(n, 0);
  port_pauses_.assign(n, 0);
  port_ctr_.assign(n, PortCounters{});
  if (params_.jobs > 0) job_bytes_.assign(n * params_.jobs, 0);
  const SwitchParams& sp = params_.sw;
  std::uint64_t total_headroom = 0;
  for (std::size_t p = 0; p < n; ++p) {
    const Port& port = ports_[p];
    // ECN thresholds scale with the port rate from their 100 Gb/s values.
    const double scale = static_cast<double>(port.rate_bps) / 100e9;
    kmin_[p] = static_cast<std::uint64_t>(static_cast<double>(sp.ecn_kmin_bytes ? sp.ecn_kmin_bytes : 100'000) * scale);
    kmax_[p] = static_cast<std::uint64_t>(static_cast<double>(sp.ecn_kmax_bytes ? sp.ecn_kmax_bytes : 400'000) * scale);
    if (sp.pfc && !unbounded_ && port.peer != id_) {
      if (sp.pfc_headroom_bytes > 0) {
        headroom_[p] = sp.pfc_headroom_bytes;
      } else {
        const auto bdp = static_cast<std::uint64_t>(
            static_cast<SamplerU128>(port.rate_bps) * static_cast<SamplerU128>(port.latency_ps) /
            8'000'000'000'000ull);
        headroom_[p] = 2 * bdp + 3 * (static_cast<std::uint64_t>(port.mtu_bytes) + params_.nic.header_bytes) +
                       sp.pause_frame_bytes;
      }
      total_headroom += headroom_[p];
    }
  }
  for (const Port& port : ports_) min_xoff_ = std::max<std::uint64_t>(min_xoff_, 2ull * (port.mtu_bytes + params_.nic.header_bytes));
  std::uint64_t buffer = sp.buffer_bytes;
  if (buffer == 0) buffer = std::max<std::uint64_t>(64ull << 20, total_headroom + (32ull << 20));
  if (!unbounded_ && total_headroom >= buffer) {
    throw engine::InputError(params_.origin("switch.buffer"), "switch.buffer",
                             topo_.describe(id_) + " needs " + std::to_string(total_headroom) +
                                 " bytes of PFC headroom but its buffer is " + std::to_string(buffer) +
                                 " bytes",
                             "raise switch.buffer or lower switch.pfc_headroom");
  }
  shared_size_ = unbounded_ ? ~std::uint64_t{0} : buffer - total_headroom;
  port_faults_.resize(n);
  route_changes_.reserve(2 * params_.faults.size());
  for (std::uint32_t f = 0; f < params_.faults.size(); ++f) {
    const LinkFault& lf = params_.faults[f];
    if (lf.kind == FaultKind::kLinkDown) {
      any_down_ = true;
      route_changes_.push_back(lf.at_ps + lf.reconverge_ps);
      if (lf.until_ps != LinkFault::kNever) route_changes_.push_back(lf.until_ps + lf.reconverge_ps);
    }
    for (std::size_t p = 0; p < n; ++p) {
      if (lf.joins(id_, ports_[p].peer)) port_faults_[p].push_back(f);
    }
  }
  std::sort(route_changes_.begin(), route_changes_.end());
}

bool SwitchLp::routed_down(engine::LpId x, engine::LpId y, SimTime now) const {
  for (const LinkFault& f : params_.faults) {
    if (f.joins(x, y) && f.routed_down(now)) return true;
  }
  return false;
}

bool SwitchLp::reachable(engine::LpId node, std::uint32_t dst, SimTime now) const {
  if (topo_.kind(node) == NodeKind::kGpu) return node == dst;
  const std::vector<Port>& ports = topo_.ports(node);
  // Candidates are next hops on shortest paths, so the recursion ends within the path length.
  for (const std::uint32_t c : topo_.candidates(node, dst)) {
    if (!routed_down(node, ports[c].peer, now) && reachable(ports[c].peer, dst, now)) return true;
  }
  return false;
}

bool SwitchLp::link_down(std::uint32_t port, SimTime now, SimTime* up) const {
  bool down = false;
  *up = now;
  for (const std::uint32_t f : port_faults_[port]) {
    const LinkFault& lf = params_.faults[f];
    if (lf.kind == FaultKind::kLinkDown && lf.active(now)) {
      down = true;
      *up = std::max(*up, lf.until_ps);
    }
  }
  return down;
}

std::uint64_t SwitchLp::xoff_threshold() const {
  if (params_.sw.pfc_xoff_bytes > 0) return params_.sw.pfc_xoff_bytes;
  // Dynamic, but never below two of the largest frames: otherwise every jumbo packet would pause
  // its upstream on arrival (switches guarantee each port a minimum of its own).
  return std::max(min_xoff_, static_cast<std::uint64_t>(params_.sw.pfc_alpha * static_cast<double>(shared_size_ - shared_used_)));
}

std::uint32_t SwitchLp::pick_port(const WirePacket& p, SimTime now) const {
  const std::span<const std::uint32_t> cand = topo_.candidates(id_, p.dst);
  if (cand.empty()) {
    throw engine::InputError(params_.source, "cluster",
                             topo_.describe(id_) + " has no route to gpu " + std::to_string(p.dst),
                             "connect every GPU's NIC to the fabric (see `fabricsim topo`)");
  }
  if (any_down_) {
    // Interval of routing's view: how many route changes lie at or before now (0 = none yet).
    const auto epoch = static_cast<std::size_t>(
        std::upper_bound(route_changes_.begin(), route_changes_.end(), now) - route_changes_.begin());
    if (epoch != route_epoch_) {
      live_.clear();
      route_epoch_ = epoch;
    }
    if (epoch > 0) {
      auto [it, fresh] = live_.try_emplace(p.dst);
      if (fresh) {
        // Reconverged routing keeps the fault-free shortest paths that avoid every dead link. With
        // none left, packets keep the old next hops (and are held or dropped at the dead port).
        for (const std::uint32_t c : cand) {
          if (!routed_down(id_, ports_[c].peer, now) && reachable(ports_[c].peer, p.dst, now)) it->second.push_back(c);
        }
        if (it->second.size() == cand.size()) it->second.clear();
      }
      if (!it->second.empty()) return choose_port(it->second, p);
    }
  }
  return choose_port(cand, p);
}

std::uint32_t SwitchLp::choose_port(std::span<const std::uint32_t> cand, const WirePacket& p) const {
  if (cand.size() == 1) return cand[0];
  const std::uint64_t flow = roce_flow_hash(p.src, p.dst, p.sport);
  const RoutingMode mode = p.kind == kWireData ? params_.sw.routing : RoutingMode::kEcmp;
  switch (mode) {
    case RoutingMode::kEcmp:  // Topology::route's choice, without looking the candidates up again
      return cand[engine::mix64(flow ^ topo_.switch_seed(id_)) % cand.size()];
    case RoutingMode::kSpray:
      return cand[engine::mix64(flow ^ topo_.switch_seed(id_) ^ (static_cast<std::uint64_t>(p.psn) << 20)) % cand.size()];
    case RoutingMode::kAdaptive: {
      // Least queued bytes (all classes) plus the rest of the current serialization; ties go to
      // the flow's ECMP choice, then the next candidates in order.
      const std::size_t first = engine::mix64(flow ^ topo_.switch_seed(id_)) % cand.size();
      std::uint32_t best = cand[first];
      std::uint64_t best_q = ~std::uint64_t{0};
      for (std::size_t k = 0; k < cand.size(); ++k) {
        const std::uint32_t c = cand[(first + k) % cand.size()];
        std::uint64_t q = 0;
        for (std::uint32_t cl = 0; cl < kNumClasses; ++cl) q += qbytes_[c * kNumClasses + cl];
        if (q < best_q) {
          best_q = q;
          best = c;
        }
      }
      return best;
    }
  }
  return cand[0];
}

void SwitchLp::handle(const engine::Event& ev, Context& ctx) {
  switch (ev.kind) {
    case kEvWire:
      on_arrive(ev.get<WirePacket>(), ctx);
      return;
    case kEvPortFree: {
      const auto port = ev.get<std::uint32_t>();
      free_pending_[port] = 0;
      try_tx(port, ctx);
      return;
    }
    case kEvPfc: {
      const auto f = ev.get<PfcFrame>();
      const std::size_t k = static_cast<std::size_t>(f.port) * kNumClasses + f.cls;
      if (f.on != 0 && paused_[k] == 0) {
        paused_[k] = 1;
        paused_since_[f.port] = ctx.now();
        ++port_ctr_[f.port].pfc_pauses;
        if (sampler_.enabled()) sampler_.count(f.port, ctx.now(), LinkSampler::Count::kXoff);
      } else if (f.on == 0 && paused_[k] != 0) {
        paused_[k] = 0;
        ctr_.paused_ps += ctx.now() - paused_since_[f.port];
        port_ctr_[f.port].paused_ps += ctx.now() - paused_since_[f.port];
        if (sampler_.enabled()) sampler_.paused(f.port, paused_since_[f.port], ctx.now());
        if (!free_pending_[f.port]) {
          if (busy_until_[f.port] <= ctx.now()) {
            try_tx(f.port, ctx);
          } else if (has_eligible(f.port)) {
            free_pending_[f.port] = 1;
            ctx.send(id_, busy_until_[f.port], kEvPortFree, f.port);
          }
        }
      }
      return;
    }
    default:
      throw engine::InternalError("switch " + topo_.describe(id_) + ": unexpected event kind " +
                                  std::to_string(ev.kind));
  }
}

bool SwitchLp::has_eligible(std::uint32_t port) const {
  for (std::uint32_t c = 0; c < kNumClasses; ++c) {
    const std::size_t k = static_cast<std::size_t>(port) * kNumClasses + c;
    if (!queue_.empty(k) && paused_[k] == 0) return true;
  }
  return false;
}

std::size_t SwitchLp::NvlsKeyHash::operator()(const NvlsKey& k) const noexcept {
  return static_cast<std::size_t>(engine::mix64((static_cast<std::uint64_t>(k.dst) << 32 | k.group) ^
                                                engine::mix64(static_cast<std::uint64_t>(k.instance) << 32 | k.tag) ^
                                                (static_cast<std::uint64_t>(k.index) * 0x9E3779B97F4A7C15ull)));
}

bool SwitchLp::nvls_arrive(WirePacket& p, Context& ctx) {
  if (!unbounded_) {
    throw engine::InternalError("switch " + topo_.describe(id_) + ": NVLS packet at a switch that is not an NVSwitch");
  }
  const std::uint64_t arg = p.hops[2].bits;
  if (p.nvls == kNvlsMulticast) {
    // multimem.st: one copy per member port, in port order.
    // The copies differ only in their destination (the port's peer, filled in at dequeue): the
    // packet is stored once, with one reference per copy (NVSwitches admit every packet, so
    // no copy is dropped or marked).
    p.nvls = kNvlsNone;
    p.hops[0] = p.hops[1] = p.hops[2] = IntHop{};
    p.flags = static_cast<std::uint8_t>(p.flags & ~kFlagHeadroom);
    const std::uint64_t mask = ports_.size() >= 64 ? arg : arg & ((std::uint64_t{1} << ports_.size()) - 1);
    if (mask == 0) return true;
    const PacketStore::Ref ref = store_.put(p, static_cast<std::uint32_t>(std::popcount(mask)));
    const std::uint64_t size = wire_bytes(p);
    const std::size_t cls = p.cls;
    for (std::uint64_t m = mask; m != 0; m &= m - 1) {
      const auto port = static_cast<std::uint32_t>(std::countr_zero(m));
      ++ctr_.nvls_copies;
      push_entry(ref | kCopyBit, size, port, static_cast<std::size_t>(port) * kNumClasses + cls, ctx);
    }
    return true;
  }
  // multimem.ld_reduce: packet `index` of the shard is reduced once every member's copy arrived.
  const NvlsKey key{p.dst, static_cast<std::uint32_t>(p.hops[0].bits >> 32),
                    static_cast<std::uint32_t>(p.hops[0].bits & 0xFFFFFFFFu), static_cast<std::uint32_t>(p.hops[1].bits >> 32),
                    static_cast<std::uint32_t>(p.hops[1].bits & 0xFFFFFFFFu)};
  NvlsEntry& e = nvls_[key];
  ++e.count;
  if (p.src == p.dst) {
    e.owner = p;
    e.has_owner = true;
  } else {
    ++ctr_.nvls_absorbed;
  }
  if (e.count < arg) return true;
  if (!e.has_owner || e.count > arg) {
    throw engine::InternalError("switch " + topo_.describe(id_) + ": NVLS reduction for gpu " + std::to_string(p.dst) +
                                " got " + std::to_string(e.count) + " of " + std::to_string(arg) +
                                " contributions without the owner's");
  }
  p = e.owner;
  nvls_.erase(key);
  p.nvls = kNvlsNone;
  p.hops[0] = p.hops[1] = p.hops[2] = IntHop{};
  return false;
}

void SwitchLp::on_arrive(WirePacket p, Context& ctx) {
  // A NIC does not see its link's state (a failed NIC or a cut NIC cable, spec kinds nic_down,
  // switch_down, link_down on gpuN-leafM): a frame whose last bit left the NIC while the link
  // was down never arrives. Switch-to-switch links hold or drop at the sender's egress instead
  // (try_tx), so only frames from GPUs are checked here.
  if (any_down_ && !port_faults_[p.in_port].empty() && topo_.kind(ports_[p.in_port].peer) == NodeKind::kGpu) {
    SimTime up = 0;
    if (link_down(p.in_port, ctx.now() - ports_[p.in_port].latency_ps, &up)) {
      ++ctr_.drops;
      ++ctr_.down_drops;  // not in port_ctr_: those count this switch's egress directions
      return;
    }
  }
  if (p.nvls != kNvlsNone && nvls_arrive(p, ctx)) return;
  enqueue(p, pick_port(p, ctx.now()), ctx);
}

void SwitchLp::enqueue(WirePacket p, std::uint32_t out, Context& ctx) {
  if (!admit(p, out, ctx)) return;
  const std::size_t k = static_cast<std::size_t>(out) * kNumClasses + p.cls;
  push_entry(store_.put(p, 1), wire_bytes(p), out, k, ctx);
}

bool SwitchLp::admit(WirePacket& p, std::uint32_t out, Context& ctx) {
  const SimTime now = ctx.now();
  const std::uint32_t cls = p.cls;
  const std::size_t k = static_cast<std::size_t>(out) * kNumClasses + cls;
  const std::uint64_t size = wire_bytes(p);
  const SwitchParams& sp = params_.sw;
  p.flags = static_cast<std::uint8_t>(p.flags & ~kFlagHeadroom);
  if (!unbounded_) {
    const std::uint64_t free_shared = shared_size_ - shared_used_;
    if (cls == kClassData && sp.pfc) {
      const std::uint32_t in = p.in_port;
      const std::uint64_t thr = xoff_threshold();
      if (ing_shared_[in] + size <= thr && size <= free_shared) {
        ing_shared_[in] += size;
        shared_used_ += size;
      } else if (ing_hdrm_[in] + size <= headroom_[in]) {
        ing_hdrm_[in] += size;
        p.flags |= kFlagHeadroom;
      } else {
        ++ctr_.drops;
        ++ctr_.headroom_drops;
        ++port_ctr_[out].drops;
        if (sampler_.enabled()) sampler_.count(out, now, LinkSampler::Count::kDrop);
        return false;
      }
      if (!xoff_sent_[in] && (ing_hdrm_[in] > 0 || ing_shared_[in] >= xoff_threshold())) {
        xoff_sent_[in] = 1;
        send_pfc(in, true, ctx);
      }
    } else {
      const auto limit = static_cast<std::uint64_t>(sp.egress_alpha * static_cast<double>(free_shared));
      if (size > free_shared || qbytes_[k] + size > limit) {
        ++ctr_.drops;
        ++port_ctr_[out].drops;
        if (sampler_.enabled()) sampler_.count(out, now, LinkSampler::Count::kDrop);
        return false;
      }
      shared_used_ += size;
    }
    ctr_.max_buffer_bytes = std::max(ctr_.max_buffer_bytes, shared_used_);
    if (cls == kClassData && sp.ecn && p.kind == kWireData) {
      const std::uint64_t q = qbytes_[k];
      bool mark = false;
      if (q > kmax_[out]) {
        mark = true;
      } else if (q > kmin_[out]) {
        const double prob = sp.ecn_pmax * static_cast<double>(q - kmin_[out]) /
                            static_cast<double>(kmax_[out] - kmin_[out]);
        const std::uint64_t r = engine::mix64(topo_.switch_seed(id_) ^ (++ecn_counter_ * 0x9E3779B97F4A7C15ull));
        mark = static_cast<double>(r >> 11) * 0x1.0p-53 < prob;
      }
      if (mark) {
        p.flags |= kFlagCe;
        ++ctr_.ecn_marks;
        ++port_ctr_[out].ecn_marks;
        if (sampler_.enabled()) sampler_.count(out, now, LinkSampler::Count::kMark);
      }
    }
  }
  return true;
}

void SwitchLp::push_entry(std::uint32_t entry, std::uint64_t size, std::uint32_t out, std::size_t k,
                          Context& ctx) {
  const SimTime now = ctx.now();
  std::uint64_t backlog = 0;
  for (std::uint32_t c = 0; c < kNumClasses; ++c) backlog += qbytes_[static_cast<std::size_t>(out) * kNumClasses + c];
  if (busy_until_[out] > now) {
    backlog += static_cast<std::uint64_t>(static_cast<SamplerU128>(busy_until_[out] - now) *
                                          ports_[out].rate_bps / 8'000'000'000'000ull);
  }
  max_queue_ps_ = std::max(max_queue_ps_, engine::serialization_ps(backlog, ports_[out].rate_bps));
  if (sampler_.enabled()) sampler_.queue(out, now, backlog);
  queue_.push(k, entry);
  qbytes_[k] += size;
  if (free_pending_[out]) return;
  if (busy_until_[out] <= now) {
    try_tx(out, ctx);
  } else if (paused_[k] == 0) {
    free_pending_[out] = 1;
    ctx.send(id_, busy_until_[out], kEvPortFree, out);
  }
}

void SwitchLp::try_tx(std::uint32_t port, Context& ctx) {
  const SimTime now = ctx.now();
  std::uint32_t cls = kNumClasses;
  for (;;) {
    cls = kNumClasses;
    for (std::uint32_t c = 0; c < kNumClasses; ++c) {
      const std::size_t k = static_cast<std::size_t>(port) * kNumClasses + c;
      if (!queue_.empty(k) && paused_[k] == 0) {
        cls = c;
        break;
      }
    }
    if (cls == kNumClasses) return;  // idle, or only paused classes wait
    SimTime up = now;
    if (port_faults_[port].empty() || !link_down(port, now, &up)) break;
    // The link is down: a lossless (PFC) packet waits at the head until it is back; a lossy one
    // is dropped (the sender's go-back-N resends it).
    if (cls == kClassData && params_.sw.pfc && !unbounded_) {
      if (up != LinkFault::kNever && !free_pending_[port]) {
        free_pending_[port] = 1;
        ctx.send(id_, up, kEvPortFree, port);
      }
      return;
    }
    dequeue(port, cls, ctx);
    ++ctr_.drops;
    ++ctr_.down_drops;
    ++port_ctr_[port].drops;
    if (sampler_.enabled()) sampler_.count(port, now, LinkSampler::Count::kDrop);
  }
  const std::size_t k = static_cast<std::size_t>(port) * kNumClasses + cls;
  WirePacket p = dequeue(port, cls, ctx);
  const std::uint64_t size = wire_bytes(p);
  const Port& link = ports_[port];
  std::uint64_t rate_bps = link.rate_bps;
  double ber = 0;
  for (const std::uint32_t f : port_faults_[port]) {
    const LinkFault& lf = params_.faults[f];
    if (!lf.active(now)) continue;
    if (lf.kind == FaultKind::kDegrade) rate_bps = std::min(rate_bps, lf.rate_bps);
    if (lf.kind == FaultKind::kBer) ber = std::max(ber, lf.ber);
  }
  if (int_ && p.kind == kWireData && !unbounded_ && p.nint < kMaxIntHops) {
    p.hops[p.nint++] = IntHop::make(now, tx_bytes_[port] + size, qbytes_[k], rate_bps);
  }
  // Ethernet switches store and forward: serialization starts when the last bit arrived (now).
  // With cluster.nvswitch_cut_through, NVSwitches forward cut-through (NVLink moves flits of tens of bytes, so a transfer unit is
  // never buffered whole): egress may start once the unit's first bit arrived, i.e. one ingress
  // serialization before now, and not before the port is free; it cannot end before the last
  // bit arrived. So an NVLink unit's size adds no per-hop delay on an idle path (docs/fabric.md).
  SimTime start = now;
  if (unbounded_ && topo_.spec().nvswitch_cut_through) {
    const SimTime first_bit = now - engine::serialization_ps(size, ports_[p.in_port].rate_bps);
    start = std::max(first_bit, busy_until_[port]);
  }
  SimTime end = std::max(now, start + engine::serialization_ps(size, rate_bps));
  bool lost = false;
  if (ber > 0 && params_.sw.link_retry) {
    // Link-level retry: the corrupted units are sent again before the next frame, so the frame
    // arrives whole, later, and the port is busy for the replays too.
    end += link_retry(port, size, rate_bps, ber, &lost);
  } else if (ber > 0) {
    // The frame is serialized, then fails its FCS check at the far end: seeded by the switch and
    // a per-switch count of BER draws (the switch handles its events in a fixed order).
    const std::uint64_t r = engine::mix64(topo_.switch_seed(id_) ^ 0xB5E5u ^ (++ber_counter_ * 0x9E3779B97F4A7C15ull));
    lost = static_cast<double>(r >> 11) * 0x1.0p-53 < frame_error_probability(ber, 8 * size);
  }
  p.in_port = static_cast<std::uint16_t>(link.peer_port);
  p.flags = static_cast<std::uint8_t>(p.flags & ~kFlagHeadroom);
  busy_until_[port] = end;
  tx_bytes_[port] += size;
  ++ctr_.packets;
  if (p.kind == kWireData) {
    port_ctr_[port].data_bytes += p.bytes;
    if (!job_bytes_.empty() && p.src < params_.job_of_gpu.size()) {
      const std::int32_t job = params_.job_of_gpu[p.src];
      if (job >= 0) job_bytes_[static_cast<std::size_t>(port) * params_.jobs + static_cast<std::uint32_t>(job)] += p.bytes;
    }
  }
  // /links counts data payload bytes (headers, ACK/CNP excluded) so bytes are conserved.
  if (sampler_.enabled() && p.kind == kWireData) sampler_.tx(port, start, end, p.bytes);
  if (lost) {
    ++ctr_.drops;
    ++ctr_.ber_drops;
    ++port_ctr_[port].drops;
    if (sampler_.enabled()) sampler_.count(port, now, LinkSampler::Count::kDrop);
  } else {
    ctx.send(link.peer, end + link.latency_ps, kEvWire, p);
  }
  if (has_eligible(port)) {
    free_pending_[port] = 1;
    ctx.send(id_, end, kEvPortFree, port);
  }
}

SimTime SwitchLp::link_retry(std::uint32_t port, std::uint64_t size, std::uint64_t rate_bps, double ber, bool* lost) {
  // Units: the frame, or cells of link_retry_cell_bytes (the last one shorter).
  const SwitchParams& sp = params_.sw;
  const std::uint64_t cell = sp.link_retry_cell_bytes > 0 ? std::min<std::uint64_t>(sp.link_retry_cell_bytes, size) : size;
  const std::uint64_t units = (size + cell - 1) / cell;
  const std::uint64_t last = size - (units - 1) * cell;
  // A replay costs the unit's serialization again plus the time the transmitter waits for the
  // far end's link NACK: the round trip (both latencies) and the NACK's serialization (a
  // minimum control frame). Units sent meanwhile are discarded by the receiver (go-back-N) and
  // so add nothing but that wait.
  const Port& link = ports_[port];
  const SimTime rtt = 2 * link.latency_ps + engine::serialization_ps(params_.nic.control_bytes, rate_bps);
  SimTime extra = 0;
  *lost = false;
  for (std::uint64_t u = 0; u < units; ++u) {
    const std::uint64_t bytes = u + 1 == units ? last : cell;
    // Replays before the unit arrives intact: geometric, P(F >= k) = q^k with q the unit's
    // error probability, drawn as floor(ln U / ln q) from U in (0, 1] (seeded like the BER
    // drops: the switch's seed and its count of draws).
    const double x = static_cast<double>(8 * bytes) * std::log1p(-ber);  // ln P(no bit error)
    // ln q = ln(1 - e^x), accurate for q near 0 and near 1 (Maechler, "Accurately computing
    // log(1 - exp(-|a|))", 2012).
    const double ln_q = x > -0.693147 ? std::log(-std::expm1(x)) : std::log1p(-std::exp(x));
    const std::uint64_t r = engine::mix64(topo_.switch_seed(id_) ^ 0x11Eu ^ (++ber_counter_ * 0x9E3779B97F4A7C15ull));
    const double uni = static_cast<double>((r >> 11) + 1) * 0x1.0p-53;
    // q = 1 in double precision (ln q = 0): the unit never arrives intact.
    const double f = ln_q < 0 ? std::log(uni) / ln_q : std::numeric_limits<double>::infinity();
    std::uint64_t replays = sp.link_retry_max;
    if (f < static_cast<double>(sp.link_retry_max)) {
      replays = static_cast<std::uint64_t>(f);
    } else if (f >= static_cast<double>(sp.link_retry_max) + 1) {
      *lost = true;  // still corrupted after the last allowed replay
    }
    if (replays == 0) continue;
    extra += static_cast<SimTime>(replays) * (engine::serialization_ps(bytes, rate_bps) + rtt);
    ctr_.link_retransmits += replays;
    ctr_.link_retransmit_bytes += replays * bytes;
    port_ctr_[port].link_retransmits += replays;
  }
  return extra;
}

WirePacket SwitchLp::dequeue(std::uint32_t port, std::uint32_t cls, Context& ctx) {
  const std::size_t k = static_cast<std::size_t>(port) * kNumClasses + cls;
  const std::uint32_t entry = queue_.front(k);
  queue_.pop(k);
  WirePacket p = store_.get(entry & ~kCopyBit);
  store_.release(entry & ~kCopyBit);
  if (entry & kCopyBit) p.dst = ports_[port].peer;
  const std::uint64_t size = wire_bytes(p);
  qbytes_[k] -= size;
  if (!unbounded_) {
    if (cls == kClassData && params_.sw.pfc) {
      const std::uint32_t in = p.in_port;
      if (p.flags & kFlagHeadroom) {
        ing_hdrm_[in] -= size;
      } else {
        ing_shared_[in] -= size;
        shared_used_ -= size;
      }
      if (xoff_sent_[in] && ing_hdrm_[in] == 0 &&
          (ing_shared_[in] == 0 || ing_shared_[in] + params_.sw.pfc_resume_offset_bytes <= xoff_threshold())) {
        xoff_sent_[in] = 0;
        send_pfc(in, false, ctx);
      }
    } else {
      shared_used_ -= size;
    }
  }
  return p;
}

void SwitchLp::send_pfc(std::uint32_t port, bool on, Context& ctx) {
  const Port& link = ports_[port];
  // A MAC control frame waits for the frame being serialized on that port, then goes first.
  const SimTime depart = std::max(ctx.now(), busy_until_[port]);
  const SimTime at = depart + engine::serialization_ps(params_.sw.pause_frame_bytes, link.rate_bps) + link.latency_ps;
  ctx.send(link.peer, at, kEvPfc, PfcFrame{link.peer_port, kClassData, on ? 1u : 0u});
  if (on) {
    ++ctr_.pause_frames;
    ++port_pauses_[port];
  } else {
    ++ctr_.resume_frames;
  }
}

// Every mutable member, in declaration order. nvls_ is only looked up, never iterated, so its
// order does not affect results; it is written sorted by key so that equal states give equal
// bytes.
void SwitchLp::save_state(engine::StateWriter& w) const {
  w.put(shared_size_);
  w.put(min_xoff_);
  w.put(shared_used_);
  w.put(ecn_counter_);
  queue_.save(w);
  store_.save(w);
  w.put_vector(qbytes_);
  w.put_vector(paused_);
  w.put_vector(busy_until_);
  w.put_vector(free_pending_);
  w.put_vector(tx_bytes_);
  w.put_vector(paused_since_);
  w.put_vector(kmin_);
  w.put_vector(kmax_);
  w.put_vector(ing_shared_);
  w.put_vector(ing_hdrm_);
  w.put_vector(headroom_);
  w.put_vector(xoff_sent_);
  w.put_vector(port_pauses_);
  w.put(max_queue_ps_);
  w.put(ctr_);
  w.put_vector(port_ctr_);
  w.put_vector(job_bytes_);
  sampler_.save(w);
  w.put(ber_counter_);
  std::vector<std::pair<NvlsKey, const NvlsEntry*>> nv;
  nv.reserve(nvls_.size());
  for (const auto& [k, e] : nvls_) nv.emplace_back(k, &e);
  const auto tuple = [](const NvlsKey& k) { return std::tie(k.dst, k.group, k.instance, k.tag, k.index); };
  std::sort(nv.begin(), nv.end(), [&](const auto& a, const auto& b) { return tuple(a.first) < tuple(b.first); });
  w.put<std::uint64_t>(nv.size());
  for (const auto& [k, e] : nv) {
    w.put(k);
    w.put(e->count);
    w.put(e->has_owner);
    w.put(e->owner);
  }
}

void SwitchLp::load_state(engine::StateReader& r) {
  shared_size_ = r.get<std::uint64_t>();
  min_xoff_ = r.get<std::uint64_t>();
  shared_used_ = r.get<std::uint64_t>();
  ecn_counter_ = r.get<std::uint64_t>();
  queue_.load(r);
  store_.load(r);
  const auto same = [&r](auto& v, auto&& loaded) {
    if (loaded.size() != v.size()) r.fail();
    v = std::move(loaded);
  };
  same(qbytes_, r.get_vector<std::uint64_t>());
  same(paused_, r.get_vector<std::uint8_t>());
  same(busy_until_, r.get_vector<engine::SimTime>());
  same(free_pending_, r.get_vector<std::uint8_t>());
  same(tx_bytes_, r.get_vector<std::uint64_t>());
  same(paused_since_, r.get_vector<engine::SimTime>());
  same(kmin_, r.get_vector<std::uint64_t>());
  same(kmax_, r.get_vector<std::uint64_t>());
  same(ing_shared_, r.get_vector<std::uint64_t>());
  same(ing_hdrm_, r.get_vector<std::uint64_t>());
  same(headroom_, r.get_vector<std::uint64_t>());
  same(xoff_sent_, r.get_vector<std::uint8_t>());
  same(port_pauses_, r.get_vector<std::uint64_t>());
  max_queue_ps_ = r.get<engine::SimTime>();
  ctr_ = r.get<SwitchCounters>();
  same(port_ctr_, r.get_vector<PortCounters>());
  same(job_bytes_, r.get_vector<std::uint64_t>());
  sampler_.load(r);
  ber_counter_ = r.get<std::uint64_t>();
  nvls_.clear();
  const auto n = r.get<std::uint64_t>();
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto k = r.get<NvlsKey>();
    NvlsEntry e;
    e.count = r.get<std::uint32_t>();
    e.has_owner = r.get<bool>();
    e.owner = r.get<WirePacket>();
    nvls_.emplace(k, e);
  }
}

}  // namespace fabricsim::models
