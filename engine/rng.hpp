#pragma once
/// @file rng.hpp
/// Counter-based random numbers: value = hash(seed, stream, counter). No shared generator, so the
/// draws of an LP do not depend on which process or thread runs it.
#include <cmath>
#include <cstdint>

namespace fabricsim::engine {

/// SplitMix64 finalizer (Steele, Lea, Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014; constants from that paper).
constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A stream of random numbers for one LP: the n-th draw is a pure function of (seed, stream, n).
class CounterRng {
 public:
  CounterRng(std::uint64_t seed, std::uint64_t stream) : key_(mix64(seed ^ mix64(stream + 0x9E3779B97F4A7C15ull))) {}
  /// Next 64 random bits.
  std::uint64_t next_u64() { return mix64(key_ + 0x9E3779B97F4A7C15ull * (++counter_)); }
  /// Uniform in [0, 1) with 53 bits.
  double next_unit() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  /// Uniform integer in [0, n), n > 0 (Lemire's multiply-shift; bias < n/2^64).
  std::uint64_t next_below(std::uint64_t n) {
    __extension__ typedef unsigned __int128 u128;  // GCC/Clang extension; quiet under -Wpedantic
    return static_cast<std::uint64_t>((static_cast<u128>(next_u64()) * n) >> 64);
  }
  /// Exponential with the given mean (inverse transform).
  double next_exponential(double mean) { return -mean * std::log1p(-next_unit()); }
  std::uint64_t counter() const { return counter_; }
  /// Restores a counter() read earlier (checkpoint restart): the stream continues from there.
  void set_counter(std::uint64_t c) { counter_ = c; }

 private:
  std::uint64_t key_;
  std::uint64_t counter_ = 0;
};

}  // namespace fabricsim::engine
