#pragma once
/// @file event_queue.hpp
/// Pending-event set of one thread: a calendar of time buckets of 32-byte event records, with the
/// 64-byte payloads that are not all zero in a separate slab of cache lines.
///
/// Order is the exact strict total order (time, src, seq): the record packs (src, seq) into one
/// word, src in the top kSrcBits bits (the Simulator rejects more than 2^kSrcBits LPs; seq wraps
/// only after 2^40 events sent by one LP, and a handler sees seq modulo 2^40).
///
/// Structure (why: a 4-ary heap over ~10^5-10^6 pending events cost ~600 instructions and several
/// cache misses per event; here a push is an append and the sorting happens on small, cache-hot
/// batches):
///  - bucket i holds records with time in [i * width, (i + 1) * width); `cur_` is the bucket being
///    consumed. Its records were sorted once when it became current (`near_`, consumed from
///    `pos_` upwards); records pushed later into bucket cur_ go to a small heap `late_`; pop takes
///    the smaller of the two heads. A push into an earlier bucket (before the run starts) moves
///    cur_ back.
///  - buckets cur_+1 .. cur_+kRing-1 live in a ring of unsorted lists of 1 KiB blocks of 32
///    records (push = append to the bucket's last block) with a bitmap of the non-empty ones, so
///    empty buckets are skipped 64 at a time. Blocks come from one pool shared by all buckets and
///    return to it when their bucket is sorted;
///  - records beyond the ring go to a 4-ary heap `far_` and migrate into the ring as it advances.
///
/// Event size: the queue holds a 32-byte record per event (time, src/seq, dst, kind and
/// a payload slot) and keeps a payload in a 64-byte, line-aligned slab slot only when it is not
/// all zeros. An event without payload (PHOLD, timers, port wake-ups) therefore costs 32 bytes of
/// queue memory instead of 96 + 24, and a payload is one cache line instead of two. pop() writes
/// the whole 96-byte Event (payload zeros included) into the caller's buffer, so a handler sees
/// exactly the bytes that were sent.
///
/// Queue memory follows the records pending, not the history of the buckets: ring
/// buckets used to be vectors that kept (or were handed, recycled) the capacity of earlier, denser
/// buckets, so at 256 GPUs (64 MiB AllReduce) the ring held 164 K record slots (5.2 MB) for 7.7 K
/// records spread over ~640 sparse buckets. A bucket now holds at most one partly filled block,
/// the pool's size is the peak of blocks in use, and the sort buffers (near_, tmp_) are freed
/// after a burst once they exceed both kKeepRecs and 4x the bucket being sorted.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <bit>
#include <vector>

#include "engine/event.hpp"

namespace fabricsim::engine {

/// Bits of the LP id in the packed tie-break word (up to 16.7 M LPs).
inline constexpr unsigned kSrcBits = 24;

class EventQueue {
 public:
  /// One queued event without its payload (32 bytes, two per cache line).
  struct alignas(32) Rec {
    std::uint64_t time;  ///< SimTime >= 0, ps
    std::uint64_t tie;   ///< src << (64 - kSrcBits) | (seq mod 2^(64 - kSrcBits))
    LpId dst;            ///< destination LP
    std::uint32_t kind;  ///< model-defined kind
    std::uint32_t pay;   ///< payload slot, or kNoPayload (all 64 bytes zero)
    std::uint32_t pad;
  };
  /// `Rec::pay` of an event whose payload is all zeros.
  static constexpr std::uint32_t kNoPayload = ~std::uint32_t{0};

  /// @param width_log2 bucket width is 2^width_log2 ps (a performance knob only; order is exact
  ///        for any width). The engine derives it from the window width.
  explicit EventQueue(unsigned width_log2 = 10) { set_bucket_width_log2(width_log2); }

  /// Changes the bucket width; only while the queue is empty (order never depends on it).
  void set_bucket_width_log2(unsigned w) {
    if (size_ == 0) shift_ = std::min(w, 40u);
  }
  unsigned bucket_width_log2() const { return shift_; }

  /// With `on`, the queue widens its buckets (x4 at a time, up to 2^40 ps) when most pushes over
  /// the last kAdaptPushes land beyond the ring (in the far heap) while few land in the current
  /// bucket: events spaced far wider than the bucket (the coarse rungs' microsecond-to-millisecond
  /// steps against a 1 ns bucket) otherwise cost a heap push and pop each, plus a migration. The
  /// queue is rebuilt at the new width when it next advances to a new bucket. Order is exact for
  /// any width, so this changes speed only. Off by default; the Simulator turns it on when
  /// nothing is cut (no window sets the width).
  void set_adaptive(bool on) { adaptive_ = on; }
  /// Times the bucket width was widened (for tests and --stats).
  std::uint64_t widenings() const { return widenings_; }

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }

  /// Time of the earliest event; undefined when empty.
  SimTime top_time() {
    settle();
    return static_cast<SimTime>(head().time);
  }

  /// Copies `ev` into the queue (a payload of all zeros takes no slab slot).
  void push(const Event& ev) {
    std::uint64_t any = 0;
    for (std::size_t i = 0; i < kPayloadBytes; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, ev.payload.data() + i, 8);
      any |= w;
    }
    push(ev.time, ev.dst, ev.src, ev.seq, ev.kind, any ? ev.payload.data() : nullptr,
         any ? kPayloadBytes : 0);
  }

  /// Queues an event given by its fields. The payload is `bytes` bytes at `payload` followed by
  /// zeros up to kPayloadBytes; `bytes` == 0 (payload may then be null) means all zeros and takes
  /// no slab slot. Requires time >= 0, bytes <= kPayloadBytes.
  void push(SimTime time, LpId dst, LpId src, std::uint64_t seq, std::uint32_t kind,
            const void* payload, std::size_t bytes) {
    constexpr std::uint64_t kSeqMask = (std::uint64_t{1} << (64 - kSrcBits)) - 1;
    Rec r;
    r.time = static_cast<std::uint64_t>(time);
    r.tie = (static_cast<std::uint64_t>(src) << (64 - kSrcBits)) | (seq & kSeqMask);
    r.dst = dst;
    r.kind = kind;
    r.pay = kNoPayload;
    r.pad = 0;
    if (bytes != 0) {
      r.pay = alloc_slot();
      std::byte* p = line(r.pay);
      std::memcpy(p, payload, bytes);
      if (bytes < kPayloadBytes) std::memset(p + bytes, 0, kPayloadBytes - bytes);
    }
    insert(r);
  }

  /// If the earliest event's time is < `limit`, removes it, writes it whole (header and the 64
  /// payload bytes) into `out` and returns true; otherwise (or when empty) returns false.
  bool pop_before(SimTime limit, Event& out) {
    if (size_ == 0) return false;
    settle();
    const bool from_late = !late_.empty() && (pos_ == near_.size() || less(late_.front(), near_[pos_]));
    const Rec& h = from_late ? late_.front() : near_[pos_];
    if (static_cast<SimTime>(h.time) >= limit) return false;
    write_out(h, out);
    if (from_late) {
      std::pop_heap(late_.begin(), late_.end(), Greater{});
      late_.pop_back();
    } else {
      ++pos_;
    }
    --size_;
    // The next bucket is made current lazily (settle), when the next record is asked for: the
    // handler of this event often schedules more in this same bucket (a network LP's tick at the
    // instant of the flows it starts), which then joins late_, where an eager advance had to
    // move the calendar back (rebase: 6-9% of a 384-GPU MoE run at the flow rung, 18% of
    // the instructions of a small one).
    return true;
  }

  /// Removes the earliest event into `out`; undefined when empty.
  void pop(Event& out) { pop_before(kInfinity, out); }

  /// The k-th next record of the current bucket (k = 0: the next one in the sorted batch), or
  /// nullptr. Only a cache hint for the caller (prefetching): the late heap is not looked at.
  const Rec* peek_near(std::size_t k) const {
    return near_.size() - pos_ > k ? &near_[pos_ + k] : nullptr;
  }

  /// Address of a record's payload line (for prefetching), or nullptr when it has none.
  const void* payload_address(const Rec& r) const {
    return r.pay == kNoPayload ? nullptr : line(r.pay);
  }

  /// Payload slab slots in use (events with a non-zero payload); for tests and memory reports.
  std::size_t payload_slots_in_use() const { return next_slot_ - free_.size(); }

  /// Ring blocks allocated (each kBlockRecs records): the peak of blocks in use at once, rounded
  /// up to an allocation of kBlocksPerChunk; for tests and memory reports.
  std::size_t ring_blocks() const { return chunk_blocks_.size() << kBlockChunkLog2; }
  /// Records one ring block holds.
  static constexpr std::size_t kBlockRecs = std::size_t{1} << 5;
  /// Heap bytes held by the queue's containers (records, blocks, payload slab, sort buffers),
  /// not counting the fixed-size bucket table inside the object; for tests and memory reports.
  std::size_t heap_bytes() const {
    return sizeof(Rec) * (near_.capacity() + late_.capacity() + far_.capacity() + tmp_.capacity()) +
           ring_blocks() * (sizeof(Block) + sizeof(std::uint32_t)) + chunks_.size() * (sizeof(Line) << kChunkLog2) +
           free_.capacity() * sizeof(std::uint32_t) + counts_.capacity() * sizeof(std::uint32_t);
  }
  /// Record capacity of the current bucket's sort buffers (near_ and its counting-sort twin).
  std::size_t sort_buffer_records() const { return near_.capacity() + tmp_.capacity(); }
  /// Sort buffers larger than this (records) are freed when 4x the bucket being sorted.
  static constexpr std::size_t kKeepRecs = 8192;

 private:
  __extension__ typedef unsigned __int128 U128;  // GCC/Clang extension (-Wpedantic)
  static bool less(const Rec& a, const Rec& b) {
    // (time, tie) as one 128-bit number: a branch-free compare (the sort of a bucket of
    // same-instant records otherwise mispredicts on the time test).
    const U128 x = static_cast<U128>(a.time) << 64 | a.tie;
    const U128 y = static_cast<U128>(b.time) << 64 | b.tie;
    return x < y;
  }
  struct Less {
    bool operator()(const Rec& a, const Rec& b) const { return less(a, b); }
  };
  struct Greater {
    bool operator()(const Rec& a, const Rec& b) const { return less(b, a); }
  };
  struct alignas(64) Line {
    std::byte b[kPayloadBytes];
  };
  static_assert(sizeof(Rec) == 32 && sizeof(Line) == kPayloadBytes);
  // 2,048 buckets: with the engine's width of ~W/16 the ring spans ~128 windows. Fewer, wider
  // buckets than before (8,192 of ~W/64) keep the bucket tails being appended to and their
  // headers in L1/L2 (PHOLD: 1.3-1.5x fewer CPU seconds); the counting sort is linear in the
  // bucket size, so wider buckets cost nothing there.
  static constexpr unsigned kRingLog2 = 11;
  static constexpr std::uint64_t kRing = std::uint64_t{1} << kRingLog2;
  static constexpr std::uint64_t kMask = kRing - 1;
  static constexpr unsigned kChunkLog2 = 12;
  // Ring bucket storage: blocks of kBlockRecs records (1 KiB, 16 cache lines), allocated
  // 2^kBlockChunkLog2 at a time (64 KiB). 32 records: a sparse bucket (a few packets on a long
  // link) wastes at most 31 slots, and a dense one (PHOLD: ~1,000 records) changes block every
  // 32 pushes.
  static constexpr unsigned kBlockChunkLog2 = 6;
  struct alignas(64) Block {
    Rec r[kBlockRecs];
  };
  static constexpr std::uint32_t kNoBlock = ~std::uint32_t{0};
  // A ring bucket: its records are `count` records in the chain of blocks head -> ... -> last
  // (links in next_block_), all full but the last; `tail` is the last block's first record.
  struct Bucket {
    Rec* tail = nullptr;
    std::uint32_t count = 0;
    std::uint32_t head = kNoBlock;
    std::uint32_t last = kNoBlock;
  };

  void write_out(const Rec& r, Event& out) {
    out.time = static_cast<SimTime>(r.time);
    out.dst = r.dst;
    out.src = static_cast<LpId>(r.tie >> (64 - kSrcBits));
    out.seq = r.tie & ((std::uint64_t{1} << (64 - kSrcBits)) - 1);
    out.kind = r.kind;
    out.reserved = 0;
    if (r.pay == kNoPayload) {
      std::memset(out.payload.data(), 0, kPayloadBytes);
    } else {
      std::memcpy(out.payload.data(), line(r.pay), kPayloadBytes);
      free_.push_back(r.pay);
    }
  }

  // Makes the next non-empty bucket current if the current one is used up (size_ > 0).
  void settle() {
    if (pos_ == near_.size() && late_.empty() && size_ > 0) advance();
  }

  const Rec& head() const {
    if (late_.empty()) return near_[pos_];
    if (pos_ == near_.size()) return late_.front();
    return less(late_.front(), near_[pos_]) ? late_.front() : near_[pos_];
  }

  std::byte* line(std::uint32_t slot) const {
    return chunks_[slot >> kChunkLog2][slot & ((1u << kChunkLog2) - 1)].b;
  }
  std::uint32_t alloc_slot() {
    if (!free_.empty()) {
      const std::uint32_t s = free_.back();
      free_.pop_back();
      return s;
    }
    if ((next_slot_ >> kChunkLog2) == chunks_.size()) {
      chunks_.push_back(std::make_unique<Line[]>(std::size_t{1} << kChunkLog2));
    }
    return next_slot_++;
  }

  void insert(const Rec& k) {
    const std::uint64_t b = k.time >> shift_;
    ++pushes_;
    if (size_++ == 0) {
      // Empty: the new record starts a fresh calendar at its own bucket.
      cur_ = b;
      near_.clear();
      pos_ = 0;
      near_.push_back(k);
      return;
    }
    if (b < cur_) {
      // Earlier than the current bucket (only before the run starts, e.g. LPs' initial events
      // in any order): move the calendar back to b, so the record is not stuck in the late heap.
      rebase(b);
      near_.push_back(k);
    } else if (b == cur_) {
      ++late_pushes_;
      late_.push_back(k);
      std::push_heap(late_.begin(), late_.end(), Greater{});
    } else if (b - cur_ < kRing) {
      put_ring(b, k);
    } else {
      ++far_pushes_;
      far_push(k);
    }
  }

  void put_ring(std::uint64_t b, const Rec& k) {
    const std::uint64_t i = b & kMask;
    Bucket& bk = ring_[i];
    const std::uint32_t c = bk.count;
    const std::uint32_t off = c & (kBlockRecs - 1);
    if (off == 0) {
      const std::uint32_t nb = new_block();
      if (c == 0) {
        bk.head = nb;
      } else {
        next_block_[bk.last] = nb;
      }
      bk.last = nb;
      bk.tail = block(nb).r;
    }
    Rec* slot = bk.tail + off;
    *slot = k;
    bk.count = c + 1;
    // The bucket's next line is written only after hundreds of pushes to other buckets: fetch
    // it now, so that push finds it in cache instead of stalling the in-order store commit on a
    // read-for-ownership miss (perf: the append was a third of PHOLD's time).
    // Records are 32-byte aligned (never split across lines); a prefetch past the block's end
    // is harmless.
    __builtin_prefetch(reinterpret_cast<const char*>(slot + 1) + 64, 1);
    const std::uint64_t bit = std::uint64_t{1} << (i & 63);
    set_bits_ += (bits_[i >> 6] & bit) == 0 ? 1 : 0;
    bits_[i >> 6] |= bit;
    ++ring_count_;
  }

  Block& block(std::uint32_t id) const {
    return chunk_blocks_[id >> kBlockChunkLog2][id & ((1u << kBlockChunkLog2) - 1)];
  }
  // A block from the pool (last freed first), or a new one.
  std::uint32_t new_block() {
    if (free_block_ != kNoBlock) {
      const std::uint32_t id = free_block_;
      free_block_ = next_block_[id];
      return id;
    }
    if ((blocks_made_ >> kBlockChunkLog2) == chunk_blocks_.size()) {
      chunk_blocks_.push_back(std::make_unique_for_overwrite<Block[]>(std::size_t{1} << kBlockChunkLog2));
      next_block_.resize(next_block_.size() + (std::size_t{1} << kBlockChunkLog2), kNoBlock);
    }
    return blocks_made_++;
  }
  // Calls f(rec) for each record of ring bucket i, in push order.
  template <class F>
  void for_each_in_bucket(std::uint64_t i, F&& f) const {
    std::uint32_t n = ring_[i].count;
    std::uint32_t id = ring_[i].head;
    while (n > 0) {
      const Rec* r = block(id).r;
      const std::uint32_t m = std::min<std::uint32_t>(n, kBlockRecs);
      for (std::uint32_t j = 0; j < m; ++j) f(r[j]);
      n -= m;
      if (n > 0) id = next_block_[id];
    }
  }
  // Empties ring bucket i (its bit and ring_count_ are the caller's): its blocks go back to the
  // pool as one chain.
  void release_bucket(std::uint64_t i) {
    Bucket& bk = ring_[i];
    if (bk.count == 0) return;
    next_block_[bk.last] = free_block_;
    free_block_ = bk.head;
    bk = Bucket{};
  }
  // Clears ring bucket i's bit and takes its records out of ring_count_ (the records stay).
  void unmark_bucket(std::uint64_t i) {
    bits_[i >> 6] &= ~(std::uint64_t{1} << (i & 63));
    --set_bits_;
    ring_count_ -= ring_[i].count;
  }

  // Takes every pending record out of the calendar (the current bucket's rest, late_, the ring
  // and the far heap), leaving it empty but for size_ and cur_; the records' order is unspecified.
  std::vector<Rec> take_all() {
    std::vector<Rec> all;
    all.reserve(size_);
    all.insert(all.end(), near_.begin() + static_cast<std::ptrdiff_t>(pos_), near_.end());
    all.insert(all.end(), late_.begin(), late_.end());
    all.insert(all.end(), far_.begin(), far_.end());
    near_.clear();
    pos_ = 0;
    late_.clear();
    far_.clear();
    for (std::uint64_t i = 0; i < kRing; ++i) {
      for_each_in_bucket(i, [&](const Rec& k) { all.push_back(k); });
      release_bucket(i);
    }
    bits_.fill(0);
    set_bits_ = 0;
    ring_count_ = 0;
    return all;
  }

  // Makes bucket b < cur_ current, with near_ and late_ empty. Records of the old current bucket
  // (near_ from pos_ and late_: late_ only ever holds records of bucket cur_) go back to the
  // ring; ring records beyond the new span go to the far heap. Costs cur_ - b bit tests; a jump
  // of a whole ring or more rebuilds the calendar.
  void rebase(std::uint64_t b) {
    if (cur_ - b >= kRing) {
      const std::vector<Rec> all = take_all();
      cur_ = b;
      for (const Rec& k : all) {  // every record's bucket is > b here
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
      for_each_in_bucket(i, [&](const Rec& k) { far_push(k); });
      unmark_bucket(i);
      release_bucket(i);
    }
    const std::uint64_t old = cur_;
    cur_ = b;
    for (std::size_t j = pos_; j < near_.size(); ++j) put_ring(old, near_[j]);
    for (const Rec& k : late_) put_ring(old, k);
    near_.clear();
    pos_ = 0;
    late_.clear();
  }

  // near_ is consumed, late_ is empty and size_ > 0 (advance's state): re-buckets every record
  // (ring and far heap) at width 2^w and makes the earliest bucket current. O(size_).
  void rebuild(unsigned w) {
    const std::vector<Rec> all = take_all();
    shift_ = w;
    ++widenings_;
    std::uint64_t lo = ~std::uint64_t{0};
    for (const Rec& k : all) lo = std::min(lo, k.time >> shift_);
    cur_ = lo;
    for (const Rec& k : all) {
      const std::uint64_t kb = k.time >> shift_;
      if (kb == cur_) {
        near_.push_back(k);
      } else if (kb - cur_ < kRing) {
        put_ring(kb, k);
      } else {
        far_push(k);
      }
    }
    sort_near(kRing);
  }

  // near_ is consumed, late_ is empty and size_ > 0: make the next non-empty bucket current.
  void advance() {
    if (adaptive_ && pushes_ >= kAdaptPushes) {
      const bool widen = far_pushes_ * 4 > pushes_ && late_pushes_ * 4 < pushes_ && shift_ + 2 <= 40;
      pushes_ = far_pushes_ = late_pushes_ = 0;
      if (widen) {
        rebuild(shift_ + 2);
        return;
      }
    }
    std::uint64_t next;
    if (ring_count_ == 0) {
      next = far_.front().time >> shift_;
    } else {
      next = cur_ + 1 + distance_to_set_bit((cur_ + 1) & kMask);
    }
    cur_ = next;
    const std::uint64_t i = cur_ & kMask;
    const bool in_ring = (bits_[i >> 6] & (std::uint64_t{1} << (i & 63))) != 0;
    // A sort buffer left large by a burst is freed rather than kept for the rest of the run.
    const std::size_t expect = in_ring ? ring_[i].count : 0;
    if (near_.capacity() > kKeepRecs && near_.capacity() > 4 * expect) {
      near_ = std::vector<Rec>();
    } else {
      near_.clear();
    }
    if (tmp_.capacity() > kKeepRecs && tmp_.capacity() > 4 * expect) tmp_ = std::vector<Rec>();
    pos_ = 0;
    // Records of the far heap now inside the ring's span [cur_, cur_ + kRing).
    while (!far_.empty() && (far_.front().time >> shift_) - cur_ < kRing) {
      const Rec k = far_.front();
      far_pop();
      const std::uint64_t b = k.time >> shift_;
      if (b == cur_) {
        near_.push_back(k);
      } else {
        put_ring(b, k);
      }
    }
    if (in_ring) unmark_bucket(i);
    sort_near(in_ring ? i : kRing);
  }

  // Sorts the current bucket ascending. All its records share time >> shift_, so a counting sort
  // on the next R bits of time (2^R >= n) leaves only records with equal digits out of
  // order; an insertion pass fixes those. When many records share a digit (e.g. bursts at one
  // instant) the pass would be quadratic, so merge_runs finishes instead. ~25 instructions per
  // record instead of ~85 for std::sort (PHOLD: ~1,000-record buckets).
  // `bucket` < kRing: ring bucket whose records join near_'s (and which is emptied); the
  // counting sort reads them straight from its blocks.
  void sort_near(std::uint64_t bucket) {
    const std::size_t from_ring = bucket < kRing ? ring_[bucket].count : 0;
    const std::size_t n = near_.size() + from_ring;
    if (n < 32 || shift_ == 0) {
      if (from_ring != 0) {
        near_.reserve(n);
        for_each_in_bucket(bucket, [&](const Rec& k) { near_.push_back(k); });
        release_bucket(bucket);
      }
      if (n < 32) {
        insertion_sort(0);
      } else {
        std::sort(near_.begin(), near_.end(), Less{});
      }
      return;
    }
    unsigned r = 1;
    while ((std::size_t{1} << r) < n && r < 14) ++r;
    r = std::min(r, shift_);
    const unsigned down = shift_ - r;
    const std::uint64_t mask = (std::uint64_t{1} << r) - 1;
    counts_.assign(std::size_t{1} << r, 0);
    for (const Rec& x : near_) ++counts_[(x.time >> down) & mask];
    if (from_ring != 0) for_each_in_bucket(bucket, [&](const Rec& x) { ++counts_[(x.time >> down) & mask]; });
    std::uint32_t sum = 0, most = 0;
    for (std::uint32_t& c : counts_) {
      const std::uint32_t k = c;
      c = sum;
      sum += k;
      most = std::max(most, k);
    }
    tmp_.resize(n);
    for (const Rec& x : near_) tmp_[counts_[(x.time >> down) & mask]++] = x;
    if (from_ring != 0) {
      for_each_in_bucket(bucket, [&](const Rec& x) { tmp_[counts_[(x.time >> down) & mask]++] = x; });
      release_bucket(bucket);
    }
    near_.swap(tmp_);
    if (most <= 1) return;
    if (most <= 16) {
      insertion_sort(1);
    } else {
      merge_runs();
    }
  }
  // Sorts near_ by merging its ascending runs, or with std::sort when there are many. Used when
  // many records share a time digit (a burst of same-instant events, e.g. every rank of a ring
  // step): the counting sort keeps them in push order, and handlers run in (time, src, seq)
  // order, so a burst is a few long ascending runs (1,024-rank ring: std::sort was ~11% of the
  // run, merging the runs ~2 passes over them).
  void merge_runs() {
    const std::size_t n = near_.size();
    bounds_.clear();
    bounds_.push_back(0);
    for (std::size_t i = 1; i < n; ++i) {
      if (!less(near_[i], near_[i - 1])) continue;
      bounds_.push_back(i);
      if (bounds_.size() > kMaxRuns) {
        std::sort(near_.begin(), near_.end(), Less{});
        return;
      }
    }
    bounds_.push_back(n);
    tmp_.resize(n);
    // Bottom-up: merge runs pairwise (an odd last run is copied) until one is left.
    while (bounds_.size() > 2) {
      std::size_t k = 0;
      for (std::size_t r = 0; r + 1 < bounds_.size(); r += 2) {
        const auto a = static_cast<std::ptrdiff_t>(bounds_[r]);
        const auto m = static_cast<std::ptrdiff_t>(bounds_[r + 1]);
        const auto e = static_cast<std::ptrdiff_t>(r + 2 < bounds_.size() ? bounds_[r + 2] : n);
        std::merge(near_.begin() + a, near_.begin() + m, near_.begin() + m, near_.begin() + e, tmp_.begin() + a,
                   Less{});
        bounds_[k++] = bounds_[r];
      }
      bounds_[k++] = n;
      bounds_.resize(k);
      near_.swap(tmp_);
    }
  }
  // Insertion sort of near_ (cheap when records are at most a few places out of order).
  void insertion_sort(std::size_t from) {
    for (std::size_t i = std::max<std::size_t>(from, 1); i < near_.size(); ++i) {
      if (!less(near_[i], near_[i - 1])) continue;
      const Rec x = near_[i];
      std::size_t j = i;
      do {
        near_[j] = near_[j - 1];
        --j;
      } while (j > 0 && less(x, near_[j - 1]));
      near_[j] = x;
    }
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

  // 4-ary min-heap of far records.
  void far_push(const Rec& k) {
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
    const Rec k = far_.back();
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
  bool adaptive_ = false;
  // Pushes since the last adaptation check, and those of them into the far heap / current bucket.
  static constexpr std::uint64_t kAdaptPushes = 4096;
  std::uint64_t pushes_ = 0, far_pushes_ = 0, late_pushes_ = 0;
  std::uint64_t widenings_ = 0;
  std::size_t size_ = 0;
  std::uint64_t cur_ = 0;
  std::vector<Rec> near_;  // current bucket, sorted ascending; near_[pos_] is the next one
  std::size_t pos_ = 0;
  std::vector<Rec> late_;  // min-heap (std heap with Greater): pushes into bucket cur_
  std::array<Bucket, kRing> ring_{};
  std::array<std::uint64_t, kRing / 64> bits_{};
  std::size_t set_bits_ = 0;  // bits set in bits_ (non-empty ring buckets), kept as they change
                              // (a popcount of 2,048 bits per new bucket was 2% of a MoE run)
  std::size_t ring_count_ = 0;
  std::vector<Rec> far_;
  std::vector<Rec> tmp_;               // counting-sort output, swapped with near_
  std::vector<std::uint32_t> counts_;  // counting-sort bins
  static constexpr std::size_t kMaxRuns = 64;  // merge_runs: more runs than this -> std::sort
  std::vector<std::size_t> bounds_;    // merge_runs: run boundaries
  std::vector<std::unique_ptr<Block[]>> chunk_blocks_;  // ring block pool, kBlockChunkLog2 per chunk
  std::vector<std::uint32_t> next_block_;  // per block: next in its bucket, or in the free chain
  std::uint32_t free_block_ = kNoBlock;    // free chain of blocks (last freed first)
  std::uint32_t blocks_made_ = 0;
  std::vector<std::unique_ptr<Line[]>> chunks_;
  std::uint32_t next_slot_ = 0;
  std::vector<std::uint32_t> free_;
};

}  // namespace fabricsim::engine
