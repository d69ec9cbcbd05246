#include "models/cc/dcqcn.hpp"

#include "engine/errors.hpp"

namespace fabricsim::models::cc {

namespace {

constexpr const char* kPaper = "Zhu et al., SIGCOMM 2015, §5 parameters";
constexpr ParamField<DcqcnParams> kFields[] = {
    {{"cc.dcqcn_g", "double", "0.00390625", "DCQCN alpha gain g (1/256)", kPaper}, &DcqcnParams::g, 0, 1},
    {{"cc.dcqcn_cnp_interval", "time", "50us", "DCQCN: at most one CNP per QP per interval", kPaper},
     &DcqcnParams::cnp_interval_ps, 0, 1e12},
    {{"cc.dcqcn_alpha_timer", "time", "55us", "DCQCN alpha decay period", kPaper}, &DcqcnParams::alpha_timer_ps, 1, 1e12},
    {{"cc.dcqcn_rate_timer", "time", "55us", "DCQCN rate-increase timer T", kPaper}, &DcqcnParams::rate_timer_ps, 1, 1e12},
    {{"cc.dcqcn_byte_counter", "bytes", "10MiB", "DCQCN rate-increase byte counter B", kPaper},
     &DcqcnParams::byte_counter_bytes, 1, 1099511627776.0},
    {{"cc.dcqcn_fast_recovery", "int", "5", "DCQCN fast-recovery steps F", kPaper}, &DcqcnParams::fast_recovery_steps,
     0, 1000},
    {{"cc.dcqcn_rai", "double", "0.001", "DCQCN additive increase R_AI as a fraction of line rate (40 Mb/s at 40 Gb/s)",
      kPaper},
     &DcqcnParams::rai_fraction, 0, 1},
    {{"cc.dcqcn_rhai", "double", "0.01", "DCQCN hyper increase R_HAI as a fraction of line rate", kPaper},
     &DcqcnParams::rhai_fraction, 0, 1},
    {{"cc.dcqcn_min_rate", "double", "0.001", "DCQCN minimum rate as a fraction of line rate", ""},
     &DcqcnParams::min_rate_fraction, 1e-6, 1},
};
constexpr auto kDecls = decls_of(kFields);

}  // namespace

ParamDecls Dcqcn::decls() { return kDecls; }

void Dcqcn::parse(const SpecReader& r, Params& p) { read_fields<DcqcnParams>(kFields, r, p); }

void Dcqcn::validate(const Params& p, const SpecReader& r) {
  if (p.g <= 0) {
    throw engine::InputError(r.file_of("cc.dcqcn_g"), "cc.dcqcn_g", "is 0: alpha would never change",
                             "use e.g. 0.00390625 (1/256)");
  }
}

// --- Reaction point (Zhu et al., SIGCOMM 2015, §3.1 Algorithm of the RP) --------------------

void Dcqcn::on_cnp(State& q, const Params& d, const QpLink& l, engine::SimTime now) {
  catch_up(q, d, l, now);
  const double line = static_cast<double>(l.line_bps);
  q.target = q.rate;
  q.rate = std::max(line * d.min_rate_fraction, q.rate * (1.0 - q.alpha / 2));
  q.alpha = (1 - d.g) * q.alpha + d.g;
  q.t_count = 0;
  q.bc_count = 0;
  q.byte_acc = 0;
  q.alpha_at = now;
  q.rate_at = now;
  q.limited = true;
}

void Dcqcn::catch_up(State& q, const Params& d, const QpLink& l, engine::SimTime now) {
  if (!q.limited) return;
  while (q.alpha_at + d.alpha_timer_ps <= now || q.rate_at + d.rate_timer_ps <= now) {
    if (q.alpha_at + d.alpha_timer_ps <= q.rate_at + d.rate_timer_ps) {
      q.alpha_at += d.alpha_timer_ps;
      q.alpha *= 1 - d.g;
    } else {
      q.rate_at += d.rate_timer_ps;
      ++q.t_count;
      increase(q, d, l);
      if (!q.limited) return;
    }
  }
}

void Dcqcn::increase(State& q, const Params& d, const QpLink& l) {
  const double line = static_cast<double>(l.line_bps);
  const std::uint32_t f = d.fast_recovery_steps;
  if (std::max(q.t_count, q.bc_count) < f) {
    // fast recovery: towards the rate before the cut
  } else if (std::min(q.t_count, q.bc_count) > f) {
    q.target += line * d.rhai_fraction * static_cast<double>(std::min(q.t_count, q.bc_count) - f);
  } else {
    q.target += line * d.rai_fraction;
  }
  q.target = std::min(q.target, line);
  q.rate = std::min(line, (q.target + q.rate) / 2);
  if (q.rate >= line * (1 - 1e-9)) {
    q.rate = line;
    q.limited = false;
  }
}

}  // namespace fabricsim::models::cc
