#pragma once
/// @file sweep.hpp
/// Parameter sweeps (`fabricsim sweep`): a sweep file names a base spec and axes over spec keys;
/// the axes expand (Cartesian product of axes, each axis one key or several zipped keys) into
/// design points with stable, filesystem-safe names. Points run as child `fabricsim run`
/// processes (locally, or one Slurm array task each) writing OUT_DIR/<point>/{results.h5,
/// summary.json}; a point whose summary.json exists is done (resume). The aggregate is one table
/// (CSV + HDF5) with the axis values and key results of every point.
///
/// Sweep file (YAML; see examples/sweeps/ and docs/sweeps.md):
/// @code
///   name: nic_x_tp                   # optional; default: the file name without extension
///   base: ../quickstart.yaml         # base spec, relative to the sweep file (required)
///   output_dir: sweeps/nic_x_tp      # optional; default sweeps/<name> (relative to the cwd)
///   set: {cluster.topology: leaf_spine}   # optional: overrides for every point
///   axes:                            # Cartesian product; the first axis varies slowest
///     - key: cluster.nic_bandwidth
///       values: [200Gbps, 400Gbps]
///     - name: topo                   # zipped keys advance together
///       zip: {cluster.hosts: [32, 4], cluster.gpus_per_host: [1, 8]}
///       labels: [t1, t8]             # optional: names used in point names
/// @endcode
#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "jobs/table.hpp"

namespace fabricsim::jobs {

/// One axis: one key (list axis) or several keys stepped together (zip axis).
struct SweepAxis {
  std::string name;                              ///< axis name used in point names
  std::vector<std::string> keys;                 ///< spec keys set by this axis
  std::vector<std::vector<std::string>> values;  ///< values[step][k]: value of keys[k] at step
  std::vector<std::string> labels;               ///< per step, filesystem-safe
};

/// One design point of a sweep.
struct SweepPoint {
  std::size_t index = 0;                                  ///< position in expansion order
  std::string name;                                       ///< stable, filesystem-safe
  std::vector<std::pair<std::string, std::string>> sets;  ///< key=value overrides (fixed sets first)
  std::vector<std::string> labels;                        ///< label per axis
};

/// A parsed, expanded and validated sweep.
struct Sweep {
  std::string file;       ///< the sweep file as given
  std::string name;       ///< sweep name
  std::string base_spec;  ///< absolute path of the base spec
  std::string output_dir; ///< default output directory (may be overridden on the command line)
  std::vector<std::pair<std::string, std::string>> fixed_sets;  ///< `set:` overrides
  std::vector<SweepAxis> axes;
  std::vector<SweepPoint> points;
};

/// Makes a value usable in a file name: keeps [A-Za-z0-9.+-], maps anything else to '_'; a path
/// becomes its file name without extension. Never empty ("_" for an empty value).
std::string safe_label(const std::string& value);

/// Expands axes into points: Cartesian product over axes (first axis slowest), each axis stepping
/// through its values; point name = "<axis>-<label>" joined by "__" ("base" with no axes).
/// @throws engine::InputError (file, "axes", duplicate point name, fix: give labels).
std::vector<SweepPoint> expand_axes(const std::string& file,
                                    const std::vector<std::pair<std::string, std::string>>& fixed,
                                    const std::vector<SweepAxis>& axes);

/// Loads a sweep file, expands it, and checks every point's spec with load_spec (base spec +
/// the point's --set overrides), so an unknown key or a bad value is reported before anything
/// runs, naming the point and the key.
/// @throws engine::InputError "SWEEP: point NAME: KEY: problem; fix" or a sweep-file error.
Sweep load_sweep(const std::string& path);

/// The argument vector of `fabricsim run` for one point (argv[0] = exe).
std::vector<std::string> point_command(const Sweep& sw, const SweepPoint& p, const std::string& exe,
                                       const std::string& out_dir, std::uint32_t threads);

/// How points run on this machine.
struct LocalRunOptions {
  std::string exe;             ///< fabricsim binary (default: /proc/self/exe)
  std::string out_dir;         ///< OUT_DIR
  unsigned jobs = 1;           ///< concurrent points
  double timeout_s = 0;        ///< per-point wall limit (0 = none); the point fails on expiry
  std::uint32_t threads = 0;   ///< --threads for each point (0 = the spec's)
  std::vector<std::string> launcher;  ///< prefix, e.g. {"srun", "--mpi=pmix"} (empty: direct)
};

/// Result of one point as found on disk (or just run).
struct PointStatus {
  std::string status;  ///< "ok", "failed" or "pending"
  std::string error;   ///< one line for failed points
};

/// Runs the points that are not done (no OUT_DIR/<point>/summary.json), at most opt.jobs at a
/// time as child processes. Each child's stdout+stderr go to OUT_DIR/<point>/run.log; a failed
/// point gets OUT_DIR/<point>/error.txt (its error line) and the others continue. Progress goes
/// to `log`. `only` (if not empty) restricts the run to those point names.
/// @returns the number of points that failed in this call.
std::size_t run_points(const Sweep& sw, const LocalRunOptions& opt, const std::vector<std::string>& only,
                       std::ostream& log);

/// Status of a point from its output directory.
PointStatus point_status(const std::string& out_dir, const SweepPoint& p);

/// Finds a point by name or by index ("3").
/// @throws engine::InputError if there is no such point.
const SweepPoint& find_point(const Sweep& sw, const std::string& name_or_index);

/// Builds the aggregate table: point, index, status, axis_<name> (the point's label on each axis),
/// one column per swept or fixed key (its value), the
/// metrics of metrics.hpp (busbw_<op>_GBps for every op seen), time_vs_fastest (iteration time /
/// the fastest ok point's), wall_s, digest and error.
Table aggregate(const Sweep& sw, const std::string& out_dir);

/// Writes OUT_DIR/aggregate.csv and OUT_DIR/aggregate.h5 (dataset /points).
/// @returns the CSV path.
std::string write_aggregate(const Sweep& sw, const std::string& out_dir, const Table& t);

/// Options of the Slurm array script.
struct SubmitOptions {
  std::string exe;                       ///< fabricsim binary (absolute)
  std::string out_dir;                   ///< OUT_DIR (absolute)
  unsigned throttle = 8;                 ///< at most this many array tasks at once (%K)
  unsigned ntasks = 1;                   ///< MPI processes per point (srun inside the task if > 1)
  std::uint32_t threads = 1;             ///< engine threads per process (--cpus-per-task)
  std::string time_limit;                ///< --time (empty: partition default)
  std::string partition;                 ///< --partition (empty: default)
  std::vector<std::string> sbatch_args;  ///< extra #SBATCH lines, e.g. "--mem=4G"
};

/// The array job script for the points not done yet: one array task per point (index = point
/// index), throttled with %K, logs in OUT_DIR/slurm/%A_%a.out, requeue-safe (a task that reruns
/// finds the point done or reruns it from scratch; outputs are written atomically).
/// @returns "" if every point is done.
std::string array_script(const Sweep& sw, const SubmitOptions& opt);

}  // namespace fabricsim::jobs
