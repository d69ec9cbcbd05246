#pragma once
/// @file timely.hpp
/// TIMELY (Mittal et al., "TIMELY: RTT-based Congestion Control for the Datacenter", SIGCOMM
/// 2015): a per-QP rate from the gradient of RTT samples (§4, Algorithm 1). Every ACK is one
/// completion event; its RTT sample is the time from the acknowledged packet's last byte
/// leaving the sender to the ACK's arrival (cc::AckInfo::rtt_ps), i.e. without the segment's
/// serialization, as the paper's RTT. The interface it implements is described in
/// models/cc/cc.hpp.
#include <cstdint>

#include "engine/time.hpp"
#include "models/cc/cc.hpp"

namespace fabricsim::models {

/// TIMELY parameters (Mittal et al., SIGCOMM 2015, Algorithm 1 and the settings of §6). Spec
/// keys cc.timely_* (Timely::decls).
struct TimelyParams {
  double alpha = 0.875;                      ///< EWMA weight of the newest RTT difference
  double beta = 0.8;                         ///< multiplicative decrease factor
  engine::SimTime t_low_ps = 50'000'000;     ///< below: additive increase whatever the gradient (50 us)
  engine::SimTime t_high_ps = 500'000'000;   ///< above: decrease by (1 - T_high / RTT) (500 us)
  std::uint64_t delta_bps = 10'000'000;      ///< additive increment delta (10 Mb/s)
  std::uint32_t hai_threshold = 5;           ///< HAI: N x delta after this many non-positive gradients in a row
  /// minRTT that normalises the gradient (20 us); 0 = the QP's path RTT (cc::QpInit::path_rtt_ps).
  engine::SimTime min_rtt_ps = 20'000'000;
  double min_rate_fraction = 0.001;          ///< floor on the rate, as a fraction of line rate
};

namespace cc {

/// TIMELY as a congestion-control plug-in (static members only; models/cc/cc.hpp).
class Timely {
 public:
  using Params = TimelyParams;
  /// Sender state of one acknowledged QP: 40 B.
  struct State {
    double rate = 0;                 ///< sending rate (bits/s)
    double rtt_diff = 0;             ///< EWMA of successive RTT differences (ps)
    engine::SimTime prev_rtt = -1;   ///< previous RTT sample (ps); -1 before the first
    engine::SimTime min_rtt = 0;     ///< minRTT of the gradient (ps)
    std::uint32_t neg_count = 0;     ///< consecutive completions with a non-positive gradient
  };
  static constexpr const char* kName = "timely";
  static constexpr const char* kSummary = "timely (RTT-gradient rate control, Mittal et al. SIGCOMM 2015)";
  static constexpr CcTraits kTraits{.ack_interval = 4, .wants_int = false, .notify_on_ce = false,
                                    .needs_path_rtt = true, .windowed = false, .paced = true,
                                    .echo_send_time = true};

  /// Spec keys cc.timely_*.
  static ParamDecls decls();
  /// Reads cc.timely_*. @throws engine::InputError for a value outside its range.
  static void parse(const SpecReader& r, Params& p);
  /// @throws engine::InputError when cc.timely_t_low is not below cc.timely_t_high.
  static void validate(const Params& p, const SpecReader& r);

  /// A new QP starts at line rate.
  static State init(const Params& t, const QpInit& q) {
    State s;
    s.rate = static_cast<double>(q.link.line_bps);
    s.min_rtt = t.min_rtt_ps > 0 ? t.min_rtt_ps : q.path_rtt_ps;
    return s;
  }
  static double rate_bps(const State& s, const QpLink&) { return s.rate; }
  static bool window_open(const State&, const TxWindow&) { return true; }
  static void on_send(State&, const Params&, const QpLink&, std::uint32_t, engine::SimTime) {}
  /// One completion event: Algorithm 1 with the ACK's RTT sample (none: no change).
  static void on_ack(State& s, const Params& t, const QpLink& l, const AckInfo& ack, engine::SimTime) {
    if (ack.rtt_ps >= 0) update(s, t, l, ack.rtt_ps);
  }
  static void on_cnp(State&, const Params&, const QpLink&, engine::SimTime) {}
  static bool notify_ce(const Params&, engine::SimTime&, engine::SimTime) { return false; }

  /// Algorithm 1 (UPDATE_RATE) for RTT sample `rtt_ps`: the first sample only initialises the
  /// gradient; then rate + delta below T_low, rate x (1 - beta (1 - T_high / rtt)) above
  /// T_high, else rate + N delta for a non-positive normalised gradient (N = 5 after
  /// hai_threshold such completions in a row, else 1) or rate x (1 - beta x gradient).
  /// The rate stays within [min_rate_fraction x line, line].
  static void update(State& s, const Params& t, const QpLink& l, engine::SimTime rtt_ps);
};

}  // namespace cc
}  // namespace fabricsim::models
