#pragma once
/// @file fold.hpp
/// Folding of identical data-parallel replicas (spec key sim.fold: dp; docs/folding.md): the
/// rank arithmetic of the replica shift sigma (dp -> dp + k mod DP, k replicas folded whole) that
/// the coarse rungs use to deliver a representative's flows into image 0 and to map links onto
/// their representatives.
#include <cstdint>

#include "models/core/packet.hpp"

namespace fabricsim::models {

/// The shift of a job's data-parallel replicas folded k at a time (docs/folding.md). The ranks
/// are laid out as rank = inner + R·(dp + DP·outer) with R ranks below the DP index (TP·CP for the
/// generator's tp-cp-dp-pp order, TP·PP for a SimAI file's tp-pp-dp). Folding groups the DP
/// replicas into DP/k images of k consecutive replicas each: stride = R·k, replicas = DP/k, and
/// sigma shifts a rank by one image (k DP replicas). Image 0 (dp < k, the k replicas simulated
/// whole) is the representative. Inactive (replicas <= 1) it maps every rank to itself.
struct FoldMap {
  std::uint32_t world = 0;     ///< ranks of the whole job
  std::uint32_t stride = 1;    ///< ranks between one image and the next (R·k)
  std::uint32_t replicas = 1;  ///< images: DP / k
  std::uint32_t block = 1;     ///< k: DP replicas per image (simulated whole in image 0)

  /// True when more than one replica is folded into the representative.
  bool active() const { return replicas > 1; }
  /// Image index of rank r (0 for ranks beyond the job: idle GPUs are their own representatives).
  std::uint32_t replica(std::uint32_t r) const { return r < world ? (r / stride) % replicas : 0; }
  /// Rank r shifted by k images (sigma^k(r)), k in [0, replicas).
  std::uint32_t shift(std::uint32_t r, std::uint32_t k) const {
    if (r >= world) return r;
    const std::uint32_t d = replica(r);
    const std::uint32_t to = (d + k) % replicas;
    return r - d * stride + to * stride;
  }
  /// The representative of rank r (its image in image 0).
  std::uint32_t rep(std::uint32_t r) const { return shift(r, (replicas - replica(r)) % replicas); }
  /// True when rank r runs its DAG in a folded run.
  bool simulated(std::uint32_t r) const { return replica(r) == 0; }
  /// The arrival of flow `head` (sent by a representative rank): unchanged when its destination
  /// is a representative; else rewritten as its image under sigma^-j (j = the destination's
  /// replica), the flow from replica -j into a representative rank, which the unfolded run has
  /// at the same instant with the same timing. @returns the rank that receives it.
  std::uint32_t mirror(Packet& head) const {
    const std::uint32_t j = replica(head.dst_rank);
    if (j == 0) return head.dst_rank;
    const std::uint32_t back = replicas - j;
    head.src_rank = shift(head.src_rank, back);
    head.dst_rank = shift(head.dst_rank, back);
    return head.dst_rank;
  }
};

}  // namespace fabricsim::models
