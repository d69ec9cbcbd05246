#pragma once
/// @file nccl_plan_detail.hpp
/// Internal to the NCCL planner (simccl/nccl_planner.cpp and the per-algorithm planners
/// simccl/plan_p2p.cpp, plan_nvls.cpp, plan_tree.cpp, plan_ring.cpp): the per-communicator
/// layout, one request's planning inputs, and the op builder and chunking helpers they share.
/// Not a public interface.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/errors.hpp"
#include "models/core/comm_plan.hpp"
#include "simccl/nccl_planner.hpp"
#include "simccl/ring_planner.hpp"

namespace fabricsim::simccl {

namespace plan_detail {

constexpr std::uint64_t kNcclSteps = 8;  // NCCL_STEPS, src/include/device.h
/// No op / no member (an unset dependency or relay).
constexpr std::uint32_t kNone = 0xFFFFFFFFu;

inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }
/// a mod n in [0, n) for negative a too.
inline std::uint32_t mod(std::int64_t a, std::uint32_t n) {
  const std::int64_t m = a % static_cast<std::int64_t>(n);
  return static_cast<std::uint32_t>(m < 0 ? m + n : m);
}
/// The smallest power of two >= v (1 for v <= 1).
inline std::uint32_t pow2_up(std::uint32_t v) {
  std::uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

/// `t` as a 32-bit message tag. @throws engine::InputError when it does not fit.
inline std::uint32_t checked_tag(std::uint64_t t) {
  if (t > 0xFFFFFFFFull) {
    throw engine::InputError("<simccl>", "collective size", "the plan needs more than 2^32 messages per rank pair",
                             "use a smaller collective or a larger NCCL_BUFFSIZE");
  }
  return static_cast<std::uint32_t>(t);
}

/// Appends ops to a materialized plan and returns their indices; sends carry the protocol's
/// wire bytes (wire_bytes) and the data bytes as payload.
struct Builder {
  models::RankPlan plan;
  Proto proto = Proto::kSimple;
  std::int64_t delay_ps = 0;  ///< P2pOp::delay_ps of the sends added next
  std::uint32_t send(std::uint32_t peer, std::uint64_t data, std::uint32_t tag, std::span<const std::uint32_t> deps,
                     std::uint16_t channel, bool relay = false) {
    models::P2pOp o{true, peer, wire_bytes(proto, data), tag};
    o.payload_bytes = data;
    o.channel = channel;
    o.relay = relay;
    o.delay_ps = delay_ps;
    return plan.add(o, deps);
  }
  /// `delay_ps`: P2pOp::delay_ps of the receive (the wait after the message arrived).
  std::uint32_t recv(std::uint32_t peer, std::uint32_t tag, std::uint16_t channel, bool relay = false,
                     std::int64_t delay_ps = 0) {
    models::P2pOp o{false, peer, 0, tag};
    o.channel = channel;
    o.relay = relay;
    o.delay_ps = delay_ps;
    return plan.add(o);
  }
};

/// Chunk and slice data sizes of one (algorithm, protocol, collective).
struct ProtoSizes {
  std::uint64_t chunk = 0;  ///< data bytes per chunk
  std::uint64_t slice = 0;  ///< data bytes per slice
  std::uint32_t max_slices = 1;
};

/// Chunk and slice data sizes (src/enqueue.cc calcCollChunking, src/include/collectives.h):
/// a step is NCCL_BUFFSIZE/NCCL_STEPS of the protocol's buffer (LL half data, LL128 15/16, at
/// least 16 B); Ring+Simple AllReduce / AllGather / ReduceScatter chunks are 4 steps in slices
/// of 2, everything else one step.
inline ProtoSizes proto_sizes(const NcclSettings& s, Algo a, Proto p, models::CollOp op) {
  using models::CollOp;
  const std::uint64_t buff = p == Proto::kLL ? s.buffsize_ll : p == Proto::kLL128 ? s.buffsize_ll128 : s.buffsize_simple;
  const std::uint64_t step = buff / kNcclSteps;
  std::uint64_t step_data = p == Proto::kLL ? step / 2 : p == Proto::kLL128 ? step / 16 * 15 : step;
  step_data = std::max<std::uint64_t>(step_data, 16);
  ProtoSizes z;
  const bool ring_simple = a == Algo::kRing && p == Proto::kSimple &&
                           (op == CollOp::kAllReduce || op == CollOp::kAllGather || op == CollOp::kReduceScatter);
  const std::uint64_t chunk_steps = ring_simple ? kNcclSteps / 2 : 1;
  const std::uint64_t slice_steps = ring_simple ? kNcclSteps / 4 : 1;
  z.chunk = step_data * chunk_steps;
  z.slice = step_data * slice_steps;
  z.max_slices = static_cast<std::uint32_t>(chunk_steps / slice_steps);
  return z;
}

/// Slices a piece of `piece` data bytes is sent in: ceil(piece / slice), 1 .. max_slices.
inline std::uint32_t nslices(std::uint64_t piece, const ProtoSizes& z) {
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(ceil_div(piece, z.slice), 1, z.max_slices));
}

}  // namespace plan_detail

struct NcclPlanner::CommInfo {
  std::vector<std::uint32_t> ranks;              // global ranks (member index -> rank)
  std::vector<std::vector<std::uint32_t>> nodes;  // members per host, by host then local GPU
  std::vector<std::vector<std::uint32_t>> node_ranks;  // nodes[k] as global ranks (lazy NVLSTree heads)
  std::vector<std::uint32_t> node_of, pos_in_node, local_gpu;
  std::unique_ptr<NcclTuner> tuner;
  int channels = 1;
  // rings[c][i] = member at ring position i; ring_pos[c][member] = its position.
  std::vector<std::vector<std::uint32_t>> rings, ring_pos;
  std::uint32_t member_on(std::uint32_t node, std::uint32_t local) const {
    for (std::uint32_t m : nodes[node]) {
      if (local_gpu[m] == local) return m;
    }
    return plan_detail::kNone;
  }
};

/// One request's planning inputs, as plan_impl derives them for the per-algorithm planners.
struct NcclPlanner::PlanCtx {
  const models::CollRequest& req;
  bool lazy = false;                     ///< lazy form wanted (NcclPlannerConfig::lazy_rings)
  std::shared_ptr<const CommInfo> ci;    ///< the communicator's layout
  const std::vector<std::uint32_t>& ranks;  ///< *req.ranks
  std::uint32_t n = 0;                   ///< communicator size (> 1)
  std::uint32_t me = 0;                  ///< req.my_index
  std::uint64_t S = 0;                   ///< req.bytes (> 0)
  TuningDecision d;                      ///< algorithm, protocol, channels (decision())
  std::uint32_t nc = 1;                  ///< channels, max(1, d.n_channels)
};

}  // namespace fabricsim::simccl
