// PacketStore (models/packet/packet_store.hpp) against a reference map of live packets: a random
// sequence of puts (1..8 references, as a multicast's copies) and releases returns every live
// packet unchanged (with or without INT hops), frees a slot only with its last reference,
// reuses freed slots (capacity is
// the peak of packets held at once, rounded up to a chunk) and never hands out a live
// reference twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "engine/rng.hpp"
#include "models/packet/packet_store.hpp"

namespace fabricsim::models {
namespace {

WirePacket make_packet(engine::CounterRng& rng) {
  WirePacket p;
  p.src = static_cast<std::uint32_t>(rng.next_u64());
  p.dst = static_cast<std::uint32_t>(rng.next_u64());
  p.psn = static_cast<std::uint32_t>(rng.next_u64());
  p.bytes = static_cast<std::uint32_t>(rng.next_below(4097));
  p.nint = static_cast<std::uint16_t>(rng.next_below(kMaxIntHops + 1));
  // Half the packets carry INT hops (a side-slab entry), half none (NVLink, no HPCC).
  if (rng.next_below(2) == 0) {
    for (std::uint32_t i = 0; i < p.nint; ++i) p.hops[i].bits = rng.next_u64();
  }
  return p;
}

bool same(const WirePacket& a, const WirePacket& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(PacketStore, MatchesReferenceOnRandomOperations) {
  PacketStore s;
  struct Live {
    WirePacket p;
    std::uint32_t refs;
  };
  std::map<PacketStore::Ref, Live> ref;  // live packets by reference
  std::vector<PacketStore::Ref> handles;  // one entry per outstanding reference
  std::size_t peak = 0;
  engine::CounterRng rng(11, 3);
  for (int step = 0; step < 300000; ++step) {
    // Phases of growth and drain, so slots are freed and reused many times over.
    const bool grow_phase = (step / 20000) % 2 == 0;
    const std::uint64_t r = rng.next_below(100);
    if (handles.empty() || r < (grow_phase ? 40u : 15u)) {
      const WirePacket p = make_packet(rng);
      const auto n = static_cast<std::uint32_t>(1 + rng.next_below(8));
      const PacketStore::Ref h = s.put(p, n);
      ASSERT_LE(h, PacketStore::kMaxRef);
      ASSERT_EQ(ref.count(h), 0u) << "a live reference was handed out again";
      ref[h] = Live{p, n};
      for (std::uint32_t i = 0; i < n; ++i) handles.push_back(h);
    } else {
      const std::size_t i = rng.next_below(handles.size());
      const PacketStore::Ref h = handles[i];
      handles[i] = handles.back();
      handles.pop_back();
      auto it = ref.find(h);
      ASSERT_NE(it, ref.end());
      ASSERT_TRUE(same(s.get(h), it->second.p));
      s.release(h);
      if (--it->second.refs == 0) ref.erase(it);
    }
    peak = std::max(peak, ref.size());
    ASSERT_EQ(s.in_use(), ref.size());
  }
  for (const auto& [h, live] : ref) ASSERT_TRUE(same(s.get(h), live.p));
  // Freed slots are reused: the slab is the peak held at once, rounded up to whole chunks.
  EXPECT_GE(s.capacity(), peak);
  EXPECT_LT(s.capacity(), peak + PacketStore::kChunkSlots);
  EXPECT_GT(peak, 1000u);  // the sequence really grew and drained
  EXPECT_LE(s.hops_in_use(), ref.size());
}

TEST(PacketStore, FreedSlotIsReusedFirst) {
  PacketStore s;
  WirePacket a, b;
  a.psn = 1;
  b.psn = 2;
  const PacketStore::Ref ra = s.put(a, 2);
  const PacketStore::Ref rb = s.put(b, 1);
  EXPECT_NE(ra, rb);
  s.release(ra);
  EXPECT_EQ(s.in_use(), 2u);  // one reference of a left
  s.release(ra);
  EXPECT_EQ(s.in_use(), 1u);
  const PacketStore::Ref rc = s.put(b, 1);
  EXPECT_EQ(rc, ra);  // last freed, first reused
  EXPECT_EQ(s.get(rc).psn, 2u);
  EXPECT_EQ(s.get(rb).psn, 2u);
  EXPECT_EQ(s.capacity(), std::size_t{PacketStore::kChunkSlots});
}

}  // namespace
}  // namespace fabricsim::models
