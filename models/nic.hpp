#pragma once
/// @file nic.hpp
/// The GPU's network endpoint (issue 3): RoCEv2 RNIC ports with queue pairs, per-QP rate
/// limiters (DCQCN) or windows (HPCC), a TX scheduler across QPs, ACK/NACK, go-back-N, CNPs,
/// PFC reaction; and the NVLink port (lossless, unacknowledged, line rate). Owned by GpuRankLp,
/// which hands it messages and receives completed message parts and send completions.
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/lp.hpp"
#include "models/cluster.hpp"
#include "models/fabric_params.hpp"
#include "models/link_sampler.hpp"
#include "models/packet.hpp"
#include "models/small_fifo.hpp"
#include "models/switch_lp.hpp"

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
  std::uint64_t timeouts = 0;         ///< RTO expiries that rewound a QP
  std::uint64_t nacks_sent = 0;
  std::uint64_t cnps_sent = 0;        ///< DCQCN notification point
  std::uint64_t cnps_received = 0;    ///< DCQCN reaction point rate cuts
  std::uint64_t acks_sent = 0;
  std::uint64_t pauses_received = 0;  ///< PFC XOFF frames that paused a NIC port
  engine::SimTime paused_ps = 0;      ///< time NIC ports were paused
  std::uint64_t qps = 0;              ///< queue pairs created
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

  /// How send_message splits a message over the connection's queue pairs (issue 9: the coarse
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

  const NicCounters& counters() const { return ctr_; }
  /// Starts sampling egress bytes of the GPU's ports in bins of `bin_ps` (ps).
  void enable_sampling(engine::SimTime bin_ps) { sampler_.enable(bin_ps, ports_.size()); }
  const LinkSampler& sampler() const { return sampler_; }
  /// Current DCQCN/HPCC sending rate of a QP (bits/s), for tests. QP indices are dense per NIC.
  double qp_rate_bps(std::uint32_t qp) const { return qps_[qp].rate; }
  std::uint32_t num_qps() const { return static_cast<std::uint32_t>(qps_.size()); }

 private:
  struct TxPart {
    std::uint32_t first_psn = 0, npkts = 0;
    std::uint32_t unit = 0;  // payload bytes per packet (the last one may be shorter)
    std::uint64_t bytes = 0;
    std::uint32_t msg = 0;  // index into msgs_
    // NVLS parts: the switch's key (packet.hpp NvlsMode) and contributors / multicast port mask.
    std::uint32_t tag = 0, group = 0, instance = 0;
    std::uint64_t nvls_arg = 0;
  };
  struct TxMsg {
    std::uint32_t parts_left = 0;
    std::uint32_t slot = 0, idx = 0;
  };
  struct Qp {
    std::uint32_t dst = 0;
    std::uint16_t sport = 0;
    std::uint16_t port = 0;
    bool noack = false;
    bool active = false;
    std::uint8_t nvls = 0;  // NvlsMode of every message on this QP (NVLS QPs carry nothing else)
    std::uint32_t mtu = 0;
    std::uint64_t line_bps = 0;
    SmallFifo<TxPart> parts;  // unacknowledged parts in PSN order
    std::uint32_t snd_una = 0, snd_nxt = 0, next_psn = 0;
    std::uint32_t high = 0;           // highest PSN sent + 1 (retransmission counting)
    engine::SimTime next_tx = 0;      // pacing: earliest start of the next data packet
    double rate = 0;                  // current rate RC (bits/s)
    // DCQCN reaction point
    double target = 0, alpha = 1.0;
    std::uint32_t t_count = 0, bc_count = 0;
    std::uint64_t byte_acc = 0;
    engine::SimTime alpha_at = 0, rate_at = 0;  // last alpha decay / rate-timer tick
    bool limited = false;                        // below line rate: increase timers run
    // go-back-N
    engine::SimTime last_progress = 0;
    bool rto_armed = false;
    std::uint32_t activations = 0;
  };
  /// HPCC sender state of a QP, kept in hpcc_ (by QP index) only when nic.cc = hpcc: 88 B per QP
  /// that DCQCN runs do not carry (issue 7, memory per simulated GPU).
  struct HpccState {
    double window = 0, wc = 0, u = 0;
    std::uint32_t inc_stage = 0, last_update_seq = 0;
    engine::SimTime base_rtt = 0;
    std::uint8_t last_nint = 0;
    IntHop last_int[kMaxIntHops];
  };
  struct RxQp {
    std::uint32_t expected = 0;
    SmallFifo<MsgDesc> descs;
    SmallFifo<std::uint64_t> ooo;  // psn - expected -> bytes | last << 32 | present << 33
    std::uint64_t got = 0;
    std::uint32_t since_ack = 0;
    engine::SimTime last_cnp = -1;
    bool nack_sent = false;
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
  bool eligible(std::uint32_t qi, const Qp& q, engine::SimTime now) const;
  void send_data(std::uint32_t qi, engine::Context& ctx);
  void send_ctrl(WirePacket p, engine::Context& ctx);
  void on_data(const WirePacket& p, engine::Context& ctx);
  void on_ack(const WirePacket& p, engine::Context& ctx);
  void on_cnp(Qp& q, engine::SimTime now);
  void acked_to(std::uint32_t qi, std::uint32_t psn, engine::Context& ctx);
  void dcqcn_catch_up(Qp& q, engine::SimTime now);
  void dcqcn_increase(Qp& q);
  void hpcc_update(Qp& q, HpccState& hs, const WirePacket& ack);
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
  std::vector<HpccState> hpcc_;  // nic.cc = hpcc: per QP (index as qps_); else empty
  // (dst, channel, k) -> qp, sorted by key (binary search; one lookup per message). A flat
  // vector: 16 B per QP instead of an unordered_map's node, bucket and allocator overhead (issue 7:
  // ~176 QPs per GPU in an NVLSTree run, ~18 KB per GPU as a map).
  std::vector<std::pair<std::uint64_t, std::uint32_t>> qp_index_;
  std::unordered_map<std::uint64_t, std::uint32_t> conn_rr_;   // (dst, channel) -> next QP for whole messages
  std::unordered_map<std::uint64_t, RxQp> rx_;                 // (src, qp) -> receive state
  std::vector<TxMsg> msgs_;
  std::vector<std::uint32_t> free_msgs_;
  NicCounters ctr_;
  LinkSampler sampler_;
};

}  // namespace fabricsim::models
