#pragma once
/// @file event_queue.hpp
/// Pending-event set of one thread: a 4-ary min-heap of 24-byte keys over a slab of event bodies.
/// Sifting moves only keys (a quarter of an Event), and the 4-ary shape halves the heap depth;
/// bodies are copied once in and once out. Order: (time, src, seq), a strict total order because
/// (src, seq) is unique per event. The key packs (src, seq) into one word, src in the top
/// kSrcBits bits: the Simulator rejects more than 2^kSrcBits LPs, and seq wraps only after 2^40
/// events sent by one LP.
#include <cstdint>
#include <vector>

#include "engine/event.hpp"

namespace fabricsim::engine {

/// Bits of the LP id in the packed tie-break word (up to 16.7 M LPs).
inline constexpr unsigned kSrcBits = 24;

class EventQueue {
 public:
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  /// Time of the earliest event; undefined when empty.
  SimTime top_time() const { return static_cast<SimTime>(heap_.front().time); }

  void push(const Event& ev) {
    std::uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
      slab_[slot] = ev;
    } else {
      slot = static_cast<std::uint32_t>(slab_.size());
      slab_.push_back(ev);
    }
    constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << (64 - kSrcBits)) - 1;
    heap_.push_back(Key{static_cast<std::uint64_t>(ev.time),
                        (static_cast<std::uint64_t>(ev.src) << (64 - kSrcBits)) | (ev.seq & kSeqMask), slot});
    sift_up(heap_.size() - 1);
  }

  /// Removes the earliest event into `out`.
  void pop(Event& out) {
    const Key top = heap_.front();
    out = slab_[top.slot];
    free_.push_back(top.slot);
    const Key last = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(last);
  }

 private:
  struct Key {
    std::uint64_t time;  // SimTime >= 0
    std::uint64_t tie;   // src << (64 - kSrcBits) | seq
    std::uint32_t slot;
  };
  static bool less(const Key& a, const Key& b) {
    return a.time < b.time || (a.time == b.time && a.tie < b.tie);
  }
  void sift_up(std::size_t i) {
    const Key k = heap_[i];
    while (i > 0) {
      const std::size_t parent = (i - 1) / 4;
      if (!less(k, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = k;
  }
  // Places `k` starting from the root, moving the smallest child up at each level.
  void sift_down(const Key& k) {
    const std::size_t n = heap_.size();
    std::size_t i = 0;
    for (;;) {
      const std::size_t first = 4 * i + 1;
      if (first >= n) break;
      std::size_t best = first;
      const std::size_t end = first + 4 < n ? first + 4 : n;
      for (std::size_t c = first + 1; c < end; ++c) {
        if (less(heap_[c], heap_[best])) best = c;
      }
      if (!less(heap_[best], k)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = k;
  }

  std::vector<Key> heap_;
  std::vector<Event> slab_;
  std::vector<std::uint32_t> free_;
};

}  // namespace fabricsim::engine
