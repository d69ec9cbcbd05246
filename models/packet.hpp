#pragma once
/// @file packet.hpp
/// The packet carried in engine events between GPU, NVSwitch and switch LPs.
#include <cstdint>

#include "engine/time.hpp"

namespace fabricsim::models {

/// Event kinds used by the network and the rank executor.
enum EventKind : std::uint32_t {
  kEvPacketArrive = 1,  ///< a packet fully received at the LP (store-and-forward)
  kEvTxPump = 2,        ///< a GPU port may emit its next batch of packets
  kEvSendDone = 3,      ///< the last packet of a flow left the source port
  kEvComputeDone = 4,   ///< a compute node finished
};

/// Group id used in packets for point-to-point (Chakra send/recv) messages.
inline constexpr std::uint32_t kP2pGroup = 0xFFFFFFFFu;

/// One packet: MTU-sized slice of a flow. Payload only (no header overhead in the skeleton).
struct Packet {
  std::uint64_t flow_id = 0;         ///< (src rank << 32) | per-source counter
  std::uint64_t flow_bytes = 0;      ///< total bytes of the flow
  engine::SimTime flow_start = 0;    ///< when the flow was handed to the port (ps)
  std::uint64_t flow_hash = 0;       ///< ECMP hash input (5-tuple stand-in, per flow)
  std::int64_t tag = 0;              ///< collective op tag, or p2p tag
  std::uint32_t src_rank = 0;
  std::uint32_t dst_rank = 0;
  std::uint32_t bytes = 0;           ///< payload bytes of this packet
  std::uint32_t group = 0;           ///< communicator index, or kP2pGroup
  std::uint32_t instance = 0;        ///< n-th collective on that communicator
};
static_assert(sizeof(Packet) <= 64);

}  // namespace fabricsim::models
