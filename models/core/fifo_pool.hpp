#pragma once
/// @file fifo_pool.hpp
/// Any number of FIFOs whose elements live in small blocks from one pool, each FIFO a 16-byte
/// handle kept by its owner (a NIC's queue pair records; the pool is the NIC's).
///
/// Why (memory per simulated GPU): a SmallFifo per queue pair doubles and never
/// shrinks, so a NIC held the sum over its queue pairs of each one's historical peak, rounded up
/// to a power of two. 256 GPUs x 64 MiB NVLSTree AllReduce: the receive descriptors of ~175
/// receive QPs per GPU held 78,269 slots (3.76 MB) while at most 32,810 were announced at once
/// (summed over the NICs' own peaks), and the send QPs' parts 310,272 slots for 262,144. Here a
/// FIFO holds at most one partly used block at each end, a drained block goes back to the pool
/// at once, and the pool is the NIC's peak of blocks in use at once (rounded up to kChunkBlocks);
/// a pool whose FIFOs are all empty gives back all but one allocation.
/// Unlike BlockFifos (a fixed set of queues owned by the container), FIFOs here are created by
/// their owners at any time (a new queue pair) and cost nothing in the pool while empty.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "engine/state_io.hpp"

namespace fabricsim::models {

/// Pool of blocks of 2^BlockLog2 trivially copyable T shared by FIFOs whose handles (Fifo) the
/// caller keeps. A handle must only be used with the pool that filled it. Not thread-safe: one
/// pool per LP. References to elements stay valid until that element is popped.
template <class T, unsigned BlockLog2>
class FifoPool {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  /// Block index of no block (an empty FIFO's head and tail).
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};
  /// Elements per block.
  static constexpr std::uint32_t kBlock = std::uint32_t{1} << BlockLog2;
  /// Blocks per allocation (a pool holds a multiple of this many blocks, at least one
  /// allocation's worth once used).
  static constexpr std::uint32_t kChunkBlocks = 16;

  /// One FIFO: 16 bytes, no heap memory of its own. Default-constructed = empty.
  struct Fifo {
    std::uint32_t head = kNone;  ///< block holding the oldest element
    std::uint32_t tail = kNone;  ///< block holding the newest element
    std::uint32_t off = 0;       ///< index of the oldest element in its block (< kBlock)
    std::uint32_t n = 0;         ///< elements queued
    bool empty() const { return n == 0; }
    std::size_t size() const { return n; }
  };

  /// Position of an element while walking a FIFO from the front (begin, next, at).
  struct Pos {
    std::uint32_t block = kNone;
    std::uint32_t off = 0;
  };

  FifoPool() = default;
  FifoPool(FifoPool&&) noexcept = default;
  FifoPool& operator=(FifoPool&&) noexcept = default;
  FifoPool(const FifoPool&) = delete;  // handles index blocks: a copy would be ambiguous
  FifoPool& operator=(const FifoPool&) = delete;

  /// Appends `v` to `f`.
  /// @throws std::length_error when the pool would pass 2^32 - 1 blocks.
  void push(Fifo& f, const T& v) {
    const std::uint32_t pos = f.off + f.n;
    if (f.n == 0) {
      f.head = f.tail = new_block();
      f.off = 0;
    } else if ((pos & kMask) == 0) {
      const std::uint32_t b = new_block();
      link(f.tail) = b;
      f.tail = b;
    }
    data(f.tail)[(f.off + f.n) & kMask] = v;
    ++f.n;
  }

  /// The oldest element of a non-empty FIFO.
  T& front(const Fifo& f) { return data(f.head)[f.off]; }
  const T& front(const Fifo& f) const { return data(f.head)[f.off]; }
  /// The newest element of a non-empty FIFO.
  T& back(const Fifo& f) { return data(f.tail)[(f.off + f.n - 1) & kMask]; }

  /// Removes the oldest element of a non-empty FIFO; a drained block returns to the pool, and
  /// once every FIFO of the pool is empty, all allocations but the first are freed.
  void pop(Fifo& f) {
    --f.n;
    if (f.n == 0) {
      free_block(f.head);
      f = Fifo{};
      if (in_use_ == 0) shrink();
    } else if (++f.off == kBlock) {
      const std::uint32_t b = link(f.head);
      free_block(f.head);
      f.head = b;
      f.off = 0;
    }
  }

  /// Walk from the front: begin(f) is the oldest element, next() moves one element towards the
  /// back (at most size() - 1 times), at() is the element there.
  Pos begin(const Fifo& f) const { return Pos{f.head, f.off}; }
  void next(Pos& p) const {
    if (++p.off == kBlock) {
      p.block = link(p.block);
      p.off = 0;
    }
  }
  T& at(Pos p) { return data(p.block)[p.off]; }
  const T& at(Pos p) const { return data(p.block)[p.off]; }

  /// Blocks allocated: the peak of blocks in use at once since the pool was last empty, rounded
  /// up to kChunkBlocks (one allocation stays while the pool is empty).
  std::size_t pool_blocks() const { return chunks_.size() * kChunkBlocks; }
  /// Blocks in use now (holding at least one element).
  std::size_t blocks_in_use() const { return in_use_; }
  /// Checkpoints (docs/checkpoint.md): writes the pool byte for byte (blocks, links, free chain),
  /// so that load() reproduces every Fifo handle's blocks and the order blocks are handed out.
  void save(engine::StateWriter& w) const {
    w.put<std::uint64_t>(chunks_.size());
    for (const auto& c : chunks_) w.put(*c);
    w.put(free_);
    w.put(made_);
    w.put<std::uint64_t>(in_use_);
  }
  /// Restores what save() wrote. @throws engine::InputError on bytes that do not fit.
  void load(engine::StateReader& r) {
    const auto n = r.get<std::uint64_t>();
    if (n > r.remaining() / sizeof(Chunk)) r.fail();
    chunks_.clear();
    for (std::uint64_t i = 0; i < n; ++i) {
      chunks_.push_back(std::make_unique_for_overwrite<Chunk>());
      r.get_bytes(chunks_.back().get(), sizeof(Chunk));
    }
    free_ = r.get<std::uint32_t>();
    made_ = r.get<std::uint32_t>();
    in_use_ = static_cast<std::size_t>(r.get<std::uint64_t>());
  }
  /// Heap bytes held (blocks with their links, and the table of allocations).
  std::size_t bytes() const { return chunks_.size() * sizeof(Chunk) + chunks_.capacity() * sizeof(chunks_[0]); }

 private:
  static constexpr std::uint32_t kMask = kBlock - 1;
  static constexpr unsigned kChunkLog2 = 4;
  static_assert(kChunkBlocks == std::uint32_t{1} << kChunkLog2);
  struct Block {
    T v[kBlock];
  };
  // One allocation: kChunkBlocks blocks and each one's link (the next block of its FIFO, or of
  // the free chain).
  struct Chunk {
    Block b[kChunkBlocks];
    std::uint32_t next[kChunkBlocks];
  };

  T* data(std::uint32_t b) { return chunks_[b >> kChunkLog2]->b[b & (kChunkBlocks - 1)].v; }
  const T* data(std::uint32_t b) const { return chunks_[b >> kChunkLog2]->b[b & (kChunkBlocks - 1)].v; }
  std::uint32_t& link(std::uint32_t b) { return chunks_[b >> kChunkLog2]->next[b & (kChunkBlocks - 1)]; }
  std::uint32_t link(std::uint32_t b) const { return chunks_[b >> kChunkLog2]->next[b & (kChunkBlocks - 1)]; }

  std::uint32_t new_block() {
    if (free_ != kNone) {
      const std::uint32_t b = free_;
      free_ = link(b);
      ++in_use_;
      return b;
    }
    if (made_ == kNone) throw std::length_error("FifoPool: more than 2^32 - 1 blocks");
    if ((made_ >> kChunkLog2) == chunks_.size()) chunks_.push_back(std::make_unique_for_overwrite<Chunk>());
    ++in_use_;
    return made_++;
  }
  void free_block(std::uint32_t b) {
    --in_use_;
    link(b) = free_;
    free_ = b;
  }
  // Every FIFO is empty: keep the first allocation (its blocks are handed out again in order),
  // free the others.
  void shrink() {
    if (chunks_.size() > 1) {
      chunks_.resize(1);
      chunks_.shrink_to_fit();
    }
    free_ = kNone;
    made_ = 0;
  }

  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::uint32_t free_ = kNone;  // free chain (last freed first)
  std::uint32_t made_ = 0;      // blocks handed out at least once since the pool was last empty
  std::size_t in_use_ = 0;
};

}  // namespace fabricsim::models
