#pragma once
/// @file event_queue.hpp
/// Pending-event set of one thread: a calendar of time buckets over a slab of event bodies.
///
/// Order is the exact strict total order (time, src, seq): the key packs (src, seq) into one word,
/// src in the top kSrcBits bits (the Simulator rejects more than 2^kSrcBits LPs; seq wraps only
/// after 2^40 events sent by one LP).
///
/// Structure (why: a 4-ary heap over ~10^5-10^6 pending events cost ~600 instructions and several
/// cache misses per event; here a push is an append and the sorting happens on small, cache-hot
/// batches):
///  - bucket i holds keys with time in [i * width, (i + 1) * width); `cur_` is the bucket being
///    consumed. Its keys were sorted once when it became current (`near_`, popped from the back);
///    keys pushed later into bucket cur_ go to a small heap `late_`; pop takes the smaller of
///    the two heads. A push into an earlier bucket (before the run starts) moves cur_ back.
///  - buckets cur_+1 .. cur_+kRing-1 live in a ring of unsorted vectors (push = append) with a
///    bitmap of the non-empty ones, so empty buckets are skipped 64 at a time;
///  - keys beyond the ring go to a 4-ary heap `far_` and migrate into the ring as it advances.
/// Bodies live in a chunked slab (stable addresses), so the engine hands the handler a reference
/// into the slab instead of copying the 96-byte event out.
#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/event.hpp"

namespace fabricsim::engine {

/// Bits of the LP id in the packed tie-break word (up to 16.7 M LPs).
inline constexpr unsigned kSrcBits = 24;

class EventQueue {
 public:
  /// @param width_log2 bucket width is 2^width_log2 ps (a performance knob only; order is exact
  ///        for any width). The engine derives it from the window width.
  explicit EventQueue(unsigned width_log2 = 10) { set_bucket_width_log2(width_log2); }

  /// Changes the bucket width; only while the queue is empty (order never depends on it).
  void set_bucket_width_log2(unsigned w) {
    if (size_ == 0) shift_ = std::min(w, 40u);
  }
  unsigned bucket_width_log2() const { return shift_; }

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }

  /// Time of the earliest event; undefined when empty.
  SimTime top_time() const { return static_cast<SimTime>(head().time); }

  /// Copies `ev` into the queue.
  void push(const Event& ev) {
    const std::uint32_t slot = alloc_slot();
    body(slot) = ev;
    insert(make_key(ev, slot));
  }

  /// Earliest event, left in place: valid until release() of its slot (later pushes do not move
  /// it). Undefined when empty.
  const Event& front(std::uint32_t& slot) const {
    slot = head().slot;
    return body(slot);
  }

  /// Removes the earliest event from the order; its body stays readable until release(slot).
  std::uint32_t take() {
    std::uint32_t slot;
    if (!late_.empty() && (near_.empty() || less(late_.front(), near_.back()))) {
      slot = late_.front().slot;
      std::pop_heap(late_.begin(), late_.end(), Greater{});
      late_.pop_back();
    } else {
      slot = near_.back().slot;
      near_.pop_back();
    }
    --size_;
    if (near_.empty() && late_.empty() && size_ > 0) advance();
    return slot;
  }

  /// The k-th next event of the current bucket (k = 0: the next one to be taken), or nullptr.
  /// Only a cache hint for the caller (prefetching): the late heap is not looked at.
  const Event* peek_near(std::size_t k) const {
    return near_.size() > k ? &body(near_[near_.size() - 1 - k].slot) : nullptr;
  }

  /// Body of a taken (not yet released) or queued event.
  const Event& body_of(std::uint32_t slot) const { return body(slot); }

  /// Returns the slot of a taken event to the free list.
  void release(std::uint32_t slot) { free_.push_back(slot); }

  /// Removes the earliest event into `out` (copying it).
  void pop(Event& out) {
    const std::uint32_t slot = take();
    out = body(slot);
    release(slot);
  }

 private:
  struct Key {
    std::uint64_t time;  // SimTime >= 0
    std::uint64_t tie;   // src << (64 - kSrcBits) | seq
    std::uint32_t slot;
  };
  __extension__ typedef unsigned __int128 U128;  // GCC/Clang extension (-Wpedantic)
  static bool less(const Key& a, const Key& b) {
    // (time, tie) as one 128-bit number: a branch-free compare (the sort of a bucket of
    // same-instant keys otherwise mispredicts on the time test).
    const U128 x = static_cast<U128>(a.time) << 64 | a.tie;
    const U128 y = static_cast<U128>(b.time) << 64 | b.tie;
    return x < y;
  }
  struct Greater {
    bool operator()(const Key& a, const Key& b) const { return less(b, a); }
  };
  static constexpr unsigned kRingLog2 = 13;
  static constexpr std::uint64_t kRing = std::uint64_t{1} << kRingLog2;
  static constexpr std::uint64_t kMask = kRing - 1;
  static constexpr unsigned kChunkLog2 = 12;

  static Key make_key(const Event& ev, std::uint32_t slot) {
    constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << (64 - kSrcBits)) - 1;
    return Key{static_cast<std::uint64_t>(ev.time),
               (static_cast<std::uint64_t>(ev.src) << (64 - kSrcBits)) | (ev.seq & kSeqMask), slot};
  }

  const Key& head() const {
    if (late_.empty()) return near_.back();
    if (near_.empty()) return late_.front();
    return less(late_.front(), near_.back()) ? late_.front() : near_.back();
  }

  Event& body(std::uint32_t slot) const {
    return chunks_[slot >> kChunkLog2][slot & ((1u << kChunkLog2) - 1)];
  }
  std::uint32_t alloc_slot() {
    if (!free_.empty()) {
      const std::uint32_t s = free_.back();
      free_.pop_back();
      return s;
    }
    if ((next_slot_ >> kChunkLog2) == chunks_.size()) {
      chunks_.push_back(std::make_unique<Event[]>(std::size_t{1} << kChunkLog2));
    }
    return next_slot_++;
  }

  void insert(const Key& k) {
    const std::uint64_t b = k.time >> shift_;
    if (size_++ == 0) {
      // Empty: the new key starts a fresh calendar at its own bucket.
      cur_ = b;
      near_.push_back(k);
      return;
    }
    if (b < cur_) {
      // Earlier than the current bucket (only before the run starts, e.g. LPs' initial events
      // in any order): move the calendar back to b, so the key is not stuck in the late heap.
      rebase(b);
      near_.push_back(k);
    } else if (b == cur_) {
      late_.push_back(k);
      std::push_heap(late_.begin(), late_.end(), Greater{});
    } else if (b - cur_ < kRing) {
      put_ring(b, k);
    } else {
      far_push(k);
    }
  }

  void put_ring(std::uint64_t b, const Key& k) {
    const std::uint64_t i = b & kMask;
    if (ring_[i].capacity() == 0 && !spare_.empty()) {
      ring_[i].swap(spare_.back());
      spare_.pop_back();
    }
    ring_[i].push_back(k);
    bits_[i >> 6] |= std::uint64_t{1} << (i & 63);
    ++ring_count_;
  }

  // Makes bucket b < cur_ current, with near_ and late_ empty. Keys of the old current bucket
  // (near_ and late_: late_ only ever holds keys of bucket cur_) go back to the ring; ring keys
  // beyond the new span go to the far heap. Costs cur_ - b bit tests; a jump of a whole ring or
  // more rebuilds the calendar.
  void rebase(std::uint64_t b) {
    if (cur_ - b >= kRing) {
      std::vector<Key> all;
      all.reserve(size_);
      all.insert(all.end(), near_.begin(), near_.end());
      all.insert(all.end(), late_.begin(), late_.end());
      all.insert(all.end(), far_.begin(), far_.end());
      near_.clear();
      late_.clear();
      far_.clear();
      for (std::uint64_t i = 0; i < kRing; ++i) {
        all.insert(all.end(), ring_[i].begin(), ring_[i].end());
        ring_[i].clear();
      }
      bits_.fill(0);
      ring_count_ = 0;
      cur_ = b;
      for (const Key& k : all) {  // every key's bucket is > b here
        const std::uint64_t kb = k.time >> shift_;
        if (kb - cur_ < kRing) {
          put_ring(kb, k);
        } else {
          far_push(k);
        }
      }
      return;
    }
    for (std::uint64_t bk = b + kRing; bk < cur_ + kRing; ++bk) {
      const std::uint64_t i = bk & kMask;
      if (!(bits_[i >> 6] & (std::uint64_t{1} << (i & 63)))) continue;
      for (const Key& k : ring_[i]) far_push(k);
      ring_count_ -= ring_[i].size();
      ring_[i].clear();
      bits_[i >> 6] &= ~(std::uint64_t{1} << (i & 63));
    }
    const std::uint64_t old = cur_;
    cur_ = b;
    for (const Key& k : near_) put_ring(old, k);
    for (const Key& k : late_) put_ring(old, k);
    near_.clear();
    late_.clear();
  }

  // near_ and late_ are empty and size_ > 0: make the next non-empty bucket current.
  void advance() {
    std::uint64_t next;
    if (ring_count_ == 0) {
      next = far_.front().time >> shift_;
    } else {
      next = cur_ + 1 + distance_to_set_bit((cur_ + 1) & kMask);
    }
    cur_ = next;
    // Keys of the far heap now inside the ring's span [cur_, cur_ + kRing).
    while (!far_.empty() && (far_.front().time >> shift_) - cur_ < kRing) {
      const Key k = far_.front();
      far_pop();
      const std::uint64_t b = k.time >> shift_;
      if (b == cur_) {
        near_.push_back(k);
      } else {
        put_ring(b, k);
      }
    }
    const std::uint64_t i = cur_ & kMask;
    if (bits_[i >> 6] & (std::uint64_t{1} << (i & 63))) {
      bits_[i >> 6] &= ~(std::uint64_t{1} << (i & 63));
      ring_count_ -= ring_[i].size();
      if (near_.empty()) {
        near_.swap(ring_[i]);
        // Recycle the old buffer instead of leaving it on this bucket: memory then follows the
        // keys alive, not kRing x the largest bucket ever seen.
        if (spare_.size() < kSpares) spare_.push_back(std::move(ring_[i]));
        ring_[i] = std::vector<Key>();
      } else {
        near_.insert(near_.end(), ring_[i].begin(), ring_[i].end());
        ring_[i].clear();
      }
    }
    std::sort(near_.begin(), near_.end(), Greater{});  // descending: pop from the back
  }

  // Distance (in buckets, ring order) from ring index `from` to the next non-empty bucket.
  std::uint64_t distance_to_set_bit(std::uint64_t from) const {
    std::uint64_t i = from;
    std::uint64_t w = bits_[i >> 6] & (~std::uint64_t{0} << (i & 63));
    std::uint64_t word = i >> 6;
    for (;;) {
      if (w) {
        const std::uint64_t pos = (word << 6) | static_cast<std::uint64_t>(__builtin_ctzll(w));
        return (pos - from) & kMask;
      }
      word = (word + 1) & (kRing / 64 - 1);
      w = bits_[word];
    }
  }

  // 4-ary min-heap of far keys.
  void far_push(const Key& k) {
    far_.push_back(k);
    std::size_t i = far_.size() - 1;
    while (i > 0) {
      const std::size_t parent = (i - 1) / 4;
      if (!less(k, far_[parent])) break;
      far_[i] = far_[parent];
      i = parent;
    }
    far_[i] = k;
  }
  void far_pop() {
    const Key k = far_.back();
    far_.pop_back();
    const std::size_t n = far_.size();
    if (n == 0) return;
    std::size_t i = 0;
    for (;;) {
      const std::size_t first = 4 * i + 1;
      if (first >= n) break;
      std::size_t best = first;
      const std::size_t end = first + 4 < n ? first + 4 : n;
      for (std::size_t c = first + 1; c < end; ++c) {
        if (less(far_[c], far_[best])) best = c;
      }
      if (!less(far_[best], k)) break;
      far_[i] = far_[best];
      i = best;
    }
    far_[i] = k;
  }

  unsigned shift_ = 10;
  std::size_t size_ = 0;
  std::uint64_t cur_ = 0;
  std::vector<Key> near_;  // current bucket, sorted descending
  std::vector<Key> late_;  // min-heap (std heap with Greater): pushes into bucket cur_
  std::array<std::vector<Key>, kRing> ring_;
  std::array<std::uint64_t, kRing / 64> bits_{};
  std::size_t ring_count_ = 0;
  std::vector<Key> far_;
  static constexpr std::size_t kSpares = 64;
  std::vector<std::vector<Key>> spare_;  // empty buffers with capacity, for buckets to reuse
  std::vector<std::unique_ptr<Event[]>> chunks_;
  std::uint32_t next_slot_ = 0;
  std::vector<std::uint32_t> free_;
};

}  // namespace fabricsim::engine
