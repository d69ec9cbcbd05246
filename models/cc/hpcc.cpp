#include "models/cc/hpcc.hpp"

#include <algorithm>

namespace fabricsim::models::cc {

namespace {

constexpr const char* kPaper = "Li et al., SIGCOMM 2019, §3.3 and §5";
constexpr ParamField<HpccParams> kFields[] = {
    {{"cc.hpcc_eta", "double", "0.95", "HPCC target utilization eta", kPaper}, &HpccParams::eta, 0.01, 1},
    {{"cc.hpcc_max_stage", "int", "5", "HPCC maxStage", kPaper}, &HpccParams::max_stage, 0, 1000},
    {{"cc.hpcc_wai", "double", "0.005", "HPCC W_AI as a fraction of W_init",
      "Li et al., SIGCOMM 2019, §3.3: N flows' increases within (1 - eta)"},
     &HpccParams::wai_fraction, 0, 1},
    {{"cc.hpcc_base_rtt", "time", "0ns", "HPCC base RTT T (0 = per connection from its path)", ""},
     &HpccParams::base_rtt_ps, 0, 1e12},
};
constexpr auto kDecls = decls_of(kFields);

}  // namespace

ParamDecls Hpcc::decls() { return kDecls; }

void Hpcc::parse(const SpecReader& r, Params& p) { read_fields<HpccParams>(kFields, r, p); }

// --- Li et al., SIGCOMM 2019, §3.3 Algorithm 1 ----------------------------------------------

void Hpcc::update(State& hs, const Params& h, const QpLink& l, const AckInfo& ack) {
  const double t_ns = static_cast<double>(hs.base_rtt) / 1000.0;
  if (hs.last_nint == ack.nint && t_ns > 0) {
    double u_max = 0, tau = 0;
    for (std::uint32_t i = 0; i < ack.nint; ++i) {
      const IntHop& cur = ack.hops[i];
      const IntHop& prev = hs.last_int[i];
      const std::uint32_t dt = (cur.ts_ns() - prev.ts_ns()) & 0xFFFFFFu;
      const double rate = static_cast<double>(cur.rate_bps());
      if (dt == 0 || rate <= 0) continue;
      const double tx_bytes = static_cast<double>(((cur.tx_units() - prev.tx_units()) & 0xFFFFFu) * 64u);
      const double tx_rate = tx_bytes * 8 / (static_cast<double>(dt) * 1e-9);
      const double qlen = static_cast<double>(std::min(cur.qlen_bytes(), prev.qlen_bytes()));
      const double u = qlen * 8 / (rate * t_ns * 1e-9) + tx_rate / rate;
      if (u > u_max) {
        u_max = u;
        tau = dt;
      }
    }
    if (tau > 0) {
      tau = std::min(tau, t_ns);
      hs.u = (1 - tau / t_ns) * hs.u + tau / t_ns * u_max;
      const double w_init = static_cast<double>(l.line_bps) * t_ns * 1e-9 / 8;
      const double w_ai = w_init * h.wai_fraction;
      const bool update = ack.psn > hs.last_update_seq;
      double w;
      if (hs.u >= h.eta || hs.inc_stage >= h.max_stage) {
        w = hs.wc / (hs.u / h.eta) + w_ai;
        if (update) {
          hs.inc_stage = 0;
          hs.wc = std::min(w, w_init);
        }
      } else {
        w = hs.wc + w_ai;
        if (update) {
          ++hs.inc_stage;
          hs.wc = std::min(w, w_init);
        }
      }
      if (update) hs.last_update_seq = ack.snd_nxt;
      hs.window = std::clamp(w, static_cast<double>(l.mtu), w_init);
      hs.rate = std::min(static_cast<double>(l.line_bps), hs.window * 8 / (t_ns * 1e-9));
    }
  }
  hs.last_nint = static_cast<std::uint8_t>(ack.nint);
  for (std::uint32_t i = 0; i < ack.nint; ++i) hs.last_int[i] = ack.hops[i];
}

}  // namespace fabricsim::models::cc
