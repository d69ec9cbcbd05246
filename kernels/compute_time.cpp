#include "kernels/compute_time.hpp"

#include <cmath>

namespace fabricsim::kernels {
engine::SimTime scaled_duration(engine::SimTime trace_ps, double scale) {
  if (scale == 1.0) return trace_ps;
  return static_cast<engine::SimTime>(std::llround(static_cast<double>(trace_ps) * scale));
}
}  // namespace fabricsim::kernels
