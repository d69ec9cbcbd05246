#include "kernels/compute_time.hpp"

#include <algorithm>
#include <cmath>

namespace fabricsim::kernels {
engine::SimTime scaled_duration(engine::SimTime trace_ps, double scale) {
  if (scale == 1.0) return std::min(trace_ps, engine::kMaxSimTime);
  const double v = static_cast<double>(trace_ps) * scale;
  if (v >= static_cast<double>(engine::kMaxSimTime)) return engine::kMaxSimTime;
  return static_cast<engine::SimTime>(std::llround(v));
}
}  // namespace fabricsim::kernels
