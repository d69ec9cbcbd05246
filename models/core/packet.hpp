#pragma once
/// @file packet.hpp
/// The packet carried in engine events between GPU, NVSwitch and switch LPs.
#include <algorithm>
#include <cstdint>

#include "engine/time.hpp"
#include "models/core/event_kinds.hpp"

namespace fabricsim::models {


/// Kind of a WirePacket.
enum WireKind : std::uint8_t { kWireData = 0, kWireAck = 1, kWireNack = 2, kWireCnp = 3 };

/// WirePacket::flags bits.
enum WireFlags : std::uint8_t {
  kFlagCe = 1,        ///< ECN congestion experienced (set by a switch)
  kFlagLast = 2,      ///< last packet of a message part
  kFlagNoAck = 4,     ///< unacknowledged transport (NVLink): no ACK, no CC
  kFlagHeadroom = 8,  ///< switch-local: the packet sits in PFC headroom at this switch
  kFlagEce = 16,      ///< ACK: the acknowledged packet carried CE (for statistics)
};

/// One hop of HPCC in-band telemetry, packed into 8 bytes (HPCC paper §4.3 packs a hop into 8
/// bytes too): egress timestamp in ns (24 bits, wraps every 16.7 ms; only differences are used),
/// cumulative tx bytes in 64-byte units (20 bits, wraps at 64 MiB), queue length in 1 KiB units
/// (12 bits, saturating at 4 MiB), and link rate in 25 Gb/s units (8 bits).
struct IntHop {
  std::uint64_t bits = 0;
  static IntHop make(engine::SimTime now_ps, std::uint64_t tx_bytes, std::uint64_t qlen_bytes,
                     std::uint64_t rate_bps) {
    const std::uint64_t ts = static_cast<std::uint64_t>(now_ps / 1000) & 0xFFFFFFu;
    const std::uint64_t tx = (tx_bytes / 64) & 0xFFFFFu;
    const std::uint64_t q = std::min<std::uint64_t>(qlen_bytes / 1024, 0xFFFu);
    const std::uint64_t r = std::min<std::uint64_t>(rate_bps / 25'000'000'000ull, 0xFFu);
    return IntHop{ts | (tx << 24) | (q << 44) | (r << 56)};
  }
  std::uint32_t ts_ns() const { return static_cast<std::uint32_t>(bits & 0xFFFFFFu); }
  std::uint32_t tx_units() const { return static_cast<std::uint32_t>((bits >> 24) & 0xFFFFFu); }
  std::uint64_t qlen_bytes() const { return ((bits >> 44) & 0xFFFu) * 1024; }
  std::uint64_t rate_bps() const { return ((bits >> 56) & 0xFFu) * 25'000'000'000ull; }
};
inline constexpr std::uint32_t kMaxIntHops = 5;

/// A packet on a link: data (one MTU slice of a QP's byte stream) or a control packet.
/// 64 bytes, so it fits an engine event. Message metadata travels once per message in MsgDesc.
struct WirePacket {
  std::uint32_t src = 0;      ///< source GPU (rank)
  std::uint32_t dst = 0;      ///< destination GPU
  std::uint32_t psn = 0;      ///< data: packet sequence number; ACK/NACK: next expected PSN
  std::uint32_t bytes = 0;    ///< data payload bytes (ACK/NACK/CNP: 0)
  std::uint16_t sport = 0;    ///< RoCEv2 UDP source port of the QP (ECMP entropy)
  std::uint16_t qp = 0;       ///< QP index at the data sender
  std::uint16_t in_port = 0;  ///< port of the receiving node this packet arrives on
  std::uint16_t kind : 2 = kWireData;  ///< WireKind
  std::uint16_t flags : 5 = 0;         ///< WireFlags
  std::uint16_t nint : 3 = 0;          ///< INT hops recorded
  std::uint16_t cls : 1 = 1;           ///< traffic class (kClassControl / kClassData)
  /// NVLink SHARP (NvlsMode): the NVSwitch reduces (kNvlsReduce) or replicates (kNvlsMulticast)
  /// this packet. NVLS packets carry no INT; hops[0..2] hold the NVLS key (see NvlsKeyWords).
  std::uint16_t nvls : 2 = 0;
  IntHop hops[kMaxIntHops];
};
static_assert(sizeof(WirePacket) == 64);

/// What the NVSwitch does with an NVLink packet (NVLink SHARP).
enum NvlsMode : std::uint8_t {
  kNvlsNone = 0,
  /// multimem.ld_reduce contribution: GPU j's copy of the shard owned by GPU `dst`. The NVSwitch
  /// keeps a count per (dst, group, instance, tag, packet index); contributions of other GPUs end
  /// there, and the owner's own packet (src == dst) is forwarded to the owner once all
  /// hops[2] contributions of that packet arrived (one reduced packet per n inputs).
  kNvlsReduce = 1,
  /// multimem.st: the NVSwitch copies the packet to every port in the mask hops[2].
  kNvlsMulticast = 2,
};
/// Layout of an NVLS packet's key in WirePacket::hops (the packet has no INT hops):
/// hops[0] = group << 32 | instance, hops[1] = tag << 32 | packet index within its message part,
/// hops[2] = contributors (kNvlsReduce) or the bit mask of NVSwitch egress ports (kNvlsMulticast).

/// PFC frame payload: pause (on = 1) or resume the class on the receiver's port `port`.
struct PfcFrame {
  std::uint32_t port = 0;
  std::uint32_t cls = 0;
  std::uint32_t on = 0;
};

/// Descriptor of one message part on a QP, sent by the sender NIC ahead of its packets (it
/// arrives no later than the first packet could: the path's propagation latency).
struct MsgDesc {
  std::uint64_t flow_id = 0;
  std::uint64_t flow_bytes = 0;   ///< whole message
  std::uint64_t part_bytes = 0;   ///< this QP's share
  engine::SimTime flow_start = 0;
  std::int64_t tag = 0;
  std::uint32_t src = 0;
  std::uint32_t group = 0;
  std::uint32_t instance = 0;
  std::uint16_t qp = 0;
  std::uint16_t sport = 0;
  std::uint32_t aux = 0;  ///< PXN chunk count (kPxnRelayGroup / kPxnDeliverGroup), else 0
};
static_assert(sizeof(MsgDesc) <= 64);

/// Group id used in packets for point-to-point (Chakra send/recv) messages.
inline constexpr std::uint32_t kP2pGroup = 0xFFFFFFFFu;
/// PXN (P2pRoute): a chunk on its way sender -> relay; instance = final receiver, aux = chunks
/// of the whole message.
inline constexpr std::uint32_t kPxnRelayGroup = 0xFFFFFFFEu;
/// PXN: a chunk relay -> receiver; instance = original sender, aux = chunks of the whole message.
inline constexpr std::uint32_t kPxnDeliverGroup = 0xFFFFFFFDu;

/// Largest message (flow) in bytes: 2^40 - 1 (Packet::flow_bytes is 40 bits).
inline constexpr std::uint64_t kMaxFlowBytes = (std::uint64_t{1} << 40) - 1;

/// One packet: MTU-sized slice of a flow. Payload only (no header overhead in the skeleton).
struct Packet {
  std::uint64_t flow_id = 0;         ///< (src rank << 32) | per-source counter
  /// Total bytes of the flow, below kMaxFlowBytes (GpuRankLp::start_flow rejects larger messages).
  std::uint64_t flow_bytes : 40 = 0;
  /// PXN chunk count of the whole message (kPxnRelayGroup / kPxnDeliverGroup), else 0; shares the
  /// word with flow_bytes so that the packet stays within an event's 64-byte payload.
  std::uint64_t aux : 24 = 0;
  engine::SimTime flow_start = 0;    ///< when the flow was handed to the port (ps)
  std::uint64_t flow_hash = 0;       ///< ECMP hash input (5-tuple stand-in, per flow)
  std::int64_t tag = 0;              ///< collective op tag, or p2p tag
  std::uint32_t src_rank = 0;
  std::uint32_t dst_rank = 0;
  std::uint32_t bytes = 0;           ///< payload bytes of this packet
  std::uint32_t group = 0;           ///< communicator index, or kP2pGroup
  std::uint32_t instance = 0;        ///< n-th collective on that communicator (PXN: see kPxnRelayGroup)
  /// Coarse rungs only: the NIC queue pair the flow rides, `channel << 16 | k << 8 | (parts - 1)`
  /// (k = QP of the connection, parts = QPs the message was split over; see Nic::split_message).
  std::uint32_t conn = 0;
};
static_assert(sizeof(Packet) <= 64);

}  // namespace fabricsim::models
