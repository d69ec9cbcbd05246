#pragma once
/// @file hdf5_writer.hpp
/// Collective HDF5 results file (/meta, /ranks, /collectives, /flows, /links, /queues) and a
/// results digest.
/// The schema is documented in docs/hdf5_schema.md.
#include <mpi.h>

#include <string>
#include <vector>

#include "io/results.hpp"

namespace fabricsim::io {

/// Version of the file layout written by write_results_h5 (attribute /meta/schema_version).
inline constexpr int kHdf5SchemaVersion = 5;
/// Fixed length of the `op` column of /collectives (NUL-padded, no terminator needed).
inline constexpr std::size_t kOpChars = 24;
/// Rows per chunk of every table dataset.
inline constexpr std::size_t kChunkRows = 4096;

/// Writes one run's results collectively (every MPI process of comm calls it with its local rows).
///
/// Rows of each table are gathered from all processes, sorted by key (ranks by rank, collectives by
/// (group, instance), flows by flow_id; rows with equal keys by their packed bytes) and each
/// process writes a contiguous slice with collective parallel HDF5, so the file's contents do not
/// depend on the number of processes. /meta is written from rank 0's `meta` (broadcast); every
/// /meta attribute X gets a string attribute `units.X`, and each `meta.fabric_counters` entry
/// (name, value) becomes the uint64 attribute `fabric_<name>` with `units.fabric_<name>` = "ps"
/// for names ending in `_ps`, "bytes" for `_bytes`, "1" otherwise (schema 3).
/// The file is first written to `path + ".tmp.<hex>"` (name chosen by rank 0) and renamed to
/// `path` by rank 0 once all processes have closed it; an existing `path` is replaced.
/// /links and /queues are sorted by (link_id, bin_start_ps); `bin_width_ps` becomes their
/// `bin_width_ps` attribute. A queue row's from_node/to_node/tier come from a link row with the same
/// link_id on the same process (every switch reports both for its own ports).
/// Schema 5: /link_totals (sorted by link_id), /jobs (by job) and /faults (by index) are written from the rows every
/// process passes (pass them on one process only when they are already global).
///
/// @throws engine::InputError ("<cli>", "-o", ...) on every process, before anything is created,
///         if path is empty or a directory, or its directory does not exist or is not writable.
/// @throws engine::InternalError on every process if an op name exceeds kOpChars characters, a
///         fabric counter name is empty, not [a-z0-9_]+ or repeated, or
///         HDF5 / the rename fails; the temporary file is then removed and `path` is untouched.
void write_results_h5(MPI_Comm comm, const std::string& path, const RunMeta& meta,
                      std::vector<RankRecord> ranks, std::vector<CollectiveRecord> colls,
                      std::vector<FlowRecord> flows, std::vector<LinkBinRecord> links = {},
                      std::vector<QueueBinRecord> queues = {}, engine::SimTime bin_width_ps = 0,
                      std::vector<LinkTotalRecord> link_totals = {}, std::vector<JobRecord> jobs = {},
                      std::vector<FaultRecord> faults = {});

/// Digest of the global (gathered, sorted) collective and flow tables, identical on every process
/// and independent of how rows are spread over processes. Collective over comm.
///
/// 16 lowercase hex digits of FNV-1a 64 (Fowler/Noll/Vo, offset basis 0xcbf29ce484222325,
/// prime 0x100000001b3; http://www.isthe.com/chongo/tech/comp/fnv/) over this byte stream:
///   u64 number of collectives, then each sorted collective row's schema-1 columns (group ..
///   busbw_GBps), u64 number of flows, then each sorted flow row's schema-1 columns (flow_id ..
///   fct_ps). Schema-2 columns are not hashed, so digests equal those of schema-1 runs.
/// A row is its columns in schema order, packed without padding, little-endian: integers as
/// their 4/8 bytes, doubles as the 8 bytes of their IEEE-754 bit pattern, `op` as 24 bytes
/// NUL-padded. See docs/hdf5_schema.md.
/// @throws engine::InternalError on every process if an op name exceeds kOpChars characters.
std::string results_digest(MPI_Comm comm, const std::vector<CollectiveRecord>& colls,
                           const std::vector<FlowRecord>& flows);

/// True after write_results_h5 failed in the middle of writing. HDF5 1.10 may then hold a file
/// it could not close and crash while terminating inside MPI_Finalize, so the caller should exit
/// without finalizing (app/main.cpp does).
bool hdf5_write_failed();

}  // namespace fabricsim::io
