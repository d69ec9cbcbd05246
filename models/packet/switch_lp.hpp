#pragma once
/// @file switch_lp.hpp
/// Output-queued, store-and-forward switch (Ethernet leaf/spine/core, or NVSwitch) with a shared
/// buffer, per-port per-class queues, PFC, ECN and HPCC INT.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/lp.hpp"
#include "engine/state_io.hpp"
#include "models/core/block_fifos.hpp"
#include "models/topology/cluster.hpp"
#include "models/core/fabric_params.hpp"
#include "models/core/link_sampler.hpp"
#include "models/core/packet.hpp"
#include "models/packet/packet_store.hpp"

namespace fabricsim::models {

/// Growable ring buffer of packets (a NIC's control queue): no allocation per packet once it
/// reached its high-water mark. It doubles and never shrinks, so it suits a queue that is short;
/// switch queues use a PacketStore and references instead.
class PacketRing {
 public:
  bool empty() const { return size_ == 0; }
  std::uint32_t size() const { return size_; }
  void push(const WirePacket& p) {
    if (size_ == buf_.size()) grow();
    buf_[(head_ + size_) & (buf_.size() - 1)] = p;
    ++size_;
  }
  WirePacket pop() {
    WirePacket p = buf_[head_];
    head_ = (head_ + 1) & (static_cast<std::uint32_t>(buf_.size()) - 1);
    --size_;
    return p;
  }

  /// Checkpoints: writes the ring (buffer, head, size); load() restores it exactly.
  void save(engine::StateWriter& w) const {
    w.put_vector(buf_);
    w.put(head_);
    w.put(size_);
  }
  /// Restores what save() wrote. @throws engine::InputError on bytes that do not fit.
  void load(engine::StateReader& r) {
    buf_ = r.get_vector<WirePacket>();
    head_ = r.get<std::uint32_t>();
    size_ = r.get<std::uint32_t>();
    if (size_ > buf_.size() || (buf_.size() & (buf_.size() - 1)) != 0) r.fail();
  }

 private:
  void grow();
  std::vector<WirePacket> buf_;
  std::uint32_t head_ = 0, size_ = 0;
};

/// Per-switch counters (summed over ports), reported in the run summary and HDF5 /links.
struct SwitchCounters {
  std::uint64_t pause_frames = 0;   ///< PFC XOFF frames this switch sent upstream
  std::uint64_t resume_frames = 0;  ///< PFC XON frames sent
  engine::SimTime paused_ps = 0;    ///< total time its egress ports were paused by a downstream XOFF
  std::uint64_t ecn_marks = 0;      ///< data packets marked CE
  std::uint64_t drops = 0;          ///< packets dropped (lossy admission or headroom overflow)
  std::uint64_t headroom_drops = 0; ///< lossless packets dropped because PFC headroom overflowed
  std::uint64_t max_buffer_bytes = 0;  ///< high-water mark of the shared buffer
  std::uint64_t packets = 0;        ///< packets forwarded (packet hops out of this switch)
  std::uint64_t nvls_absorbed = 0;  ///< NVLS reduce contributions that ended here (reduced away)
  std::uint64_t nvls_copies = 0;    ///< NVLS multicast copies sent (one per member per packet)
  std::uint64_t down_drops = 0;     ///< lossy packets dropped at a port whose link was down (in `drops`)
  std::uint64_t ber_drops = 0;      ///< frames lost to a link's bit-error rate (in `drops`)
  /// Link-level retry (SwitchParams::link_retry): units (frames or cells) sent again on a link
  /// after a bit error, and their wire bytes.
  std::uint64_t link_retransmits = 0;
  std::uint64_t link_retransmit_bytes = 0;
};

/// Per egress port totals over the run (the summary's per-link table, HDF5 /link_totals).
struct PortCounters {
  std::uint64_t data_bytes = 0;        ///< data payload bytes serialized (no headers, no control frames)
  std::uint64_t ecn_marks = 0;         ///< data packets CE-marked when enqueued here
  std::uint64_t pfc_pauses = 0;        ///< XOFF frames from the peer that paused this transmitter
  engine::SimTime paused_ps = 0;       ///< time the peer's PFC held this port (intervals closed by an XON)
  std::uint64_t drops = 0;             ///< packets dropped that were bound for this port
  std::uint64_t link_retransmits = 0;  ///< link-level retry units sent again on this port's link
};

/// A switch LP.
///
/// Arrival (store-and-forward, the whole packet received): pick the egress port (ECMP hash of
/// the 5-tuple with this switch's seed, spraying, or least-loaded adaptive), admit it to the
/// shared buffer (data class with PFC: the ingress (port, class) counter against a dynamic XOFF
/// threshold, then the port's headroom; lossy classes: a dynamic egress threshold), mark ECN
/// (RED on the egress queue), enqueue. Egress: strict priority between classes, a class paused
/// by the downstream peer's PFC is skipped; a port has at most one pending event (its
/// serialization end) and only while packets wait. Dequeue releases the buffer, may send XON,
/// and stamps HPCC INT. NVSwitches (`lossless_unbounded`) keep the queues but no buffer limit,
/// no PFC and no ECN (NVLink is credit-based and lossless).
class SwitchLp final : public engine::Lp {
 public:
  /// @param params outlives the LP. @param lossless_unbounded true for NVSwitches.
  SwitchLp(const Topology& topo, engine::LpId id, const FabricParams& params, bool lossless_unbounded);
  void init(engine::Context&) override {}
  void handle(const engine::Event& ev, engine::Context& ctx) override;
  /// Checkpoints (docs/checkpoint.md): save_state holds every mutable member (queues, packet
  /// store, buffer and PFC/ECN state, counters, samplers, NVLS reductions in progress).
  bool checkpointable() const override { return true; }
  std::string_view type_name() const override { return "SwitchLp"; }
  void save_state(engine::StateWriter& out) const override;
  void load_state(engine::StateReader& in) override;
  engine::LpId lp_id() const { return id_; }
  /// Bytes transmitted per egress port (wire bytes).
  const std::vector<std::uint64_t>& port_bytes() const { return tx_bytes_; }
  /// Largest queueing delay seen at any egress port (ps): backlog ahead of a packet at its rate.
  engine::SimTime max_queue_delay_ps() const { return max_queue_ps_; }
  const SwitchCounters& counters() const { return ctr_; }
  /// Totals per egress port (indexed like Topology::ports(lp_id())).
  const std::vector<PortCounters>& port_counters() const { return port_ctr_; }
  /// `jobs:` specs: data payload bytes of job j serialized on port p at [p * jobs + j]
  /// (FabricParams::jobs; empty for a single-job spec).
  const std::vector<std::uint64_t>& port_job_bytes() const { return job_bytes_; }
  /// PFC XOFF frames sent upstream on each port.
  const std::vector<std::uint64_t>& port_pauses() const { return port_pauses_; }
  /// Starts sampling egress bytes and queue backlog in bins of `bin_ps` (ps); off by default.
  void enable_sampling(engine::SimTime bin_ps) { sampler_.enable(bin_ps, ports_.size()); }
  const LinkSampler& sampler() const { return sampler_; }
  /// PFC headroom of a port (bytes), as configured or auto-sized.
  std::uint64_t headroom_bytes(std::uint32_t port) const { return headroom_[port]; }
  /// Shared buffer available to queues (bytes): buffer minus all ports' headroom.
  std::uint64_t shared_bytes() const { return shared_size_; }

 private:
  /// Egress port for `p` at time `now`: the ECMP set, less the ports whose link routing sees as
  /// down and those whose next switch has no live path on to p.dst (when that leaves any).
  std::uint32_t pick_port(const WirePacket& p, engine::SimTime now) const;
  /// Picks from `cand` (non-empty) by the routing mode.
  std::uint32_t choose_port(std::span<const std::uint32_t> cand, const WirePacket& p) const;
  /// Link faults (FabricParams::faults): routing sees the link x-y as down at `now`.
  bool routed_down(engine::LpId x, engine::LpId y, engine::SimTime now) const;
  /// A shortest path from `node` to GPU `dst` exists whose links routing sees as up at `now`.
  bool reachable(engine::LpId node, std::uint32_t dst, engine::SimTime now) const;
  /// The link of `port` is down at `now`; `*up` gets when it comes back (LinkFault::kNever).
  bool link_down(std::uint32_t port, engine::SimTime now, engine::SimTime* up) const;
  /// Pops the head of queue (port, cls), releasing its buffer (and sending XON if due).
  WirePacket dequeue(std::uint32_t port, std::uint32_t cls, engine::Context& ctx);
  std::uint64_t xoff_threshold() const;
  void on_arrive(WirePacket p, engine::Context& ctx);
  /// Admits `p` to egress port `out` (buffer, PFC, ECN) and starts serialization if idle.
  void enqueue(WirePacket p, std::uint32_t out, engine::Context& ctx);
  /// Buffer admission of `p` at egress port `out` (shared buffer, PFC, ECN marking; updates
  /// p.flags). @returns false if the packet was dropped. NVSwitches admit everything.
  bool admit(WirePacket& p, std::uint32_t out, engine::Context& ctx);
  /// Appends queue entry `entry` (a store reference, kCopyBit set for a multicast copy) of
  /// `size` wire bytes to queue `k` of port `out` and starts serialization if the port is idle.
  void push_entry(std::uint32_t entry, std::uint64_t size, std::uint32_t out, std::size_t k,
                  engine::Context& ctx);
  /// Queue entry bit: a multicast copy, whose destination is the port's peer (the stored packet
  /// is shared by all copies).
  static constexpr std::uint32_t kCopyBit = std::uint32_t{1} << 31;
  /// NVLink SHARP (packet.hpp NvlsMode). @returns true if `p` was consumed (a reduce
  /// contribution still waiting for others, or a multicast that was copied to the members);
  /// false if `p` (now the reduced packet) continues to its owner.
  bool nvls_arrive(WirePacket& p, engine::Context& ctx);
  void try_tx(std::uint32_t port, engine::Context& ctx);
  void send_pfc(std::uint32_t port, bool on, engine::Context& ctx);
  bool has_eligible(std::uint32_t port) const;
  /// Link-level retry of a `size`-byte frame serialized at `rate_bps` on `port` at bit-error rate
  /// `ber`: draws each unit's replays, counts them, and @returns the extra time the port stays
  /// busy (ps); `*lost` = some unit still failed after SwitchParams::link_retry_max replays.
  engine::SimTime link_retry(std::uint32_t port, std::uint64_t size, std::uint64_t rate_bps, double ber, bool* lost);
  std::uint32_t wire_bytes(const WirePacket& p) const {
    return p.kind == kWireData ? p.bytes + params_.nic.header_bytes : params_.nic.control_bytes;
  }

  const Topology& topo_;
  engine::LpId id_;
  const FabricParams& params_;
  const std::vector<Port>& ports_;
  bool unbounded_;
  bool int_;  // the congestion control wants in-band telemetry (cc::CcTraits::wants_int)
  std::uint64_t shared_size_ = 0;
  std::uint64_t min_xoff_ = 0;  // floor of the dynamic XOFF threshold: two of the largest frames
  std::uint64_t shared_used_ = 0;
  std::uint64_t ecn_counter_ = 0;
  // Per port x class: FIFO of queue entries (PacketStore references, kCopyBit for a multicast
  // copy): 4 bytes per queued packet copy in blocks shared by all ports, the packets themselves
  // are in store_.
  BlockFifos<std::uint32_t> queue_;
  PacketStore store_;
  std::vector<std::uint64_t> qbytes_;
  std::vector<std::uint8_t> paused_;
  // Per port
  std::vector<engine::SimTime> busy_until_;
  std::vector<std::uint8_t> free_pending_;
  std::vector<std::uint64_t> tx_bytes_;
  std::vector<engine::SimTime> paused_since_;
  std::vector<std::uint64_t> kmin_, kmax_;
  // Per ingress port (lossless data class)
  std::vector<std::uint64_t> ing_shared_, ing_hdrm_, headroom_;
  std::vector<std::uint8_t> xoff_sent_;
  std::vector<std::uint64_t> port_pauses_;
  engine::SimTime max_queue_ps_ = 0;
  SwitchCounters ctr_;
  std::vector<PortCounters> port_ctr_;
  std::vector<std::uint64_t> job_bytes_;
  LinkSampler sampler_;
  // Link faults: per port, indices into params_.faults of the faults on its link (empty when
  // none); any_down_ = some fault is a link-down (routing must check); BER draw counter.
  std::vector<std::vector<std::uint32_t>> port_faults_;
  bool any_down_ = false;
  std::uint64_t ber_counter_ = 0;
  // Reconverged routing is piecewise constant in time: it changes only at the link-down faults'
  // at_ps + reconverge_ps and until_ps + reconverge_ps (route_changes_, sorted). pick_port keeps,
  // per destination GPU, the ECMP set less dead next hops for the current interval (empty = the
  // fault-free set), recomputed when the interval changes; only looked up, never iterated.
  std::vector<engine::SimTime> route_changes_;
  mutable std::size_t route_epoch_ = 0;
  mutable std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> live_;
  // NVLS reductions in progress, per (owner, group, instance, tag, packet index): contributions
  // counted so far and the owner's own packet (forwarded once the count is complete). Only
  // looked up, never iterated (results do not depend on the map's order).
  struct NvlsKey {
    std::uint32_t dst = 0, group = 0, instance = 0, tag = 0, index = 0;
    bool operator==(const NvlsKey&) const = default;
  };
  struct NvlsKeyHash {
    std::size_t operator()(const NvlsKey& k) const noexcept;
  };
  struct NvlsEntry {
    std::uint32_t count = 0;
    bool has_owner = false;
    WirePacket owner;
  };
  std::unordered_map<NvlsKey, NvlsEntry, NvlsKeyHash> nvls_;
};

/// ECMP flow hash of a RoCEv2 connection's 5-tuple (src, dst, UDP source port; destination
/// port 4791 and protocol UDP are the same for all RoCEv2 traffic). Switches mix it with their
/// own seed (Topology::route), so equal seeds reproduce hash polarization.
std::uint64_t roce_flow_hash(std::uint32_t src, std::uint32_t dst, std::uint16_t sport);

/// UDP source port a NIC gives QP `qp_index` of the connection src -> dst (RoCEv2 NICs derive it
/// from the QP number; here a hash, deterministic per run seed), in [49152, 65535] (IANA dynamic).
std::uint16_t roce_sport(std::uint32_t src, std::uint32_t dst, std::uint32_t qp_index, std::uint64_t seed);

}  // namespace fabricsim::models
