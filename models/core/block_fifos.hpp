#pragma once
/// @file block_fifos.hpp
/// A fixed set of FIFOs (a switch's per-port, per-class egress queues) whose elements live in
/// small blocks from one pool shared by all of them.
///
/// Why (memory per simulated GPU): a FIFO per queue that doubles and never shrinks
/// holds the sum of every queue's historical peak; queues of one switch rarely all peak at once
/// (an NVSwitch's GPU ports fill in turn with the NVLS phases). Here a queue holds at most one
/// partly used block at each end, a block goes back to the pool as soon as it is drained, and
/// the pool is the switch's peak of blocks in use at once (1,024 GPUs x 64 MiB AllReduce: the
/// per-port rings of 4-byte queue entries held 2.55 MB at the heap peak).
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "engine/state_io.hpp"

namespace fabricsim::models {

/// `queues` FIFOs of trivially copyable T sharing a pool of blocks of 2^BlockLog2 elements.
/// Not thread-safe: one per switch LP. References returned by front() stay valid until that
/// element is popped.
template <class T, unsigned BlockLog2 = 4>
class BlockFifos {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  /// Elements per block (16 x 4-byte entries: one 64-byte cache line).
  static constexpr std::uint32_t kBlock = std::uint32_t{1} << BlockLog2;

  explicit BlockFifos(std::size_t queues = 0) : q_(queues) {}

  /// Number of FIFOs.
  std::size_t queues() const { return q_.size(); }
  bool empty(std::size_t q) const { return q_[q].size == 0; }
  std::uint32_t size(std::size_t q) const { return q_[q].size; }

  /// Appends `v` to FIFO q.
  /// @throws std::length_error when the pool would pass 2^32 - 1 blocks.
  void push(std::size_t q, const T& v) {
    Fifo& f = q_[q];
    const std::uint32_t pos = f.head_off + f.size;
    if (f.size == 0) {
      f.head = f.tail = new_block();
      f.head_off = 0;
    } else if ((pos & (kBlock - 1)) == 0) {
      const std::uint32_t b = new_block();
      next_[f.tail] = b;
      f.tail = b;
    }
    block(f.tail)[(f.head_off + f.size) & (kBlock - 1)] = v;
    ++f.size;
  }

  /// The oldest element of a non-empty FIFO q.
  const T& front(std::size_t q) const { return block(q_[q].head)[q_[q].head_off]; }

  /// Removes the oldest element of a non-empty FIFO q; a drained block returns to the pool.
  void pop(std::size_t q) {
    Fifo& f = q_[q];
    --f.size;
    if (f.size == 0) {
      free_block(f.head);
      f.head = f.tail = kNone;
      f.head_off = 0;
    } else if (++f.head_off == kBlock) {
      const std::uint32_t b = next_[f.head];
      free_block(f.head);
      f.head = b;
      f.head_off = 0;
    }
  }

  /// Blocks per allocation (16: 1 KiB of 4-byte entries; a switch with little traffic should not
  /// hold more, at 1,024 GPUs there are ~260 switches).
  static constexpr std::size_t kChunkBlocks = 16;
  /// Blocks allocated: the peak of blocks in use at once, rounded up to kChunkBlocks.
  std::size_t pool_blocks() const { return chunks_.size() << kChunkLog2; }
  /// Blocks in use now.
  std::size_t blocks_in_use() const { return in_use_; }
  /// Checkpoints (docs/checkpoint.md): writes the queues, blocks, links and free chain byte for
  /// byte; load() restores them exactly (same queue count expected).
  void save(engine::StateWriter& w) const {
    w.put_vector(q_);
    w.put<std::uint64_t>(chunks_.size());
    for (const auto& c : chunks_) w.put_bytes(c.get(), sizeof(Block) << kChunkLog2);
    w.put_vector(next_);
    w.put(free_);
    w.put(made_);
    w.put<std::uint64_t>(in_use_);
  }
  /// Restores what save() wrote. @throws engine::InputError on bytes that do not fit.
  void load(engine::StateReader& r) {
    auto q = r.get_vector<Fifo>();
    if (q.size() != q_.size()) r.fail();
    q_ = std::move(q);
    const auto n = r.get<std::uint64_t>();
    if (n > r.remaining() / (sizeof(Block) << kChunkLog2)) r.fail();
    chunks_.clear();
    for (std::uint64_t i = 0; i < n; ++i) {
      chunks_.push_back(std::make_unique_for_overwrite<Block[]>(std::size_t{1} << kChunkLog2));
      r.get_bytes(chunks_.back().get(), sizeof(Block) << kChunkLog2);
    }
    next_ = r.get_vector<std::uint32_t>();
    if (next_.size() != chunks_.size() << kChunkLog2) r.fail();
    free_ = r.get<std::uint32_t>();
    made_ = r.get<std::uint32_t>();
    in_use_ = static_cast<std::size_t>(r.get<std::uint64_t>());
  }
  /// Heap bytes held (blocks, their links, the queue table).
  std::size_t bytes() const {
    return pool_blocks() * (sizeof(T) * kBlock + sizeof(std::uint32_t)) + q_.capacity() * sizeof(Fifo) +
           chunks_.capacity() * sizeof(chunks_[0]);
  }

 private:
  static constexpr std::uint32_t kNone = ~std::uint32_t{0};
  static constexpr unsigned kChunkLog2 = 4;
  static_assert(kChunkBlocks == std::size_t{1} << kChunkLog2);
  struct Fifo {
    std::uint32_t head = kNone;   // block holding the oldest element
    std::uint32_t tail = kNone;   // block holding the newest element
    std::uint32_t head_off = 0;   // index of the oldest element in its block
    std::uint32_t size = 0;       // elements queued
  };
  struct Block {
    T v[kBlock];
  };

  T* block(std::uint32_t b) { return chunks_[b >> kChunkLog2][b & ((1u << kChunkLog2) - 1)].v; }
  const T* block(std::uint32_t b) const { return chunks_[b >> kChunkLog2][b & ((1u << kChunkLog2) - 1)].v; }

  std::uint32_t new_block() {
    ++in_use_;
    if (free_ != kNone) {
      const std::uint32_t b = free_;
      free_ = next_[b];
      return b;
    }
    if (made_ == kNone) throw std::length_error("BlockFifos: more than 2^32 - 1 blocks");
    if ((made_ >> kChunkLog2) == chunks_.size()) {
      chunks_.push_back(std::make_unique_for_overwrite<Block[]>(std::size_t{1} << kChunkLog2));
      next_.resize(next_.size() + (std::size_t{1} << kChunkLog2), kNone);
    }
    return made_++;
  }
  void free_block(std::uint32_t b) {
    --in_use_;
    next_[b] = free_;
    free_ = b;
  }

  std::vector<Fifo> q_;
  std::vector<std::unique_ptr<Block[]>> chunks_;
  std::vector<std::uint32_t> next_;  // per block: the next block of its FIFO, or of the free chain
  std::uint32_t free_ = kNone;       // free chain (last freed first)
  std::uint32_t made_ = 0;           // blocks handed out at least once
  std::size_t in_use_ = 0;
};

}  // namespace fabricsim::models
