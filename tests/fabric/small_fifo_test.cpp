// SmallFifo (models/core/small_fifo.hpp) against std::deque as the reference: the same random
// sequence of push_back / pop_front / resize / indexed writes gives the same contents, through
// wrap-around and growth; an empty FIFO holds no buffer and copies are deep.
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>

#include "engine/rng.hpp"
#include "models/core/small_fifo.hpp"

namespace fabricsim::models {
namespace {

TEST(SmallFifo, MatchesDequeOnRandomOperations) {
  SmallFifo<std::uint64_t> f;
  std::deque<std::uint64_t> ref;
  engine::CounterRng rng(5, 9);
  for (int step = 0; step < 200000; ++step) {
    const std::uint64_t r = rng.next_below(100);
    if (r < 45) {
      const std::uint64_t v = rng.next_u64();
      f.push_back(v);
      ref.push_back(v);
    } else if (r < 90) {
      if (!ref.empty()) {
        ASSERT_EQ(f.front(), ref.front());
        f.pop_front();
        ref.pop_front();
      }
    } else if (r < 95) {
      const std::size_t n = ref.size() + rng.next_below(9);
      f.resize(n, 77);
      ref.resize(n, 77);
    } else if (!ref.empty()) {
      const std::size_t i = rng.next_below(ref.size());
      f[i] = step;
      ref[i] = static_cast<std::uint64_t>(step);
    }
    ASSERT_EQ(f.size(), ref.size());
    ASSERT_EQ(f.empty(), ref.empty());
  }
  for (std::size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(f[i], ref[i]);
  const SmallFifo<std::uint64_t> copy = f;
  f.push_back(1);
  ASSERT_EQ(copy.size(), ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(copy[i], ref[i]);
}

TEST(SmallFifo, EmptyCostsOnlyItsHeader) {
  EXPECT_LE(sizeof(SmallFifo<std::uint64_t>), 24u);  // std::deque: 80 B + ~600 B allocated
}

}  // namespace
}  // namespace fabricsim::models
