// EventQueue: the calendar queue must pop exactly in (time, src, seq) order, compared with a
// sorted reference, for interleaved pushes and pops including pushes into the current bucket or
// the past, far-future keys (beyond the ring), ties in time, and every bucket width.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <tuple>
#include <vector>

#include "engine/event_queue.hpp"
#include "engine/rng.hpp"

namespace fabricsim::engine {
namespace {

using Ref = std::tuple<SimTime, LpId, std::uint64_t>;

void check_against_reference(unsigned width_log2, std::uint64_t seed, SimTime spread, bool adaptive = false,
                             std::uint64_t* widenings = nullptr) {
  EventQueue q(width_log2);
  q.set_adaptive(adaptive);
  std::set<Ref> ref;
  CounterRng rng(seed, 7);
  std::vector<std::uint64_t> seq(64, 0);
  SimTime now = 0;
  auto push_one = [&](SimTime t) {
    Event ev;
    ev.time = t;
    ev.src = static_cast<LpId>(rng.next_below(64));
    ev.seq = seq[ev.src]++;
    ev.dst = 3;
    ev.kind = static_cast<std::uint32_t>(ev.seq);
    q.push(ev);
    ref.emplace(ev.time, ev.src, ev.seq);
  };
  for (int i = 0; i < 2000; ++i) push_one(static_cast<SimTime>(rng.next_below(static_cast<std::uint64_t>(spread))));
  for (int step = 0; step < 60000; ++step) {
    const std::uint64_t r = rng.next_below(100);
    if (r < 48 || q.empty()) {
      SimTime t;
      if (r < 5) t = now;                                                  // same time (self event)
      else if (r < 8) t = now > 10 ? now - 10 : 0;                         // earlier than the head
      else if (r < 10) t = now + spread * 1000 + static_cast<SimTime>(rng.next_below(1000));  // far
      else t = now + static_cast<SimTime>(rng.next_below(static_cast<std::uint64_t>(spread)));
      push_one(t);
    } else {
      ASSERT_EQ(q.size(), ref.size());
      ASSERT_EQ(q.top_time(), std::get<0>(*ref.begin()));
      Event out;
      q.pop(out);
      const Ref want = *ref.begin();
      ref.erase(ref.begin());
      ASSERT_EQ(Ref(out.time, out.src, out.seq), want) << "width 2^" << width_log2;
      ASSERT_EQ(out.kind, static_cast<std::uint32_t>(out.seq));
      now = out.time;
    }
  }
  while (!q.empty()) {
    Event out;
    q.pop(out);
    ASSERT_EQ(Ref(out.time, out.src, out.seq), *ref.begin());
    ref.erase(ref.begin());
  }
  EXPECT_TRUE(ref.empty());
  if (widenings != nullptr) *widenings = q.widenings();
}

TEST(EventQueue, ExactOrderAnyBucketWidth) {
  for (unsigned w : {0u, 4u, 10u, 16u, 30u}) {
    for (SimTime spread : {SimTime{1}, SimTime{1000}, SimTime{1'000'000}}) {
      check_against_reference(w, 11 + w, spread);
    }
  }
}

// The adaptive width (what the engine uses when nothing is cut) rebuilds the calendar while
// events are pending, at wider and wider buckets; order must stay exactly the reference's. With
// events spread over 100 us..1 ms against a 1 ns (2^10 ps) bucket, most pushes land beyond the
// 2,048-bucket ring, so the queue must widen at least once; with a spacing below the ring's span
// it must not.
TEST(EventQueue, AdaptiveWidthKeepsExactOrder) {
  for (SimTime spread : {SimTime{100'000'000}, SimTime{1'000'000'000}}) {
    std::uint64_t widened = 0;
    check_against_reference(10, 5, spread, /*adaptive=*/true, &widened);
    EXPECT_GE(widened, 1u) << "spread " << spread;
  }
  std::uint64_t widened = 0;
  check_against_reference(10, 5, 1000, /*adaptive=*/true, &widened);
  EXPECT_EQ(widened, 0u);
}

// A burst of same-instant records (every rank of a ring step) reaches the bucket sort as a few
// ascending runs in push order; the runs are merged (or std::sort takes over beyond 64 runs).
// Bursts of 1..80 runs of uneven lengths, with a few other instants mixed in, must pop in exactly
// the reference (time, src, seq) order.
TEST(EventQueue, SameInstantBurstsInAscendingRunsPopInOrder) {
  for (std::uint32_t runs : {1u, 2u, 3u, 7u, 63u, 64u, 65u, 80u}) {
    for (unsigned w : {4u, 10u}) {
      EventQueue q(w);
      std::set<Ref> ref;
      CounterRng rng(runs, w);
      std::vector<std::uint64_t> seq(1024, 0);
      const SimTime t0 = 5000;
      auto push = [&](SimTime t, LpId src) {
        Event ev;
        ev.time = t;
        ev.src = src;
        ev.seq = seq[src]++;
        ev.dst = 1;
        q.push(ev);
        ref.emplace(ev.time, ev.src, ev.seq);
      };
      push(0, 0);  // makes bucket 0 current: the burst lands in a later bucket, sorted when reached
      // Run r: ascending sources from a random start, so consecutive runs overlap in src.
      for (std::uint32_t r = 0; r < runs; ++r) {
        const LpId lo = static_cast<LpId>(rng.next_below(512));
        const std::uint32_t len = 20 + static_cast<std::uint32_t>(rng.next_below(200));
        for (std::uint32_t i = 0; i < len; ++i) push(t0, lo + i);
        push(t0 + 1 + static_cast<SimTime>(rng.next_below(3)), static_cast<LpId>(rng.next_below(1024)));
      }
      while (!q.empty()) {
        Event out;
        q.pop(out);
        ASSERT_EQ(Ref(out.time, out.src, out.seq), *ref.begin()) << runs << " runs, width 2^" << w;
        ref.erase(ref.begin());
      }
      EXPECT_TRUE(ref.empty());
    }
  }
}

// Every field and all 64 payload bytes come back as pushed, whether the payload is all zeros (no
// slab slot), partly written (the rest must read as zeros) or full; and slots are recycled.
TEST(EventQueue, EventsComeBackWhole) {
  EventQueue q(4);
  CounterRng rng(3, 1);
  std::vector<Event> sent;
  for (std::uint32_t i = 0; i < 5000; ++i) {
    Event e;
    e.time = static_cast<SimTime>(i);  // distinct times: pop order = push order
    e.dst = static_cast<LpId>(rng.next_below(1000));
    e.src = static_cast<LpId>(rng.next_below(1000));
    e.seq = rng.next_below(std::uint64_t{1} << 40);
    e.kind = static_cast<std::uint32_t>(rng.next_u64());
    const std::uint64_t shape = i % 3;  // 0: zeros, 1: first 12 bytes, 2: all 64 bytes
    const std::size_t n = shape == 0 ? 0 : shape == 1 ? 12 : kPayloadBytes;
    for (std::size_t b = 0; b < n; ++b) e.payload[b] = static_cast<std::byte>(rng.next_below(255) + 1);
    if (i % 2 == 0) {
      q.push(e);
    } else {
      q.push(e.time, e.dst, e.src, e.seq, e.kind, e.payload.data(), n);
    }
    sent.push_back(e);
  }
  // Two of every three events carry a payload; the all-zero ones take no slab slot.
  EXPECT_EQ(q.payload_slots_in_use(), 5000u - 1667u);
  for (const Event& want : sent) {
    Event got;
    got.payload.fill(std::byte{0x5A});  // must be overwritten, zeros included
    ASSERT_FALSE(q.empty());
    q.pop(got);
    ASSERT_EQ(got.time, want.time);
    ASSERT_EQ(got.dst, want.dst);
    ASSERT_EQ(got.src, want.src);
    ASSERT_EQ(got.seq, want.seq);
    ASSERT_EQ(got.kind, want.kind);
    ASSERT_EQ(got.reserved, 0u);
    ASSERT_EQ(std::memcmp(got.payload.data(), want.payload.data(), kPayloadBytes), 0);
  }
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.payload_slots_in_use(), 0u);
}

TEST(EventQueue, PopBeforeStopsAtTheLimit) {
  EventQueue q(2);
  for (SimTime t : {SimTime{40}, SimTime{10}, SimTime{30}, SimTime{20}}) {
    Event e;
    e.time = t;
    q.push(e);
  }
  Event out;
  EXPECT_TRUE(q.pop_before(25, out));
  EXPECT_EQ(out.time, 10);
  EXPECT_TRUE(q.pop_before(25, out));
  EXPECT_EQ(out.time, 20);
  EXPECT_FALSE(q.pop_before(25, out));  // 30 >= 25: left in the queue
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.top_time(), 30);
}

// Issue 7: ring memory follows the records pending. Records spread thin over many buckets (a
// few packets on each of many long links) after a dense burst: each non-empty bucket holds at
// most one partly filled block, so blocks in use <= pending / 32 + non-empty buckets (< 2,048),
// and blocks are reused, so the pool never exceeds the peak of that bound (rounded up to a
// 64-block allocation). Vectors per bucket that kept or were handed the capacity of the burst's
// buckets held ~20x the records here.
TEST(EventQueue, RingBlocksFollowRecordsPending) {
  EventQueue q(10);
  CounterRng rng(17, 2);
  std::uint64_t seq = 0;
  auto push = [&](SimTime t) {
    Event ev;
    ev.time = t;
    ev.src = 1;
    ev.seq = seq++;
    q.push(ev);
  };
  push(0);
  std::size_t bound_peak = 0;
  auto note = [&] {
    const std::size_t nonempty = std::min<std::size_t>(q.size(), 2047);
    bound_peak = std::max(bound_peak, (q.size() + EventQueue::kBlockRecs - 1) / EventQueue::kBlockRecs + nonempty);
  };
  // Dense bursts: 3 buckets of 3,000 records each, popped before the next burst.
  SimTime now = 0;
  for (int burst = 0; burst < 3; ++burst) {
    for (int i = 0; i < 3000; ++i) push(now + 5 * 1024 + static_cast<SimTime>(rng.next_below(1024)));
    note();
    Event out;
    while (!q.empty()) {
      q.pop(out);
      now = out.time;
    }
    push(now);
  }
  const std::size_t after_bursts = q.ring_blocks();
  // Sparse phase: ~1,000 buckets ahead with ~5 records each, consumed and refilled 30 times.
  for (int round = 0; round < 30; ++round) {
    for (int i = 0; i < 5000; ++i) push(now + 1 + static_cast<SimTime>(rng.next_below(1000 * 1024)));
    note();
    Event out;
    for (int i = 0; i < 5000 && !q.empty(); ++i) {
      q.pop(out);
      now = out.time;
    }
  }
  const std::size_t limit = (bound_peak + 63) / 64 * 64;
  EXPECT_LE(q.ring_blocks(), limit);
  EXPECT_LE(after_bursts, (3000 / EventQueue::kBlockRecs + 1 + 63) / 64 * 64 + 64);
  EXPECT_GT(bound_peak, 1000u);  // the sparse phase really spread over many buckets
}

// A same-instant burst needs sort buffers of its size; once the run is back to small buckets
// they are freed (buffers above kKeepRecs and 4x the bucket), instead of holding the burst's
// size for the rest of the run.
TEST(EventQueue, SortBuffersShrinkAfterABurst) {
  EventQueue q(10);
  std::vector<std::uint64_t> seq(60000, 0);
  auto push = [&](SimTime t, LpId src) {
    Event ev;
    ev.time = t;
    ev.src = src;
    ev.seq = seq[src]++;
    q.push(ev);
  };
  push(0, 0);
  for (LpId s = 0; s < 50000; ++s) push(4096, s);  // one bucket, one instant
  Event out;
  q.pop(out);  // time 0
  q.pop(out);  // the burst's bucket is now sorted
  EXPECT_GE(q.sort_buffer_records(), 50000u);
  while (!q.empty()) q.pop(out);
  // Back to small buckets: 100 instants of 10 records each.
  for (SimTime t = 0; t < 100; ++t) {
    for (LpId s = 0; s < 10; ++s) push(5000 + (t + 1) * 2048, s);
  }
  while (!q.empty()) q.pop(out);
  EXPECT_LE(q.sort_buffer_records(), 2 * EventQueue::kKeepRecs);
}

}  // namespace
}  // namespace fabricsim::engine
