#include "models/workload.hpp"

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

}  // namespace fabricsim::models
