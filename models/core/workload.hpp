#pragma once
/// @file workload.hpp
/// The per-rank workload DAG that the GPU-rank LP walks. Readers in io/ (Chakra ET, SimAI/AICB
/// text) and generators in jobs/ produce it; it is deliberately plain data.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/time.hpp"

namespace fabricsim::models {

/// Kind of a workload node (Chakra ET node types, collapsed to what the executor needs).
enum class NodeType : std::uint8_t {
  kCompute,     ///< COMP_NODE (also METADATA/MEM_LOAD/MEM_STORE with their duration)
  kCollective,  ///< COMM_COLL_NODE
  kSend,        ///< COMM_SEND_NODE
  kRecv,        ///< COMM_RECV_NODE
};

/// Collective operations simccl can plan. Byte counts follow nccl-tests' "size" convention
/// (nccl-tests doc/PERFORMANCE.md): AllReduce/Broadcast/Reduce: the buffer; AllGather: the
/// output (each rank contributes size/N); ReduceScatter: the input (each rank keeps size/N);
/// AllToAll: the send buffer (size/N to each peer).
enum class CollOp : std::uint8_t { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kAllToAll };

/// Name as nccl-tests prints it ("all_reduce", ...).
const char* coll_op_name(CollOp op);
/// nccl-tests bus-bandwidth factor: busbw = algbw * factor(N) (nccl-tests doc/PERFORMANCE.md).
double busbw_factor(CollOp op, std::uint32_t n);

/// Parallelism a communicator or point-to-point message serves, for the exposed-communication
/// breakdown (io::RankRecord::exposed_kind_ps). Generators and SimAI/AICB files know it; Chakra
/// traces name process groups without saying what they are for, so theirs are kOther.
enum class CommKind : std::uint8_t {
  kTp,     ///< tensor parallel (also TP communication-overlap ring exchanges)
  kDp,     ///< data parallel: gradient reduction and parameter gathering (dense and expert DP, the
           ///< tied-embedding gradient group)
  kEp,     ///< expert parallel (MoE dispatch and combine)
  kPp,     ///< pipeline parallel (activations and gradients between stages)
  kCp,     ///< context parallel (ring of K/V exchanges)
  kOther,  ///< anything else: the world group, Chakra process groups, hand-built workloads
};
/// Number of CommKind values (array sizes; CommKind values are 0 .. kCommKinds-1).
inline constexpr std::size_t kCommKinds = 6;
/// Lower-case name of a kind: "tp", "dp", "ep", "pp", "cp", "other".
const char* comm_kind_name(CommKind k);

/// One node of a rank's DAG. Fields are ordered largest first so the struct has no padding
/// (104 B on LP64; a 9,216-GPU MoE iteration holds ~75 M of them).
struct WorkNode {
  std::uint64_t source_id = 0;   ///< node id in the input (Chakra id, or line number for SimAI)
  std::string name;              ///< node name from the input
  engine::SimTime duration_ps = 0;  ///< compute duration (ps)
  std::uint64_t bytes = 0;          ///< collective size (see CollOp) or message size (send/recv)
  std::int64_t tag = 0;             ///< send/recv matching tag
  std::vector<std::uint32_t> deps;  ///< indices into the same rank's node vector; all must finish first
  std::int32_t group = 0;           ///< collective: index into Workload::groups
  std::int32_t peer = -1;           ///< send: destination rank; recv: source rank (global ranks)
  std::int32_t root = 0;            ///< broadcast/reduce root, as an index inside the group
  NodeType type = NodeType::kCompute;
  CollOp op = CollOp::kAllReduce;   ///< collectives only
  /// Send/receive: the parallelism the message serves (a collective's kind is its group's,
  /// CommGroup::kind).
  CommKind kind = CommKind::kOther;
  /// Compute nodes only: a CPU-side op (Chakra `is_cpu_op`). It runs on the rank's host
  /// thread, one host op at a time, concurrently with GPU compute and communication (ASTRA-sim
  /// @0383c20 workload/HardwareResource.cc keeps one in-flight slot for CPU ops and one for GPU
  /// ops; Workload.cc replays a CPU op for its recorded duration). It is not GPU compute time.
  bool host = false;
};

/// A communicator: a named, ordered set of global ranks (ring order = this order).
struct CommGroup {
  std::string name;                  ///< e.g. "world", "tp0", "dp3", or a Chakra pg_name
  std::vector<std::uint32_t> ranks;  ///< global ranks, no duplicates
  CommKind kind = CommKind::kOther;  ///< what the communicator is for (exposed-time breakdown)
};

/// A whole workload: one DAG per rank and the communicators they name.
///
/// Shared programs (generated workloads at scale): ranks whose DAGs differ only in the
/// communicators and peers they name run one program. Then `program_of[r]` says which program
/// rank r runs, and in a shared program a collective's `group` and a send/receive's `peer` are
/// slots: the rank's global group index is group_slots[r * group_width + group] and its global
/// peer rank peer_slots[r * peer_width + peer]. A 9,216-GPU MoE iteration has 75 M DAG nodes as
/// per-rank programs (~15 GB) and 12 x 8,200 as shared ones. Consumers read programs through
/// program(), group_of() and peer_of(), which also serve unshared workloads (program_of empty:
/// programs[r] with global values), or call unshare() first.
struct Workload {
  std::string source;   ///< file or ET prefix it came from
  std::string format;   ///< "chakra" | "simai"
  std::uint32_t ranks = 0;
  std::vector<CommGroup> groups;                ///< groups[0] is always the world
  std::vector<std::vector<WorkNode>> programs;  ///< programs[rank], or the shared programs (program_of)
  std::vector<std::string> warnings;            ///< reader warnings (printed on stderr by `run`)
  std::vector<std::uint32_t> program_of;        ///< empty, or rank -> index into programs (shared)
  std::uint32_t group_width = 0;                ///< group slots per rank (shared programs)
  std::uint32_t peer_width = 0;                 ///< peer slots per rank (shared programs)
  std::vector<std::int32_t> group_slots;        ///< ranks x group_width global group indices
  std::vector<std::int32_t> peer_slots;         ///< ranks x peer_width global ranks
  /// Rank layout of the data-parallel replicas when the producer knows it (sim.fold: dp,
  /// docs/folding.md): rank = inner + replica_stride·(dp + replicas·outer), inner < replica_stride,
  /// dp < replicas. Set by the SimAI reader for pp > 1 (stride TP·PP: its order is tp-pp-dp); a
  /// generated job's comes from its sizes (stride TP·CP, order tp-cp-dp-pp); 0: not known.
  std::uint32_t replica_stride = 0;
  std::uint32_t replicas = 0;  ///< DP (see replica_stride); 0: not known

  /// True if programs are shared (program_of is set).
  bool shared() const { return !program_of.empty(); }
  /// The DAG rank `r` runs (nodes in topological order).
  const std::vector<WorkNode>& program(std::uint32_t r) const {
    return program_of.empty() ? programs[r] : programs[program_of[r]];
  }
  /// Global communicator index of collective node `n` of rank `r`'s program (n.group for other
  /// node types and unshared programs).
  std::int32_t group_of(std::uint32_t r, const WorkNode& n) const {
    if (program_of.empty() || n.type != NodeType::kCollective) return n.group;
    return group_slots[std::size_t{r} * group_width + static_cast<std::uint32_t>(n.group)];
  }
  /// Global peer rank of send/receive node `n` of rank `r`'s program (n.peer for other node
  /// types and unshared programs).
  std::int32_t peer_of(std::uint32_t r, const WorkNode& n) const {
    if (program_of.empty() || (n.type != NodeType::kSend && n.type != NodeType::kRecv) || n.peer < 0) return n.peer;
    return peer_slots[std::size_t{r} * peer_width + static_cast<std::uint32_t>(n.peer)];
  }
  /// DAG nodes over all ranks (a shared program counts once per rank that runs it).
  std::uint64_t total_nodes() const;
  /// Rewrites shared programs as one program per rank with global groups and peers (tools and
  /// writers that need them; memory: every rank's DAG). No-op when not shared.
  void unshare();
  /// Checks the sharing tables: program_of, the slot tables' sizes and every slot a program
  /// names within its width. @throws engine::InternalError naming the first inconsistency.
  void check_shared() const;
};
}  // namespace fabricsim::models
