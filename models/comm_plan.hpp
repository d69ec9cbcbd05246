#pragma once
/// @file comm_plan.hpp
/// The contract between the rank executor (models) and the collective planner (simccl): a
/// collective becomes, on each rank, a small DAG of point-to-point sends and receives.
#include <cstdint>
#include <vector>

#include "models/workload.hpp"

namespace fabricsim::models {

/// One point-to-point operation of a rank inside a collective.
struct P2pOp {
  bool is_send = false;
  std::uint32_t peer = 0;       ///< global rank of the peer
  std::uint64_t bytes = 0;      ///< message size (sends only; receivers learn it from the flow)
  std::uint32_t tag = 0;        ///< (sender rank, tag) is unique per receiver inside one collective instance
  std::vector<std::uint32_t> deps;  ///< indices of ops of this rank that must complete first
  // Planner annotations (the executor does not need them; reports and tests do):
  std::uint64_t payload_bytes = 0;  ///< sends: data carried; bytes - payload = protocol overhead (LL/LL128)
  std::uint16_t channel = 0;        ///< NCCL channel the op belongs to
  bool relay = false;               ///< forwards another rank's data (PXN relay), not this rank's own
};

/// What one rank does for one collective.
struct RankPlan {
  std::vector<P2pOp> ops;
};

/// A collective as one rank sees it.
struct CollRequest {
  CollOp op = CollOp::kAllReduce;
  std::uint64_t bytes = 0;                         ///< nccl-tests size convention (workload.hpp)
  const std::vector<std::uint32_t>* ranks = nullptr;  ///< communicator, ring order
  std::uint32_t my_index = 0;                      ///< this rank's position in *ranks
  std::uint32_t root_index = 0;                    ///< broadcast/reduce root position
};

/// Plans collectives; implemented by simccl. Must be deterministic and thread-safe (const).
class CollectivePlanner {
 public:
  virtual ~CollectivePlanner() = default;
  /// @returns the rank's plan; an empty plan completes immediately.
  virtual RankPlan plan(const CollRequest& req) const = 0;
};

}  // namespace fabricsim::models
