#pragma once
/// @file switch_lp.hpp
/// Store-and-forward switch (Ethernet leaf/spine or NVSwitch) with FIFO output queues.
#include <cstdint>
#include <vector>

#include "engine/lp.hpp"
#include "models/cluster.hpp"
#include "models/link_sampler.hpp"

namespace fabricsim::models {

/// A switch LP. Each egress port is a FIFO with unbounded buffer: a packet that arrives at t
/// starts transmission at max(t, port free time) and reaches the peer after its serialization
/// time plus the link latency. Keeping only the port's free time makes this exactly a FIFO
/// output queue with one event per packet hop (htsim habit); the queue length at time t is
/// (free_time - t) * rate. Buffers, PFC and ECN arrive with issue 3.
class SwitchLp final : public engine::Lp {
 public:
  SwitchLp(const Topology& topo, engine::LpId id);
  void init(engine::Context&) override {}
  void handle(const engine::Event& ev, engine::Context& ctx) override;
  engine::LpId lp_id() const { return id_; }
  /// Bytes transmitted per egress port.
  const std::vector<std::uint64_t>& port_bytes() const { return bytes_; }
  /// Largest queueing delay seen at any egress port (ps).
  engine::SimTime max_queue_delay_ps() const { return max_queue_ps_; }
  /// Starts sampling egress bytes and queue backlog in bins of `bin_ps` (ps); off by default.
  void enable_sampling(engine::SimTime bin_ps) { sampler_.enable(bin_ps, free_at_.size()); }
  /// The sampled series (empty unless enable_sampling was called).
  const LinkSampler& sampler() const { return sampler_; }

 private:
  const Topology& topo_;
  engine::LpId id_;
  std::vector<engine::SimTime> free_at_;
  std::vector<std::uint64_t> bytes_;
  engine::SimTime max_queue_ps_ = 0;
  LinkSampler sampler_;
};

}  // namespace fabricsim::models
