#pragma once
/// @file small_fifo.hpp
/// A FIFO for per-QP state that costs 24 bytes and no heap memory while empty.
///
/// Why (memory per simulated GPU): libstdc++'s std::deque allocates a 512-byte block and
/// its map when it is constructed, so every receive QP with two deques held ~1.2 KB even when
/// idle (massif: 73 KB per GPU at 128 GPUs with NCCL Tree plans). This ring grows by doubling a
/// power-of-two buffer (first one element of 32 bytes or more, else four) on the first push and
/// on overflow, and frees nothing until destroyed. The NIC now keeps it only for out-of-order
/// receive buffers (which need resize and indexed writes); send parts and receive descriptors
/// moved to per-NIC block pools (models/core/fifo_pool.hpp), since per-QP buffers that never shrink
/// held the sum of every QP's own peak (2.4x the descriptors ever queued at once).
#include <cstdint>
#include <memory>
#include <type_traits>

#include "engine/state_io.hpp"

namespace fabricsim::models {

/// FIFO of trivially copyable T: push_back, front, pop_front, indexed access from the front,
/// resize at the back. Indices and references are invalidated by a push that grows the buffer.
template <class T>
class SmallFifo {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  SmallFifo() = default;
  SmallFifo(SmallFifo&&) noexcept = default;
  SmallFifo& operator=(SmallFifo&&) noexcept = default;
  SmallFifo(const SmallFifo& o) { *this = o; }
  SmallFifo& operator=(const SmallFifo& o) {
    if (this == &o) return *this;
    buf_.reset();
    cap_ = head_ = size_ = 0;
    for (std::uint32_t i = 0; i < o.size_; ++i) push_back(o[i]);
    return *this;
  }

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  T& front() { return buf_[head_]; }
  const T& front() const { return buf_[head_]; }
  /// The i-th element from the front (0 = front); i < size().
  T& operator[](std::size_t i) { return buf_[(head_ + i) & (cap_ - 1)]; }
  const T& operator[](std::size_t i) const { return buf_[(head_ + i) & (cap_ - 1)]; }

  void push_back(const T& v) {
    if (size_ == cap_) grow(size_ + 1);
    buf_[(head_ + size_) & (cap_ - 1)] = v;
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) & (cap_ - 1);
    --size_;
  }
  /// Grows to n elements, new ones equal to `v` (never shrinks: n >= size()).
  void resize(std::size_t n, const T& v) {
    while (size_ < n) push_back(v);
  }

  /// Checkpoints: writes the buffer (capacity, head, size, elements); load() restores it exactly.
  void save(engine::StateWriter& w) const {
    w.put(cap_);
    w.put(head_);
    w.put(size_);
    if (cap_ != 0) w.put_bytes(buf_.get(), sizeof(T) * cap_);
  }
  /// Restores what save() wrote. @throws engine::InputError on bytes that do not fit.
  void load(engine::StateReader& r) {
    cap_ = r.get<std::uint32_t>();
    head_ = r.get<std::uint32_t>();
    size_ = r.get<std::uint32_t>();
    if (size_ > cap_ || (cap_ & (cap_ - 1)) != 0 || cap_ > r.remaining() / sizeof(T)) r.fail();
    buf_.reset(cap_ != 0 ? new T[cap_] : nullptr);
    if (cap_ != 0) r.get_bytes(buf_.get(), sizeof(T) * cap_);
  }

 private:
  void grow(std::uint32_t need) {
    std::uint32_t c = cap_ ? cap_ : kFirstCapacity;
    while (c < need) c *= 2;
    std::unique_ptr<T[]> b(new T[c]);
    for (std::uint32_t i = 0; i < size_; ++i) b[i] = (*this)[i];
    buf_ = std::move(b);
    cap_ = c;
    head_ = 0;
  }

  // First buffer: 4 small elements, or one of 32 bytes or more. Most per-QP FIFOs hold one
  // element at a time (a QP's message in flight, its receiver's descriptor), and at 1,024 GPUs
  // with NCCL Tree the first buffer of 4 was ~26 KB per GPU: 64 receive QPs x 4 x
  // 64-byte MsgDesc and 70 send QPs x 4 x 48-byte TxPart.
  static constexpr std::uint32_t kFirstCapacity = sizeof(T) >= 32 ? 1 : 4;

  std::unique_ptr<T[]> buf_;
  std::uint32_t cap_ = 0, head_ = 0, size_ = 0;
};

}  // namespace fabricsim::models
