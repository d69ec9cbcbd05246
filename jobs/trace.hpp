#pragma once
/// @file trace.hpp
/// Perfetto / Chrome trace-event JSON of a run (docs/hdf5_schema.md, "Trace-event JSON").
#include <cstdint>
#include <string>
#include <vector>

#include "io/results.hpp"
#include "models/rank/gpu_rank.hpp"
#include "models/core/workload.hpp"

namespace fabricsim::jobs {

/// One `faults:` entry as the trace shows it (times in ps; until_ps < 0 = the rest of the run).
struct TraceFault {
  std::string kind;    ///< link_down, ber, degrade, nic_down or switch_down
  std::string target;  ///< as written in the spec
  engine::SimTime at_ps = 0, until_ps = -1;
  engine::SimTime reconverge_ps = 0;  ///< down kinds: detect + converge; 0 otherwise
};

/// Builds the trace-event JSON ("JSON Object Format" of the Chrome Trace Event Format, which
/// Perfetto's UI and trace processor load): one process per traced rank (pid = rank), thread 0
/// "compute" with one complete event ("ph":"X") per compute node, threads 1.. "comm k" with one
/// complete event per collective / send / recv; overlapping communication ops go to separate
/// comm threads (first free lane), so events on one thread never overlap; thread 1000 "host (CPU
/// ops)" holds the rank's host-side compute nodes (WorkNode::host), one at a time. Timestamps and durations
/// are in microseconds (the format's unit) with picosecond precision kept as decimals.
/// @param intervals every traced interval (any order); @param colls the /collectives table
/// (algorithm, protocol, channels for the event arguments)
///
/// NIC tracks: for every link bin of a traced rank's own ports in `gpu_links` (/links rows whose
/// from_node is the rank's GPU), counter events ("ph":"C") on the rank's process: "<tier> tx Gb/s"
/// (payload bytes x 8 / bin width) and, when PFC paused the port, "<tier> PFC paused %"; a
/// counter drops back to 0 after a bin without a following bin. `bin_ps` is the bin width.
///
/// Fault timeline (spec `faults:`, docs/jobs_and_faults.md): when `faults` is not empty, one
/// process "fabric faults" (pid = `fault_pid`, after every rank) with one thread per entry and a
/// complete event per entry from its `time` to its `until` (or to `end_ps`, the run's end, when it
/// lasts the rest of the run), named "<kind> <target>", plus, for the down kinds, an instant event
/// ("ph":"i") "routing reconverged" at time + detect + converge and "routing restored" at until +
/// detect + converge where those fall before `end_ps`.
std::string trace_json(const std::vector<models::TraceInterval>& intervals, const models::Workload& w,
                       const std::vector<io::CollectiveRecord>& colls,
                       const std::vector<io::LinkBinRecord>& gpu_links = {}, engine::SimTime bin_ps = 0,
                       const std::vector<TraceFault>& faults = {}, engine::SimTime end_ps = 0);

}  // namespace fabricsim::jobs
