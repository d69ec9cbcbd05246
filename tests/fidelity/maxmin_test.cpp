// Max-min fair sharing (progressive filling) on small link graphs with hand-derived rates.
#include <gtest/gtest.h>

#include <vector>

#include "models/flow_maxmin.hpp"

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
  s.add_flow(p0, 2);
  s.add_flow(p1, 1);
  const auto f2 = s.add_flow(p2, 2);
  const auto f3 = s.add_flow(p3, 1);
  solve_all(s);
  std::vector<std::uint32_t> solved;
  const std::vector<std::uint32_t> seeds = {0};
  EXPECT_EQ(s.recompute(seeds, &solved), 2u);  // flows 0 and 1 only
  EXPECT_DOUBLE_EQ(s.rate(f2), 0.5);
  EXPECT_DOUBLE_EQ(s.rate(f3), 0.5);
  // Slots are reused after removal.
  s.remove_flow(f3);
  const std::uint32_t p4[] = {2};
  EXPECT_EQ(s.add_flow(p4, 1), f3);
}

}  // namespace
