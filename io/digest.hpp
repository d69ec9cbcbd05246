#pragma once
/// @file digest.hpp
/// Results digest without gathering rows: the flow table enters as an
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

#include "io/flow_digest.hpp"
#include "io/results.hpp"

namespace fabricsim::io {

/// The results digest (see the file comment). Collective over comm.
/// @param colls the global collective table, the same on every process (any order).
/// @param local_flows this process's flow records, folded (any split over processes).
/// @throws engine::InternalError if an op name exceeds 24 characters.
std::string results_digest_sum(MPI_Comm comm, std::vector<CollectiveRecord> colls, FlowDigest local_flows);

}  // namespace fabricsim::io
