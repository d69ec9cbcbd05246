#pragma once
/// @file custom_planner.hpp
/// Replays custom schedules (simccl/custom_schedule.hpp) for the collectives they fit and hands
/// every other collective to the run's planner (NCCL or ring). Spec key `simccl.schedule: PATH`
/// (docs/simccl.md). A schedule fits a call when the collective matches the schedule's and the
/// communicator has the schedule's number of ranks; rank i of the schedule is position i of the
/// communicator; a send of k chunks carries k x size / chunks_per_buffer bytes (size in the
/// nccl-tests convention, models/core/workload.hpp). Schedules are replayed as given: no protocol
/// inflation, no channels beyond the schedule's.
#include <memory>
#include <vector>

#include "models/core/comm_plan.hpp"
#include "simccl/custom_schedule.hpp"

namespace fabricsim::simccl {

/// The custom-schedule planner (stateless after construction; thread-safe).
class CustomPlanner final : public models::CollectivePlanner {
 public:
  /// @param base planner for the collectives no schedule fits (owned)
  /// @param schedules tried in order; the first that fits a call plans it
  CustomPlanner(std::unique_ptr<models::CollectivePlanner> base, std::vector<CustomSchedule> schedules);
  models::RankPlan plan(const models::CollRequest& req) const override;
  /// Workload sends take the base planner's route (schedules only plan collectives).
  models::P2pRoute p2p_route(std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) const override {
    return base_->p2p_route(src, dst, bytes);
  }
  /// Replayed schedules start at once; other calls take the base planner's latency.
  std::int64_t p2p_start_latency_ps(std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) const override {
    return base_->p2p_start_latency_ps(src, dst, bytes);
  }
  std::int64_t start_latency_ps(const models::CollRequest& req) const override {
    return match(req) != nullptr ? 0 : base_->start_latency_ps(req);
  }
  /// The schedule that plans `req`, or nullptr when the base planner does.
  const CustomSchedule* match(const models::CollRequest& req) const;
  /// The planner of the other collectives.
  const models::CollectivePlanner& base() const { return *base_; }
  const std::vector<CustomSchedule>& schedules() const { return schedules_; }

 private:
  std::unique_ptr<models::CollectivePlanner> base_;
  std::vector<CustomSchedule> schedules_;
};

/// Expands one rank's part of a schedule for a call of `bytes` over communicator `ranks`
/// (global ranks by position). Peers become global ranks, chunk counts become bytes.
models::RankPlan expand_schedule(const CustomSchedule& s, std::uint64_t bytes, const std::vector<std::uint32_t>& ranks,
                                 std::uint32_t position);

}  // namespace fabricsim::simccl
