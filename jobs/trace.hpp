#pragma once
/// @file trace.hpp
/// Perfetto / Chrome trace-event JSON of a run (docs/hdf5_schema.md, "Trace-event JSON").
#include <cstdint>
#include <string>
#include <vector>

#include "io/results.hpp"
#include "models/gpu_rank.hpp"
#include "models/workload.hpp"

namespace fabricsim::jobs {

/// Builds the trace-event JSON ("JSON Object Format" of the Chrome Trace Event Format, which
/// Perfetto's UI and trace processor load): one process per traced rank (pid = rank), thread 0
/// "compute" with one complete event ("ph":"X") per compute node, threads 1.. "comm k" with one
/// complete event per collective / send / recv; overlapping communication ops go to separate
/// comm threads (first free lane), so events on one thread never overlap. Timestamps and durations
/// are in microseconds (the format's unit) with picosecond precision kept as decimals.
/// @param intervals every traced interval (any order); @param colls the /collectives table
/// (algorithm, protocol, channels for the event arguments)
std::string trace_json(const std::vector<models::TraceInterval>& intervals, const models::Workload& w,
                       const std::vector<io::CollectiveRecord>& colls);

}  // namespace fabricsim::jobs
