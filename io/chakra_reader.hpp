#pragma once
/// @file chakra_reader.hpp
/// Reader for Chakra execution traces (ET): one binary file per rank, `PREFIX.<rank>.et`.
///
/// File layout (Chakra framing): a sequence of records `[varint32 length][protobuf message]`;
/// the first record is a `ChakraProtoMsg::GlobalMetadata`, every later one a `ChakraProtoMsg::Node`,
/// until a clean end of file. The schema is our own io/et_def.proto (wire-compatible with
/// upstream Chakra).
///
/// Mapping onto models::WorkNode:
///  * COMP_NODE, METADATA_NODE, MEM_LOAD_NODE, MEM_STORE_NODE -> kCompute,
///    duration_ps = duration_micros * 1e6.
///  * COMM_COLL_NODE -> kCollective; attribute `comm_type` (CollectiveCommType) selects the op:
///    ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER / REDUCE_SCATTER_BLOCK, BROADCAST, REDUCE,
///    ALL_TO_ALL map one to one; BARRIER becomes an AllReduce of 4 bytes (one float, as
///    torch.distributed.barrier does); GATHER and SCATTER are rejected (not supported yet).
///    `comm_size` (bytes) is required; `pg_name` selects the communicator (absent/empty = world).
///    Broadcast/Reduce roots are index 0 of the group (the ET carries no root).
///  * COMM_SEND_NODE -> kSend (peer = `comm_dst`), COMM_RECV_NODE -> kRecv (peer = `comm_src`);
///    `comm_size` required, `comm_tag` optional (default 0). A `comm_type` attribute on send/recv
///    nodes (values 5/6 in MSCCL-derived ETs) is ignored.
///  * Integer attributes are accepted in any protobuf integer encoding (int32/int64/uint32/uint64,
///    sint*, fixed*, sfixed*).
///  * deps = data_deps ∪ ctrl_deps (ChakraReadOptions::ctrl_deps, default on), as Chakra's feeder
///    orders execution by data and control dependencies when both are enabled (mlcommons/chakra
///    et_feeder, USE_DATA_DEPS / USE_CTRL_DEPS). Each rank's nodes are emitted in a topological
///    order that is stable: among ready nodes, the smallest Chakra node id first. deps are
///    remapped to indices.
///  * Traces from Chakra's PyTorch converter name, in their control dependencies, nodes the
///    converter filtered out (about a third of them in mlcommons/chakra's own feeder test
///    traces), while every data dependency resolves. A control dependency on an id absent from
///    the rank's file is dropped (ChakraReadOptions::missing_ctrl_deps = kIgnore, the default)
///    and counted in one workload warning, or refused (kError). A data dependency on an absent
///    id is always an error.
///
///  * A COMP_NODE with the bool attribute `is_cpu_op` true is a CPU-side op: WorkNode::host
///    (ChakraReadOptions::cpu_ops kHost, the default: timed for its duration on the rank's host
///    thread, one at a time, concurrently with GPU work, as ASTRA-sim @0383c20 Workload.cc and
///    HardwareResource.cc do) or zero duration (kSkip).
///
/// Communicators: groups[0] is the world (ranks 0..N-1 in order). With a comm-group file
/// (ASTRA-sim `--comm-group-configuration` JSON: `{"<pg_name>": [rank, ...], ...}`) every
/// distinct pg_name used by the trace becomes one CommGroup (in order of first use, rank 0's file
/// first), named after the pg_name, ranks in the order listed. Without one, the process-group
/// metadata that PyTorch's execution-trace observer records and Chakra's converter keeps (a
/// METADATA_NODE named "## process_group:init ##" whose inputs.values is the list of
/// {"pg_name", "ranks", "pg_size", ...} objects, as a JSON list or a Python repr of a one-string
/// list; empty "ranks" = every rank) defines them, as ASTRA-sim's issue_pytorch_pg_metadata reads
/// it. A pg_name defined nowhere is the world communicator, with one warning.
///
/// One rank's trace, many ranks: when only `PREFIX.0.et` exists and the world size N > 1 (from
/// ChakraReadOptions::world_size, else the largest pg_size in rank 0's process-group metadata),
/// every rank r runs rank 0's program. Each communicator of rank 0 must then be the world or an
/// arithmetic progression {0, s, 2s, ..., (k-1)s} with k*s dividing N (Megatron-style TP, DP,
/// PP and CP groups are); rank r uses the group of the same stride and size that holds r:
/// {b, b+s, ..., b+(k-1)s} with b = (r / (k*s)) * (k*s) + r % s, named "<pg_name>+<b>".
/// Point-to-point nodes cannot be translated that way and are refused (give every rank's file).
///
/// Checks that raise engine::InputError (one line: file, field, problem, fix): missing files or a
/// gap in the rank numbering, truncated records, undecodable bytes, a first record that is not
/// GlobalMetadata, unknown node types, duplicate node ids, data dependencies on unknown ids
/// (control dependencies too with MissingDeps::kError),
/// dependency cycles, comm nodes without comm_size/comm_type/peer, negative or absurd sizes
/// (> 1 TiB) or durations, peers outside 0..N-1, a rank using a communicator it is not a member
/// of, a pg_name with no comm-group file or not found in it, and sends that have no matching
/// receive (per (src, dst, tag): same count and total bytes).
#include <cstdint>
#include <string>

#include "models/core/workload.hpp"

namespace fabricsim::io {

/// What read_chakra does with a control dependency on a node id absent from the rank's file.
enum class MissingDeps : std::uint8_t {
  kIgnore,  ///< drop it; the workload gets one warning with the count (spec `ignore`)
  kError,   ///< engine::InputError naming the file, the node and the first missing id (`error`)
};

/// What read_chakra does with a CPU-side compute node (`is_cpu_op` true).
enum class CpuOps : std::uint8_t {
  kHost,  ///< timed for its duration on the rank's host thread (spec `host`)
  kSkip,  ///< zero duration, kept for dependency ordering (spec `skip`)
};

/// Parses "host" | "skip". @throws engine::InputError naming `file` and `field` otherwise.
CpuOps parse_cpu_ops(const std::string& v, const std::string& file, const std::string& field);

/// Parses "ignore" | "error". @throws engine::InputError naming `file` and `field` otherwise.
MissingDeps parse_missing_deps(const std::string& v, const std::string& file, const std::string& field);

/// Options of read_chakra (spec keys workload.chakra.*).
struct ChakraReadOptions {
  /// Control dependencies order execution together with data dependencies (true, Chakra's
  /// feeder with both enabled) or are ignored (false: data dependencies only).
  bool ctrl_deps = true;
  /// Control dependencies on absent nodes (see the file comment).
  MissingDeps missing_ctrl_deps = MissingDeps::kIgnore;
  /// CPU-side compute nodes (attribute `is_cpu_op` true): kHost runs them for their recorded
  /// duration on the rank's host thread (WorkNode::host), as ASTRA-sim replays them; kSkip keeps
  /// them for ordering with zero duration.
  CpuOps cpu_ops = CpuOps::kHost;
  /// World size (spec workload.gpus, 0 = from the files). With only rank 0's file present, a
  /// world size above 1 (given here, or the largest pg_size of the trace's process-group
  /// metadata) replicates rank 0's program to every rank (see the file comment).
  std::uint32_t world_size = 0;
};

/// Largest message/collective size (bytes) accepted from a trace; bigger is treated as corrupt.
inline constexpr unsigned long long kMaxChakraBytes = 1ull << 40;  // 1 TiB

/// Reads a set of Chakra ET files into a Workload.
/// @param prefix           path prefix: the files are `prefix + "." + rank + ".et"`, rank 0..N-1;
///                         N is the number of consecutive ranks present (at least one).
/// @param comm_groups_json optional path of an ASTRA-sim comm-group JSON file (see file comment);
///                         required when any node carries a non-empty `pg_name`.
/// @param options          dependency handling (ChakraReadOptions).
/// @return the workload: format "chakra", ranks = N, groups[0] = world, programs[r] in
///         topological order; compute durations in ps, sizes in bytes; warnings holds one line
///         with the count of dropped control dependencies, if any.
/// @throws engine::InputError on any malformed or inconsistent input (see file comment).
models::Workload read_chakra(const std::string& prefix, const std::string& comm_groups_json = "",
                            const ChakraReadOptions& options = {});

/// If `path` names one rank's file (`X.<n>.et`), returns its prefix `X`; otherwise returns `path`
/// unchanged.
std::string chakra_prefix_of(const std::string& path);

/// True if `path` is a Chakra ET prefix whose `path.0.et` exists, or is itself an existing
/// `X.<n>.et` file (then chakra_prefix_of(path) gives the prefix to pass to read_chakra).
/// Never throws.
bool looks_like_chakra_prefix(const std::string& path);

}  // namespace fabricsim::io
