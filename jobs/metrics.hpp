#pragma once
/// @file metrics.hpp
/// The key results of one run as named numbers, the same whether they come from a RunResult (in
/// process, `fabricsim regress`) or from a summary JSON written by `fabricsim run --summary-json`
/// (`fabricsim sweep`), so sweeps and regressions report identical columns.
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "jobs/run.hpp"

namespace fabricsim::jobs {

/// Metric name -> value. Names and units:
///  - iteration_time_ps: simulated time until the last rank finished (ps)
///  - events: engine events; flows: flow records; collectives: collective instances
///  - compute_ps_mean, comm_ps_mean, exposed_comm_ps_mean: per-rank means (ps)
///  - busbw_<op>_GBps: mean bus bandwidth (GB/s) of the op's collectives on communicators of more
///    than one rank (NCCL-tests definition; absent if the run has none of that op)
///  - ttft_ps, tpot_ps: inference workloads only: time to first token, time per output token (ps;
///    tpot_ps absent with a single output token)
/// Wall-clock time is not a metric here (it depends on the machine); see RunResult/summary.
using Metrics = std::map<std::string, double>;

/// Metrics of an in-process run.
Metrics metrics_of(const RunResult& r);

/// Metrics of a summary JSON written by `fabricsim run --summary-json`.
/// @throws engine::InputError (file, missing field) if a required field is absent.
Metrics metrics_of_summary(const nlohmann::json& j, const std::string& file);

}  // namespace fabricsim::jobs
