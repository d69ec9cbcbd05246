#pragma once
/// @file lp.hpp
/// Logical process interface. An LP owns its state; only its own handler writes it.
#include <string_view>

#include "engine/event.hpp"

namespace fabricsim::engine {

class Context;
class StateWriter;
class StateReader;

/// A simulated node (GPU rank, NIC, switch, NVSwitch, PHOLD LP...).
class Lp {
 public:
  virtual ~Lp() = default;
  /// Called once at time 0 before the first window; may schedule initial events.
  virtual void init(Context& ctx) = 0;
  /// Handles one event addressed to this LP at ctx.now() == ev.time.
  virtual void handle(const Event& ev, Context& ctx) = 0;

  /// Checkpoints (docs/checkpoint.md): true if save_state/load_state hold the LP's whole mutable
  /// state, so that an LP built the same way and given load_state(saved bytes) continues exactly
  /// as this one would. Default false: a run with such an LP refuses checkpoint and restart
  /// flags before it simulates.
  virtual bool checkpointable() const { return false; }
  /// A short name of the LP's type for error messages ("GpuRankLp").
  virtual std::string_view type_name() const { return "Lp"; }
  /// Writes the LP's mutable state (called between windows, never during handle()).
  /// Only called when checkpointable(); the default writes nothing.
  virtual void save_state(StateWriter& out) const { (void)out; }
  /// Restores what save_state wrote, into an LP constructed exactly as the saved one was (same
  /// spec, same id), before Simulator::run() and instead of init().
  /// @throws InputError (via StateReader) on bytes that do not fit.
  virtual void load_state(StateReader& in) { (void)in; }
};

}  // namespace fabricsim::engine
