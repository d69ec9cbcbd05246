#pragma once
/// @file compute_time.hpp
/// Compute-time source for workload nodes. The walking skeleton takes durations from the trace
/// (Chakra duration_micros, SimAI ns columns) and applies an optional scale factor; the measured
/// kernel database and roofline scaling live in kernels/ (kernel_db, efficiency_model).
#include <cstdint>

#include "engine/time.hpp"

namespace fabricsim::kernels {

/// Scales a trace duration by `scale` (e.g. 0.5 for a GPU twice as fast), rounding to nearest ps.
/// @param trace_ps duration from the trace (ps, >= 0); @param scale > 0.
engine::SimTime scaled_duration(engine::SimTime trace_ps, double scale);

}  // namespace fabricsim::kernels
