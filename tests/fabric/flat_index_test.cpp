// FlatIndex (models/core/flat_index.hpp) against std::map as the reference: the same random sequence
// of inserts (new and repeated keys) and lookups (present and absent keys) gives the same
// answers.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>

#include "engine/rng.hpp"
#include "models/core/flat_index.hpp"

namespace fabricsim::models {
namespace {

TEST(FlatIndex, MatchesMapOnRandomOperations) {
  FlatIndex f;
  std::map<std::uint64_t, std::uint32_t> ref;
  engine::CounterRng rng(11, 3);
  for (int step = 0; step < 20000; ++step) {
    // Keys shaped like the NIC's: (peer << 32 | channel << 16 | qp), from a small range so that
    // repeats and misses both happen often.
    const std::uint64_t key = rng.next_below(300) << 32 | rng.next_below(4) << 16 | rng.next_below(3);
    if (rng.next_below(2) == 0) {
      const auto v = static_cast<std::uint32_t>(rng.next_u64());
      const bool fresh = ref.find(key) == ref.end();
      ASSERT_EQ(f.insert(key, v), fresh);
      if (fresh) ref[key] = v;
    } else {
      const auto it = ref.find(key);
      ASSERT_EQ(f.find(key), it == ref.end() ? -1 : static_cast<std::int64_t>(it->second));
    }
    ASSERT_EQ(f.size(), ref.size());
  }
  for (const auto& [k, v] : ref) EXPECT_EQ(f.find(k), static_cast<std::int64_t>(v));
  EXPECT_EQ(f.find(~std::uint64_t{0}), -1);
}

}  // namespace
}  // namespace fabricsim::models
