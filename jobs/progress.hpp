#pragma once
/// @file progress.hpp
/// The progress report of `fabricsim run` (docs/progress.md): how it is shown (--progress), how
/// often (--progress-interval), and the work-based ETA it prints.
///
/// Work: every DAG node of every rank counts models::GpuRankLp::node_work: 1 ps plus a compute
/// node's duration, or plus a communication node's bytes at the rank's slowest GPU port rate
/// (bytes x 8 / rate_bps, in ps; the NIC on the usual cluster). Work done counts completed nodes
/// whole and running ones by their completed share (GpuRankLp::work_done: elapsed share of a
/// compute node, operations done of a collective's plan). Sums run over every rank of every
/// process (the engine reduces them to rank 0 at a window boundary).
#include <cstdint>
#include <functional>
#include <string>

#include "engine/simulator.hpp"

namespace fabricsim::jobs {

/// How progress is shown on stderr (rank 0 only).
enum class ProgressMode {
  kOff,    ///< nothing
  kTty,    ///< one line rewritten in place with a carriage return (interactive terminals)
  kLines,  ///< one complete line per interval, flushed (log files, batch jobs)
};

/// Parses --progress: "off", "tty" or "lines".
/// @throws engine::InputError("<cli>", "--progress") naming the accepted values otherwise.
ProgressMode parse_progress_mode(const std::string& text);

/// The mode when --progress is not given: kTty when stderr is a terminal, else kLines.
ProgressMode default_progress_mode(bool stderr_is_tty);

/// Progress options of a run (RunOptions::progress).
struct ProgressOptions {
  ProgressMode mode = ProgressMode::kOff;
  /// Wall seconds between two reports (--progress-interval, default 60 s). 0: every check
  /// (tests).
  double interval_s = 60.0;
  /// Events between two clock reads on rank 0 (engine::Simulator::set_progress; a power of two,
  /// default 2^16). Tests lower it to get reports from small runs.
  std::uint64_t check_events = 65536;
  /// Called on rank 0 at each report with the engine's figures (tests); may be empty. With an
  /// observer, reports run even in kOff mode (then nothing is printed).
  std::function<void(const engine::ProgressInfo&)> observer;
};

/// What a progress line shows, derived from a report.
struct ProgressEstimate {
  double fraction = 0;      ///< work done / total work, in [0, 1] (0 when the total is 0)
  /// Estimated wall seconds until the simulation ends, or < 0 when unknown (no work done yet,
  /// or no wall time elapsed). See ProgressEstimator for the definition.
  double eta_s = -1;
  double events_per_s = 0;  ///< events per wall second since the start (0 at t = 0)
};

/// The ETA of a sequence of reports. With W the total work and D the work done (summed over all
/// ranks, see the file comment) after t wall seconds of simulation, and (t1, D1) the previous
/// report's figures:
///     ETA = (W - D) * (t - t1) / (D - D1)   when there is a previous report and D > D1:
///                                           the remaining work at the speed of the last interval;
///     ETA = (W - D) * t / D                 for the first report, or when no work was done in
///                                           the last interval: at the average speed so far;
///     ETA = 0                               when D >= W.
/// The last interval's speed follows phases that cost more wall time per unit of work than
/// the average (a packet-level collective after a long compute phase is nearly all of a run's
/// wall time but little of its work). Positive while any node (e.g. the last collective) still
/// runs, since D < W then.
class ProgressEstimator {
 public:
  /// The estimate for report `p`; reports must come in order (wall time not decreasing).
  ProgressEstimate next(const engine::ProgressInfo& p);

 private:
  bool has_prev_ = false;
  double prev_wall_s_ = 0, prev_done_ = 0;
};

/// The estimate of a first report (ProgressEstimator's closed form without a previous report).
ProgressEstimate estimate_progress(const engine::ProgressInfo& p);

/// A wall duration for humans: "4.2 s" (below 10 s, rounded up to 0.1 s, so a positive
/// duration never shows as 0), "42 s", "3 min 07 s", "2 h 05 min"; "?" when `s` < 0.
std::string format_wall(double s);

/// One progress report as text without line end: "simulated 1.234 ms, 42.0% of work, 123456
/// events, 1.23e+06 events/s, wall 12 s, ETA 17 s".
std::string progress_text(const engine::ProgressInfo& p, const ProgressEstimate& e);

}  // namespace fabricsim::jobs
