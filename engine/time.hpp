#pragma once
/// @file time.hpp
/// Simulated time. All event ordering uses integer picoseconds; no floating point.
#include <cstdint>
#include <limits>

namespace fabricsim::engine {

/// Simulated time in picoseconds (int64: about 106 days of simulated time).
using SimTime = std::int64_t;
/// "Never": the time of an empty queue.
inline constexpr SimTime kInfinity = std::numeric_limits<SimTime>::max();
/// Largest simulated time an event may carry: 2^60 ps (about 13.3 days). Durations are clamped to
/// it, so time + duration + latency never wraps an int64; an event beyond it is a user error
/// (absurd bandwidth, latency or compute time), reported by the engine with exit code 2.
inline constexpr SimTime kMaxSimTime = SimTime{1} << 60;
inline constexpr SimTime kPsPerNs = 1'000;
inline constexpr SimTime kPsPerUs = 1'000'000;
inline constexpr SimTime kPsPerMs = 1'000'000'000;
inline constexpr SimTime kPsPerS = 1'000'000'000'000;

/// Saturating a + b for non-negative b (never overflows past kInfinity).
constexpr SimTime sat_add(SimTime a, SimTime b) {
  return (a > kInfinity - b) ? kInfinity : a + b;
}

/// Serialization time of `bytes` on a link of `rate_bps` bits/s, rounded up to whole ps and
/// clamped to kMaxSimTime. @throws nothing; rate_bps must be > 0 (checked by the spec validator).
constexpr SimTime serialization_ps(std::uint64_t bytes, std::uint64_t rate_bps) {
  // bytes*8*1e12 / rate, computed in 128-bit to avoid overflow for GiB-sized transfers.
  // __extension__: unsigned __int128 is a GCC/Clang extension; keeps -Wpedantic -Werror builds clean.
  __extension__ typedef unsigned __int128 u128;
  const u128 num = static_cast<u128>(bytes) * 8u * 1'000'000'000'000ull;
  const u128 ps = (num + rate_bps - 1) / rate_bps;
  return ps > static_cast<u128>(kMaxSimTime) ? kMaxSimTime : static_cast<SimTime>(ps);
}

}  // namespace fabricsim::engine
