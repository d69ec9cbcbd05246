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

/// Options of `fabricsim nccl-tests`.
struct NcclTestsOptions {
  std::string collective = "all_reduce";  ///< nccl-tests binary name without _perf
  std::string spec_path;                  ///< optional spec (cluster, nccl:, simccl:)
  std::vector<std::string> sets;          ///< --set key=value
  std::uint64_t min_bytes = 32ull << 20;  ///< -b, bytes
  std::uint64_t max_bytes = 32ull << 20;  ///< -e, bytes
  std::uint32_t factor = 2;               ///< -f
  std::uint32_t gpus_per_node = 8;        ///< -g
  std::uint32_t nodes = 1;                ///< -n / --nodes
  std::uint32_t root = 0;                 ///< -r
  bool explain = false;                   ///< print simccl's choice per size
};

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
