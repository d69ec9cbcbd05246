#pragma once
/// @file custom_schedule.hpp
/// Custom collective schedules replayed as given: TE-CCL JSON schedules
/// (microsoft/TE-CCL `teccl/examples/schedules/*.json`) and MSCCL-IR XML algorithms
/// (`<algo><gpu><tb><step/>`, as written by msccl-tools, TE-CCL and ASTRA-sim's custom
/// collectives). Both are turned into one neutral form: per rank, point-to-point operations
/// counted in chunks, with dependencies, which simccl/custom_planner.hpp scales to the bytes of a
/// collective call. Formats: ../shared/reference/formats.md §2f (TE-CCL) and the MSCCL-IR notes
/// in docs/simccl.md.
#include <cstdint>
#include <string>
#include <vector>

#include "models/core/workload.hpp"

namespace fabricsim::simccl {

/// One point-to-point operation of a rank in a schedule. Peers are communicator positions.
struct ScheduleOp {
  bool is_send = false;
  std::uint32_t peer = 0;    ///< communicator position of the peer
  std::uint32_t chunks = 1;  ///< sends: number of chunks carried
  std::uint32_t tag = 0;     ///< unique per (sender, receiver) inside the schedule
  std::uint16_t channel = 0; ///< MSCCL channel (TE-CCL: 0)
  std::vector<std::uint32_t> deps;  ///< indices of this rank's ops that must complete first
};

/// A parsed schedule.
struct CustomSchedule {
  std::string path;    ///< file it came from
  std::string format;  ///< "te-ccl" or "msccl"
  std::string name;    ///< MSCCL algo name, TE-CCL file stem
  models::CollOp op = models::CollOp::kAllGather;
  std::uint32_t n_ranks = 0;
  /// The collective's size (nccl-tests convention, models/core/workload.hpp) is cut into this many
  /// equal chunks: TE-CCL AllGather ranks x chunks per GPU; MSCCL nchunksperloop.
  std::uint32_t chunks_per_buffer = 1;
  std::vector<std::vector<ScheduleOp>> ranks;  ///< [position] -> ops in issue order
  /// TE-CCL only: epochs the solver reports (`3-Epochs_Required`); 0 for MSCCL.
  std::uint32_t epochs = 0;
  std::uint32_t transfers = 0;  ///< sends in the whole schedule
};

/// Reads a TE-CCL JSON schedule: GPUs = the `GPU k` keys of `6-Demand_Met`; transfers = the
/// `7-Flows` lines "Chunk c from s traveled over a->b in epoch e". A flow becomes a send at a and
/// a receive at b; a send waits for the receive that brought chunk (s, c) to a (a != s) and for
/// the previous send on the same link a->b (epoch order: links replay the solver's order).
/// The schedule must be an AllGather that delivers every chunk to every GPU.
/// @throws engine::InputError(path, field, ...) for unreadable files, malformed flow lines, flows
/// through non-GPU (switch) nodes, a chunk forwarded before it arrived, or an incomplete AllGather.
CustomSchedule load_teccl_schedule(const std::string& path);

/// As load_teccl_schedule, parsing the JSON `text` (the file's content; `path` names it in
/// messages and gives the schedule's name). @throws engine::InputError as load_teccl_schedule.
CustomSchedule parse_teccl_schedule(const std::string& text, const std::string& path);

/// Reads an MSCCL-IR XML algorithm: `algo` (coll, ngpus, nchunksperloop, nchannels), per `gpu`
/// its thread blocks `tb` (send peer, recv peer, chan) and their `step`s in order (type s, r,
/// rcs, rrc, rrs, rrcs send and/or receive `cnt` chunks; cpy, re, nop move nothing on the
/// network). A step waits for the previous step of its thread block and for step `deps` of thread
/// block `depid` when given. The k-th send on connection (gpu, peer, chan) matches the k-th
/// receive of the peer's thread block receiving from gpu on chan.
/// @throws engine::InputError for unreadable XML, ngpus outside 2..65536, an unknown coll or step type, unmatched
/// send/receive counts on a connection, bad peers, or a dependency cycle.
CustomSchedule load_msccl_schedule(const std::string& path);

/// As load_msccl_schedule, parsing the XML `text` (the file's content; `path` names it in
/// messages). @throws engine::InputError as load_msccl_schedule.
CustomSchedule parse_msccl_schedule(const std::string& text, const std::string& path);

/// Picks the reader by content (first non-blank character '{' = TE-CCL JSON, '<' = MSCCL XML).
/// @throws engine::InputError naming `path` if it is missing, unreadable or of neither format.
CustomSchedule load_custom_schedule(const std::string& path);

/// Bytes carried by `chunks` chunks when `bytes` is cut into `per_buffer` chunks (at least 1).
std::uint64_t schedule_chunk_bytes(std::uint64_t bytes, std::uint32_t per_buffer, std::uint32_t chunks);

}  // namespace fabricsim::simccl
