#pragma once
/// @file chain_workload.hpp
/// fabricsim workload for the ns-3 chain cross-check (tests/ns3/ns3_chain.cc): ranks 0..S-1 are
/// the constant-rate senders, rank S the receiver. Each sender sends one `payload_bytes` message
/// (one UDP packet in ns-3, one flow of one packet in fabricsim) every `interval_ps`, the first
/// at `start_ps`, as Chakra nodes:
///
///   sender s:  COMP(start) -> COMP(interval) -> COMP(interval) -> ...   (a chain of timers)
///                 |              |                 |
///               SEND k=0       SEND k=1          SEND k=2 ...           (each depends only on
///                                                                        its timer, so a send
///   receiver:  RECV(src s, tag k) for every (s, k), no dependencies      never delays the next)
///
/// Send k of sender s is therefore issued at start + k * interval, as in ns3_chain; its tag is k
/// so that flow (s, k) and ns-3 packet (sender s, seq k) pair up one to one.
#include <cstdint>

#include "models/core/workload.hpp"

namespace fabricsim::tests::ns3chain {

/// Traffic of the chain experiment (the ns3_chain flags of the same names).
struct ChainTraffic {
  std::uint32_t senders = 1;        ///< sending ranks 0..senders-1; the receiver is rank `senders`
  std::uint64_t payload_bytes = 0;  ///< message size = UDP payload, bytes (> 0)
  std::int64_t interval_ps = 0;     ///< time between sends of one sender, ps (whole us, > 0)
  std::int64_t start_ps = 0;        ///< first send instant, ps (whole us, > 0)
  std::uint32_t count = 0;          ///< messages per sender (> 0)
};

/// Builds the workload described in the file comment.
/// @throws engine::InputError if a field is out of range or a time is not a whole number of
///         microseconds (Chakra COMP_NODE stores duration_micros; io/chakra_writer.hpp).
models::Workload make_chain_workload(const ChainTraffic& t);

}  // namespace fabricsim::tests::ns3chain
