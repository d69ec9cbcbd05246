// Max-min fair sharing (progressive filling) on small link graphs with hand-derived rates.
#include <gtest/gtest.h>

#include <vector>

#include "models/flow/flow_maxmin.hpp"

namespace {

using fabricsim::models::MaxMinSolver;

std::vector<std::uint32_t> solve_all(MaxMinSolver& s) {
  std::vector<std::uint32_t> seeds, solved;
  for (std::uint32_t l = 0; l < s.num_links(); ++l) seeds.push_back(l);
  s.recompute(seeds, &solved);
  return solved;
}

// Classic 3-flow line (Bertsekas & Gallager §6.5.2 shape): link A (1 Gb/s), link B (2 Gb/s);
// flow 0 crosses A and B, flow 1 only A, flow 2 only B. A saturates first at 0.5 each; B then
// has 2 - 0.5 = 1.5 left for flow 2.
TEST(MaxMin, ThreeFlowLine) {
  MaxMinSolver s({1e9, 2e9});
  const std::uint32_t ab[] = {0, 1}, a[] = {0}, b[] = {1};
  const auto f0 = s.add_flow(ab, 2), f1 = s.add_flow(a, 1), f2 = s.add_flow(b, 1);
  solve_all(s);
  EXPECT_DOUBLE_EQ(s.rate(f0), 0.5e9);
  EXPECT_DOUBLE_EQ(s.rate(f1), 0.5e9);
  EXPECT_DOUBLE_EQ(s.rate(f2), 1.5e9);
}

// Link 0 (10) carries flows 0, 1, 2; link 1 (4) carries flows 2, 3. Link 1's share 2 is the
// smallest: flows 2, 3 get 2; link 0 then splits 10 - 2 = 8 between flows 0, 1: 4 each.
TEST(MaxMin, BottleneckElsewhere) {
  MaxMinSolver s({10, 4});
  const std::uint32_t l0[] = {0}, l01[] = {0, 1}, l1[] = {1};
  const auto f0 = s.add_flow(l0, 1), f1 = s.add_flow(l0, 1), f2 = s.add_flow(l01, 2), f3 = s.add_flow(l1, 1);
  solve_all(s);
  EXPECT_DOUBLE_EQ(s.rate(f0), 4);
  EXPECT_DOUBLE_EQ(s.rate(f1), 4);
  EXPECT_DOUBLE_EQ(s.rate(f2), 2);
  EXPECT_DOUBLE_EQ(s.rate(f3), 2);
  // Flow 3 leaves: link 1 no longer limits flow 2, all three share link 0 equally (10/3).
  s.remove_flow(f3);
  const std::vector<std::uint32_t> seeds = {1};
  std::vector<std::uint32_t> solved;
  EXPECT_EQ(s.recompute(seeds, &solved), 3u);
  EXPECT_DOUBLE_EQ(s.rate(f0), 10.0 / 3);
  EXPECT_DOUBLE_EQ(s.rate(f2), 10.0 / 3);
}

// Incast: 4 flows into one 100 Gb/s link, each from its own 400 Gb/s link: 25 Gb/s each; the
// conservation law: the bottleneck is exactly full.
TEST(MaxMin, IncastConservation) {
  MaxMinSolver s({400e9, 400e9, 400e9, 400e9, 100e9});
  std::vector<std::uint32_t> f;
  for (std::uint32_t i = 0; i < 4; ++i) {
    const std::uint32_t path[] = {i, 4};
    f.push_back(s.add_flow(path, 2));
  }
  solve_all(s);
  double sum = 0;
  for (auto id : f) {
    EXPECT_DOUBLE_EQ(s.rate(id), 25e9);
    sum += s.rate(id);
  }
  EXPECT_DOUBLE_EQ(sum, 100e9);
}

// Incremental recomputation touches only the connected component of the seeds.
TEST(MaxMin, IncrementalComponentOnly) {
  MaxMinSolver s({1, 1, 1, 1});
  const std::uint32_t p0[] = {0, 1}, p1[] = {1}, p2[] = {2, 3}, p3[] = {3};
  const auto f0 = s.add_flow(p0, 2);
  s.add_flow(p1, 1);
  const auto f2 = s.add_flow(p2, 2);
  const auto f3 = s.add_flow(p3, 1);
  solve_all(s);
  std::vector<std::uint32_t> solved;
  // A new flow on link 1 (saturated: flows 0 and 1 at 1/2): link 1's three flows are re-solved
  // (1/3 each), flows 2 and 3 on links 2-3 are not.
  const std::uint32_t p5[] = {1};
  s.add_flow(p5, 1);
  const std::vector<std::uint32_t> seeds = {1};
  EXPECT_EQ(s.recompute(seeds, &solved), 3u);
  for (auto f : solved) EXPECT_NE(f, f2);
  EXPECT_DOUBLE_EQ(s.rate(f0), 1.0 / 3);
  EXPECT_DOUBLE_EQ(s.rate(f2), 0.5);
  EXPECT_DOUBLE_EQ(s.rate(f3), 0.5);
  // Slots are reused after removal.
  s.remove_flow(f3);
  const std::uint32_t p4[] = {2};
  EXPECT_EQ(s.add_flow(p4, 1), f3);
}

// Flows coupled only through a link that is not saturated are not re-solved together: two
// 1-unit NIC links (0, 1) each with one flow through a shared 4-unit spine link (2); both flows
// run at 1 and the spine carries 2 of 4. A third flow on link 0 halves flow 0 and leaves
// flow 1 alone (not re-solved); a flow on the spine alone then saturates it (4 - 0.5 - 1
// leaves 2.5) without touching the others.
TEST(MaxMin, UnsaturatedLinkDoesNotCouple) {
  MaxMinSolver s({1, 1, 4});
  const std::uint32_t a[] = {0, 2}, b[] = {1, 2}, c[] = {0}, d[] = {2};
  const auto fa = s.add_flow(a, 2), fb = s.add_flow(b, 2);
  solve_all(s);
  EXPECT_DOUBLE_EQ(s.rate(fa), 1);
  EXPECT_DOUBLE_EQ(s.rate(fb), 1);
  const auto fc = s.add_flow(c, 1);
  std::vector<std::uint32_t> solved;
  EXPECT_EQ(s.recompute({0}, &solved), 2u);  // fa and fc, not fb
  EXPECT_DOUBLE_EQ(s.rate(fa), 0.5);
  EXPECT_DOUBLE_EQ(s.rate(fc), 0.5);
  EXPECT_DOUBLE_EQ(s.rate(fb), 1);
  const auto fd = s.add_flow(d, 1);
  solved.clear();
  EXPECT_EQ(s.recompute({2}, &solved), 1u);  // fd only: the spine (2 of 4 used) was not saturated
  EXPECT_DOUBLE_EQ(s.rate(fd), 2.5);
  // The spine is now saturated (0.5 + 1 + 2.5 = 4) but only fd has it as bottleneck. Removing
  // fb leaves fd without one: fd alone is re-solved, to 4 - 0.5; fa keeps link 0.
  s.remove_flow(fb);
  solved.clear();
  EXPECT_EQ(s.recompute({1, 2}, &solved), 1u);
  EXPECT_DOUBLE_EQ(s.rate(fa), 0.5);
  EXPECT_DOUBLE_EQ(s.rate(fd), 3.5);
}

// A link that was not saturated becomes saturated by new flows: the flows it held at their
// rates must be re-solved with them (the solver retries with the larger set). Link 0 (cap 3)
// carries flow x, limited to 1 by link 1; three new flows on link 0 alone then share it with x:
// 3/4 each, x included.
TEST(MaxMin, NewlySaturatedLinkPullsHeldFlows) {
  MaxMinSolver s({3, 1});
  const std::uint32_t x[] = {0, 1}, y[] = {0};
  const auto fx = s.add_flow(x, 2);
  solve_all(s);
  EXPECT_DOUBLE_EQ(s.rate(fx), 1);
  std::vector<std::uint32_t> ys;
  for (int i = 0; i < 3; ++i) ys.push_back(s.add_flow(y, 1));
  std::vector<std::uint32_t> solved;
  EXPECT_EQ(s.recompute({0}, &solved), 4u);
  EXPECT_DOUBLE_EQ(s.rate(fx), 0.75);
  for (auto f : ys) EXPECT_DOUBLE_EQ(s.rate(f), 0.75);
}

}  // namespace

namespace {

// Independent check of the incremental solver: after every batch of random additions and
// removals, every rate equals (within 1e-9 relative) the rate a fresh solver gives when it
// solves all active flows at once by progressive filling over the whole network. The network
// is a small two-level fabric (16 NIC uplinks and downlinks of 1, 8 spine links of 2), the
// flows random NIC -> spine -> NIC paths, so flows couple through saturated and unsaturated
// links in every way.
TEST(MaxMin, IncrementalEqualsFullSolve) {
  constexpr std::uint32_t kNics = 16, kSpines = 8;
  std::vector<double> cap(2 * kNics + kSpines, 1.0);
  for (std::uint32_t s = 0; s < kSpines; ++s) cap[2 * kNics + s] = 2.0;
  // Three runs: the first grows to ~200 concurrent flows, the others stay near a dozen.
  for (const std::uint64_t seed : {12345ULL, 777ULL, 4242ULL}) {
  MaxMinSolver inc(cap);
  struct Active {
    std::uint32_t id;
    std::vector<std::uint32_t> links;
  };
  std::vector<Active> act;
  std::uint64_t x = seed;
  auto next = [&x](std::uint32_t n) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::uint32_t>((x >> 33) % n);
  };
  for (int step = 0; step < 400; ++step) {
    std::vector<std::uint32_t> seeds;
    const std::uint32_t adds = next(4), removes = act.empty() ? 0 : next(seed == 12345 ? 3 : 5);
    for (std::uint32_t i = 0; i < removes && !act.empty(); ++i) {
      const std::uint32_t k = next(static_cast<std::uint32_t>(act.size()));
      inc.remove_flow(act[k].id);
      seeds.insert(seeds.end(), act[k].links.begin(), act[k].links.end());
      act.erase(act.begin() + k);
    }
    for (std::uint32_t i = 0; i < adds; ++i) {
      const std::uint32_t src = next(kNics), dst = next(kNics), sp = next(kSpines);
      std::vector<std::uint32_t> links = {src, 2 * kNics + sp, kNics + dst};
      if (next(4) == 0) links = {src, kNics + dst};  // a flow that skips the spine layer
      act.push_back({inc.add_flow(links.data(), static_cast<std::uint32_t>(links.size())), links});
      seeds.insert(seeds.end(), links.begin(), links.end());
    }
    std::vector<std::uint32_t> solved;
    inc.recompute(seeds, &solved);
    MaxMinSolver full(cap);
    std::vector<std::uint32_t> ids;
    for (const auto& a : act) ids.push_back(full.add_flow(a.links.data(), static_cast<std::uint32_t>(a.links.size())));
    solve_all(full);
    for (std::size_t i = 0; i < act.size(); ++i) {
      const double want = full.rate(ids[i]);
      ASSERT_NEAR(inc.rate(act[i].id), want, 1e-9 * want) << "seed " << seed << " step " << step << " flow " << i;
    }
  }
  }
}

}  // namespace
