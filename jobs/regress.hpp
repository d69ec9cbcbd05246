#pragma once
/// @file regress.hpp
/// Regression suites (`fabricsim regress REFERENCE_DIR`): a named list of cases (spec, workload,
/// --set overrides, per-metric relative tolerances) in REFERENCE_DIR/suite.yaml, run in process,
/// compared metric by metric (jobs/metrics.hpp) with REFERENCE_DIR/references/<case>.json.
/// `--rebaseline` rewrites the references deliberately.
///
/// Suite file:
/// @code
///   name: default
///   default_tolerance: 1e-9        # relative tolerance of metrics not listed (default 1e-9)
///   tolerances: {events: 0}        # suite-wide per metric
///   cases:
///     - name: allreduce_16
///       workload: ../data/chakra/.../all_reduce   # relative to REFERENCE_DIR (optional)
///       spec: ../../examples/quickstart.yaml      # relative to REFERENCE_DIR (optional)
///       gpus: 16                                  # optional (--gpus)
///       set: {cluster.nic_bandwidth: 200Gbps}     # optional (workload.path values: relative to REFERENCE_DIR)
///       tolerances: {busbw_AllReduce_GBps: 1e-6}  # optional, per metric
/// @endcode
#include <mpi.h>

#include <map>
#include <string>
#include <vector>

#include "jobs/metrics.hpp"
#include "jobs/table.hpp"

namespace fabricsim::jobs {

/// One regression case.
struct RegressCase {
  std::string name;                      ///< filesystem-safe; its reference is references/<name>.json
  std::string spec;                      ///< absolute spec path or ""
  std::string workload;                  ///< absolute workload path or ""
  std::uint32_t gpus = 0;                ///< --gpus (0 = none)
  std::vector<std::string> sets;         ///< key=value
  std::map<std::string, double> tolerances;  ///< per-metric relative tolerance
};

/// A parsed suite.
struct RegressSuite {
  std::string dir;                       ///< REFERENCE_DIR
  std::string file;                      ///< REFERENCE_DIR/suite.yaml
  std::string name;
  double default_tolerance = 1e-9;
  std::map<std::string, double> tolerances;  ///< suite-wide per metric
  std::vector<RegressCase> cases;
};

/// Loads REFERENCE_DIR/suite.yaml. @throws engine::InputError for a missing or malformed suite.
RegressSuite load_suite(const std::string& reference_dir);

/// The relative tolerance of a metric in a case (case, then suite, then default).
double tolerance_of(const RegressSuite& s, const RegressCase& c, const std::string& metric);

/// True if `value` is within relative tolerance `tol` of `ref`: |value - ref| <= tol * |ref|
/// (for ref == 0: |value| <= tol).
bool within(double ref, double value, double tol);

/// Options of one regression run.
struct RegressOptions {
  bool rebaseline = false;              ///< write references instead of comparing
  std::vector<std::string> sets;        ///< extra --set applied to every case (what-ifs, tests)
  std::vector<std::string> only;        ///< case names to run (empty = all)
  std::string version, git_commit;      ///< recorded in rewritten references
};

/// Outcome of a regression run.
struct RegressReport {
  Table table;          ///< case, metric, reference, current, rel_diff, tolerance, status
  std::string text;     ///< the printed table and a verdict line
  std::size_t drifted = 0;   ///< metrics outside tolerance (+ missing/new metrics)
  std::size_t errors = 0;    ///< cases that failed to run
};

/// Runs the suite collectively on `comm` (every process calls it; rank 0 reads and writes files).
/// A case that throws is reported as an error row and the others still run.
/// @throws engine::InputError before running anything if a case has no reference (and not
///         rebaselining) or a reference file is malformed.
RegressReport run_regress(const RegressSuite& suite, const RegressOptions& opt, MPI_Comm comm);

}  // namespace fabricsim::jobs
