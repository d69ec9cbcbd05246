#pragma once
/// @file dcqcn.hpp
/// DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015):
/// rate-based reaction point at the sender (§3.1) and CNP notification point at the receiver
/// (§3.2). The interface it implements is described in models/cc/cc.hpp.
#include <algorithm>
#include <cstdint>

#include "engine/time.hpp"
#include "models/cc/cc.hpp"

namespace fabricsim::models {

/// DCQCN reaction-point and notification-point parameters (Zhu et al., SIGCOMM 2015, §3 and
/// the parameter list of §5; rate steps scaled with the line rate from the paper's 40 Gb/s).
/// Spec keys cc.dcqcn_* (Dcqcn::decls).
struct DcqcnParams {
  double g = 1.0 / 256;                          ///< alpha EWMA gain
  engine::SimTime cnp_interval_ps = 50'000'000;  ///< NP: at most one CNP per QP per 50 us
  engine::SimTime alpha_timer_ps = 55'000'000;   ///< RP: alpha decays every 55 us without CNP
  engine::SimTime rate_timer_ps = 55'000'000;    ///< RP: rate-increase timer T
  std::uint64_t byte_counter_bytes = 10ull << 20;  ///< RP: rate-increase byte counter B (10 MB)
  std::uint32_t fast_recovery_steps = 5;         ///< F
  /// Additive increase R_AI as a fraction of line rate: 40 Mb/s at 40 Gb/s in the paper = 1/1000.
  double rai_fraction = 0.001;
  double rhai_fraction = 0.01;                   ///< hyper increase R_HAI (10 x R_AI)
  double min_rate_fraction = 0.001;              ///< floor on the sending rate
};

namespace cc {

/// DCQCN as a congestion-control plug-in (static members only; models/cc/cc.hpp).
class Dcqcn {
 public:
  using Params = DcqcnParams;
  /// Reaction-point state of one acknowledged QP: 64 B.
  struct State {
    double rate = 0;    ///< current rate R_C (bits/s)
    double target = 0;  ///< target rate R_T (bits/s)
    double alpha = 1.0;
    std::uint64_t byte_acc = 0;  ///< bytes sent since the last byte-counter event
    engine::SimTime alpha_at = 0, rate_at = 0;  ///< last alpha decay / rate-timer tick (ps)
    std::uint32_t t_count = 0, bc_count = 0;    ///< rate-timer and byte-counter events since the cut
    bool limited = false;  ///< below line rate: the increase timers run
  };
  static constexpr const char* kName = "dcqcn";
  static constexpr const char* kSummary = "dcqcn (ECN/CNP rate control, Zhu et al. SIGCOMM 2015)";
  static constexpr CcTraits kTraits{.ack_interval = 4, .wants_int = false, .notify_on_ce = true,
                                    .needs_path_rtt = false, .windowed = false, .paced = true,
                                    .echo_send_time = false};

  /// Spec keys cc.dcqcn_*.
  static ParamDecls decls();
  /// Reads cc.dcqcn_*. @throws engine::InputError for a value outside its range.
  static void parse(const SpecReader& r, Params& p);
  /// @throws engine::InputError when cc.dcqcn_g is 0 (alpha would never change).
  static void validate(const Params& p, const SpecReader& r);

  /// A new QP starts at line rate, alpha = 1 (§3.1).
  static State init(const Params&, const QpInit& q) {
    State s;
    s.rate = static_cast<double>(q.link.line_bps);
    s.target = s.rate;
    return s;
  }
  static double rate_bps(const State& s, const QpLink&) { return s.rate; }
  static bool window_open(const State&, const TxWindow&) { return true; }
  /// A data packet of `wire_bytes` leaves: timers catch up, then the byte counter (§3.1).
  static void on_send(State& s, const Params& d, const QpLink& l, std::uint32_t wire_bytes, engine::SimTime now) {
    if (s.limited) catch_up(s, d, l, now);
    s.byte_acc += wire_bytes;
    if (s.limited && s.byte_acc >= d.byte_counter_bytes) {
      s.byte_acc -= d.byte_counter_bytes;
      ++s.bc_count;
      increase(s, d, l);
    }
  }
  static void on_ack(State&, const Params&, const QpLink&, const AckInfo&, engine::SimTime) {}
  /// Rate cut on a CNP: R_T = R_C, R_C = max(floor, R_C (1 - alpha/2)), alpha = (1-g) alpha + g.
  static void on_cnp(State& s, const Params& d, const QpLink& l, engine::SimTime now);
  /// Notification point: true (send a CNP, `last_cnp` = now) when CE-marked data arrives and no
  /// CNP went out for the QP in the last cnp_interval (`last_cnp` < 0: none yet).
  static bool notify_ce(const Params& d, engine::SimTime& last_cnp, engine::SimTime now) {
    if (last_cnp < 0 || now - last_cnp >= d.cnp_interval_ps) {
      last_cnp = now;
      return true;
    }
    return false;
  }

  /// The alpha and rate timers due by `now`, in time order (no timer events).
  static void catch_up(State& s, const Params& d, const QpLink& l, engine::SimTime now);
  /// One rate-increase event: fast recovery, additive or hyper increase (§3.1).
  static void increase(State& s, const Params& d, const QpLink& l);
};

}  // namespace cc
}  // namespace fabricsim::models
