#pragma once
// LPs shared by the flow-rung tests that drive the network LP directly (flow_source_test,
// simgrid_crosscheck_test): switches exist as LPs in the topology but must never be addressed
// at the flow rung, so each is a stand-in that fails the test on any event.
#include <gtest/gtest.h>

#include "engine/simulator.hpp"

namespace fabricsim::testing {

/// A switch LP for flow-rung tests: no state, any event it receives is a test failure.
class IdleSwitchLp final : public engine::Lp {
 public:
  void init(engine::Context&) override {}
  void handle(const engine::Event& ev, engine::Context&) override { FAIL() << "switch LP got event " << ev.kind; }
};

}  // namespace fabricsim::testing
