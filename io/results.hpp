#pragma once
/// @file results.hpp
/// Result records of a run, as written to HDF5 and the summary JSON. Plain data; times in ps.
#include <cstdint>
#include <string>
#include <vector>

#include "engine/time.hpp"

namespace fabricsim::io {

/// Run metadata (HDF5 group /meta, attributes).
struct RunMeta {
  std::string spec_text;     ///< the effective spec (after --set), YAML
  std::string version;       ///< fabricsim version
  std::string git_commit;    ///< commit the binary was built from
  std::string workload;      ///< workload path / prefix
  std::uint64_t seed = 0;
  std::uint32_t processes = 1;
  std::uint32_t threads = 1;
  std::uint32_t ranks = 0;
  double wall_s = 0;
  std::uint64_t events = 0;
  engine::SimTime simulated_time_ps = 0;
};

/// Per-rank summary (dataset /ranks). Ordered by rank.
struct RankRecord {
  std::uint32_t rank = 0;
  engine::SimTime finish_ps = 0;         ///< when the rank's DAG completed
  engine::SimTime compute_ps = 0;        ///< time with compute running
  engine::SimTime comm_ps = 0;           ///< time with >= 1 communication op in flight
  engine::SimTime exposed_comm_ps = 0;   ///< communication time not overlapped by compute
};

/// Per-collective record (dataset /collectives). Ordered by (group, instance).
struct CollectiveRecord {
  std::uint32_t group = 0;       ///< communicator index (Workload::groups)
  std::uint32_t instance = 0;    ///< n-th collective on that communicator
  std::string op;                ///< nccl-tests name, e.g. "all_reduce"
  std::uint64_t bytes = 0;       ///< nccl-tests "size"
  std::uint32_t ranks = 0;       ///< communicator size
  engine::SimTime start_ps = 0;  ///< earliest start over the ranks
  engine::SimTime end_ps = 0;    ///< latest completion over the ranks
  double algbw_GBps = 0;         ///< bytes / (end-start), GB/s = 1e9 B/s
  double busbw_GBps = 0;         ///< algbw * nccl-tests factor
};

/// Per-flow record (dataset /flows): one point-to-point transfer. Ordered by flow_id.
struct FlowRecord {
  std::uint64_t flow_id = 0;     ///< (src rank << 32) | per-source counter: unique, deterministic
  std::uint32_t src = 0;         ///< source rank
  std::uint32_t dst = 0;         ///< destination rank
  std::uint64_t bytes = 0;
  engine::SimTime start_ps = 0;  ///< first packet handed to the NIC/NVLink port
  engine::SimTime end_ps = 0;    ///< last byte received
  engine::SimTime fct_ps = 0;    ///< end - start
};

}  // namespace fabricsim::io
