// Counter-based RNG and event order.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <queue>
#include <vector>

#include "engine/event.hpp"
#include "engine/rng.hpp"

namespace fabricsim::engine {
namespace {

TEST(CounterRng, Deterministic) {
  CounterRng a(42, 7), b(42, 7), c(42, 8), d(43, 7);
  int diff_stream = 0, diff_seed = 0;
  for (int i = 0; i < 1000; ++i) {
    const auto x = a.next_u64();
    ASSERT_EQ(x, b.next_u64());
    diff_stream += x != c.next_u64();
    diff_seed += x != d.next_u64();
  }
  EXPECT_EQ(a.counter(), 1000u);
  EXPECT_EQ(diff_stream, 1000);
  EXPECT_EQ(diff_seed, 1000);
}

TEST(CounterRng, DrawIsPureFunctionOfCounter) {
  // The n-th draw does not depend on which methods consumed the earlier draws.
  CounterRng a(9, 3), b(9, 3);
  a.next_unit();
  a.next_exponential(5.0);
  b.next_u64();
  b.next_below(17);
  EXPECT_EQ(a.next_u64(), b.next_u64());
}

TEST(CounterRng, UniformMean) {
  CounterRng r(1, 0);
  constexpr int n = 100'000;
  double sum = 0, mn = 1, mx = 0;
  for (int i = 0; i < n; ++i) {
    const double u = r.next_unit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    mn = std::min(mn, u);
    mx = std::max(mx, u);
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);  // within 1%
  EXPECT_LT(mn, 1e-3);
  EXPECT_GT(mx, 1 - 1e-3);
}

TEST(CounterRng, ExponentialMean) {
  CounterRng r(2, 5);
  constexpr int n = 100'000;
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    const double x = r.next_exponential(1000.0);
    ASSERT_GE(x, 0.0);
    sum += x;
  }
  EXPECT_NEAR(sum / n, 1000.0, 10.0);  // within 1% (sigma of the mean is 0.32%)
}

TEST(CounterRng, BelowIsUniform) {
  CounterRng r(3, 1);
  std::array<int, 10> hist{};
  constexpr int n = 100'000;
  for (int i = 0; i < n; ++i) {
    const auto k = r.next_below(10);
    ASSERT_LT(k, 10u);
    ++hist[k];
  }
  for (int h : hist) EXPECT_NEAR(h, n / 10, 400);  // ~4.2 sigma
}

Event ev(SimTime t, LpId src, std::uint64_t seq, LpId dst) {
  Event e;
  e.time = t;
  e.src = src;
  e.seq = seq;
  e.dst = dst;
  return e;
}

TEST(EventLater, OrderIsTimeSrcSeqDst) {
  EventLater later;
  EXPECT_TRUE(later(ev(2, 0, 0, 0), ev(1, 9, 9, 9)));   // time first
  EXPECT_FALSE(later(ev(1, 9, 9, 9), ev(2, 0, 0, 0)));
  EXPECT_TRUE(later(ev(1, 2, 0, 0), ev(1, 1, 9, 9)));   // then src
  EXPECT_TRUE(later(ev(1, 1, 5, 0), ev(1, 1, 4, 9)));   // then seq
  EXPECT_TRUE(later(ev(1, 1, 4, 3), ev(1, 1, 4, 2)));   // then dst
  EXPECT_FALSE(later(ev(1, 1, 4, 2), ev(1, 1, 4, 2)));  // irreflexive
}

TEST(EventLater, PriorityQueuePopsInOrder) {
  std::vector<Event> evs;
  CounterRng r(5, 5);
  for (int i = 0; i < 2000; ++i) {
    evs.push_back(ev(static_cast<SimTime>(r.next_below(50)), static_cast<LpId>(r.next_below(4)),
                     r.next_below(8), static_cast<LpId>(r.next_below(4))));
  }
  std::priority_queue<Event, std::vector<Event>, EventLater> q;
  for (const auto& e : evs) q.push(e);
  auto key = [](const Event& e) { return std::tuple(e.time, e.src, e.seq, e.dst); };
  std::sort(evs.begin(), evs.end(), [&](const Event& a, const Event& b) { return key(a) < key(b); });
  for (const auto& e : evs) {
    ASSERT_EQ(key(q.top()), key(e));
    q.pop();
  }
}

TEST(Event, PayloadRoundTrip) {
  struct P {
    double a;
    std::uint32_t b;
    std::uint64_t c[6];
  };
  P p{1.5, 7, {1, 2, 3, 4, 5, 6}};
  Event e;
  e.put(p);
  const P q = e.get<P>();
  EXPECT_EQ(q.a, 1.5);
  EXPECT_EQ(q.b, 7u);
  EXPECT_EQ(q.c[5], 6u);
}

}  // namespace
}  // namespace fabricsim::engine
