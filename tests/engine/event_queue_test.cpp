// EventQueue: the calendar queue must pop exactly in (time, src, seq) order, compared with a
// sorted reference, for interleaved pushes and pops including pushes into the current bucket or
// the past, far-future keys (beyond the ring), ties in time, and every bucket width.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

#include "engine/event_queue.hpp"
#include "engine/rng.hpp"

namespace fabricsim::engine {
namespace {

using Ref = std::tuple<SimTime, LpId, std::uint64_t>;

void check_against_reference(unsigned width_log2, std::uint64_t seed, SimTime spread) {
  EventQueue q(width_log2);
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
}

TEST(EventQueue, ExactOrderAnyBucketWidth) {
  for (unsigned w : {0u, 4u, 10u, 16u, 30u}) {
    for (SimTime spread : {SimTime{1}, SimTime{1000}, SimTime{1'000'000}}) {
      check_against_reference(w, 11 + w, spread);
    }
  }
}

TEST(EventQueue, BodiesStayInPlaceUntilReleased) {
  EventQueue q(4);
  Event a;
  a.time = 5;
  a.kind = 42;
  q.push(a);
  const std::uint32_t slot = q.take();
  const Event* p = &q.body_of(slot);
  for (int i = 0; i < 100000; ++i) {  // many pushes grow the slab; the taken body must not move
    Event e;
    e.time = 10 + i;
    e.seq = static_cast<std::uint64_t>(i);
    q.push(e);
  }
  EXPECT_EQ(p, &q.body_of(slot));
  EXPECT_EQ(p->kind, 42u);
  q.release(slot);
  EXPECT_EQ(q.size(), 100000u);
  EXPECT_EQ(q.top_time(), 10);
}

}  // namespace
}  // namespace fabricsim::engine
