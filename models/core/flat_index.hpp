#pragma once
/// @file flat_index.hpp
/// A small map from 64-bit keys to 32-bit values in two sorted vectors.
///
/// Why (memory per simulated GPU): the NIC looks up its queue pairs by (peer, channel,
/// QP) and its receive QPs by (source, QP), ~130-180 entries per GPU in the 1,024-GPU NVLSTree
/// benchmark. Two parallel vectors cost 12 B per entry (plus the vectors' growth slack), where a
/// vector of std::pair<u64, u32> costs 16 B and an unordered_map ~110 B (node, bucket and
/// allocator overhead). Lookups are binary searches (O(log n)); inserts move the tail (O(n)), which
/// suits indexes that gain an entry per QP created and are read per message or packet.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/state_io.hpp"

namespace fabricsim::models {

/// Sorted map u64 -> u32 (keys unique), 12 B per entry.
class FlatIndex {
 public:
  /// The value stored under `key`, or -1 when there is none.
  std::int64_t find(std::uint64_t key) const {
    const auto it = std::lower_bound(keys_.begin(), keys_.end(), key);
    if (it == keys_.end() || *it != key) return -1;
    return values_[static_cast<std::size_t>(it - keys_.begin())];
  }
  /// Stores `value` under `key`, which must not be present (else the index is left unchanged
  /// and false is returned).
  bool insert(std::uint64_t key, std::uint32_t value) {
    const auto it = std::lower_bound(keys_.begin(), keys_.end(), key);
    if (it != keys_.end() && *it == key) return false;
    const auto pos = it - keys_.begin();
    keys_.insert(it, key);
    values_.insert(values_.begin() + pos, value);
    return true;
  }
  std::size_t size() const { return keys_.size(); }
  /// Checkpoints: writes the keys and values; load() restores them exactly.
  void save(engine::StateWriter& w) const {
    w.put_vector(keys_);
    w.put_vector(values_);
  }
  /// Restores what save() wrote. @throws engine::InputError on bytes that do not fit.
  void load(engine::StateReader& r) {
    keys_ = r.get_vector<std::uint64_t>();
    values_ = r.get_vector<std::uint32_t>();
    if (keys_.size() != values_.size()) r.fail();
  }

 private:
  std::vector<std::uint64_t> keys_;
  std::vector<std::uint32_t> values_;
};

}  // namespace fabricsim::models
