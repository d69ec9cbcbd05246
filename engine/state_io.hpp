#pragma once
/// @file state_io.hpp
/// Byte writer and bounds-checked reader for checkpoint state (engine/checkpoint.hpp). Values are
/// written in the host's byte order as raw bytes: a checkpoint is read back by the same build on
/// the same kind of machine (the header's build id enforces the first; docs/checkpoint.md).
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/errors.hpp"

namespace fabricsim::engine {

/// Appends trivially copyable values and vectors of them to a byte buffer.
class StateWriter {
 public:
  /// Appends the bytes of `v`.
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  /// Appends a length (u64 elements) and the elements.
  template <class T>
  void put_vector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<std::uint64_t>(v.size());
    const auto* p = reinterpret_cast<const std::byte*>(v.data());
    bytes_.insert(bytes_.end(), p, p + v.size() * sizeof(T));
  }
  /// Appends raw bytes (no length).
  void put_bytes(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::byte*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  std::vector<std::byte>& bytes() { return bytes_; }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

/// Reads what a StateWriter wrote. Every read is bounds-checked.
class StateReader {
 public:
  /// @param what names the data in error messages (a checkpoint file path).
  StateReader(std::span<const std::byte> bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  /// Reads one value. @throws InputError when fewer than sizeof(T) bytes remain (a truncated or
  /// inconsistent checkpoint).
  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  /// Reads a vector written by StateWriter::put_vector. @throws InputError as get().
  template <class T>
  std::vector<T> get_vector() {
    const auto n = get<std::uint64_t>();
    if (n > (bytes_.size() - pos_) / (sizeof(T) == 0 ? 1 : sizeof(T))) fail();
    std::vector<T> v(static_cast<std::size_t>(n));
    if (n != 0) std::memcpy(v.data(), bytes_.data() + pos_, static_cast<std::size_t>(n) * sizeof(T));
    pos_ += static_cast<std::size_t>(n) * sizeof(T);
    return v;
  }
  /// Copies n raw bytes. @throws InputError as get().
  void get_bytes(void* out, std::size_t n) {
    need(n);
    std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
  }
  /// The next n bytes, consumed. @throws InputError as get().
  std::span<const std::byte> take(std::size_t n) {
    need(n);
    auto s = bytes_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  std::size_t remaining() const { return bytes_.size() - pos_; }
  const std::string& what() const { return what_; }
  /// @throws InputError naming the data: its content does not match what this build expects.
  [[noreturn]] void fail() const {
    throw InputError(what_, "state", "the checkpoint's content ends early or does not match this run's LPs",
                     "use a checkpoint written by this fabricsim build for this spec");
  }

 private:
  void need(std::size_t n) const {
    if (n > bytes_.size() - pos_) fail();
  }
  std::span<const std::byte> bytes_;
  std::string what_;
  std::size_t pos_ = 0;
};

/// Writes a map of trivially copyable keys and values (std::unordered_map, std::map) sorted by
/// `less` on the keys: equal contents give equal bytes whatever the map's bucket order. Only for
/// maps whose iteration order does not affect results (looked up, never iterated), since
/// load_map() does not reproduce bucket order.
template <class Map, class Less = std::less<typename Map::key_type>>
void put_map(StateWriter& w, const Map& m, Less less = {}) {
  std::vector<const typename Map::value_type*> e;
  e.reserve(m.size());
  for (const auto& kv : m) e.push_back(&kv);
  std::sort(e.begin(), e.end(), [&](const auto* a, const auto* b) { return less(a->first, b->first); });
  w.put<std::uint64_t>(e.size());
  for (const auto* kv : e) {
    w.put(kv->first);
    w.put(kv->second);
  }
}
/// Reads what put_map wrote into `m` (cleared first). @throws InputError as StateReader::get.
template <class Map>
void load_map(StateReader& r, Map& m) {
  m.clear();
  const auto n = r.get<std::uint64_t>();
  for (std::uint64_t i = 0; i < n; ++i) {
    auto k = r.get<typename Map::key_type>();
    auto v = r.get<typename Map::mapped_type>();
    m.emplace(std::move(k), std::move(v));
  }
}

}  // namespace fabricsim::engine
