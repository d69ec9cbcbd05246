#pragma once
/// @file lp.hpp
/// Logical process interface. An LP owns its state; only its own handler writes it.
#include "engine/event.hpp"

namespace fabricsim::engine {

class Context;

/// A simulated node (GPU rank, NIC, switch, NVSwitch, PHOLD LP...).
class Lp {
 public:
  virtual ~Lp() = default;
  /// Called once at time 0 before the first window; may schedule initial events.
  virtual void init(Context& ctx) = 0;
  /// Handles one event addressed to this LP at ctx.now() == ev.time.
  virtual void handle(const Event& ev, Context& ctx) = 0;
};

}  // namespace fabricsim::engine
