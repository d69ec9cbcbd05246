#pragma once
/// @file packet_store.hpp
/// Per-switch slab of queued packets with reference counts, so that a switch's egress queues
/// hold 4-byte references and an NVLS multicast packet is stored once for all its copies.
///
/// Why (issue 7, memory per simulated GPU): each (port, class) queue used to be a ring of whole
/// 64-byte WirePackets that doubled and never shrank, so a switch held the sum of its ports'
/// historical peaks, and an NVLS multicast (multimem.st, copied to all 8 GPU ports of an
/// NVSwitch) held 8 copies of one packet. At 256 GPUs (64 MiB AllReduce, NVLSTree) the rings
/// held 215 K packet slots (13.8 MB, 54 KB per GPU) while at most 68 K packets were ever queued
/// at once in all switches together. With the store, a switch's memory follows the packets it
/// holds at once (one slot per multicast, whatever its fan-out), plus 4 bytes per queued copy.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "models/packet.hpp"

namespace fabricsim::models {

/// Slab of WirePackets in chunks of kChunk slots, each slot with a reference count. Slots are
/// reused last-freed first; the slab grows by one chunk (4 KiB) when every slot is in use and
/// never shrinks (its size is the switch's peak of packets held at once, rounded up to a chunk).
/// Not thread-safe: one per switch LP.
class PacketStore {
 public:
  /// A reference to a stored packet (a slot index); at most kMaxRef.
  using Ref = std::uint32_t;
  /// Largest reference: the top bit stays free for the caller (SwitchLp marks multicast copies).
  static constexpr Ref kMaxRef = (Ref{1} << 31) - 1;
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
      if ((next_ >> kChunkLog2) == chunks_.size()) {
        chunks_.push_back(std::make_unique<WirePacket[]>(kChunk));
        refs_.resize(refs_.size() + kChunk, 0);
      }
      r = next_++;
    }
    slot(r) = p;
    refs_[r] = static_cast<std::uint8_t>(refs);
    return r;
  }

  /// The packet behind a live reference.
  const WirePacket& get(Ref r) const { return chunks_[r >> kChunkLog2][r & (kChunk - 1)]; }

  /// Drops one reference of a live packet; its slot is free for reuse once none is left.
  void release(Ref r) {
    if (--refs_[r] == 0) free_.push_back(r);
  }

  /// Packets held now (slots with references left).
  std::size_t in_use() const { return next_ - free_.size(); }
  /// Packet slots allocated (the high-water mark of in_use(), rounded up to whole chunks).
  std::size_t capacity() const { return chunks_.size() * kChunk; }
  /// Heap bytes held by the store (slots, reference counts and the free list's buffer).
  std::size_t bytes() const {
    return capacity() * (sizeof(WirePacket) + 1) + free_.capacity() * sizeof(Ref) +
           chunks_.capacity() * sizeof(chunks_[0]);
  }

 private:
  static constexpr unsigned kChunkLog2 = 6;
  static constexpr Ref kChunk = Ref{1} << kChunkLog2;  // 64 packets, 4 KiB
  WirePacket& slot(Ref r) { return chunks_[r >> kChunkLog2][r & (kChunk - 1)]; }

  std::vector<std::unique_ptr<WirePacket[]>> chunks_;
  std::vector<std::uint8_t> refs_;  // per slot: references left (0: free or never used)
  std::vector<Ref> free_;           // free slots below next_, last freed on top
  Ref next_ = 0;                    // slots [0, next_) have been handed out at least once
};

}  // namespace fabricsim::models
