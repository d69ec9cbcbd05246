#pragma once
/// @file ring_planner.hpp
/// Minimal collective planner for the walking skeleton (`simccl.planner: ring`; the NCCL-faithful planner is
/// simccl/nccl_planner.hpp): ring AllReduce (reduce-scatter then all-gather, 2(N-1) steps), ring AllGather and
/// ReduceScatter (N-1 steps), pipelined chain Broadcast and Reduce along the ring, and direct
/// AllToAll (every rank sends size/N to every peer at once).
#include <cstdint>

#include "models/core/comm_plan.hpp"

namespace fabricsim::simccl {

/// Pipeline chunk for Broadcast/Reduce: NCCL's default Simple-protocol step,
/// NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8 = 512 KiB (NCCL 2.28 src/include/device.h, src/init.cc).
inline constexpr std::uint64_t kPipelineChunkBytes = 512 * 1024;

/// Size of chunk `c` when `bytes` is split into `n` near-equal chunks (the first bytes % n
/// chunks get one extra byte), so chunk sizes always sum to `bytes`.
std::uint64_t chunk_bytes(std::uint64_t bytes, std::uint32_t n, std::uint32_t c);

/// The ring/chain/direct planner. Stateless.
class RingPlanner final : public models::CollectivePlanner {
 public:
  models::RankPlan plan(const models::CollRequest& req) const override;
};

}  // namespace fabricsim::simccl
