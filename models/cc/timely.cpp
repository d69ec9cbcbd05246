#include "models/cc/timely.hpp"

#include <algorithm>

#include "engine/errors.hpp"

namespace fabricsim::models::cc {

namespace {

constexpr const char* kPaper = "Mittal et al., SIGCOMM 2015, §6 settings";
constexpr ParamField<TimelyParams> kFields[] = {
    {{"cc.timely_alpha", "double", "0.875", "TIMELY EWMA weight alpha of the newest RTT difference", kPaper},
     &TimelyParams::alpha, 0, 1},
    {{"cc.timely_beta", "double", "0.8", "TIMELY multiplicative decrease factor beta", kPaper}, &TimelyParams::beta, 0, 1},
    {{"cc.timely_t_low", "time", "50us", "TIMELY T_low: additive increase below this RTT", kPaper},
     &TimelyParams::t_low_ps, 0, 1e12},
    {{"cc.timely_t_high", "time", "500us", "TIMELY T_high: decrease by (1 - T_high/RTT) above this RTT", kPaper},
     &TimelyParams::t_high_ps, 1, 1e12},
    {{"cc.timely_delta", "rate", "10Mbps", "TIMELY additive increment delta per completion", kPaper},
     &TimelyParams::delta_bps, 0, 1e14},
    {{"cc.timely_hai_threshold", "int", "5", "TIMELY: hyperactive increase (5 x delta) after this many non-positive gradients in a row",
      kPaper},
     &TimelyParams::hai_threshold, 1, 1000},
    {{"cc.timely_min_rtt", "time", "20us", "TIMELY minRTT normalising the gradient (0 = per connection from its path)",
      kPaper},
     &TimelyParams::min_rtt_ps, 0, 1e12},
    {{"cc.timely_min_rate", "double", "0.001", "TIMELY minimum rate as a fraction of line rate", ""},
     &TimelyParams::min_rate_fraction, 1e-6, 1},
};
constexpr auto kDecls = decls_of(kFields);

/// HAI multiplier N of Algorithm 1.
constexpr double kHaiSteps = 5;

}  // namespace

ParamDecls Timely::decls() { return kDecls; }

void Timely::parse(const SpecReader& r, Params& p) { read_fields<TimelyParams>(kFields, r, p); }

void Timely::validate(const Params& p, const SpecReader& r) {
  if (p.t_low_ps >= p.t_high_ps) {
    throw engine::InputError(r.file_of("cc.timely_t_low"), "cc.timely_t_low", "is not below cc.timely_t_high",
                             "e.g. timely_t_low: 50us, timely_t_high: 500us");
  }
}

// --- Mittal et al., SIGCOMM 2015, Algorithm 1 -----------------------------------------------

void Timely::update(State& s, const Params& t, const QpLink& l, engine::SimTime rtt_ps) {
  if (s.prev_rtt < 0) {
    s.prev_rtt = rtt_ps;
    return;
  }
  const double line = static_cast<double>(l.line_bps);
  const double new_rtt = static_cast<double>(rtt_ps);
  const double new_rtt_diff = new_rtt - static_cast<double>(s.prev_rtt);
  s.prev_rtt = rtt_ps;
  s.rtt_diff = (1 - t.alpha) * s.rtt_diff + t.alpha * new_rtt_diff;
  const double gradient = s.min_rtt > 0 ? s.rtt_diff / static_cast<double>(s.min_rtt) : 0;
  const double delta = static_cast<double>(t.delta_bps);
  double rate;
  if (rtt_ps < t.t_low_ps) {
    rate = s.rate + delta;
  } else if (rtt_ps > t.t_high_ps) {
    s.neg_count = 0;
    rate = s.rate * (1 - t.beta * (1 - static_cast<double>(t.t_high_ps) / new_rtt));
  } else if (gradient <= 0) {
    ++s.neg_count;
    rate = s.rate + (s.neg_count >= t.hai_threshold ? kHaiSteps : 1) * delta;
  } else {
    s.neg_count = 0;
    rate = s.rate * (1 - t.beta * gradient);
  }
  s.rate = std::clamp(rate, line * t.min_rate_fraction, line);
}

}  // namespace fabricsim::models::cc
