#pragma once
/// @file digest.hpp
/// Results digest without gathering rows (issue 7/9 scale work): the flow table enters as an
/// order-independent sum of per-record hashes, so each process (and each GPU LP) folds in its own
/// flow records as they complete and keeps none of them; one MPI_Allreduce combines the sums.
///
/// Digest (16 lowercase hex digits) = FNV-1a 64 (offset basis 0xcbf29ce484222325, prime
/// 0x100000001b3) over the byte stream, little-endian:
///   u64 number of collectives, then each collective row, sorted by (group, instance), as its
///   schema-1 columns packed without padding (group u32, instance u32, op 24 bytes NUL-padded,
///   bytes u64, ranks u32, start_ps u64, end_ps u64, algbw_GBps and busbw_GBps as the 8 bytes of
///   their IEEE-754 bit pattern);
///   u64 number of flow records; u64 sum mod 2^64 of flow_record_hash over all flow records.
/// Identical for any number of processes and threads and any placement of the LPs. It is not
/// the FNV stream of io::results_digest (hdf5_writer.hpp), so references stored before this
/// change differ.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/rng.hpp"
#include "io/results.hpp"

namespace fabricsim::io {

/// Hash of one flow record's schema-1 columns (flow_id, src, dst, bytes, start_ps, end_ps,
/// fct_ps): a chain of mix64 (SplitMix64 finalizer) steps, one per column.
constexpr std::uint64_t flow_record_hash(const FlowRecord& r) {
  constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;
  std::uint64_t h = engine::mix64(r.flow_id + kGolden);
  h = engine::mix64(h ^ ((static_cast<std::uint64_t>(r.src) << 32) | r.dst));
  h = engine::mix64(h ^ r.bytes);
  h = engine::mix64(h ^ static_cast<std::uint64_t>(r.start_ps));
  h = engine::mix64(h ^ static_cast<std::uint64_t>(r.end_ps));
  h = engine::mix64(h ^ static_cast<std::uint64_t>(r.fct_ps));
  return h;
}

/// Order-independent accumulator of flow records (16 bytes; one per GPU LP).
struct FlowDigest {
  std::uint64_t count = 0;  ///< flow records folded in
  std::uint64_t sum = 0;    ///< sum mod 2^64 of flow_record_hash
  void add(const FlowRecord& r) {
    ++count;
    sum += flow_record_hash(r);
  }
  void merge(const FlowDigest& o) {
    count += o.count;
    sum += o.sum;
  }
};

/// The results digest (see the file comment). Collective over comm.
/// @param colls the global collective table, the same on every process (any order).
/// @param local_flows this process's flow records, folded (any split over processes).
/// @throws engine::InternalError if an op name exceeds 24 characters.
std::string results_digest_sum(MPI_Comm comm, std::vector<CollectiveRecord> colls, FlowDigest local_flows);

}  // namespace fabricsim::io
