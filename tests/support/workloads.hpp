#pragma once
// In-memory workloads for the scenarios tests build again and again: one collective on every
// rank, point-to-point flows (incast, shift permutation), and a one-collective SimAI file.
#include <cstdint>
#include <string>
#include <vector>

#include "models/core/workload.hpp"

namespace fabricsim::testing {

/// `n` ranks with only the world communicator (groups[0], ranks 0..n-1) and empty programs.
/// `format` matters to the runner ("chakra" worlds are the Chakra default group); `source` is
/// the name reports print.
models::Workload world_workload(std::uint32_t n, const std::string& format = "simai",
                                const std::string& source = "<test>");

/// Appends one collective node (`op`, `bytes` per rank, communicator index `group`, node name
/// `name`) to every rank's program.
void add_collective(models::Workload& w, models::CollOp op, std::uint64_t bytes, const std::string& name,
                    std::int32_t group = 0);

/// world_workload(n) with one collective `op` of `bytes` named `name` on every rank.
models::Workload collective_workload(std::uint32_t n, models::CollOp op, std::uint64_t bytes,
                                     const std::string& name);

/// Appends a send of `bytes` from rank `src` to rank `dst` (after the nodes `deps` of src's
/// program) and its matching receive on `dst`, both with tag `tag`.
void add_p2p(models::Workload& w, std::uint32_t src, std::uint32_t dst, std::uint64_t bytes, std::int64_t tag,
             std::vector<std::uint32_t> deps = {});

/// world_workload(n): ranks 1..n-1 each send `bytes` to rank 0 at time 0 (tag = sender).
models::Workload incast_workload(std::uint32_t n, std::uint64_t bytes);

/// A point-to-point message; `start_ps` delays its send (a compute node before it).
struct P2pFlow {
  unsigned src = 0, dst = 0;
  unsigned long long bytes = 0;
  long long start_ps = 0;
};

/// world_workload(ranks, format, source) where flow i is a send on its source (after a compute
/// node of start_ps when that is positive) and a receive on its destination, tag i.
models::Workload p2p_workload(unsigned ranks, const std::vector<P2pFlow>& flows,
                              const std::string& format = "chakra", const std::string& source = "<test>");

/// `senders` flows of `bytes` into rank `receiver`, from ranks 0..senders-1.
std::vector<P2pFlow> incast_flows(unsigned senders, unsigned receiver, unsigned long long bytes);

/// The shift permutation of `ranks`: rank i sends `bytes` to rank (i + shift) mod ranks.
std::vector<P2pFlow> shift_permutation_flows(unsigned ranks, unsigned shift, unsigned long long bytes);

/// Writes a SimAI MICRO workload file with one collective `comm` (e.g. "ALLREDUCE") of `bytes`
/// and no compute into `dir` (rank 0 writes, all MPI processes wait) and returns its path.
std::string micro_workload(const std::string& dir, const std::string& comm, unsigned long long bytes);

}  // namespace fabricsim::testing
