#include "simccl/ring_planner.hpp"

#include <algorithm>
#include <memory>

#include "engine/errors.hpp"

namespace fabricsim::simccl {

using models::CollOp;
using models::P2pOp;
using models::RankPlan;

std::uint64_t chunk_bytes(std::uint64_t bytes, std::uint32_t n, std::uint32_t c) {
  return bytes / n + (c < bytes % n ? 1 : 0);
}

namespace {

std::uint32_t mod(std::int64_t a, std::uint32_t n) {
  const std::int64_t m = a % static_cast<std::int64_t>(n);
  return static_cast<std::uint32_t>(m < 0 ? m + n : m);
}

// Ring of `steps` steps: at step k the rank sends chunk send_chunk(k) to next and receives from
// prev; the send of step k waits for the receive of step k-1 (the data it forwards or reduces).
// Lazy (models::LazyRing): O(1) memory per rank whatever the ring's length. `bytes_at(j)` gives
// the step-bytes function of ring position j: this rank's sends (j = i) and its predecessor's
// (j = i - 1, what this rank receives; the streamed rings of sim.ring_flows need it).
template <class BytesAt>
RankPlan ring(std::uint32_t steps, std::uint32_t next, std::uint32_t prev, std::uint32_t i, std::uint32_t n,
              BytesAt bytes_at) {
  RankPlan p;
  auto r = std::make_shared<models::LazyRing>();
  r->steps = steps;
  r->next = next;
  r->prev = prev;
  r->step_bytes = bytes_at(i);
  r->recv_bytes = bytes_at((i + n - 1) % n);
  p.lazy_ring = std::move(r);
  return p;
}

// Pipelined chain along the ring from position 0 to position n-1 (positions relative to `first`).
RankPlan chain(std::uint64_t bytes, std::uint32_t n, std::uint32_t pos, std::uint32_t next,
               std::uint32_t prev) {
  RankPlan p;
  const std::uint64_t chunks = std::max<std::uint64_t>(1, (bytes + kPipelineChunkBytes - 1) / kPipelineChunkBytes);
  for (std::uint32_t c = 0; c < chunks; ++c) {
    const std::uint64_t sz = std::min<std::uint64_t>(kPipelineChunkBytes, bytes - std::min(bytes, c * kPipelineChunkBytes));
    if (pos == 0) {
      p.add(P2pOp{true, next, sz, c});
    } else if (pos == n - 1) {
      p.add(P2pOp{false, prev, 0, c});
    } else {
      const std::uint32_t r = p.add(P2pOp{false, prev, 0, c});
      p.add(P2pOp{true, next, sz, c}, {r});
    }
  }
  return p;
}

}  // namespace

RankPlan RingPlanner::plan(const models::CollRequest& req) const {
  const auto& ranks = *req.ranks;
  const auto n = static_cast<std::uint32_t>(ranks.size());
  if (n <= 1) return {};
  const std::uint32_t i = req.my_index;
  const std::uint32_t next = ranks[(i + 1) % n];
  const std::uint32_t prev = ranks[(i + n - 1) % n];
  const std::uint64_t s = req.bytes;
  switch (req.op) {
    case CollOp::kAllReduce:
      // Reduce-scatter: step k sends chunk (i-k); all-gather: step t sends chunk (i+1-t).
      return ring(2 * (n - 1), next, prev, i, n, [s, n](std::uint32_t j) {
        return [s, n, j](std::uint32_t k) {
          const std::int64_t c = k < n - 1 ? static_cast<std::int64_t>(j) - k
                                           : static_cast<std::int64_t>(j) + 1 - (k - (n - 1));
          return chunk_bytes(s, n, mod(c, n));
        };
      });
    case CollOp::kAllGather:
      return ring(n - 1, next, prev, i, n, [s, n](std::uint32_t j) {
        return [s, n, j](std::uint32_t k) { return chunk_bytes(s, n, mod(static_cast<std::int64_t>(j) - k, n)); };
      });
    case CollOp::kReduceScatter:
      return ring(n - 1, next, prev, i, n, [s, n](std::uint32_t j) {
        return [s, n, j](std::uint32_t k) { return chunk_bytes(s, n, mod(static_cast<std::int64_t>(j) - k - 1, n)); };
      });
    case CollOp::kBroadcast:
      return chain(s, n, mod(static_cast<std::int64_t>(i) - req.root_index, n), next, prev);
    case CollOp::kReduce:
      // Data flows root+1 -> root+2 -> ... -> root (NCCL's ring PipelineTo).
      return chain(s, n, mod(static_cast<std::int64_t>(i) - req.root_index - 1, n), next, prev);
    case CollOp::kAllToAll: {
      RankPlan p;
      for (std::uint32_t d = 1; d < n; ++d) {
        const std::uint32_t to = (i + d) % n;
        p.add(P2pOp{true, ranks[to], chunk_bytes(s, n, to), 0});
        p.add(P2pOp{false, ranks[(i + n - d) % n], 0, 0});
      }
      return p;
    }
  }
  throw engine::InternalError("RingPlanner: unknown collective");
}

}  // namespace fabricsim::simccl
