#pragma once
/// @file hpcc.hpp
/// HPCC (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019): a window per QP
/// from the in-band telemetry (INT) of every ACK, paced at window / base RTT (§3.3 Algorithm 1).
/// The interface it implements is described in models/cc/cc.hpp.
#include <cstdint>

#include "engine/time.hpp"
#include "models/cc/cc.hpp"

namespace fabricsim::models {

/// HPCC parameters (Li et al., SIGCOMM 2019, §3.3 Algorithm 1 and §5 settings). Spec keys
/// cc.hpcc_* (Hpcc::decls).
struct HpccParams {
  double eta = 0.95;            ///< target utilization
  std::uint32_t max_stage = 5;  ///< additive-increase stages before a multiplicative update
  /// W_AI as a fraction of the initial window W_init = line rate x base RTT; the paper sets
  /// W_AI so that N flows' increases stay within (1 - eta); 1/(2 x 100) here (100 flows).
  double wai_fraction = 0.005;
  /// Base RTT T (ps); 0 = auto: twice the sum of link latencies plus serialization of one MTU
  /// per hop on the connection's path, computed when the QP is created.
  engine::SimTime base_rtt_ps = 0;
};

namespace cc {

/// HPCC as a congestion-control plug-in (static members only; models/cc/cc.hpp).
class Hpcc {
 public:
  using Params = HpccParams;
  /// Sender state of one acknowledged QP: 96 B.
  struct State {
    double rate = 0;                  ///< pacing rate W / T (bits/s)
    double window = 0, wc = 0, u = 0; ///< window W and W_c (bytes), utilization estimate U
    std::uint32_t inc_stage = 0, last_update_seq = 0;
    engine::SimTime base_rtt = 0;     ///< T (ps)
    std::uint8_t last_nint = 0;       ///< INT hops of the previous ACK
    IntHop last_int[kMaxIntHops];     ///< INT of the previous ACK
  };
  static constexpr const char* kName = "hpcc";
  static constexpr const char* kSummary = "hpcc (INT window control, Li et al. SIGCOMM 2019)";
  static constexpr CcTraits kTraits{.ack_interval = 1, .wants_int = true, .notify_on_ce = false,
                                    .needs_path_rtt = true, .windowed = true, .paced = true,
                                    .echo_send_time = false};

  /// Spec keys cc.hpcc_*.
  static ParamDecls decls();
  /// Reads cc.hpcc_*. @throws engine::InputError for a value outside its range.
  static void parse(const SpecReader& r, Params& p);
  static void validate(const Params&, const SpecReader&) {}

  /// W_init = line rate x T, with T = cc.hpcc_base_rtt or the QP's path RTT.
  static State init(const Params& h, const QpInit& q) {
    State s;
    s.rate = static_cast<double>(q.link.line_bps);
    s.base_rtt = h.base_rtt_ps > 0 ? h.base_rtt_ps : q.path_rtt_ps;
    s.window = static_cast<double>(q.link.line_bps) * static_cast<double>(s.base_rtt) / 8e12;  // W_init = B x T
    s.wc = s.window;
    return s;
  }
  static double rate_bps(const State& s, const QpLink&) { return s.rate; }
  /// Closed while the bytes in flight (whole packets) reach the window and one is outstanding.
  static bool window_open(const State& s, const TxWindow& w) {
    const double inflight = static_cast<double>(w.snd_nxt - w.snd_una) * w.packet_bytes;
    return !(inflight >= s.window && w.snd_nxt > w.snd_una);
  }
  static void on_send(State&, const Params&, const QpLink&, std::uint32_t, engine::SimTime) {}
  /// Algorithm 1 on an ACK carrying INT (ACKs without INT leave the state as it is).
  static void on_ack(State& s, const Params& h, const QpLink& l, const AckInfo& ack, engine::SimTime) {
    if (ack.nint > 0) update(s, h, l, ack);
  }
  static void on_cnp(State&, const Params&, const QpLink&, engine::SimTime) {}
  static bool notify_ce(const Params&, engine::SimTime&, engine::SimTime) { return false; }

  /// Utilization from the INT hops, EWMA over T, window update (MeasureInflight and
  /// ComputeWind of Algorithm 1), pacing rate W / T.
  static void update(State& s, const Params& h, const QpLink& l, const AckInfo& ack);
};

}  // namespace cc
}  // namespace fabricsim::models
