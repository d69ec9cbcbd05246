#pragma once
/// @file nccl_tests.hpp
/// nccl-tests compatible sweeps on the simulated cluster (`fabricsim nccl-tests`): one in-memory
/// workload per size, run through jobs::run_simulation, printed as nccl-tests prints.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "models/core/workload.hpp"

namespace fabricsim::jobs {

/// Options of `fabricsim nccl-tests`, named after nccl-tests' own flags (src/common.cu). Those
/// that cannot change a simulated result are accepted, echoed in the header and documented as
/// such (docs/validation_nccl.md): the simulation is deterministic and moves no data.
struct NcclTestsOptions {
  std::string collective = "all_reduce";  ///< nccl-tests binary name without _perf
  std::string spec_path;                  ///< optional spec (cluster, nccl:, simccl:)
  std::vector<std::string> sets;          ///< --set key=value
  std::uint64_t min_bytes = 32ull << 20;  ///< -b, bytes
  std::uint64_t max_bytes = 32ull << 20;  ///< -e, bytes
  std::uint32_t factor = 2;               ///< -f; 1 = add step_bytes instead (nccl-tests' default)
  std::uint64_t step_bytes = 1ull << 20;  ///< -i, bytes added per step when factor is 1
  std::uint32_t gpus_per_node = 8;        ///< -g (GPUs per process; one simulated process per node)
  std::uint32_t nodes = 1;                ///< --nodes
  std::uint32_t root = 0;                 ///< -r (takes effect for broadcast and reduce)
  std::string datatype = "float";         ///< -d: sets the element size (count = bytes / size)
  std::string redop = "sum";              ///< -o: printed; no effect on time (no data is reduced)
  std::uint32_t iters = 20;               ///< -n: printed; no effect (every iteration is the same)
  std::uint32_t warmup_iters = 5;         ///< -w: printed; no effect (no warm-up state is simulated)
  std::uint32_t check = 1;                ///< -c: printed; #wrong is N/A (no data is moved)
  std::uint32_t blocking = 0;             ///< -z: printed; no effect (one collective at a time)
  std::vector<std::uint64_t> sizes;       ///< explicit sizes (bytes, nccl-tests convention); empty = -b/-e/-f/-i
  bool explain = false;                   ///< print simccl's choice per size
};

/// Element size in bytes of an nccl-tests -d type (int8, uint8, int32, uint32, int64, uint64,
/// half, float, double, bfloat16, and NCCL 2.24's fp8 types f8e4m3, f8e5m2).
/// @throws engine::InputError naming -d and the valid names.
std::uint32_t nccl_tests_type_size(const std::string& type);

/// Checks an nccl-tests -o reduction name (sum, prod, max, min, avg, mulsum).
/// @throws engine::InputError naming -o and the valid names.
void check_nccl_tests_redop(const std::string& op);

/// Formats a number as nccl-tests does in a column of `width` characters (util.cu getFloatStr):
/// two decimals while they fit, then one, then none, then exponent notation.
std::string nccl_tests_float(double value, int width);

/// One table row of a published nccl-tests log (stdout of an *_perf binary).
struct NcclTestsLogRow {
  int line = 0;                 ///< 1-based line in the log
  std::uint64_t bytes = 0;      ///< "size" column, bytes
  std::uint64_t count = 0;      ///< "count" column, elements
  std::string type;             ///< "type" column, e.g. "float"
  std::string redop;            ///< "redop" column ("none" for non-reducing collectives)
  int root = -1;                ///< "root" column (-1 when not rooted or absent)
  double oop_busbw_GBps = 0;    ///< out-of-place busbw, GB/s
  double ip_busbw_GBps = -1;    ///< in-place busbw, GB/s (-1 when the log has no in-place half)
};

/// A published nccl-tests log as parse_nccl_tests_log reads it.
struct NcclTestsLog {
  std::string path;             ///< file name, for messages
  std::string collective;       ///< from "# Collective test starting: X_perf" ("" when absent)
  std::uint32_t ranks = 0;      ///< "#  Rank" lines (0 when absent)
  std::uint32_t nodes = 0;      ///< distinct hosts of those lines (0 when absent)
  std::uint32_t ngpus = 0;      ///< nGpus of the "# nThread" line (0 when absent)
  std::vector<NcclTestsLogRow> rows;
};

/// Reads the text of an nccl-tests log labelled `path`: the "# nThread" / "# Using devices" /
/// "# Collective test starting" header lines where present, the column header, the rows and the
/// "# Avg bus bandwidth" footer. NCCL debug lines ("NCCL INFO", "NCCL WARN") between rows are
/// skipped. @throws engine::InputError (path, "line N", problem, fix) for a foreign log (no table
/// header), a truncated one (no rows, a short row, no footer), a non-numeric row, sizes that do not
/// grow row by row, or a second table.
NcclTestsLog parse_nccl_tests_log_text(const std::string& text, const std::string& path);

/// parse_nccl_tests_log_text of the file at `path`. @throws engine::InputError when unreadable.
NcclTestsLog parse_nccl_tests_log(const std::string& path);

/// One compared size.
struct NcclTestsCompareRow {
  std::uint64_t bytes = 0;
  double measured_oop_GBps = 0, measured_ip_GBps = -1;  ///< published busbw (ip -1 when absent)
  double simulated_GBps = 0;                            ///< simulated busbw
  double error_pct = 0;  ///< 100 x (simulated - measured out-of-place) / measured out-of-place
};

/// `fabricsim nccl-tests --compare LOG`: re-runs the log's collective, sizes, type and root on the
/// cluster of `opt` (whose collective, gpus_per_node and nodes the caller has filled from the log
/// or the flags) and prints per size the measured and simulated busbw and the error.
/// @throws engine::InputError when a logged size is not whole elements per rank for this rank
/// count, or for bad options.
std::string compare_nccl_tests(const NcclTestsOptions& opt, const NcclTestsLog& log, MPI_Comm comm,
                               const std::string& version, const std::string& git_commit,
                               std::vector<NcclTestsCompareRow>* rows = nullptr);

/// One row of the table.
struct NcclTestsRow {
  std::uint64_t bytes = 0;  ///< nccl-tests "size": the larger of the send and receive buffers, bytes
  /// nccl-tests "count" (elements of 4-byte float): the count passed to the NCCL call, which is
  /// per rank for all_gather / reduce_scatter / alltoall (size / 4 / ranks) and the whole buffer
  /// for the others (size / 4). nccl-tests common.cu prints args->nbytes / wordSize with nbytes =
  /// paramcount x wordSize; all_gather.cu, reduce_scatter.cu and alltoall.cu set paramcount to
  /// count / nranks.
  std::uint64_t count = 0;
  double time_us = 0;       ///< simulated time of the collective
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  std::string choice;       ///< "Ring/Simple 24ch" (empty for sendrecv)
};

/// Parses an nccl-tests size ("8", "128K", "1M", "8G": powers of 1024), 1 B .. 64 GiB.
/// @throws engine::InputError naming `flag`.
std::uint64_t parse_nccl_tests_size(const std::string& text, const std::string& flag);

/// The workload of one nccl-tests iteration: `ranks` ranks, one collective (or a ring of
/// send/recv for "sendrecv") of `bytes`. @throws engine::InputError for an unknown collective.
models::Workload nccl_tests_workload(const std::string& collective, std::uint32_t ranks, std::uint64_t bytes,
                                     std::uint32_t root);

/// `fabricsim plan`: what simccl chooses for one call of `opt.collective` of `bytes` (nccl-tests
/// size convention) on the cluster of `opt` (spec, --set, -g, -n), and why: the NCCL_* settings
/// in effect, the cost model's table (per algorithm x protocol: latency us, algorithm bandwidth
/// GB/s, estimated time us, or the reason it is unavailable), the choice (algorithm, protocol,
/// channels, threads) and the resulting plan summed over all ranks (messages, channels, steps,
/// message sizes, bytes on NVLink and on the network, PXN relays). Builds plans, simulates nothing.
/// @throws engine::InputError for bad options or settings (exit 2).
std::string plan_report(const NcclTestsOptions& opt, std::uint64_t bytes);

/// Runs the sweep collectively on `comm`; fills `rows` if given. @returns the printed table.
/// @throws engine::InputError for bad options (exit 2).
std::string run_nccl_tests(const NcclTestsOptions& opt, MPI_Comm comm, const std::string& version,
                           const std::string& git_commit, std::vector<NcclTestsRow>* rows = nullptr);

}  // namespace fabricsim::jobs
