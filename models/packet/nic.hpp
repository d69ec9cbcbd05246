#pragma once
/// @file nic.hpp
/// The GPU's network endpoint: RoCEv2 RNIC ports with queue pairs, per-QP congestion
/// control (a plug-in of models/cc: rate limiter, window, notification point), a TX scheduler
/// across QPs, ACK/NACK, go-back-N, CNPs, PFC reaction; and the NVLink port (lossless, unacknowledged, line rate). Owned by GpuRankLp,
/// which hands it messages and receives completed message parts and send completions.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/lp.hpp"
#include "models/cc/registry.hpp"
#include "models/topology/cluster.hpp"
#include "models/core/fabric_params.hpp"
#include "models/core/fifo_pool.hpp"
#include "models/core/flat_index.hpp"
#include "models/core/link_sampler.hpp"
#include "models/core/packet.hpp"
#include "models/core/small_fifo.hpp"
#include "models/packet/switch_lp.hpp"

namespace fabricsim::models {

/// With cluster.nvswitch_cut_through, an NVLink message part is cut into at least this many
/// transfer units (when that keeps units of at least kNvlinkMinUnitBytes), so that concurrent
/// parts interleave finely on a GPU port.
inline constexpr std::uint64_t kNvlinkUnitsPerPart = 8;
/// Smallest NVLink transfer unit chosen for a part (bytes): the former default unit, or
/// cluster.nvlink_mtu when that is smaller.
inline constexpr std::uint64_t kNvlinkMinUnitBytes = 4096;

/// What a message is, for the receiver's matching and the flow records.
struct MsgMeta {
  std::uint64_t flow_id = 0;
  std::int64_t tag = 0;
  std::uint32_t group = 0;
  std::uint32_t instance = 0;
  std::uint32_t done_slot = 0;  ///< opaque to the NIC: returned by on_send_complete
  std::uint32_t done_idx = 0;
  /// NCCL channel: each channel has its own connection (own QPs, own UDP source ports), so
  /// channels to the same peer progress concurrently rather than in one QP's order.
  std::uint16_t channel = 0;
  std::uint32_t aux = 0;  ///< carried to the receiver (Packet::aux)
  /// NVLink SHARP (NvlsMode; the packet rung, coarse rungs use flow_model): kNvlsReduce sends this GPU's copy of the shard
  /// owned by `dst` into the NVSwitch's reduction (only the owner, dst == this GPU, receives:
  /// the reduced shard, once all members contributed); kNvlsMulticast sends to the NVSwitch,
  /// which copies it to every member (dst is ignored). Both need `members`.
  std::uint8_t nvls = 0;
  const std::vector<std::uint32_t>* members = nullptr;  ///< NVLS: the communicator's GPUs
};

/// Callbacks from the NIC to the rank executor.
class NicOwner {
 public:
  virtual ~NicOwner() = default;
  /// A message part arrived completely (`p.bytes` = part bytes; p.flow_* describe the message).
  virtual void on_part_received(const Packet& p, engine::Context& ctx) = 0;
  /// The last byte of every part of a message left the GPU (first transmission; go-back-N
  /// retransmissions stay inside the NIC).
  virtual void on_send_complete(std::uint32_t done_slot, std::uint32_t done_idx, engine::Context& ctx) = 0;
};

/// NIC counters (per GPU), reported in the run summary.
struct NicCounters {
  std::uint64_t data_packets = 0;     ///< data packets sent (including retransmissions)
  std::uint64_t retransmits = 0;      ///< data packets sent again after NACK/timeout (go-back-N)
  std::uint64_t retransmit_bytes = 0; ///< payload bytes of those packets
  std::uint64_t timeouts = 0;         ///< RTO expiries that rewound a QP
  std::uint64_t nacks_sent = 0;
  std::uint64_t cnps_sent = 0;        ///< DCQCN notification point
  std::uint64_t cnps_received = 0;    ///< DCQCN reaction point rate cuts
  std::uint64_t acks_sent = 0;
  std::uint64_t pauses_received = 0;  ///< PFC XOFF frames that paused a NIC port
  engine::SimTime paused_ps = 0;      ///< time NIC ports were paused
  std::uint64_t qps = 0;              ///< queue pairs created
  /// nic.qp_cache (limited only): data packets whose RoCE QP context was cached when the TX
  /// scheduler served it, and serves that found it absent (each starts one nic.qp_miss_latency fetch).
  std::uint64_t qp_ctx_hits = 0;
  std::uint64_t qp_ctx_misses = 0;
};

/// Endpoint state of one GPU. All state has one writer: the GPU's LP.
class Nic {
 public:
  Nic(const Topology& topo, engine::LpId gpu, const FabricParams& params, NicOwner& owner);

  /// Sends `bytes` to GPU `dst` (NVLink inside the scale-up domain, else RoCE over the NIC),
  /// split over the connection's QPs. Completion comes back through NicOwner.
  void send_message(std::uint32_t dst, std::uint64_t bytes, const MsgMeta& meta, engine::Context& ctx);
  /// Handles kEvWire, kEvPortFree, kEvPfc, kEvMsgDesc, kEvQpTimer. @returns false for other kinds.
  bool handle(const engine::Event& ev, engine::Context& ctx);

  /// How send_message splits a message over the connection's queue pairs (the coarse
  /// rungs ride the same QPs, so they take the same UDP source ports and ECMP paths).
  struct Split {
    std::uint32_t parts = 1;    ///< messages of >= qps x MTU split over all QPs (NCCL_IB_SPLIT_DATA_ON_QPS=1)
    std::uint32_t first_k = 0;  ///< QP of part 0; part i rides QP (first_k + i) % qps
    std::uint32_t qps = 1;      ///< QPs per connection (1 on NVLink)
    std::uint32_t mtu = 0;      ///< payload bytes per packet on the first hop
    bool nvlink = false;        ///< inside the scale-up domain (no ACKs, UDP source port 0)
  };
  /// The split of a `bytes`-byte message to GPU `dst` on NCCL channel `channel`, advancing the
  /// per-connection round robin exactly as send_message does (whole messages go to the next QP in
  /// turn). Creates no QP. Called instead of send_message by the coarse rungs.
  Split split_message(std::uint32_t dst, std::uint64_t bytes, std::uint16_t channel);
  /// Bytes of part `i` of a `bytes`-byte message split into `parts` MTU-aligned shares (the last
  /// part takes the rest), as send_message cuts it.
  static std::uint64_t part_bytes(std::uint64_t bytes, std::uint32_t parts, std::uint32_t i, std::uint32_t mtu);
  /// ECMP hash of queue pair `qp_index` (= channel << 16 | k) from GPU `src` to GPU `dst`: the
  /// 5-tuple hash of its RoCE UDP source port (roce_sport, roce_flow_hash), which every switch
  /// and the GPU's own port choice use. The same value for the packet and coarse rungs.
  static std::uint64_t qp_flow_hash(std::uint32_t src, std::uint32_t dst, std::uint32_t qp_index, std::uint64_t seed) {
    return roce_flow_hash(src, dst, roce_sport(src, dst, qp_index, seed));
  }

  /// One message part queued on a send QP, in PSN order; public for the tests of its packing.
  /// 16 B, was 48 B (memory per simulated GPU): its first PSN is implicit
  /// (Qp::head_psn plus the packets of the parts before it), its transfer unit and packet count
  /// follow from its bytes (unit_of, npkts_of), a message in one part carries the owner's
  /// completion handle itself (no msgs_ entry), and an NVLS part refers to its shared switch key
  /// and completion slot (nvls_keys_) instead of holding them.
  struct TxPart {
    std::uint32_t bytes_lo = 0;     ///< part bytes, low 32 bits (below kMaxFlowBytes = 2^40)
    std::uint32_t bytes_hi : 8 = 0;
    std::uint32_t multi : 1 = 0;    ///< one of several parts: `word` indexes msgs_
    std::uint32_t key : 23 = 0;     ///< NVLS: index into nvls_keys_ (below kMaxNvlsKeys)
    std::uint32_t done_idx = 0;     ///< MsgMeta::done_idx (single part)
    /// NVLS: low 32 bits of MsgMeta::tag (packet.hpp NvlsKeyWords; the done slot is in the key);
    /// else MsgMeta::done_slot (single part) or the msgs_ index (multi).
    std::uint32_t word = 0;
    /// Part bytes (< 2^40).
    std::uint64_t bytes() const { return static_cast<std::uint64_t>(bytes_hi) << 32 | bytes_lo; }
    /// Stores `b` (< 2^40; higher bits are dropped).
    void set_bytes(std::uint64_t b) {
      bytes_lo = static_cast<std::uint32_t>(b);
      bytes_hi = static_cast<std::uint32_t>(b >> 32) & 0xFFu;
    }
  };
  /// Consecutive parts of a send QP stored as one record (memory per simulated GPU):
  /// `count` parts equal to `first` but for done_idx and word, which advance by `step_idx` and
  /// `step_word` per part (modulo 2^32). An NVLS QP's window of parts (NCCL_STEPS = 8 slices of
  /// one collective: same size and key, done index and tag in steps) is one 28-byte run instead
  /// of 8 x 16 B; a part that does not continue the last run starts a new one. Public for tests.
  struct TxRun {
    TxPart first;                ///< the oldest part of the run
    std::uint32_t count = 1;     ///< parts in the run (>= 1 while queued)
    std::uint32_t step_idx = 0;  ///< done_idx of part i = first.done_idx + i x step_idx
    std::uint32_t step_word = 0; ///< word of part i = first.word + i x step_word
    /// Part i of the run (i < count).
    TxPart part(std::uint32_t i) const {
      TxPart p = first;
      p.done_idx += i * step_idx;
      p.word += i * step_word;
      return p;
    }
    /// Appends `p` if it continues the run (same bytes, multi and key; done_idx and word at the
    /// run's steps, which a run of one part takes from `p`); false (run unchanged) otherwise or
    /// when the run holds 2^32 - 1 parts.
    bool append(const TxPart& p) {
      if (p.bytes_lo != first.bytes_lo || p.bytes_hi != first.bytes_hi || p.multi != first.multi ||
          p.key != first.key || count == ~std::uint32_t{0}) {
        return false;
      }
      if (count == 1) {
        step_idx = p.done_idx - first.done_idx;
        step_word = p.word - first.word;
      } else if (p.done_idx != first.done_idx + count * step_idx || p.word != first.word + count * step_word) {
        return false;
      }
      ++count;
      return true;
    }
    /// Drops the oldest part (count > 1).
    void pop_front() {
      first = part(1);
      --count;
    }
  };
  /// Send QPs' queued parts as runs, one run per block of the NIC's pool (a QP holds 1-2 runs at
  /// a time in the NVLSTree AllReduce).
  using TxFifos = FifoPool<TxRun, 0>;
  /// Distinct NVLS keys a NIC can hold at once (TxPart::key is 23 bits).
  static constexpr std::uint32_t kMaxNvlsKeys = 1u << 23;
  /// Bytes of the NIC's per-QP and per-message records (memory per simulated GPU); the
  /// sizes are a contract checked by static_assert here and by tests/fabric/nic_layout_test.cpp.
  struct Layout {
    std::size_t tx_part;   ///< per message part queued on a send QP (was 48)
    std::size_t tx_run;    ///< per run of such parts (TxRun), what a send QP's queue stores
    std::size_t qp;        ///< per send QP (was 176 with the CC state inline)
    /// per acknowledged (RoCE) send QP, in addition; plus cc::state_bytes(nic.cc) of the
    /// congestion control's own state
    std::size_t rel_qp;
    std::size_t rx_qp;     ///< per receive QP (was 80 plus ~32 of unordered_map node and bucket)
    std::size_t rx_desc;   ///< per message part announced and not yet received (MsgDesc: 64)
    std::size_t nvls_key;  ///< per distinct NVLS switch key queued
  };
  static Layout layout();

  const NicCounters& counters() const { return ctr_; }
  /// Checkpoints (docs/checkpoint.md): writes every mutable member (ports and their control
  /// queues, send and receive QPs with their queued parts and descriptors, congestion-control
  /// state, NVLS keys, indices, counters, sampler). load() restores it into a NIC constructed
  /// the same way. @throws engine::InputError (load) on bytes that do not fit.
  void save(engine::StateWriter& w) const;
  void load(engine::StateReader& r);
  /// Starts sampling egress bytes of the GPU's ports in bins of `bin_ps` (ps).
  void enable_sampling(engine::SimTime bin_ps) { sampler_.enable(bin_ps, ports_.size()); }
  const LinkSampler& sampler() const { return sampler_; }
  /// Current sending rate of a QP as its congestion control sets it (bits/s), for tests. QP
  /// indices are dense per NIC. NVLink/NVLS QPs (no CC): their port's line rate.
  double qp_rate_bps(std::uint32_t qp) const;
  std::uint32_t num_qps() const { return static_cast<std::uint32_t>(qps_.size()); }

 private:
  /// A message split over several QPs (NCCL_IB_SPLIT_DATA_ON_QPS): completes when all parts left.
  struct TxMsg {
    std::uint32_t parts_left = 0;
    std::uint32_t slot = 0, idx = 0;
  };
  /// The NVSwitch key every packet of an NVLS part carries besides its tag and index
  /// (packet.hpp: hops[0] = group << 32 | instance, hops[2] = contributors or port mask) and the
  /// owner's completion slot, shared by the queued parts that have them (`refs`): 24 B per
  /// distinct key, typically one or two live per GPU (the collective in progress).
  struct NvlsKey {
    std::uint32_t group = 0, instance = 0;
    std::uint64_t arg = 0;
    std::uint32_t slot = 0;  // MsgMeta::done_slot
    std::uint32_t refs = 0;
  };
  /// Send queue pair: 56 B (was 176 B with the congestion-control state inline). The
  /// state only acknowledged (RoCE) QPs use lives in rel_ and cc_ (index `rel`); NVLink and NVLS QPs,
  /// unacknowledged and without CC, have none (~130 NVLS QPs per GPU in the NVLSTree benchmark).
  struct Qp {
    std::uint32_t dst = 0;
    std::uint16_t sport = 0;
    std::uint16_t port = 0;
    std::uint32_t cut_mtu = 0;  // MTU messages to dst are cut with (unit_of)
    std::uint16_t rel = 0;      // index into rel_ (acknowledged QPs only; a NIC has < 65,535 QPs)
    std::uint8_t nvls : 2 = 0;  // NvlsMode of every message on this QP (NVLS QPs carry nothing else)
    std::uint8_t noack : 1 = 0;
    std::uint8_t active : 1 = 0;
    std::uint8_t rto_armed : 1 = 0;  // acknowledged QPs: a retransmission timer is pending
    std::uint8_t retries = 0;  // acknowledged QPs: timeouts in a row without ACK progress (NicParams::retry_count)
    TxFifos::Fifo parts;  // unacknowledged parts in PSN order, as runs (elements in tx_parts_)
    std::uint32_t head_psn = 0;  // first PSN of parts.front()
    std::uint32_t snd_una = 0, snd_nxt = 0, next_psn = 0;
    engine::SimTime next_tx = 0;  // pacing / staggered start: earliest start of the next data packet
  };
  /// Per-QP state of acknowledged (RoCE) QPs only, besides their congestion control's (cc_,
  /// same index): the port's line rate and MTU every algorithm reads (cc::QpLink) and go-back-N
  /// (24 B per such QP; with DCQCN's 64 B the 88 B that RelQp held with DCQCN inline).
  struct RelQp {
    std::uint64_t line_bps = 0;
    engine::SimTime last_progress = 0;  // go-back-N: last ACK progress (RTO reference)
    std::uint32_t mtu = 0;   // MTU of the QP's port
    std::uint32_t high = 0;  // highest PSN sent + 1 (retransmission counting)
    cc::QpLink link() const { return cc::QpLink{line_bps, mtu}; }
  };
  /// What the receiver keeps of a MsgDesc until the part's last packet: 48 B (MsgDesc is 64 B;
  /// src and qp are the receive QP's key, the UDP source port comes with every packet, and
  /// flow_bytes/aux are stored as wide as Packet carries them).
  struct RxDesc {
    std::uint64_t flow_id = 0;
    std::uint64_t flow_bytes : 40 = 0;
    std::uint64_t aux : 24 = 0;
    std::uint64_t part_bytes = 0;
    engine::SimTime flow_start = 0;
    std::int64_t tag = 0;
    std::uint32_t group = 0;
    std::uint32_t instance = 0;
  };
  /// Announced parts of the receive QPs: one descriptor per block from the NIC's pool (
  /// most receive QPs hold 0-2 at a time, and the NIC's peak is ~128 at once in the 64 MiB
  /// NVLSTree AllReduce; with blocks of 2 the pool held 1.5x the bytes there).
  using RxFifos = FifoPool<RxDesc, 0>;
  /// Receive state of one (source GPU, source QP): 32 B (was 80 B plus an unordered_map node
  /// and bucket). Packets held out of order (adaptive routing, spraying) wait in
  /// rx_ooo_, the notification point's last CNP per QP in rx_last_cnp_.
  struct RxQp {
    std::uint32_t expected = 0;
    std::uint32_t since_ack = 0;
    std::uint64_t got : 40 = 0;  // bytes of the current part so far (a part is below 2^40 B)
    std::uint64_t nack_sent : 1 = 0;
    std::uint64_t held : 1 = 0;  // has an rx_ooo_ entry
    RxFifos::Fifo descs;  // announced parts not yet received (elements in rx_descs_)
  };
  struct NicPort {
    engine::SimTime busy_until = 0;
    bool free_pending = false;
    bool paused = false;  // data class paused by the peer's PFC
    engine::SimTime paused_since = 0;
    engine::SimTime wake_at = -1;  // earliest pending pacing wake-up, -1 = none
    PacketRing ctrl;
    std::vector<std::uint32_t> active;  // QPs with unsent data
    std::uint32_t rr = 0;
    std::uint64_t tx_bytes = 0;
  };

  std::uint32_t qp_for(std::uint32_t dst, std::uint32_t channel, std::uint32_t k);
  /// Appends a new QP to qps_ (with its rel_/cc_ entries when `q.noack` is false) on a port of
  /// `line_bps` bits/s and `mtu` bytes.
  void add_qp(Qp q, std::uint64_t line_bps, std::uint32_t mtu);
  /// Transfer unit (payload bytes per packet; the last one may be shorter) of a `bytes`-byte
  /// part on `q`: cut_mtu, or with cluster.nvswitch_cut_through on NVLink at least
  /// kNvlinkUnitsPerPart units per part (see send_message).
  std::uint64_t unit_of(const Qp& q, std::uint64_t bytes) const;
  /// Packets of a `bytes`-byte part on `q` (at least 1).
  std::uint32_t npkts_of(const Qp& q, std::uint64_t bytes) const {
    const std::uint64_t unit = unit_of(q, bytes);
    return static_cast<std::uint32_t>(std::max<std::uint64_t>(1, (bytes + unit - 1) / unit));
  }
  /// Queues `part` on QP `qi` (its PSNs follow the queued parts'). With `nvls` (the part's NVLS
  /// switch key: group, instance, arg, done slot), the part takes a reference to that key once
  /// the check has passed.
  /// @throws engine::InputError past 2^32 packets on the QP (`fix` names the key to raise).
  void queue_part(std::uint32_t qi, TxPart part, const char* fix, const NvlsKey* nvls = nullptr);
  /// Removes the oldest queued part of `q` (non-empty).
  void pop_part(Qp& q);
  /// Index of the shared NVLS key (group, instance, arg, done slot) in nvls_keys_, one more
  /// reference held.
  std::uint32_t nvls_key(std::uint32_t group, std::uint32_t instance, std::uint64_t arg, std::uint32_t slot);
  /// Drops one reference to the NVLS key of `part` (queued parts only).
  void release_part(const TxPart& part);
  /// Receive state of (source GPU, its QP): its index in rxq_, -1 if none yet.
  std::int64_t rx_find(std::uint64_t key);
  /// MsgMeta::nvls != 0: the message on its own NVLS queue pair (reduce: per owner and channel;
  /// multicast: per communicator), serialized at cluster.nvls_bandwidth.
  void send_nvls(std::uint32_t dst, std::uint64_t bytes, const MsgMeta& meta, engine::Context& ctx);
  /// Slot of a new outgoing message in msgs_ (a freed slot first), holding `m`.
  std::uint32_t new_msg(const TxMsg& m);
  /// Index of the QP under `key` in qps_, and whether the caller must append it now (new key).
  /// @throws engine::InputError past 65,535 QPs on this GPU.
  std::pair<std::uint32_t, bool> qp_slot(std::uint64_t key);
  /// The receiver's descriptor of one message part: `bytes` the whole message, `part_bytes`
  /// this part (bytes), `now` its start (ps), on local QP `qi` with RoCEv2 UDP source port `sport`.
  MsgDesc message_desc(const MsgMeta& meta, std::uint64_t bytes, std::uint64_t part_bytes, engine::SimTime now,
                       std::uint32_t qi, std::uint16_t sport) const;
  void activate(std::uint32_t q, engine::Context& ctx);
  void kick(std::uint32_t port, engine::Context& ctx);
  void try_tx(std::uint32_t port, engine::Context& ctx);
  bool eligible(const Qp& q, engine::SimTime now) const;
  /// nic.qp_cache: whether the TX scheduler may serve eligible RoCE QP `qi` now. A cached
  /// context is moved to the LRU's front (a hit); a context fetched after a miss is inserted
  /// there, evicting the least recently served one when the cache is full; an absent one starts
  /// its fetch (a miss): the QP's next packet waits nic.qp_miss_latency, and false is returned.
  bool qp_ctx_ready(std::uint32_t qi, Qp& q, engine::SimTime now);
  /// Whether QP `q`'s next packet is the first transmission of a part's first packet (a
  /// message start for nic.msg_rate). RoCE QPs with a packet left only.
  bool starts_part(const Qp& q) const;
  void send_data(std::uint32_t qi, engine::Context& ctx);
  void send_ctrl(WirePacket p, engine::Context& ctx);
  void on_data(const WirePacket& p, engine::Context& ctx);
  void on_ack(const WirePacket& p, engine::Context& ctx);
  void acked_to(std::uint32_t qi, std::uint32_t psn, engine::Context& ctx);
  void arm_rto(std::uint32_t qi, engine::Context& ctx);
  std::uint32_t wire_bytes(const WirePacket& p) const {
    return p.kind == kWireData ? p.bytes + params_.nic.header_bytes : params_.nic.control_bytes;
  }
  engine::SimTime path_latency(std::uint32_t dst, std::uint64_t flow_hash, engine::SimTime* rtt) const;

  const Topology& topo_;
  engine::LpId id_;
  const FabricParams& params_;
  NicOwner& owner_;
  std::uint32_t ack_interval_ = 1;
  std::vector<NicPort> ports_;
  std::deque<Qp> qps_;  // deque: references stay valid when a callback creates a QP
  TxFifos tx_parts_;    // elements of every Qp::parts
  std::vector<RelQp> rel_;       // acknowledged QPs only (Qp::rel)
  // nic.flow_start = staggered: activations per QP (index as qps_; the start offset's hash input).
  std::vector<std::uint32_t> activations_;
  // The congestion control's per-QP state (index as rel_) and the dispatch of its hooks.
  cc::CcStates cc_;
  std::vector<NvlsKey> nvls_keys_;         // shared NVLS keys of queued parts (refs > 0) and free ones
  std::vector<std::uint32_t> free_nvls_keys_;
  std::uint32_t last_nvls_key_ = 0;        // the last key found (consecutive parts share one)
  // (dst, channel, k) -> qp (binary search; one lookup per message): 12 B per QP instead of an
  // unordered_map's node, bucket and allocator overhead (~176 QPs per GPU in an NVLSTree
  // run, ~18 KB per GPU as a map).
  FlatIndex qp_index_;
  std::unordered_map<std::uint64_t, std::uint32_t> conn_rr_;   // (dst, channel) -> next QP for whole messages
  // (src << 16 | qp) -> index into rxq_: 12 B per receive QP (the unordered_map it
  // replaces cost ~112 B per entry in node, bucket and allocator overhead).
  FlatIndex rx_index_;
  std::deque<RxQp> rxq_;  // receive QPs in order of first descriptor
  RxFifos rx_descs_;      // elements of every RxQp::descs
  // Notification point (cc::CcTraits::notify_on_ce): last CNP sent, per receive QP (index in
  // rxq_) that has seen CE-marked data (none sent yet: -1).
  std::unordered_map<std::uint32_t, engine::SimTime> rx_last_cnp_;
  // Receive QPs (index in rxq_) with packets held out of order:
  // psn - expected -> bytes | last << 32 | present << 33. Erased once drained.
  std::unordered_map<std::uint32_t, SmallFifo<std::uint64_t>> rx_ooo_;
  std::uint64_t rx_last_key_ = ~0ull;  // the last receive QP looked up (packets come in bursts)
  std::uint32_t rx_last_idx_ = 0;
  // nic.qp_cache > 0: the QP-context LRU, per QP (index as qps_): kCtxAbsent / kCtxCached /
  // kCtxFetched (fetch done, inserted when served), and the list links (most recent first).
  // Empty with an unlimited cache.
  std::vector<std::uint8_t> ctx_state_;
  std::vector<std::uint32_t> ctx_prev_, ctx_next_;
  std::uint32_t ctx_head_ = ~0u, ctx_tail_ = ~0u;  // most and least recently served cached QP
  std::uint32_t ctx_cached_ = 0;
  // nic.msg_rate > 0: earliest start of the next message part (ps), and the gap between starts.
  engine::SimTime next_msg_ps_ = 0;
  engine::SimTime msg_gap_ps_ = 0;
  std::vector<TxMsg> msgs_;  // messages split over several QPs only
  std::vector<std::uint32_t> free_msgs_;
  NicCounters ctr_;
  LinkSampler sampler_;

  static_assert(sizeof(TxPart) == 16);
  static_assert(sizeof(TxRun) == 28);
  static_assert(sizeof(Qp) == 56);
  static_assert(sizeof(RelQp) == 24);
  static_assert(sizeof(RxQp) == 32);
  static_assert(sizeof(RxDesc) == 48);
  static_assert(sizeof(NvlsKey) == 24);
};

}  // namespace fabricsim::models
