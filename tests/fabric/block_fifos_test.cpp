// BlockFifos (models/core/block_fifos.hpp) against one std::deque per FIFO as the reference: a random
// sequence of pushes and pops over 12 FIFOs, in phases of growth and drain, gives the same
// fronts and sizes through block boundaries and reuse; drained blocks return to the pool, so
// blocks in use never exceed elements / 16 + 2 per non-empty FIFO, the pool never exceeds the
// peak of that bound (rounded up to one allocation of blocks), and an emptied set holds no
// block in use.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "engine/rng.hpp"
#include "models/core/block_fifos.hpp"

namespace fabricsim::models {
namespace {

TEST(BlockFifos, MatchesDequesOnRandomOperations) {
  constexpr std::size_t kQueues = 12;
  BlockFifos<std::uint32_t> f(kQueues);
  std::vector<std::deque<std::uint32_t>> ref(kQueues);
  engine::CounterRng rng(21, 4);
  std::size_t bound_peak = 0;
  for (int step = 0; step < 400000; ++step) {
    const bool grow_phase = (step / 25000) % 2 == 0;
    // Skewed: a few FIFOs get most of the traffic, as a switch's busy ports.
    const std::size_t q = rng.next_below(4) == 0 ? rng.next_below(kQueues) : rng.next_below(3);
    if (rng.next_below(100) < (grow_phase ? 60u : 35u)) {
      const auto v = static_cast<std::uint32_t>(rng.next_u64());
      f.push(q, v);
      ref[q].push_back(v);
    } else if (!ref[q].empty()) {
      ASSERT_EQ(f.front(q), ref[q].front());
      f.pop(q);
      ref[q].pop_front();
    }
    ASSERT_EQ(f.size(q), ref[q].size());
    ASSERT_EQ(f.empty(q), ref[q].empty());
    std::size_t total = 0, nonempty = 0;
    for (const auto& d : ref) {
      total += d.size();
      nonempty += d.empty() ? 0 : 1;
    }
    const std::size_t bound = total / BlockFifos<std::uint32_t>::kBlock + 2 * nonempty;
    ASSERT_LE(f.blocks_in_use(), bound);
    bound_peak = std::max(bound_peak, bound);
  }
  constexpr std::size_t kChunk = BlockFifos<std::uint32_t>::kChunkBlocks;
  EXPECT_LE(f.pool_blocks(), (bound_peak + kChunk - 1) / kChunk * kChunk);
  EXPECT_GT(bound_peak, 100u);  // the FIFOs really spanned many blocks
  for (std::size_t q = 0; q < kQueues; ++q) {
    while (!ref[q].empty()) {
      ASSERT_EQ(f.front(q), ref[q].front());
      f.pop(q);
      ref[q].pop_front();
    }
    EXPECT_TRUE(f.empty(q));
  }
  EXPECT_EQ(f.blocks_in_use(), 0u);
}

TEST(BlockFifos, WrapsAcrossBlocksAndReusesThem) {
  BlockFifos<std::uint64_t, 2> f(2);  // blocks of 4
  // A FIFO that always holds 3 elements walks through many blocks; it needs at most 2 at once.
  for (std::uint64_t i = 0; i < 3; ++i) f.push(0, i);
  for (std::uint64_t i = 3; i < 1000; ++i) {
    f.push(0, i);
    ASSERT_EQ(f.front(0), i - 3);
    f.pop(0);
    ASSERT_LE(f.blocks_in_use(), 2u);
  }
  EXPECT_EQ(f.size(0), 3u);
  EXPECT_TRUE(f.empty(1));
  EXPECT_EQ(f.pool_blocks(), BlockFifos<std::uint64_t>::kChunkBlocks);  // one allocation, reused throughout
}

}  // namespace
}  // namespace fabricsim::models
