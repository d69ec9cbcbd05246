#include "models/core/workload.hpp"

#include <string>

#include "engine/errors.hpp"

namespace fabricsim::models {

const char* coll_op_name(CollOp op) {
  switch (op) {
    case CollOp::kAllReduce: return "all_reduce";
    case CollOp::kAllGather: return "all_gather";
    case CollOp::kReduceScatter: return "reduce_scatter";
    case CollOp::kBroadcast: return "broadcast";
    case CollOp::kReduce: return "reduce";
    case CollOp::kAllToAll: return "alltoall";
  }
  return "unknown";
}

const char* comm_kind_name(CommKind k) {
  switch (k) {
    case CommKind::kTp: return "tp";
    case CommKind::kDp: return "dp";
    case CommKind::kEp: return "ep";
    case CommKind::kPp: return "pp";
    case CommKind::kCp: return "cp";
    case CommKind::kOther: return "other";
  }
  return "other";
}

double busbw_factor(CollOp op, std::uint32_t n) {
  if (n <= 1) return 0.0;
  const double nd = static_cast<double>(n);
  switch (op) {
    case CollOp::kAllReduce: return 2.0 * (nd - 1.0) / nd;
    case CollOp::kAllGather:
    case CollOp::kReduceScatter:
    case CollOp::kAllToAll: return (nd - 1.0) / nd;
    case CollOp::kBroadcast:
    case CollOp::kReduce: return 1.0;
  }
  return 1.0;
}

std::uint64_t Workload::total_nodes() const {
  std::uint64_t n = 0;
  if (program_of.empty()) {
    for (const auto& p : programs) n += p.size();
  } else {
    for (std::uint32_t r = 0; r < ranks; ++r) n += programs[program_of[r]].size();
  }
  return n;
}

void Workload::unshare() {
  if (program_of.empty()) return;
  std::vector<std::vector<WorkNode>> out(ranks);
  for (std::uint32_t r = 0; r < ranks; ++r) {
    out[r] = program(r);
    for (WorkNode& n : out[r]) {
      n.group = group_of(r, n);
      n.peer = peer_of(r, n);
    }
  }
  // group_of/peer_of read the tables: clear them only after every rank is rewritten.
  programs = std::move(out);
  program_of.clear();
  group_slots.clear();
  peer_slots.clear();
  group_width = peer_width = 0;
}

void Workload::check_shared() const {
  if (program_of.empty()) return;
  auto fail = [](const std::string& what) { throw engine::InternalError("shared workload programs: " + what); };
  if (program_of.size() != ranks) fail("program_of has " + std::to_string(program_of.size()) + " entries for " + std::to_string(ranks) + " ranks");
  if (group_slots.size() != std::size_t{ranks} * group_width || peer_slots.size() != std::size_t{ranks} * peer_width) {
    fail("slot tables do not hold ranks x width entries");
  }
  for (std::uint32_t r = 0; r < ranks; ++r) {
    if (program_of[r] >= programs.size()) fail("rank " + std::to_string(r) + " runs a program that does not exist");
  }
  for (std::size_t p = 0; p < programs.size(); ++p) {
    for (const WorkNode& n : programs[p]) {
      if (n.type == NodeType::kCollective && (n.group < 0 || static_cast<std::uint32_t>(n.group) >= group_width)) {
        fail("program " + std::to_string(p) + " names group slot " + std::to_string(n.group));
      }
      if ((n.type == NodeType::kSend || n.type == NodeType::kRecv) && n.peer >= 0 &&
          static_cast<std::uint32_t>(n.peer) >= peer_width) {
        fail("program " + std::to_string(p) + " names peer slot " + std::to_string(n.peer));
      }
    }
  }
}

}  // namespace fabricsim::models
