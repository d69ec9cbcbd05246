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

namespace fabricsim::fabric_test {

using jobs::RunOptions;
using jobs::RunResult;
using models::NodeType;
using models::WorkNode;
using models::Workload;

/// One point-to-point message of p2p_workload: `bytes` from rank `src` to rank `dst`.
struct Flow {
  unsigned src, dst;
  unsigned long long bytes;
  long long start_ps = 0;  // delay before the send is posted
};

/// A workload of point-to-point messages: each flow is a send on its source (after an optional
/// compute node of `start_ps`) and a receive on its destination, matched by tag.
inline Workload p2p_workload(unsigned ranks, const std::vector<Flow>& flows) {
  Workload w;
  w.source = "<fabric_test>";
  w.format = "chakra";
  w.ranks = ranks;
  w.groups.push_back({"world", {}});
  for (unsigned r = 0; r < ranks; ++r) w.groups[0].ranks.push_back(r);
  w.programs.resize(ranks);
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const Flow& f = flows[i];
    auto& sp = w.programs[f.src];
    std::vector<std::uint32_t> deps;
    if (f.start_ps > 0) {
      WorkNode c;
      c.name = "delay";
      c.type = NodeType::kCompute;
      c.duration_ps = f.start_ps;
      sp.push_back(c);
      deps.push_back(static_cast<std::uint32_t>(sp.size() - 1));
    }
    WorkNode s;
    s.name = "send";
    s.type = NodeType::kSend;
    s.peer = static_cast<std::int32_t>(f.dst);
    s.bytes = f.bytes;
    s.tag = static_cast<std::int64_t>(i);
    s.deps = deps;
    sp.push_back(s);
    WorkNode r;
    r.name = "recv";
    r.type = NodeType::kRecv;
    r.peer = static_cast<std::int32_t>(f.src);
    r.bytes = f.bytes;
    r.tag = static_cast<std::int64_t>(i);
    w.programs[f.dst].push_back(r);
  }
  return w;
}

/// Runs `w` in this process on `comm` with the spec overrides `sets` (key=value), flow records
/// kept, no HDF5 output.
inline RunResult run(const Workload& w, std::vector<std::string> sets, MPI_Comm comm = MPI_COMM_SELF, unsigned threads = 1) {
  RunOptions opt;
  opt.workload_data = &w;
  opt.sets = std::move(sets);
  opt.write_h5 = false;
  opt.quiet = true;
  opt.keep_flows = true;
  opt.threads = threads;
  return fabricsim::jobs::run_simulation(opt, comm, "test", "test");
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
