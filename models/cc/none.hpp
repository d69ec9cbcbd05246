#pragma once
/// @file none.hpp
/// No congestion control: every acknowledged QP sends at line rate, limited only by PFC and the
/// port's round robin. The interface it implements is described in models/cc/cc.hpp.
#include <cstdint>

#include "engine/time.hpp"
#include "models/cc/cc.hpp"

namespace fabricsim::models {

/// nic.cc = none has no parameters.
struct NoneParams {};

namespace cc {

/// Line rate, no reaction (static members only; models/cc/cc.hpp).
class None {
 public:
  using Params = NoneParams;
  struct State {};  ///< empty: the NIC stores nothing per QP
  static constexpr const char* kName = "none";
  static constexpr const char* kSummary = "none (every QP at line rate)";
  static constexpr CcTraits kTraits{.ack_interval = 4, .wants_int = false, .notify_on_ce = false,
                                    .needs_path_rtt = false, .windowed = false, .paced = false,
                                    .echo_send_time = false};

  static ParamDecls decls();
  static void parse(const SpecReader&, Params&) {}
  static void validate(const Params&, const SpecReader&) {}
  static State init(const Params&, const QpInit&) { return {}; }
  static double rate_bps(const State&, const QpLink& l) { return static_cast<double>(l.line_bps); }
  static bool window_open(const State&, const TxWindow&) { return true; }
  static void on_send(State&, const Params&, const QpLink&, std::uint32_t, engine::SimTime) {}
  static void on_ack(State&, const Params&, const QpLink&, const AckInfo&, engine::SimTime) {}
  static void on_cnp(State&, const Params&, const QpLink&, engine::SimTime) {}
  static bool notify_ce(const Params&, engine::SimTime&, engine::SimTime) { return false; }
};

}  // namespace cc
}  // namespace fabricsim::models
