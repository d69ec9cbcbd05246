#pragma once
/// @file ring_stream.hpp
/// Streamed ring collectives at the coarse rungs (spec key sim.ring_flows, docs/fidelity.md
/// "Streamed rings"): a LazyRing of S steps runs as NCCL's ring streams it over its one
/// connection, one flow per rank to `next` carrying all S steps' bytes, instead of S dependent
/// flows. This file holds the spec key and the closed-form timing the executor (GpuRankLp)
/// adds to the stream so that an uncongested ring completes exactly when the step-wise ring would.
///
/// Timing (time in ps, sizes in bytes). Let T_l(b) = head + drain + tail of b bytes alone on ring
/// link l (transfer_timing; a lone flow's arrival - post time at both coarse rungs), link l the
/// route members[l] -> members[l+1] of QP 0 of channel 0. In the step-wise ring, rank i's last
/// receive is the end of a chain of S messages that all carry ONE chunk (AllGather: chunk i+1
/// forwarded n-1 times; ReduceScatter: chunk i; AllReduce: chunk i+2 over 2(n-1) steps), of
/// c = the bytes prev sends at step S-1, so with every rank starting together and no flow
/// waiting for a link or its queue pair it arrives at
///     begin + P1,   P1 = sum over the S links before rank i (links i-1, i-2, ..., i-S mod n) of T_l(c).
/// The stream from prev (B_in = the sum of prev's step bytes) arrives alone at
/// begin + T_{i-1}(B_in), so the rank's own completion term is
///     own_i = max(A_in + max(0, P1 - T_{i-1}(B_in)),  E_out)
/// with A_in the stream's arrival and E_out its own stream's send completion, and every rank of
/// the ring completes at max_j own_j (learnt through tokens, RingToken below): the step-wise
/// ring's chains pass through every rank, so a late start or a congested edge anywhere delays
/// them all, and a ring whose links differ (NVLink and NIC hops) runs at its slowest link, whose
/// downstream rank's A_in carries it (T_slow(B), the slow link busy back to back).
/// Equal links, equal chunks, uncongested: own_i = begin + S T(c) on every rank, the step-wise
/// time to the picosecond (tests/fidelity/ring_stream_test.cpp), as long as the tokens arrive
/// within the slack P1 - T(B) (see RingToken).
#include <cstdint>
#include <string>
#include <vector>

#include "engine/time.hpp"
#include "models/topology/cluster.hpp"
#include "models/flow/flow_model.hpp"

namespace fabricsim::models {

/// How a LazyRing (simccl's ring planner) becomes flows at the flow and analytical rungs (spec
/// key sim.ring_flows). The packet rung ignores it (always step-wise: it is the reference).
enum class RingFlows : std::uint8_t {
  kStep,    ///< one flow per step, step k+1 sent once step k was received (default)
  kStream,  ///< one flow per rank carrying every step's bytes, completion corrected (ring_stream.hpp)
};

/// "step" | "stream". @throws engine::InputError(file, field) for other names.
RingFlows parse_ring_flows(const std::string& name, const std::string& file, const std::string& field);

/// Time of `bytes` bytes alone on `path` (ps): head + drain + tail of transfer_timing, the
/// arrival - post time of a lone flow at the flow and analytical rungs.
engine::SimTime lone_transfer_ps(const FlowPath& path, std::uint64_t bytes);

/// Route of ring link `from` -> `to` as a coarse flow of channel 0, QP 0 takes it (the ECMP hash
/// Nic::qp_flow_hash(from, to, 0, seed)); no link ids.
FlowPath ring_link_path(const Topology& topo, std::uint32_t from, std::uint32_t to);

/// The n links of a ring communicator (members[l] -> members[(l+1) % n]) grouped into classes
/// of equal timing (same hops, rates, latencies and MTU), so that sums and maxima over the ring
/// cost one transfer_timing per class, not per link. Built once per communicator per rank
/// (n route look-ups), a few hundred bytes.
class RingLinkClasses {
 public:
  RingLinkClasses() = default;
  /// @param members the communicator in ring order (global ranks).
  RingLinkClasses(const Topology& topo, const std::vector<std::uint32_t>& members);
  /// Sum over all n links of T_l(bytes) (ps).
  engine::SimTime sum_ps(std::uint64_t bytes) const;
  /// Largest first-hop MTU of the ring's links (bytes): a step of at most this many bytes may
  /// be a single-packet flow, which at the flow rung holds no max-min share.
  std::uint32_t max_mtu() const;

 private:
  struct Class {
    FlowPath path;
    std::uint32_t count = 0;
  };
  std::vector<Class> classes_;
};

/// Ring-wide completion (GpuRankLp): each rank's own term is
///     own_i = max(A_in + max(0, P1 - T_{i-1}(B_in)),  E_out),
/// and every rank completes at max_j own_j (the step-wise ring's ranks complete within a step of
/// each other: its chains pass through every rank, so a late start or a congested edge anywhere
/// delays all of them). The maximum travels in R = ceil(log2 n) rounds of tokens (recursive
/// doubling along the ring: in round r rank i sends the largest term it knows to i + 2^r once it
/// knows its own and round r-1's), n R engine events per collective instead of n S flows. A
/// token takes ring_token_delay_ps, so a rank completes at max(max_j own_j, its last token's
/// arrival): exact whenever the tokens arrive within the latency slack P1 - T(B) (uncongested
/// rings of equal links: (S - 1) per-step latencies >= R token delays).
struct RingToken {
  std::uint32_t group = 0;     ///< the collective's communicator
  std::uint32_t instance = 0;  ///< its instance on that communicator
  std::uint32_t round = 0;     ///< 0 .. R-1
  engine::SimTime value = 0;   ///< the largest completion term the sender knows (ps)
};
/// Most token rounds a ring can need (n < 2^32).
inline constexpr std::uint32_t kMaxRingTokenRounds = 32;
/// R = ceil(log2 n) for n >= 2.
inline std::uint32_t ring_token_rounds(std::uint32_t n) {
  std::uint32_t r = 0;
  while ((std::uint64_t{1} << r) < n) ++r;
  return r;
}
/// Delay of a token from GPU `from` to GPU `to` (ps): at the flow rung D = coarse_offset_ps
/// (no more than the lookahead allows: with `from` and `to` in different partitions one of
/// them is cut from the network LP by an edge of latency D); at the analytical rung the largest
/// latency of one link of the route (with `from` and `to` in different partitions a cut edge,
/// whose latency is at least the lookahead, lies on the route). The same for any partition.
engine::SimTime ring_token_delay_ps(const Topology& topo, Fidelity fidelity, std::uint32_t from, std::uint32_t to);

/// Whether a ring streams: only when every step of every rank is more than one packet, i.e.
/// `min_step_bytes` (the least step of the ring: over a rank's sends and receives together,
/// which cover every chunk, so every rank decides alike) > links.max_mtu(). A single-packet
/// flow at the flow rung is pure latency on its port clock and never shares a link, while a
/// stream of such steps would share its links max-min and pay that congestion on top of the
/// latency chain P1 (measured: +34% on a 64-GPU 256 KiB ring, 4 KiB steps, docs/fidelity.md);
/// such rings stay step-wise (their flows are the cheap direct kind, FlowSource).
inline bool ring_streams(const RingLinkClasses& links, std::uint64_t min_step_bytes) {
  return min_step_bytes > links.max_mtu();
}

/// The stream's completion terms for rank `index` of ring `members` (n = members.size() >= 2)
/// running `steps` steps (see the file comment).
struct RingStreamTiming {
  engine::SimTime chain_ps = 0;   ///< P1: the step-wise chain to the last receive, uncongested
  engine::SimTime in_ps = 0;      ///< T_{i-1}(B_in): the incoming stream alone
};
/// @param chain_bytes c, the bytes of the last step's incoming message (the chunk of the chain).
/// @param in_bytes B_in (the incoming stream's bytes).
/// @throws engine::InternalError if index >= n or n < 2.
RingStreamTiming ring_stream_timing(const Topology& topo, const std::vector<std::uint32_t>& members,
                                    const RingLinkClasses& links, std::uint32_t index, std::uint32_t steps,
                                    std::uint64_t chain_bytes, std::uint64_t in_bytes);

}  // namespace fabricsim::models
