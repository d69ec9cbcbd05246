#include "simccl/custom_planner.hpp"

#include <span>

namespace fabricsim::simccl {

CustomPlanner::CustomPlanner(std::unique_ptr<models::CollectivePlanner> base, std::vector<CustomSchedule> schedules)
    : base_(std::move(base)), schedules_(std::move(schedules)) {}

const CustomSchedule* CustomPlanner::match(const models::CollRequest& req) const {
  for (const auto& s : schedules_) {
    if (s.op == req.op && req.ranks != nullptr && req.ranks->size() == s.n_ranks) return &s;
  }
  return nullptr;
}

models::RankPlan expand_schedule(const CustomSchedule& s, std::uint64_t bytes, const std::vector<std::uint32_t>& ranks,
                                 std::uint32_t position) {
  models::RankPlan p;
  const auto& ops = s.ranks[position];
  p.reserve(ops.size(), ops.size() * 2);
  for (const ScheduleOp& o : ops) {
    models::P2pOp op;
    op.is_send = o.is_send;
    op.peer = ranks[o.peer];
    op.tag = o.tag;
    op.channel = o.channel;
    if (o.is_send) {
      op.bytes = schedule_chunk_bytes(bytes, s.chunks_per_buffer, o.chunks);
      op.payload_bytes = op.bytes;
    }
    p.add(op, std::span<const std::uint32_t>(o.deps.data(), o.deps.size()));
  }
  return p;
}

models::RankPlan CustomPlanner::plan(const models::CollRequest& req) const {
  if (const CustomSchedule* s = match(req)) return expand_schedule(*s, req.bytes, *req.ranks, req.my_index);
  return base_->plan(req);
}

}  // namespace fabricsim::simccl
