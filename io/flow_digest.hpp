#pragma once
/// @file flow_digest.hpp
/// Order-independent flow-record hashing for the results digest (io/digest.hpp gives the whole
/// digest and its byte stream). Header-only and free of MPI, so the rank executor in models/
/// can fold its flow records in as they complete.
#include <cstdint>

#include "engine/rng.hpp"
#include "io/results.hpp"

namespace fabricsim::io {

/// Hash of one flow record's schema-1 columns (flow_id, src, dst, bytes, start_ps, end_ps,
/// fct_ps): a chain of mix64 (SplitMix64 finalizer) steps, one per column.
constexpr std::uint64_t flow_record_hash(const FlowRecord& r) {
  constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;
  std::uint64_t h = engine::mix64(r.flow_id + kGolden);
  h = engine::mix64(h ^ ((static_cast<std::uint64_t>(r.src) << 32) | r.dst));
  h = engine::mix64(h ^ r.bytes);
  h = engine::mix64(h ^ static_cast<std::uint64_t>(r.start_ps));
  h = engine::mix64(h ^ static_cast<std::uint64_t>(r.end_ps));
  h = engine::mix64(h ^ static_cast<std::uint64_t>(r.fct_ps));
  return h;
}

/// Order-independent accumulator of flow records (16 bytes; one per GPU LP).
struct FlowDigest {
  std::uint64_t count = 0;  ///< flow records folded in
  std::uint64_t sum = 0;    ///< sum mod 2^64 of flow_record_hash
  void add(const FlowRecord& r) {
    ++count;
    sum += flow_record_hash(r);
  }
  void merge(const FlowDigest& o) {
    count += o.count;
    sum += o.sum;
  }
};

}  // namespace fabricsim::io
