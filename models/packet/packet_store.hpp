#pragma once
/// @file packet_store.hpp
/// Per-switch slab of queued packets with reference counts, so that a switch's egress queues
/// hold 4-byte references and an NVLS multicast packet is stored once for all its copies.
///
/// Why (memory per simulated GPU): each (port, class) queue used to be a ring of whole
/// 64-byte WirePackets that doubled and never shrank, so a switch held the sum of its ports'
/// historical peaks, and an NVLS multicast (multimem.st, copied to all 8 GPU ports of an
/// NVSwitch) held 8 copies of one packet. At 256 GPUs (64 MiB AllReduce, NVLSTree) the rings
/// held 215 K packet slots (13.8 MB, 54 KB per GPU) while at most 68 K packets were ever queued
/// at once in all switches together. With the store, a switch's memory follows the packets it
/// holds at once (one slot per multicast, whatever its fan-out), plus 4 bytes per queued copy.
///
/// A slot is 32 bytes: the packet's first 24 bytes (all but the INT hops) and the index of its
/// hops in a side slab, used only when a hop is not zero (HPCC telemetry on Ethernet switches;
/// NVLink packets and packets without HPCC carry none once past the NVSwitch's NVLS step).
#include <cstddef>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "engine/state_io.hpp"
#include "models/core/packet.hpp"

namespace fabricsim::models {

/// Slab of WirePackets in chunks of kChunk 32-byte slots, each slot with a reference count.
/// Slots are reused last-freed first; the slab grows by one chunk (1 KiB) when every slot is in
/// use and never shrinks (its size is the switch's peak of packets held at once, rounded up to
/// a chunk). Packets with INT hops also take a 40-byte entry of a side slab (same policy, grown
/// by doubling). get() returns the packet byte for byte as it was put. Not thread-safe: one per
/// switch LP.
class PacketStore {
 public:
  /// A reference to a stored packet (a slot index); at most kMaxRef.
  using Ref = std::uint32_t;
  /// Largest reference: the top bit stays free for the caller (SwitchLp marks multicast copies).
  static constexpr Ref kMaxRef = (Ref{1} << 31) - 1;
  /// Slots per allocation (32: 1 KiB; ~260 switches at 1,024 GPUs, most of them holding few
  /// packets at once).
  static constexpr std::uint32_t kChunkSlots = 32;
  /// Largest reference count of one packet (a multicast to at most 255 ports).
  static constexpr std::uint32_t kMaxRefs = 255;

  /// Stores `p` with `refs` references (1 <= refs <= kMaxRefs; not checked on this hot path:
  /// SwitchLp's multicast mask has at most 64 bits) and returns its reference.
  /// @throws std::length_error when more than kMaxRef + 1 packets would be held at once.
  Ref put(const WirePacket& p, std::uint32_t refs) {
    Ref r;
    if (!free_.empty()) {
      r = free_.back();
      free_.pop_back();
    } else {
      if (next_ > kMaxRef) throw std::length_error("PacketStore: more than 2^31 packets queued");
      if ((next_ >> kChunkLog2) == chunks_.size()) chunks_.push_back(std::make_unique<Slot[]>(kChunk));
      r = next_++;
    }
    Slot& s = slot(r);
    std::memcpy(s.head, &p, kHeadBytes);
    std::uint64_t any = 0;
    for (const IntHop& h : p.hops) any |= h.bits;
    s.hops = kNoHops;
    if (any != 0) {
      if (!hops_free_.empty()) {
        s.hops = hops_free_.back();
        hops_free_.pop_back();
      } else {
        s.hops = static_cast<std::uint32_t>(hops_.size());
        hops_.emplace_back();
      }
      std::memcpy(hops_[s.hops].data(), p.hops, sizeof p.hops);
    }
    s.refs = static_cast<std::uint8_t>(refs);
    return r;
  }

  /// The packet behind a live reference (a copy, byte for byte as it was put).
  WirePacket get(Ref r) const {
    const Slot& s = slot(r);
    WirePacket p;
    // WirePacket is trivially copyable (its default member initializers only make it
    // non-trivial to construct), so its bytes may be written directly.
    auto* bytes = static_cast<void*>(&p);
    std::memcpy(bytes, s.head, kHeadBytes);
    if (s.hops == kNoHops) {
      std::memset(static_cast<std::byte*>(bytes) + kHeadBytes, 0, sizeof p.hops);
    } else {
      std::memcpy(static_cast<std::byte*>(bytes) + kHeadBytes, hops_[s.hops].data(), sizeof p.hops);
    }
    return p;
  }

  /// Drops one reference of a live packet; its slot is free for reuse once none is left.
  void release(Ref r) {
    Slot& s = slot(r);
    if (--s.refs != 0) return;
    if (s.hops != kNoHops) hops_free_.push_back(s.hops);
    free_.push_back(r);
  }

  /// Packets held now (slots with references left).
  std::size_t in_use() const { return next_ - free_.size(); }
  /// Packet slots allocated (the high-water mark of in_use(), rounded up to whole chunks).
  std::size_t capacity() const { return chunks_.size() * kChunk; }
  /// Packets with INT hops held now.
  std::size_t hops_in_use() const { return hops_.size() - hops_free_.size(); }
  /// Checkpoints (docs/checkpoint.md): writes the slots, hop entries and free lists byte for
  /// byte, so that load() restores every live reference and the order slots are reused.
  void save(engine::StateWriter& w) const {
    w.put<std::uint64_t>(chunks_.size());
    for (const auto& c : chunks_) w.put_bytes(c.get(), sizeof(Slot) * kChunk);
    w.put_vector(free_);
    w.put(next_);
    w.put_vector(hops_);
    w.put_vector(hops_free_);
  }
  /// Restores what save() wrote. @throws engine::InputError on bytes that do not fit.
  void load(engine::StateReader& r) {
    const auto n = r.get<std::uint64_t>();
    if (n > r.remaining() / (sizeof(Slot) * kChunk)) r.fail();
    chunks_.clear();
    for (std::uint64_t i = 0; i < n; ++i) {
      chunks_.push_back(std::make_unique<Slot[]>(kChunk));
      r.get_bytes(chunks_.back().get(), sizeof(Slot) * kChunk);
    }
    free_ = r.get_vector<Ref>();
    next_ = r.get<Ref>();
    hops_ = r.get_vector<std::array<std::uint64_t, kMaxIntHops>>();
    hops_free_ = r.get_vector<std::uint32_t>();
  }
  /// Heap bytes held by the store (slots, hop entries and the free lists' buffers).
  std::size_t bytes() const {
    return capacity() * sizeof(Slot) + hops_.capacity() * sizeof(hops_[0]) +
           (free_.capacity() + hops_free_.capacity()) * sizeof(Ref) + chunks_.capacity() * sizeof(chunks_[0]);
  }

 private:
  // Bytes of a WirePacket before its INT hops.
  static constexpr std::size_t kHeadBytes = offsetof(WirePacket, hops);
  static_assert(kHeadBytes == 24 && sizeof(WirePacket) == kHeadBytes + sizeof(IntHop) * kMaxIntHops);
  static_assert(std::is_trivially_copyable_v<WirePacket>);
  static constexpr std::uint32_t kNoHops = ~std::uint32_t{0};
  struct Slot {
    std::byte head[kHeadBytes];  // the packet's bytes before its hops
    std::uint32_t hops;          // index in hops_, or kNoHops (all hops zero)
    std::uint8_t refs;           // references left (0: free)
  };
  static_assert(sizeof(Slot) == 32);
  static constexpr unsigned kChunkLog2 = 5;
  static constexpr Ref kChunk = Ref{1} << kChunkLog2;
  static_assert(kChunk == kChunkSlots);
  Slot& slot(Ref r) { return chunks_[r >> kChunkLog2][r & (kChunk - 1)]; }
  const Slot& slot(Ref r) const { return chunks_[r >> kChunkLog2][r & (kChunk - 1)]; }

  std::vector<std::unique_ptr<Slot[]>> chunks_;
  std::vector<Ref> free_;  // free slots below next_, last freed on top
  Ref next_ = 0;           // slots [0, next_) have been handed out at least once
  std::vector<std::array<std::uint64_t, kMaxIntHops>> hops_;  // INT hops of stored packets
  std::vector<std::uint32_t> hops_free_;                      // free entries of hops_
};

}  // namespace fabricsim::models
