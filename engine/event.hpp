#pragma once
/// @file event.hpp
/// The engine's event: a fixed-size, trivially copyable record so it can cross MPI processes as bytes.
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "engine/time.hpp"

namespace fabricsim::engine {

/// Global logical-process id (dense, 0..num_lps-1).
using LpId = std::uint32_t;

/// Bytes available to a model inside one event.
inline constexpr std::size_t kPayloadBytes = 64;

/// Tag for constructing an Event whose payload is left uninitialized (the engine's send path
/// writes all of it exactly once).
struct NoInit {};

/// One event. Order: (time, src, seq, dst) — every LP sees its events in the same order
/// whatever the partitioning (DESIGN.md §2), because `seq` is the source LP's own counter.
struct Event {
  SimTime time = 0;     ///< delivery time, ps
  LpId dst = 0;         ///< destination LP
  LpId src = 0;         ///< source LP
  std::uint64_t seq = 0;  ///< per-source-LP sequence number
  std::uint32_t kind = 0;  ///< model-defined event kind
  std::uint32_t reserved = 0;
  std::array<std::byte, kPayloadBytes> payload;

  Event() : payload{} {}
  explicit Event(NoInit) {}

  /// Copies a trivially copyable model struct into the payload.
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= kPayloadBytes);
    std::memcpy(payload.data(), &v, sizeof(T));
  }
  /// Reads a model struct from the payload.
  template <class T>
  T get() const {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= kPayloadBytes);
    T v;
    std::memcpy(&v, payload.data(), sizeof(T));
    return v;
  }
};
static_assert(std::is_trivially_copyable_v<Event>);

/// Strict total order used by every event queue: earlier first, then (src, seq, dst).
struct EventLater {
  bool operator()(const Event& a, const Event& b) const {
    if (a.time != b.time) return a.time > b.time;
    if (a.src != b.src) return a.src > b.src;
    if (a.seq != b.seq) return a.seq > b.seq;
    return a.dst > b.dst;
  }
};

}  // namespace fabricsim::engine
