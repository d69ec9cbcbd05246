#pragma once
/// @file event_kinds.hpp
/// The one registry of engine event kinds (engine::Event::kind) that the models use. Each model
/// family owns a block of 16 kinds, numbered from its base in the order listed; the payload each
/// kind carries is named beside it. A new kind is one line in its family's list; a new family is
/// one line in EventFamily. The kind never takes part in event ordering (the engine orders by
/// time, source, sequence and destination), so renumbering changes no result.
#include <cstdint>

namespace fabricsim::models {

/// Model families that own event kinds, each a block of kEventFamilySize kinds.
enum class EventFamily : std::uint32_t {
  kRank = 0,    ///< the GPU-rank executor (models/rank)
  kPacket = 1,  ///< the packet fabric: NIC, switch, NVSwitch (models/packet)
  kFlow = 2,    ///< the flow and analytical rungs (models/flow)
};

/// Kinds per family block.
inline constexpr std::uint32_t kEventFamilySize = 16;

/// First kind of `f`'s block (0 is never a valid kind: the rank block starts at 1).
constexpr std::uint32_t event_family_base(EventFamily f) {
  return static_cast<std::uint32_t>(f) * kEventFamilySize;
}

/// Kinds of the rank executor (payloads in models/rank/gpu_rank.hpp, models/flow/ring_stream.hpp).
enum RankEventKind : std::uint32_t {
  kEvComputeDone = event_family_base(EventFamily::kRank) + 1,  ///< self: a compute node finished (payload: node index)
  kEvCollLaunch,      ///< self: a collective's start-up latency elapsed (payload: slot)
  kEvRingStreamDone,  ///< self: a streamed ring collective completes (payload: slot; ring_stream.hpp)
  kEvRingToken,       ///< GPU -> GPU: a streamed ring's completion token (payload: RingToken; ring_stream.hpp)
  kEvSendLaunch,      ///< self: a workload send's start-up latency elapsed (payload: node index)
  kEvStepDelay,       ///< self: a collective op's P2pOp::delay_ps elapsed (a send starts, a materialized receive completes; payload: GpuRankLp::StepDelay)
  kEvHostDone,        ///< self: a host (CPU-side) compute node finished (payload: node index)
  kEvRecvDelay,       ///< self: a lazy channel ring's receive completes after its hop latency (payload: GpuRankLp::RecvDelay)
  kEvProxySend,       ///< self: the GPU's proxy posted a network send (payload: GpuRankLp::ProxySend)
  kEvProxyRecv,       ///< self: the GPU's proxy noticed a network message (payload: the message's Packet)
  kRankEventEnd,      ///< one past the family's last kind
};

/// Kinds of the packet fabric (payloads in models/core/packet.hpp).
enum PacketEventKind : std::uint32_t {
  kEvPacketArrive = event_family_base(EventFamily::kPacket),  ///< a packet fully received at the LP (store-and-forward)
  kEvTxPump,      ///< a GPU port may emit its next batch of packets
  kEvSendDone,    ///< the last packet of a flow left the source port
  kEvWire,        ///< a WirePacket fully received at the LP (store-and-forward; payload: WirePacket)
  kEvPortFree,    ///< self: an egress port finished serializing (payload: port index)
  kEvPfc,         ///< a PFC pause/resume frame arrived (payload: PfcFrame)
  kEvMsgDesc,     ///< sender NIC -> receiver NIC: message descriptor (payload: MsgDesc)
  kEvQpTimer,     ///< self: a QP timer (congestion-control timers, RTO, stagger start)
  kPacketEventEnd,  ///< one past the family's last kind
};

/// Kinds of the coarse rungs (payloads in models/flow/flow_model.hpp).
enum FlowEventKind : std::uint32_t {
  kEvFlowStart = event_family_base(EventFamily::kFlow),  ///< GPU -> network LP: a flow (payload Packet head) enters the network
  kEvFlowArrive,  ///< -> destination GPU: the flow's last byte arrived (payload Packet head)
  kEvFlowSent,    ///< -> source GPU: the flow's last byte left its NIC (payload flow_id)
  kEvNetTick,     ///< network LP to itself: drains due / starts pending (no payload)
  kFlowEventEnd,  ///< one past the family's last kind
};

static_assert(kRankEventEnd <= event_family_base(EventFamily::kPacket), "rank event kinds overflow their block");
static_assert(kPacketEventEnd <= event_family_base(EventFamily::kFlow), "packet event kinds overflow their block");
static_assert(kFlowEventEnd <= event_family_base(EventFamily::kFlow) + kEventFamilySize,
              "flow event kinds overflow their block");

}  // namespace fabricsim::models
