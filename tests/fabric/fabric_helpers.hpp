#pragma once
/// @file fabric_helpers.hpp
/// Helpers of the packet-fabric tests (tests/fabric): point-to-point
/// workloads, one in-process run, and queue and utilization readings from the link samples.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "jobs/run.hpp"
#include "models/core/workload.hpp"
#include "tests/support/run.hpp"
#include "tests/support/workloads.hpp"

namespace fabricsim::fabric_test {

using jobs::RunResult;
using models::Workload;

/// One point-to-point message (tests/support/workloads.hpp).
using Flow = testing::P2pFlow;

/// A workload of point-to-point messages in the Chakra format (tests/support/workloads.hpp):
/// each flow is a send on its source (after a compute node of `start_ps` when positive) and a
/// receive on its destination, matched by tag.
inline Workload chakra_p2p(unsigned ranks, const std::vector<Flow>& flows) {
  return testing::p2p_workload(ranks, flows, "chakra", "<fabric_test>");
}

/// Runs `w` quietly in this process on `comm` with the spec overrides `sets`, flow records kept.
/// The fabric's closed forms have no NCCL software latency: simccl.launch_latency and
/// step_latency are none unless `sets` says otherwise (the last value of a key wins).
inline RunResult run(const Workload& w, std::vector<std::string> sets, MPI_Comm comm = MPI_COMM_SELF, unsigned threads = 1) {
  sets.insert(sets.begin(), {"simccl.launch_latency=none", "simccl.step_latency=none"});
  return testing::run_quiet(&w, std::move(sets), comm, threads, /*keep_flows=*/true);
}

/// Mean backlog (bytes) of the queue feeding `to_node` from a switch, over bins in [t0, t1).
inline double mean_queue(const RunResult& r, unsigned to_node, long long t0, long long t1) {
  std::uint32_t link = ~0u;
  for (const auto& l : r.link_records) {
    if (l.to_node == to_node && l.tier != 0 && l.from_node > to_node) link = l.link_id;
  }
  double sum = 0;
  int n = 0;
  for (const auto& q : r.queue_records) {
    if (q.link_id == link && q.bin_start_ps >= t0 && q.bin_start_ps < t1) {
      sum += static_cast<double>(q.max_queue_bytes);
      ++n;
    }
  }
  return n ? sum / n : -1;
}

/// Bytes per ps delivered to `to_node` over bins in [t0, t1), as a fraction of `gbps`.
inline double utilization(const RunResult& r, unsigned to_node, long long t0, long long t1, double gbps) {
  double bytes = 0;
  for (const auto& l : r.link_records) {
    if (l.to_node == to_node && l.bin_start_ps >= t0 && l.bin_start_ps < t1) bytes += static_cast<double>(l.bytes);
  }
  return bytes * 8 / (gbps * 1e9 * static_cast<double>(t1 - t0) * 1e-12);
}

}  // namespace fabricsim::fabric_test
