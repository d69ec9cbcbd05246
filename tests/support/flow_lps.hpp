#pragma once
// LPs shared by the flow-rung tests that drive the network LP directly (flow_source_test,
// simgrid_crosscheck_test): switches exist as LPs in the topology but must never be addressed
// at the flow rung, so each is a stand-in that fails the test on any event.
#include <gtest/gtest.h>

#include <cstdint>

#include "engine/simulator.hpp"
#include "models/core/packet.hpp"

namespace fabricsim::testing {

/// A switch LP for flow-rung tests: no state, any event it receives is a test failure.
class IdleSwitchLp final : public engine::Lp {
 public:
  void init(engine::Context&) override {}
  void handle(const engine::Event& ev, engine::Context&) override { FAIL() << "switch LP got event " << ev.kind; }
};

/// The head packet of one point-to-point test flow `id` of `bytes` from rank `src` to `dst`,
/// handed to the port at `now` (ps) with ECMP hash input `hash`; the tag is the flow id.
inline models::Packet p2p_flow_head(std::uint64_t id, std::uint64_t bytes, std::uint32_t src, std::uint32_t dst,
                                    std::uint64_t hash, engine::SimTime now) {
  models::Packet head;
  head.flow_id = id;
  head.flow_bytes = bytes;
  head.flow_start = now;
  head.flow_hash = hash;
  head.tag = static_cast<std::int64_t>(id);
  head.src_rank = src;
  head.dst_rank = dst;
  head.group = models::kP2pGroup;
  return head;
}

}  // namespace fabricsim::testing
