#include "jobs/progress.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "engine/errors.hpp"
#include "engine/units.hpp"

namespace fabricsim::jobs {

ProgressMode parse_progress_mode(const std::string& text) {
  if (text == "off") return ProgressMode::kOff;
  if (text == "tty") return ProgressMode::kTty;
  if (text == "lines") return ProgressMode::kLines;
  throw engine::InputError("<cli>", "--progress", "'" + text + "' is not a progress mode",
                           "use --progress=off, --progress=tty or --progress=lines");
}

ProgressMode default_progress_mode(bool stderr_is_tty) {
  return stderr_is_tty ? ProgressMode::kTty : ProgressMode::kLines;
}

ProgressEstimate estimate_progress(const engine::ProgressInfo& p) { return ProgressEstimator{}.next(p); }

ProgressEstimate ProgressEstimator::next(const engine::ProgressInfo& p) {
  ProgressEstimate e;
  const double total = p.work.total, done = std::min(p.work.done, p.work.total);
  if (total > 0) e.fraction = std::max(0.0, done / total);
  if (p.wall_s > 0) e.events_per_s = static_cast<double>(p.events) / p.wall_s;
  if (total > 0 && done >= total) {
    e.eta_s = 0;
  } else if (has_prev_ && done > prev_done_ && p.wall_s > prev_wall_s_) {
    e.eta_s = (total - done) * (p.wall_s - prev_wall_s_) / (done - prev_done_);
  } else if (done > 0 && p.wall_s > 0) {
    e.eta_s = (total - done) * p.wall_s / done;
  }
  has_prev_ = true;
  prev_wall_s_ = p.wall_s;
  prev_done_ = done;
  return e;
}

std::string format_wall(double s) {
  if (s < 0 || !std::isfinite(s)) return "?";
  if (s < 9.95) return fmt::format("{:.1f} s", std::ceil(s * 10.0) / 10.0);
  if (s < 99.5) return fmt::format("{:.0f} s", s);
  const auto whole = static_cast<std::uint64_t>(std::llround(s));
  if (whole < 3600) return fmt::format("{} min {:02} s", whole / 60, whole % 60);
  return fmt::format("{} h {:02} min", whole / 3600, whole / 60 % 60);
}

std::string progress_text(const engine::ProgressInfo& p, const ProgressEstimate& e) {
  return fmt::format("simulated {}, {:.1f}% of work, {} events, {:.3g} events/s, wall {}, ETA {}",
                     engine::format_time(p.now_ps), 100.0 * e.fraction, p.events, e.events_per_s,
                     format_wall(p.wall_s), format_wall(e.eta_s));
}

}  // namespace fabricsim::jobs
