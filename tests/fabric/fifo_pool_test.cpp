// FifoPool (models/core/fifo_pool.hpp) against one std::deque per FIFO as the reference: random
// pushes, pops and walks over 40 FIFOs sharing a pool, in phases of growth and drain, give the
// same fronts, backs, sizes and walk order through block boundaries and reuse. Memory bounds:
// blocks in use never exceed elements / block + 2 per non-empty FIFO (a FIFO holds at most one
// partly used block at each end), the pool never exceeds the peak of that bound since it was
// last empty (rounded up to one allocation), and a pool whose FIFOs are all empty keeps one
// allocation and no block in use.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "engine/rng.hpp"
#include "models/core/fifo_pool.hpp"

namespace fabricsim::models {
namespace {

// A 24-byte element (not a power of two) so that a copy of the wrong element shows.
struct Elem {
  std::uint64_t a = 0;
  std::uint32_t b = 0;
  std::uint32_t c = 0;
  std::uint64_t d = 0;
  bool operator==(const Elem&) const = default;
};

template <unsigned BlockLog2>
void RandomOperations(std::uint64_t seed) {
  using Pool = FifoPool<Elem, BlockLog2>;
  constexpr std::size_t kFifos = 40;
  Pool pool;
  std::vector<typename Pool::Fifo> f(kFifos);
  std::vector<std::deque<Elem>> ref(kFifos);
  engine::CounterRng rng(seed, 7);
  std::size_t bound_peak = 0, pool_peak = 0;
  for (int step = 0; step < 200000; ++step) {
    const bool grow_phase = (step / 20000) % 2 == 0;
    // Skewed: a few FIFOs get most of the traffic, as a NIC's busy queue pairs.
    const std::size_t q = rng.next_below(4) == 0 ? rng.next_below(kFifos) : rng.next_below(5);
    const std::uint64_t op = rng.next_below(100);
    if (op < (grow_phase ? 58u : 33u)) {
      const Elem e{rng.next_u64(), static_cast<std::uint32_t>(step), static_cast<std::uint32_t>(q), rng.next_u64()};
      pool.push(f[q], e);
      ref[q].push_back(e);
      ASSERT_EQ(pool.back(f[q]), e);
    } else if (op < 98u) {
      if (!ref[q].empty()) {
        ASSERT_EQ(pool.front(f[q]), ref[q].front());
        pool.pop(f[q]);
        ref[q].pop_front();
      }
    } else if (!ref[q].empty()) {
      // Walk the whole FIFO (as the NIC finds the part holding a PSN).
      typename Pool::Pos p = pool.begin(f[q]);
      for (std::size_t i = 0; i < ref[q].size(); ++i) {
        ASSERT_EQ(pool.at(p), ref[q][i]) << "element " << i;
        if (i + 1 < ref[q].size()) pool.next(p);
      }
    }
    ASSERT_EQ(f[q].size(), ref[q].size());
    ASSERT_EQ(f[q].empty(), ref[q].empty());
    std::size_t total = 0, nonempty = 0;
    for (const auto& d : ref) {
      total += d.size();
      nonempty += d.empty() ? 0 : 1;
    }
    const std::size_t bound = total / Pool::kBlock + 2 * nonempty;
    ASSERT_LE(pool.blocks_in_use(), bound);
    ASSERT_GE(pool.blocks_in_use() * Pool::kBlock, total);
    if (total == 0) {
      ASSERT_EQ(pool.blocks_in_use(), 0u);
      ASSERT_LE(pool.pool_blocks(), Pool::kChunkBlocks);  // all but one allocation given back
      bound_peak = 0;
    }
    bound_peak = std::max(bound_peak, bound);
    ASSERT_LE(pool.pool_blocks(), (std::max<std::size_t>(bound_peak, 1) + Pool::kChunkBlocks - 1) / Pool::kChunkBlocks * Pool::kChunkBlocks);
    pool_peak = std::max(pool_peak, pool.pool_blocks());
  }
  EXPECT_GT(pool_peak, 4 * Pool::kChunkBlocks);  // the FIFOs really spanned many allocations
  for (std::size_t q = 0; q < kFifos; ++q) {
    while (!ref[q].empty()) {
      ASSERT_EQ(pool.front(f[q]), ref[q].front());
      pool.pop(f[q]);
      ref[q].pop_front();
    }
    EXPECT_TRUE(f[q].empty());
  }
  EXPECT_EQ(pool.blocks_in_use(), 0u);
  EXPECT_EQ(pool.pool_blocks(), Pool::kChunkBlocks);
  EXPECT_LE(pool.bytes(), sizeof(Elem) * Pool::kBlock * Pool::kChunkBlocks + 4 * Pool::kChunkBlocks + sizeof(void*));
}

TEST(FifoPool, MatchesDequesOnRandomOperationsBlocksOf1) { RandomOperations<0>(31); }
TEST(FifoPool, MatchesDequesOnRandomOperationsBlocksOf4) { RandomOperations<2>(32); }
TEST(FifoPool, MatchesDequesOnRandomOperationsBlocksOf16) { RandomOperations<4>(33); }

TEST(FifoPool, SteadyFifoReusesItsBlocks) {
  FifoPool<std::uint64_t, 2> pool;  // blocks of 4
  FifoPool<std::uint64_t, 2>::Fifo a, idle;
  // A FIFO that always holds 3 elements walks through many blocks; it needs at most 2 at once.
  for (std::uint64_t i = 0; i < 3; ++i) pool.push(a, i);
  for (std::uint64_t i = 3; i < 1000; ++i) {
    pool.push(a, i);
    ASSERT_EQ(pool.front(a), i - 3);
    ASSERT_EQ(pool.back(a), i);
    pool.pop(a);
    ASSERT_LE(pool.blocks_in_use(), 2u);
  }
  EXPECT_EQ(a.size(), 3u);
  EXPECT_TRUE(idle.empty());
  EXPECT_EQ(pool.pool_blocks(), 16u);  // one allocation, reused throughout
  static_assert(sizeof(FifoPool<std::uint64_t, 2>::Fifo) == 16);
}

TEST(FifoPool, DrainedPoolGivesBackAllButOneAllocation) {
  FifoPool<std::uint32_t, 0> pool;  // one element per block
  std::vector<FifoPool<std::uint32_t, 0>::Fifo> f(10);
  for (std::uint32_t i = 0; i < 1000; ++i) pool.push(f[i % 10], i);
  EXPECT_EQ(pool.blocks_in_use(), 1000u);
  EXPECT_EQ(pool.pool_blocks(), 1008u);  // 63 allocations of 16
  for (std::uint32_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(pool.front(f[i % 10]), i);
    pool.pop(f[i % 10]);
  }
  EXPECT_EQ(pool.blocks_in_use(), 0u);
  EXPECT_EQ(pool.pool_blocks(), 16u);
  // Refilled from the kept allocation, then grown again as needed.
  for (std::uint32_t i = 0; i < 40; ++i) pool.push(f[0], i);
  EXPECT_EQ(pool.pool_blocks(), 48u);
  for (std::uint32_t i = 0; i < 40; ++i) {
    ASSERT_EQ(pool.front(f[0]), i);
    pool.pop(f[0]);
  }
  EXPECT_EQ(pool.pool_blocks(), 16u);
}

}  // namespace
}  // namespace fabricsim::models
