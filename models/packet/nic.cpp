#include "models/packet/nic.hpp"

#include <algorithm>
#include <cmath>

#include "engine/errors.hpp"
#include "engine/rng.hpp"
#include "engine/state_io.hpp"
#include "engine/simulator.hpp"
#include "engine/units.hpp"

namespace fabricsim::models {

using engine::Context;
using engine::SimTime;

namespace {
// kTimerTxDone: a message in one part left (a, b = the owner's done slot and index);
// kTimerTxDoneMulti: one part of a split message left (a = its msgs_ index).
enum TimerType : std::uint32_t { kTimerRto = 0, kTimerTxDone = 1, kTimerTxDoneMulti = 2 };
struct QpTimer {
  std::uint32_t qp = 0;
  std::uint32_t type = 0;
  std::uint32_t a = 0;
  std::uint32_t b = 0;
};
constexpr std::uint64_t kPresent = 1ull << 33;
constexpr std::uint64_t kLastBit = 1ull << 32;
constexpr std::uint64_t kMaxDeliveryBytes = 1ull << 31;  // largest Packet::bytes handed to the owner
constexpr std::uint8_t kCtxAbsent = 0, kCtxCached = 1, kCtxFetched = 2;
constexpr std::uint32_t kCtxNone = ~0u;
}  // namespace

Nic::Nic(const Topology& topo, engine::LpId gpu, const FabricParams& params, NicOwner& owner)
    : topo_(topo), id_(gpu), params_(params), owner_(owner), ports_(topo.ports(gpu).size()),
      cc_(params.nic.cc, params.cc) {
  ack_interval_ = params.nic.ack_interval_packets > 0 ? params.nic.ack_interval_packets : cc_.traits().ack_interval;
  if (params.nic.msg_rate_per_s > 0) {
    msg_gap_ps_ = static_cast<SimTime>(std::ceil(1e12 / params.nic.msg_rate_per_s));
  }
}

SimTime Nic::path_latency(std::uint32_t dst, std::uint64_t flow_hash, SimTime* rtt) const {
  SimTime lat = 0, ser = 0;
  for (engine::LpId at = id_; at != dst;) {
    const Port& hop = topo_.ports(at)[topo_.route(at, dst, flow_hash)];
    lat += hop.latency_ps;
    ser += engine::serialization_ps(hop.mtu_bytes + params_.nic.header_bytes, hop.rate_bps) +
           engine::serialization_ps(params_.nic.control_bytes, hop.rate_bps);
    at = hop.peer;
  }
  if (rtt != nullptr) *rtt = 2 * lat + ser;
  return lat;
}

std::uint32_t Nic::new_msg(const TxMsg& m) {
  std::uint32_t mi;
  if (!free_msgs_.empty()) {
    mi = free_msgs_.back();
    free_msgs_.pop_back();
  } else {
    mi = static_cast<std::uint32_t>(msgs_.size());
    msgs_.emplace_back();
  }
  msgs_[mi] = m;
  return mi;
}

std::pair<std::uint32_t, bool> Nic::qp_slot(std::uint64_t key) {
  const std::int64_t found = qp_index_.find(key);
  if (found >= 0) return {static_cast<std::uint32_t>(found), false};
  if (qps_.size() >= 0xFFFF) {
    throw engine::InputError(params_.origin("nic.qps_per_connection"), "nic.qps_per_connection",
                             "gpu " + std::to_string(id_) + " needs more than 65,535 queue pairs",
                             "lower nic.qps_per_connection");
  }
  const auto qi = static_cast<std::uint32_t>(qps_.size());
  qp_index_.insert(key, qi);
  return {qi, true};
}

std::uint32_t Nic::qp_for(std::uint32_t dst, std::uint32_t channel, std::uint32_t k) {
  const std::uint64_t key = static_cast<std::uint64_t>(dst) << 32 | static_cast<std::uint64_t>(channel) << 16 | k;
  const auto [found, inserted] = qp_slot(key);
  if (!inserted) return found;
  Qp q;
  q.dst = dst;
  q.cut_mtu = topo_.ports(id_)[topo_.route(id_, dst, 0)].mtu_bytes;  // split_message's MTU
  q.sport = roce_sport(id_, dst, channel << 16 | k, topo_.spec().seed);
  // The GPU's port for this QP: NVLink inside the scale-up domain, else a NIC port (with
  // several NIC ports, e.g. dual-plane, chosen by the QP's 5-tuple hash).
  const std::uint32_t port = topo_.route(id_, dst, roce_flow_hash(id_, dst, q.sport));
  q.port = static_cast<std::uint16_t>(port);
  const Port& link = topo_.ports(id_)[port];
  q.noack = topo_.kind(link.peer) == NodeKind::kNvSwitch;
  if (q.noack) q.sport = 0;
  add_qp(q, link.rate_bps, link.mtu_bytes);
  return found;
}

void Nic::add_qp(Qp q, std::uint64_t line_bps, std::uint32_t mtu) {
  if (!q.noack) {
    q.rel = static_cast<std::uint16_t>(rel_.size());  // qp_slot keeps QPs below 65,535
    RelQp r;
    r.line_bps = line_bps;
    r.mtu = mtu;
    rel_.push_back(r);
    cc::QpInit init{r.link(), 0};
    if (cc_.traits().needs_path_rtt) path_latency(q.dst, roce_flow_hash(id_, q.dst, q.sport), &init.path_rtt_ps);
    cc_.add(init);
  }
  if (params_.nic.flow_start == FlowStart::kStaggered) activations_.push_back(0);
  if (params_.nic.qp_cache > 0) {
    ctx_state_.push_back(kCtxAbsent);
    ctx_prev_.push_back(kCtxNone);
    ctx_next_.push_back(kCtxNone);
  }
  qps_.push_back(std::move(q));
  ++ctr_.qps;
}

Nic::Layout Nic::layout() {
  return Layout{sizeof(TxPart), sizeof(TxRun), sizeof(Qp), sizeof(RelQp), sizeof(RxQp), sizeof(RxDesc), sizeof(NvlsKey)};
}

double Nic::qp_rate_bps(std::uint32_t qp) const {
  const Qp& q = qps_[qp];
  return q.noack ? static_cast<double>(topo_.ports(id_)[q.port].rate_bps) : cc_.rate_bps(q.rel, rel_[q.rel].link());
}

std::uint64_t Nic::unit_of(const Qp& q, std::uint64_t bytes) const {
  const std::uint64_t mtu = q.cut_mtu;
  if (!q.noack || !topo_.spec().nvswitch_cut_through) return mtu;
  const std::uint64_t floor_unit = std::min<std::uint64_t>(mtu, kNvlinkMinUnitBytes);
  const std::uint64_t want = (bytes / kNvlinkUnitsPerPart + kNvlinkMinUnitBytes - 1) / kNvlinkMinUnitBytes * kNvlinkMinUnitBytes;
  return std::clamp<std::uint64_t>(want, floor_unit, mtu);
}

void Nic::queue_part(std::uint32_t qi, TxPart part, const char* fix, const NvlsKey* nvls) {
  Qp& q = qps_[qi];
  const std::uint32_t npkts = npkts_of(q, part.bytes());
  if (static_cast<std::uint64_t>(q.next_psn) + npkts > 0xFFFFFFF0ull) {
    throw engine::InputError(params_.source, "workload",
                             "more than 2^32 packets on one queue pair (gpu " + std::to_string(id_) + ")", fix);
  }
  // After the check above, which may throw: the queued part holds the key's reference.
  if (nvls != nullptr) part.key = nvls_key(nvls->group, nvls->instance, nvls->arg, nvls->slot);
  if (q.parts.empty()) {
    q.head_psn = q.next_psn;
    tx_parts_.push(q.parts, TxRun{part});
  } else if (!tx_parts_.back(q.parts).append(part)) {
    tx_parts_.push(q.parts, TxRun{part});
  }
  q.next_psn += npkts;
}

void Nic::pop_part(Qp& q) {
  TxRun& r = tx_parts_.front(q.parts);
  if (r.count > 1) {
    r.pop_front();
  } else {
    tx_parts_.pop(q.parts);
  }
}

std::uint32_t Nic::nvls_key(std::uint32_t group, std::uint32_t instance, std::uint64_t arg, std::uint32_t slot) {
  auto same = [&](const NvlsKey& k) {
    return k.refs > 0 && k.group == group && k.instance == instance && k.arg == arg && k.slot == slot;
  };
  if (last_nvls_key_ < nvls_keys_.size() && same(nvls_keys_[last_nvls_key_])) {
    ++nvls_keys_[last_nvls_key_].refs;
    return last_nvls_key_;
  }
  for (std::uint32_t i = 0; i < nvls_keys_.size(); ++i) {
    if (same(nvls_keys_[i])) {
      ++nvls_keys_[i].refs;
      last_nvls_key_ = i;
      return i;
    }
  }
  std::uint32_t i;
  if (!free_nvls_keys_.empty()) {
    i = free_nvls_keys_.back();
    free_nvls_keys_.pop_back();
  } else {
    i = static_cast<std::uint32_t>(nvls_keys_.size());
    nvls_keys_.emplace_back();
  }
  if (i >= kMaxNvlsKeys) {
    throw engine::InternalError("gpu " + std::to_string(id_) + ": more than 2^23 distinct NVLS keys queued");
  }
  nvls_keys_[i] = NvlsKey{group, instance, arg, slot, 1};
  last_nvls_key_ = i;
  return i;
}

void Nic::release_part(const TxPart& part) {
  NvlsKey& k = nvls_keys_[part.key];
  if (--k.refs == 0) free_nvls_keys_.push_back(part.key);
}

std::int64_t Nic::rx_find(std::uint64_t key) {
  if (key == rx_last_key_) return rx_last_idx_;
  const std::int64_t ri = rx_index_.find(key);
  if (ri < 0) return -1;
  rx_last_key_ = key;
  rx_last_idx_ = static_cast<std::uint32_t>(ri);
  return ri;
}

Nic::Split Nic::split_message(std::uint32_t dst, std::uint64_t bytes, std::uint16_t channel) {
  const std::uint32_t port = topo_.route(id_, dst, 0);
  const Port& link = topo_.ports(id_)[port];
  Split s;
  s.nvlink = topo_.kind(link.peer) == NodeKind::kNvSwitch;
  s.qps = s.nvlink ? 1u : std::max<std::uint32_t>(1, params_.nic.qps_per_connection);
  s.mtu = link.mtu_bytes;
  s.parts = s.qps;
  // NCCL_IB_SPLIT_DATA_ON_QPS=1: split over the QPs when each gets at least one MTU; otherwise
  // (NCCL's default, and for small messages) the whole message goes to the next QP in turn.
  if (!params_.nic.split_data_on_qps || bytes < static_cast<std::uint64_t>(s.qps) * link.mtu_bytes) {
    s.parts = 1;
    if (s.qps > 1) {  // one QP: always QP 0, no round-robin state to keep
      std::uint32_t& rr = conn_rr_[static_cast<std::uint64_t>(dst) << 16 | channel];
      s.first_k = rr;
      rr = (rr + 1) % s.qps;
    }
  }
  return s;
}

std::uint64_t Nic::part_bytes(std::uint64_t bytes, std::uint32_t parts, std::uint32_t i, std::uint32_t mtu) {
  if (parts <= 1) return bytes;
  const std::uint64_t m = std::max<std::uint32_t>(1, mtu);
  const std::uint64_t per = (bytes / parts + m - 1) / m * m;  // MTU-aligned shares
  const std::uint64_t before = std::min(bytes, per * i);
  return i + 1 == parts ? bytes - before : std::min(bytes - before, per);
}

MsgDesc Nic::message_desc(const MsgMeta& meta, std::uint64_t bytes, std::uint64_t part_bytes, engine::SimTime now,
                          std::uint32_t qi, std::uint16_t sport) const {
  MsgDesc d;
  d.flow_id = meta.flow_id;
  d.flow_bytes = bytes;
  d.part_bytes = part_bytes;
  d.flow_start = now;
  d.tag = meta.tag;
  d.src = id_;
  d.group = meta.group;
  d.instance = meta.instance;
  d.aux = meta.aux;
  d.qp = static_cast<std::uint16_t>(qi);
  d.sport = sport;
  return d;
}

void Nic::send_nvls(std::uint32_t dst, std::uint64_t bytes, const MsgMeta& meta, Context& ctx) {
  const auto& my_ports = topo_.ports(id_);
  if (my_ports.empty() || topo_.kind(my_ports[0].peer) != NodeKind::kNvSwitch || meta.members == nullptr) {
    throw engine::InternalError("gpu " + std::to_string(id_) + ": NVLS message without an NVSwitch or members");
  }
  const Port& up = my_ports[0];
  const bool mc = meta.nvls == kNvlsMulticast;
  const std::uint32_t qdst = mc ? id_ : dst;
  // Reduce: one QP per (owner, channel); multicast: one per (channel, communicator), so that every
  // member sees one PSN stream per multicast QP (communicators are told apart modulo 2^16).
  const std::uint32_t ch = (mc ? 0xC000u : 0x8000u) | (meta.channel & 0x3FFFu);
  const std::uint64_t key = static_cast<std::uint64_t>(qdst) << 32 | static_cast<std::uint64_t>(ch) << 16 |
                            (mc ? (meta.group & 0xFFFFu) : 0u);
  const auto [qi, inserted] = qp_slot(key);
  if (inserted) {
    Qp q;
    q.dst = qdst;
    q.sport = 0;
    q.port = 0;
    q.noack = true;
    q.nvls = meta.nvls;
    q.cut_mtu = up.mtu_bytes;
    add_qp(q, up.rate_bps, up.mtu_bytes);
  }
  // Contributors (reduce) or the NVSwitch egress ports of the members (multicast): the
  // communicator's GPUs on this NVSwitch take part (NVLSTree: one NVLS group per node).
  auto local = [&](std::uint32_t m) {
    const auto& mp = topo_.ports(m);
    return !mp.empty() && mp[0].peer == up.peer;
  };
  std::uint64_t arg = 0;
  for (std::uint32_t m : *meta.members) {
    if (!local(m)) continue;
    const std::uint32_t pp = topo_.ports(m)[0].peer_port;
    if (pp >= 64) {
      throw engine::InputError(params_.source, "nccl.NCCL_NVLS_ENABLE",
                               "NVLS multicast from gpu " + std::to_string(id_) + " to gpu " + std::to_string(m) +
                                   ": beyond NVSwitch port 63, which simccl's NVLS multicast mask cannot name",
                               "set nccl.NCCL_NVLS_ENABLE=0 for this topology");
    }
    arg = mc ? arg | std::uint64_t{1} << pp : arg + 1;
  }
  // Same transfer unit rule as send_message (unit_of): every contributor of a shard cuts it
  // alike, so the switch matches packet i of each.
  TxPart part;
  part.set_bytes(bytes);
  part.done_idx = meta.done_idx;
  part.word = static_cast<std::uint32_t>(meta.tag);
  NvlsKey nk;
  nk.group = meta.group;
  nk.instance = meta.instance;
  nk.arg = arg;
  nk.slot = meta.done_slot;
  queue_part(qi, part, "raise cluster.nvlink_mtu", &nk);
  const MsgDesc d = message_desc(meta, bytes, bytes, ctx.now(), qi, 0);
  // Receivers learn of the message after the two NVLink hops' propagation (no later than the
  // first packet): the owner of a reduced shard, or every multicast member.
  if (mc) {
    for (std::uint32_t m : *meta.members) {
      if (local(m)) ctx.send(m, ctx.now() + up.latency_ps + topo_.ports(m)[0].latency_ps, kEvMsgDesc, d);
    }
  } else if (dst == id_) {
    ctx.send(id_, ctx.now() + 2 * up.latency_ps, kEvMsgDesc, d);
  }
  activate(qi, ctx);
}

void Nic::send_message(std::uint32_t dst, std::uint64_t bytes, const MsgMeta& meta, Context& ctx) {
  if (meta.nvls != kNvlsNone) {
    send_nvls(dst, bytes, meta, ctx);
    return;
  }
  const Split split = split_message(dst, bytes, meta.channel);
  const std::uint32_t parts = split.parts, first_k = split.first_k, nq = split.qps;
  // A message in one part carries the owner's handle in its TxPart; only split ones need msgs_.
  const std::uint32_t mi = parts > 1 ? new_msg(TxMsg{parts, meta.done_slot, meta.done_idx}) : 0;
  for (std::uint32_t i = 0; i < parts; ++i) {
    const std::uint64_t b = part_bytes(bytes, parts, i, split.mtu);
    const std::uint32_t qi = qp_for(dst, meta.channel, (first_k + i) % nq);
    // NVLink with cut-through NVSwitches (cluster.nvswitch_cut_through; otherwise units are
    // cluster.nvlink_mtu, as the flow rungs assume): the unit is only event granularity, so a
    // part is cut into at least kNvlinkUnitsPerPart units (never below 4 KiB, never above
    // cluster.nvlink_mtu). Concurrent channels on one GPU port interleave per unit, so a part
    // then finishes within 1/kNvlinkUnitsPerPart of its time under fine (flit) interleaving,
    // while large parts move in few units (docs/fabric.md, "NVLink transfer unit"; unit_of).
    TxPart part;
    part.set_bytes(b);
    part.multi = parts > 1 ? 1 : 0;
    part.word = parts > 1 ? mi : meta.done_slot;
    part.done_idx = meta.done_idx;
    queue_part(qi, part, "raise cluster.mtu or nic.qps_per_connection");
    const Qp& q = qps_[qi];
    // The descriptor reaches the receiver after the path's propagation latency: no later than
    // the first packet (which also pays serialization), and never sooner than the lookahead.
    const MsgDesc d = message_desc(meta, bytes, b, ctx.now(), qi, q.sport);
    ctx.send(dst, ctx.now() + path_latency(dst, roce_flow_hash(id_, dst, q.sport), nullptr), kEvMsgDesc, d);
    activate(qi, ctx);
  }
}

void Nic::activate(std::uint32_t qi, Context& ctx) {
  Qp& q = qps_[qi];
  if (q.active || q.snd_nxt >= q.next_psn) return;
  q.active = true;
  if (params_.nic.flow_start == FlowStart::kStaggered) {
    std::uint32_t& activations = activations_[qi];
    if (q.snd_nxt == q.snd_una && params_.nic.stagger_window_ps > 0) {
      const std::uint64_t h = engine::mix64((static_cast<std::uint64_t>(id_) << 40) ^
                                            (static_cast<std::uint64_t>(qi) << 20) ^ activations ^
                                            topo_.spec().seed * 0x9E3779B97F4A7C15ull);
      q.next_tx = std::max(q.next_tx, ctx.now() + static_cast<SimTime>(h % static_cast<std::uint64_t>(params_.nic.stagger_window_ps)));
    }
    ++activations;
  }
  ports_[q.port].active.push_back(qi);
  kick(q.port, ctx);
}

void Nic::kick(std::uint32_t port, Context& ctx) {
  NicPort& np = ports_[port];
  if (np.free_pending) return;
  if (np.busy_until <= ctx.now()) {
    try_tx(port, ctx);
  } else {
    np.free_pending = true;
    ctx.send(id_, np.busy_until, kEvPortFree, port);
  }
}

bool Nic::eligible(const Qp& q, SimTime now) const {
  if (q.snd_nxt >= q.next_psn || q.next_tx > now) return false;
  if (!q.noack && cc_.traits().windowed) {
    return cc_.window_open(q.rel, cc::TxWindow{q.snd_una, q.snd_nxt, rel_[q.rel].mtu + params_.nic.header_bytes});
  }
  return true;
}

void Nic::try_tx(std::uint32_t port, Context& ctx) {
  NicPort& np = ports_[port];
  const SimTime now = ctx.now();
  bool sent = true;
  if (!np.ctrl.empty()) {
    const WirePacket p = np.ctrl.pop();
    const Port& link = topo_.ports(id_)[port];
    const SimTime end = now + engine::serialization_ps(wire_bytes(p), link.rate_bps);
    np.busy_until = end;
    np.tx_bytes += wire_bytes(p);
    WirePacket out = p;
    out.in_port = static_cast<std::uint16_t>(link.peer_port);
    ctx.send(link.peer, end + link.latency_ps, kEvWire, out);
  } else if (!np.paused && !np.active.empty()) {
    // Round-robin over the port's active QPs; drop QPs with nothing left to send.
    SimTime wake = -1;
    std::uint32_t chosen = 0xFFFFFFFFu;
    std::size_t n = np.active.size();
    for (std::size_t scanned = 0; scanned < n;) {
      if (np.rr >= np.active.size()) np.rr = 0;
      const std::uint32_t qi = np.active[np.rr];
      Qp& q = qps_[qi];
      if (q.snd_nxt >= q.next_psn) {
        q.active = false;
        np.active[np.rr] = np.active.back();
        np.active.pop_back();
        --n;
        continue;
      }
      if (eligible(q, now)) {
        // The NIC limits only its RoCE QPs (NVLink and NVLS QPs are the GPU's, not the NIC's).
        // Message rate first: a held message start takes no cache slot; a miss takes no token.
        if (msg_gap_ps_ > 0 && !q.noack && next_msg_ps_ > now && starts_part(q)) {
          if (wake < 0 || next_msg_ps_ < wake) wake = next_msg_ps_;
        } else if (params_.nic.qp_cache == 0 || q.noack || qp_ctx_ready(qi, q, now)) {
          chosen = qi;
          ++np.rr;
          break;
        }
      }
      if (q.next_tx > now && (wake < 0 || q.next_tx < wake)) wake = q.next_tx;
      ++np.rr;
      ++scanned;
    }
    if (chosen != 0xFFFFFFFFu) {
      send_data(chosen, ctx);
    } else {
      sent = false;  // QPs wait for pacing (wake-up below) or for window (an ACK kicks the port)
      if (wake > now && (np.wake_at < 0 || wake < np.wake_at || np.wake_at <= now)) {
        np.wake_at = wake;
        ctx.send(id_, wake, kEvPortFree, port);
      }
      return;
    }
  } else {
    sent = false;
  }
  const bool more = !np.ctrl.empty() || (!np.paused && !np.active.empty());
  if (sent && more && !np.free_pending) {
    // Also when the packet took no time (an empty message without header bytes): the port is
    // free again at once, and one packet goes out per call.
    np.free_pending = true;
    ctx.send(id_, std::max(now, np.busy_until), kEvPortFree, port);
  }
}

bool Nic::qp_ctx_ready(std::uint32_t qi, Qp& q, SimTime now) {
  std::uint8_t& st = ctx_state_[qi];
  if (st == kCtxAbsent) {
    // A miss: the fetch runs while the port serves other QPs; no slot is taken until the
    // context is back and the QP is served (a fetched context cannot be evicted unused).
    ++ctr_.qp_ctx_misses;
    st = kCtxFetched;
    q.next_tx = std::max(q.next_tx, now + params_.nic.qp_miss_ps);
    if (q.next_tx > now) return false;  // else (no miss latency) it is inserted at once
  }
  auto unlink = [&](std::uint32_t i) {
    const std::uint32_t p = ctx_prev_[i], n = ctx_next_[i];
    (p == kCtxNone ? ctx_head_ : ctx_next_[p]) = n;
    (n == kCtxNone ? ctx_tail_ : ctx_prev_[n]) = p;
  };
  if (st == kCtxCached) {
    ++ctr_.qp_ctx_hits;
    if (ctx_head_ == qi) return true;
    unlink(qi);
  } else {  // kCtxFetched: insert, evicting the least recently served context when full
    if (ctx_cached_ == params_.nic.qp_cache) {
      const std::uint32_t victim = ctx_tail_;
      unlink(victim);
      ctx_state_[victim] = kCtxAbsent;
      --ctx_cached_;
    }
    st = kCtxCached;
    ++ctx_cached_;
  }
  ctx_prev_[qi] = kCtxNone;
  ctx_next_[qi] = ctx_head_;
  (ctx_head_ == kCtxNone ? ctx_tail_ : ctx_prev_[ctx_head_]) = qi;
  ctx_head_ = qi;
  return true;
}

bool Nic::starts_part(const Qp& q) const {
  if (q.snd_nxt < rel_[q.rel].high) return false;  // a retransmission: its message started before
  TxFifos::Pos pi = tx_parts_.begin(q.parts);
  std::uint64_t first_psn = q.head_psn;
  for (;;) {
    const TxRun& run = tx_parts_.at(pi);
    const std::uint64_t n = npkts_of(q, run.first.bytes());
    if (first_psn + n * run.count > q.snd_nxt) return (q.snd_nxt - first_psn) % n == 0;
    first_psn += n * run.count;
    tx_parts_.next(pi);
  }
}

void Nic::send_data(std::uint32_t qi, Context& ctx) {
  Qp& q = qps_[qi];
  NicPort& np = ports_[q.port];
  const SimTime now = ctx.now();
  const std::uint32_t psn = q.snd_nxt;
  // The part holding `psn`: PSNs are consecutive over the queued parts from head_psn on.
  // The parts of a run have one size, hence one unit and packet count: a run is skipped whole.
  TxFifos::Pos pi = tx_parts_.begin(q.parts);
  std::uint64_t first_psn = q.head_psn;
  const TxRun* run = &tx_parts_.at(pi);
  std::uint64_t unit = unit_of(q, run->first.bytes());
  std::uint64_t npkts = std::max<std::uint64_t>(1, (run->first.bytes() + unit - 1) / unit);
  while (first_psn + npkts * run->count <= psn) {
    first_psn += npkts * run->count;
    tx_parts_.next(pi);
    run = &tx_parts_.at(pi);
    unit = unit_of(q, run->first.bytes());
    npkts = std::max<std::uint64_t>(1, (run->first.bytes() + unit - 1) / unit);
  }
  const auto in_run = static_cast<std::uint32_t>((psn - first_psn) / npkts);
  first_psn += in_run * npkts;
  const TxPart part = run->part(in_run);
  const std::uint64_t off = static_cast<std::uint64_t>(psn - first_psn) * unit;
  WirePacket p;
  p.src = id_;
  p.dst = q.dst;
  p.psn = psn;
  p.bytes = static_cast<std::uint32_t>(std::min<std::uint64_t>(unit, part.bytes() - off));
  p.sport = q.sport;
  p.qp = static_cast<std::uint16_t>(qi);
  p.kind = kWireData;
  p.cls = kClassData;
  const bool last = psn + 1 == first_psn + npkts;
  p.flags = static_cast<std::uint8_t>((last ? kFlagLast : 0) | (q.noack ? kFlagNoAck : 0));
  const Port& link = topo_.ports(id_)[q.port];
  p.in_port = static_cast<std::uint16_t>(link.peer_port);
  std::uint64_t tx_bps = link.rate_bps;
  std::uint32_t done_slot = part.word;
  if (q.nvls != kNvlsNone) {
    const NvlsKey& key = nvls_keys_[part.key];
    done_slot = key.slot;
    p.nvls = q.nvls;
    p.hops[0].bits = static_cast<std::uint64_t>(key.group) << 32 | key.instance;
    p.hops[1].bits = static_cast<std::uint64_t>(part.word) << 32 | (psn - first_psn);
    p.hops[2].bits = key.arg;
    // The GPU issues multimem traffic at cluster.nvls_bandwidth at most (docs/simccl.md, NVLS).
    tx_bps = std::min<std::uint64_t>(tx_bps, topo_.spec().nvls_bps);
  }
  const std::uint32_t wb = wire_bytes(p);
  const SimTime end = now + engine::serialization_ps(wb, tx_bps);
  np.busy_until = end;
  np.tx_bytes += wb;
  if (sampler_.enabled()) sampler_.tx(q.port, now, end, p.bytes);  // payload (see SwitchLp)
  // The RTT sample's start (cc::AckInfo::rtt_ps): the last byte leaves the port.
  if (!q.noack && cc_.traits().echo_send_time) p.hops[0].bits = static_cast<std::uint64_t>(end);
  ctx.send(link.peer, end + link.latency_ps, kEvWire, p);
  ++ctr_.data_packets;
  // Unacknowledged QPs never rewind, so every packet goes out for the first time.
  RelQp* rel = q.noack ? nullptr : &rel_[q.rel];
  const bool first_time = rel == nullptr || psn >= rel->high;
  if (rel != nullptr) {
    if (msg_gap_ps_ > 0 && first_time && psn == first_psn) {
      next_msg_ps_ = now + msg_gap_ps_;
    }
    if (first_time) {
      rel->high = psn + 1;
    } else {
      ++ctr_.retransmits;
      ctr_.retransmit_bytes += p.bytes;
    }
    if (q.snd_nxt == q.snd_una) rel->last_progress = now;  // first packet outstanding: RTO from here
  }
  if (last && first_time) {
    // The GPU's send is done once its last byte left the port (NCCL's kernel moves on once the
    // data is handed to the NIC; reliability stays with the NIC, and the receive side completes
    // only when every byte arrived).
    ctx.send(id_, end, kEvQpTimer,
             QpTimer{qi, part.multi ? kTimerTxDoneMulti : kTimerTxDone, done_slot, part.done_idx});
  }
  ++q.snd_nxt;
  if (rel == nullptr) {
    // Posted NVLink writes: the part is done once serialized.
    q.snd_una = q.snd_nxt;
    if (last) {
      if (q.nvls != kNvlsNone) release_part(part);
      q.head_psn += static_cast<std::uint32_t>(npkts);
      pop_part(q);
    }
  } else {
    const cc::QpLink l = rel->link();
    cc_.on_send(q.rel, l, wb, now);
    if (cc_.traits().paced) {
      const double rate = cc_.rate_bps(q.rel, l);
      if (rate < static_cast<double>(l.line_bps)) {
        q.next_tx = now + static_cast<SimTime>(std::ceil(static_cast<double>(wb) * 8e12 / rate));
      }
    }
    arm_rto(qi, ctx);
  }
}

void Nic::arm_rto(std::uint32_t qi, Context& ctx) {
  Qp& q = qps_[qi];
  if (q.rto_armed) return;
  q.rto_armed = 1;
  ctx.send(id_, ctx.now() + params_.nic.rto_ps, kEvQpTimer, QpTimer{qi, kTimerRto, 0, 0});
}

void Nic::send_ctrl(WirePacket p, Context& ctx) {
  p.cls = kClassControl;
  const std::uint32_t port = topo_.route(id_, p.dst, roce_flow_hash(id_, p.dst, p.sport));
  ports_[port].ctrl.push(p);
  kick(port, ctx);
}

bool Nic::handle(const engine::Event& ev, Context& ctx) {
  switch (ev.kind) {
    case kEvWire: {
      const auto p = ev.get<WirePacket>();
      if (p.dst != id_) {
        throw engine::InternalError("gpu " + std::to_string(id_) + " got a packet for gpu " + std::to_string(p.dst));
      }
      if (p.kind == kWireData) {
        on_data(p, ctx);
      } else {
        on_ack(p, ctx);
      }
      return true;
    }
    case kEvPortFree: {
      const auto port = ev.get<std::uint32_t>();
      NicPort& np = ports_[port];
      if (np.wake_at == ctx.now()) np.wake_at = -1;
      if (np.busy_until <= ctx.now()) {
        np.free_pending = false;
        try_tx(port, ctx);
      }
      return true;
    }
    case kEvPfc: {
      const auto f = ev.get<PfcFrame>();
      NicPort& np = ports_[f.port];
      if (f.on != 0 && !np.paused) {
        np.paused = true;
        np.paused_since = ctx.now();
        ++ctr_.pauses_received;
        if (sampler_.enabled()) sampler_.count(f.port, ctx.now(), LinkSampler::Count::kXoff);
      } else if (f.on == 0 && np.paused) {
        np.paused = false;
        ctr_.paused_ps += ctx.now() - np.paused_since;
        if (sampler_.enabled()) sampler_.paused(f.port, np.paused_since, ctx.now());
        kick(f.port, ctx);
      }
      return true;
    }
    case kEvMsgDesc: {
      const auto d = ev.get<MsgDesc>();
      const std::uint64_t key = static_cast<std::uint64_t>(d.src) << 16 | d.qp;
      std::int64_t ri = rx_find(key);
      if (ri < 0) {
        ri = static_cast<std::int64_t>(rxq_.size());
        rx_index_.insert(key, static_cast<std::uint32_t>(ri));
        rxq_.emplace_back();
        rx_last_key_ = key;
        rx_last_idx_ = static_cast<std::uint32_t>(ri);
      }
      RxDesc r;
      r.flow_id = d.flow_id;
      r.flow_bytes = d.flow_bytes;
      r.aux = d.aux;
      r.part_bytes = d.part_bytes;
      r.flow_start = d.flow_start;
      r.tag = d.tag;
      r.group = d.group;
      r.instance = d.instance;
      rx_descs_.push(rxq_[static_cast<std::size_t>(ri)].descs, r);
      return true;
    }
    case kEvQpTimer: {
      const auto t = ev.get<QpTimer>();
      if (t.type == kTimerTxDone) {
        owner_.on_send_complete(t.a, t.b, ctx);
        return true;
      }
      if (t.type == kTimerTxDoneMulti) {
        TxMsg& m = msgs_[t.a];
        if (--m.parts_left == 0) {
          free_msgs_.push_back(t.a);
          owner_.on_send_complete(m.slot, m.idx, ctx);
        }
        return true;
      }
      Qp& q = qps_[t.qp];
      RelQp& r = rel_[q.rel];
      q.rto_armed = 0;
      if (q.snd_una >= q.next_psn) return true;  // everything acknowledged
      if (ctx.now() - r.last_progress >= params_.nic.rto_ps) {
        if (q.snd_nxt > q.snd_una) {
          ++ctr_.timeouts;
          if (++q.retries > params_.nic.retry_count) {
            throw engine::InputError(
                params_.origin("faults"), "faults",
                "at " + engine::format_time(ctx.now()) + " gpu " + std::to_string(id_) + "'s queue pair " +
                    std::to_string(t.qp) + " timed out " + std::to_string(q.retries) +
                    " times in a row without an ACK (nic.retry_count " + std::to_string(params_.nic.retry_count) +
                    ", nic.rto " + engine::format_time(params_.nic.rto_ps) +
                    "): the transport gives up, as NCCL does on 'transport retry counter exceeded'",
                "shorten the link-down window, lower the BER, or raise nic.retry_count / nic.rto");
          }
          q.snd_nxt = q.snd_una;  // go back N
        }
        r.last_progress = ctx.now();
        activate(t.qp, ctx);
      }
      q.rto_armed = 1;
      ctx.send(id_, r.last_progress + params_.nic.rto_ps, kEvQpTimer, QpTimer{t.qp, kTimerRto, 0, 0});
      return true;
    }
    default:
      return false;
  }
}

void Nic::on_data(const WirePacket& p, Context& ctx) {
  const std::uint64_t key = static_cast<std::uint64_t>(p.src) << 16 | p.qp;
  const std::int64_t ri = rx_find(key);
  // A retransmitted duplicate may arrive after its message part completed (no descriptor left);
  // anything else always finds its descriptor (it travels ahead of the first packet).
  if (ri < 0 || (rxq_[static_cast<std::size_t>(ri)].descs.empty() &&
                 p.psn >= rxq_[static_cast<std::size_t>(ri)].expected)) {
    throw engine::InternalError("gpu " + std::to_string(id_) + ": data from gpu " + std::to_string(p.src) +
                                " qp " + std::to_string(p.qp) + " before its message descriptor");
  }
  // rxq_ is a deque and only kEvMsgDesc appends to it, so `r` outlives the owner's callbacks.
  RxQp& r = rxq_[static_cast<std::size_t>(ri)];
  const bool reorder_ok = params_.sw.routing != RoutingMode::kEcmp || (p.flags & kFlagNoAck);
  const bool noack = (p.flags & kFlagNoAck) != 0;
  // Notification point (e.g. DCQCN's: at most one CNP per cnp_interval per QP); no entry yet:
  // no CNP sent.
  SimTime* last_cnp = nullptr;
  if ((p.flags & kFlagCe) && cc_.traits().notify_on_ce && !noack) {
    last_cnp = &rx_last_cnp_.try_emplace(static_cast<std::uint32_t>(ri), SimTime{-1}).first->second;
  }
  if (last_cnp != nullptr && cc_.notify_ce(*last_cnp, ctx.now())) {
    WirePacket cnp;
    cnp.src = id_;
    cnp.dst = p.src;
    cnp.qp = p.qp;
    cnp.sport = p.sport;
    cnp.kind = kWireCnp;
    ++ctr_.cnps_sent;
    send_ctrl(cnp, ctx);
  }
  auto ack = [&](std::uint8_t kind) {
    WirePacket a;
    a.src = id_;
    a.dst = p.src;
    a.qp = p.qp;
    a.sport = p.sport;
    a.kind = kind;
    a.psn = r.expected;
    a.nint = p.nint;
    a.flags = static_cast<std::uint8_t>((p.flags & kFlagCe) ? kFlagEce : 0);
    for (std::uint32_t i = 0; i < p.nint; ++i) a.hops[i] = p.hops[i];
    if (cc_.traits().echo_send_time) a.hops[0] = p.hops[0];  // the data packet's send time
    if (kind == kWireNack) {
      ++ctr_.nacks_sent;
    } else {
      ++ctr_.acks_sent;
    }
    send_ctrl(a, ctx);
  };
  if (p.psn < r.expected) {  // duplicate after go-back-N
    if (!noack && (p.flags & kFlagLast)) ack(kWireAck);
    return;
  }
  const std::uint32_t gap = p.psn - r.expected;
  if (gap > 0 && !reorder_ok) {
    if (!r.nack_sent) {
      r.nack_sent = 1;
      ack(kWireNack);
    }
    return;
  }
  bool ack_now = false;
  // Delivers the packet at the head of the receive window (entry `e` as kept in rx_ooo_).
  auto deliver = [&](std::uint64_t e) {
    ++r.expected;
    ++r.since_ack;
    r.got += e & 0xFFFFFFFFull;
    r.nack_sent = 0;
    if (e & kLastBit) {
      ack_now = true;
      if (r.descs.empty()) {
        throw engine::InternalError("gpu " + std::to_string(id_) + ": message part without descriptor");
      }
      const RxDesc d = rx_descs_.front(r.descs);
      rx_descs_.pop(r.descs);
      if (r.got != d.part_bytes) {
        throw engine::InternalError("gpu " + std::to_string(id_) + ": part of flow " + std::to_string(d.flow_id) +
                                    " has " + std::to_string(r.got) + " bytes, expected " + std::to_string(d.part_bytes));
      }
      r.got = 0;
      Packet m;
      m.flow_id = d.flow_id;
      m.flow_bytes = d.flow_bytes;
      m.flow_start = d.flow_start;
      m.flow_hash = roce_flow_hash(p.src, id_, p.sport);  // the QP's port, as in its MsgDesc
      m.tag = d.tag;
      m.src_rank = p.src;
      m.dst_rank = id_;
      m.group = d.group;
      m.instance = d.instance;
      m.aux = d.aux;
      // Packet::bytes is 32 bits: a part of 4 GiB or more is handed over in pieces of 2 GiB at
      // the same instant (the owner adds them up per flow), not truncated modulo 2^32 (which
      // left such a message never completed).
      std::uint64_t left = d.part_bytes;
      do {
        const std::uint64_t piece = std::min<std::uint64_t>(left, kMaxDeliveryBytes);
        m.bytes = static_cast<std::uint32_t>(piece);
        left -= piece;
        owner_.on_part_received(m, ctx);
      } while (left > 0);
    }
  };
  const std::uint64_t entry = p.bytes | ((p.flags & kFlagLast) ? kLastBit : 0) | kPresent;
  if (gap == 0 && !r.held) {
    // In order with nothing held back (nearly every packet): delivered at once, without an
    // rx_ooo_ entry (a receive QP keeps no out-of-order buffer unless it needs one).
    deliver(entry);
  } else {
    // An unordered_map node: the reference stays valid while deliver() calls the owner.
    SmallFifo<std::uint64_t>& ooo = rx_ooo_[static_cast<std::uint32_t>(ri)];
    r.held = 1;
    if (ooo.size() <= gap) ooo.resize(gap + 1, 0);
    ooo[gap] = entry;
    while (!ooo.empty() && (ooo.front() & kPresent)) {
      const std::uint64_t e = ooo.front();
      ooo.pop_front();
      deliver(e);
    }
    if (ooo.empty()) {
      r.held = 0;
      rx_ooo_.erase(static_cast<std::uint32_t>(ri));
    }
  }
  if (!noack && (ack_now || r.since_ack >= ack_interval_)) {
    r.since_ack = 0;
    ack(kWireAck);
  }
}

void Nic::on_ack(const WirePacket& p, Context& ctx) {
  if (p.qp >= qps_.size()) {
    throw engine::InternalError("gpu " + std::to_string(id_) + ": ack for unknown qp " + std::to_string(p.qp));
  }
  Qp& q = qps_[p.qp];
  if (q.noack) {
    throw engine::InternalError("gpu " + std::to_string(id_) + ": control packet for unacknowledged qp " +
                                std::to_string(p.qp));
  }
  RelQp& r = rel_[q.rel];
  const SimTime now = ctx.now();
  switch (p.kind) {
    case kWireCnp:
      ++ctr_.cnps_received;
      cc_.on_cnp(q.rel, r.link(), now);
      return;
    case kWireAck:
      cc_.on_ack(q.rel, r.link(),
                 cc::AckInfo{p.psn, q.snd_nxt, p.nint, p.hops,
                             cc_.traits().echo_send_time ? now - static_cast<SimTime>(p.hops[0].bits) : SimTime{-1}},
                 now);
      acked_to(p.qp, p.psn, ctx);
      kick(q.port, ctx);
      return;
    case kWireNack:
      acked_to(p.qp, p.psn, ctx);
      if (q.snd_nxt > p.psn) {
        q.snd_nxt = p.psn;  // go back N
        activate(p.qp, ctx);
      }
      kick(q.port, ctx);
      return;
    default:
      throw engine::InternalError("gpu " + std::to_string(id_) + ": unknown control packet kind");
  }
}

void Nic::acked_to(std::uint32_t qi, std::uint32_t psn, Context& ctx) {
  Qp& q = qps_[qi];
  if (psn <= q.snd_una) return;
  q.snd_una = psn;
  rel_[q.rel].last_progress = ctx.now();
  q.retries = 0;
  if (q.snd_nxt < q.snd_una) q.snd_nxt = q.snd_una;
  while (!q.parts.empty()) {
    const std::uint32_t n = npkts_of(q, tx_parts_.front(q.parts).first.bytes());
    if (q.head_psn + n > q.snd_una) break;
    q.head_psn += n;
    pop_part(q);
  }
}

// Every mutable member in declaration order. conn_rr_, rx_last_cnp_ and rx_ooo_ are only looked
// up (find / emplace / erase), never iterated, so their bucket order does not affect results;
// they are written sorted by key.
void Nic::save(engine::StateWriter& w) const {
  w.put(ack_interval_);
  w.put<std::uint64_t>(ports_.size());
  for (const NicPort& p : ports_) {
    w.put(p.busy_until);
    w.put(p.free_pending);
    w.put(p.paused);
    w.put(p.paused_since);
    w.put(p.wake_at);
    p.ctrl.save(w);
    w.put_vector(p.active);
    w.put(p.rr);
    w.put(p.tx_bytes);
  }
  w.put_vector(std::vector<Qp>(qps_.begin(), qps_.end()));
  tx_parts_.save(w);
  w.put_vector(rel_);
  w.put_vector(activations_);
  cc_.save(w);
  w.put_vector(nvls_keys_);
  w.put_vector(free_nvls_keys_);
  w.put(last_nvls_key_);
  qp_index_.save(w);
  engine::put_map(w, conn_rr_);
  rx_index_.save(w);
  w.put_vector(std::vector<RxQp>(rxq_.begin(), rxq_.end()));
  rx_descs_.save(w);
  engine::put_map(w, rx_last_cnp_);
  std::vector<std::uint32_t> ooo;
  for (const auto& kv : rx_ooo_) ooo.push_back(kv.first);
  std::sort(ooo.begin(), ooo.end());
  w.put<std::uint64_t>(ooo.size());
  for (std::uint32_t k : ooo) {
    w.put(k);
    rx_ooo_.at(k).save(w);
  }
  w.put(rx_last_key_);
  w.put(rx_last_idx_);
  w.put_vector(ctx_state_);
  w.put_vector(ctx_prev_);
  w.put_vector(ctx_next_);
  w.put(ctx_head_);
  w.put(ctx_tail_);
  w.put(ctx_cached_);
  w.put(next_msg_ps_);
  w.put_vector(msgs_);
  w.put_vector(free_msgs_);
  w.put(ctr_);
  sampler_.save(w);
}

void Nic::load(engine::StateReader& r) {
  ack_interval_ = r.get<std::uint32_t>();
  if (r.get<std::uint64_t>() != ports_.size()) r.fail();
  for (NicPort& p : ports_) {
    p.busy_until = r.get<engine::SimTime>();
    p.free_pending = r.get<bool>();
    p.paused = r.get<bool>();
    p.paused_since = r.get<engine::SimTime>();
    p.wake_at = r.get<engine::SimTime>();
    p.ctrl.load(r);
    p.active = r.get_vector<std::uint32_t>();
    p.rr = r.get<std::uint32_t>();
    p.tx_bytes = r.get<std::uint64_t>();
  }
  const auto qps = r.get_vector<Qp>();
  qps_.assign(qps.begin(), qps.end());
  tx_parts_.load(r);
  rel_ = r.get_vector<RelQp>();
  activations_ = r.get_vector<std::uint32_t>();
  cc_.load(r);
  nvls_keys_ = r.get_vector<NvlsKey>();
  free_nvls_keys_ = r.get_vector<std::uint32_t>();
  last_nvls_key_ = r.get<std::uint32_t>();
  qp_index_.load(r);
  engine::load_map(r, conn_rr_);
  rx_index_.load(r);
  const auto rxq = r.get_vector<RxQp>();
  rxq_.assign(rxq.begin(), rxq.end());
  rx_descs_.load(r);
  engine::load_map(r, rx_last_cnp_);
  rx_ooo_.clear();
  const auto n = r.get<std::uint64_t>();
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto k = r.get<std::uint32_t>();
    rx_ooo_[k].load(r);
  }
  rx_last_key_ = r.get<std::uint64_t>();
  rx_last_idx_ = r.get<std::uint32_t>();
  ctx_state_ = r.get_vector<std::uint8_t>();
  ctx_prev_ = r.get_vector<std::uint32_t>();
  ctx_next_ = r.get_vector<std::uint32_t>();
  ctx_head_ = r.get<std::uint32_t>();
  ctx_tail_ = r.get<std::uint32_t>();
  ctx_cached_ = r.get<std::uint32_t>();
  next_msg_ps_ = r.get<engine::SimTime>();
  if ((params_.nic.qp_cache > 0 ? qps_.size() : 0) != ctx_state_.size() || ctx_prev_.size() != ctx_state_.size() ||
      ctx_next_.size() != ctx_state_.size()) {
    r.fail();
  }
  msgs_ = r.get_vector<TxMsg>();
  free_msgs_ = r.get_vector<std::uint32_t>();
  ctr_ = r.get<NicCounters>();
  sampler_.load(r);
}

}  // namespace fabricsim::models
