// The same spec gives bit-identical per-collective and per-flow tables
// for 1, 2 and 4 MPI processes and 1 and 2 threads. Registered sequentially and under
// mpiexec -n 2 / -n 4; in every configuration the run on MPI_COMM_WORLD (all processes, with 1
// and 2 threads) is compared with a sequential reference run on MPI_COMM_SELF.
#include <gtest/gtest.h>

#include <string>

#include "io/digest.hpp"
#include "jobs/run.hpp"
#include "partition/partition.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/scratch.hpp"
#include "tests/support/mpi.hpp"

using fabricsim::testing::world_procs;

namespace {

using fabricsim::jobs::RunOptions;
using fabricsim::jobs::run_simulation;

struct Input {
  const char* name;
  std::string workload;
  unsigned gpus;
  std::vector<std::string> sets;
};

std::vector<Input> inputs() {
  const std::string chakra = "chakra/astra-sim/examples/";
  return {
      {"allreduce16", fabricsim::testing::data(chakra + "workload/microbenchmarks/all_reduce/16npus_1MB/all_reduce"), 0, {}},
      {"alltoall8_two_hosts", fabricsim::testing::data(chakra + "workload/microbenchmarks/all_to_all/8npus_1MB/all_to_all"), 0,
       {"cluster.gpus_per_host=4"}},
      {"custom_sendrecv", fabricsim::testing::data(chakra + "system/custom_collectives/custom_ring_allreduce_8npus_1MB/custom_allreduce"), 0,
       {"cluster.gpus_per_host=2"}},
      {"hybrid_tp8_dp4", fabricsim::testing::data("synthetic/hybrid_tp8_dp4.txt"), 0,
       {"cluster.nics_per_leaf=2", "cluster.spines=2"}},  // 2 leaves per rail group: ECMP over spines
  };
}

/// Runs input `in` on `comm` with `threads` threads (no HDF5 file); `keep_flows` keeps the flow
/// records.
fabricsim::jobs::RunResult run_on(MPI_Comm comm, const Input& in, unsigned threads, bool keep_flows = false) {
  RunOptions opt;
  opt.workload = in.workload;
  opt.gpus = in.gpus;
  opt.sets = in.sets;
  opt.threads = threads;
  opt.write_h5 = false;
  opt.keep_flows = keep_flows;
  return run_simulation(opt, comm, "test", "test");
}

TEST(Determinism, IdenticalTablesAcrossProcessesAndThreads) {
  const int procs = world_procs();
  for (const Input& in : inputs()) {
    SCOPED_TRACE(in.name);
    const auto ref = run_on(MPI_COMM_SELF, in, 1);
    // custom_sendrecv is point-to-point only: it has flows but no collective records.
    if (std::string(in.name) != "custom_sendrecv") {
      ASSERT_FALSE(ref.collectives.empty());
    }
    ASSERT_GT(ref.flows, 0u);
    for (unsigned threads : {1u, 2u}) {
      SCOPED_TRACE("threads=" + std::to_string(threads) + " processes=" + std::to_string(procs));
      const auto got = run_on(MPI_COMM_WORLD, in, threads);
      EXPECT_EQ(got.digest, ref.digest);
      EXPECT_EQ(got.flows, ref.flows);
      EXPECT_EQ(got.stats.events, ref.stats.events);
      EXPECT_EQ(got.meta.simulated_time_ps, ref.meta.simulated_time_ps);
      ASSERT_EQ(got.ranks.size(), ref.ranks.size());
      for (std::size_t r = 0; r < got.ranks.size(); ++r) {
        EXPECT_EQ(got.ranks[r].finish_ps, ref.ranks[r].finish_ps);
        EXPECT_EQ(got.ranks[r].compute_ps, ref.ranks[r].compute_ps);
        EXPECT_EQ(got.ranks[r].comm_ps, ref.ranks[r].comm_ps);
        EXPECT_EQ(got.ranks[r].exposed_comm_ps, ref.ranks[r].exposed_comm_ps);
        EXPECT_EQ(got.ranks[r].exposed_kind_ps, ref.ranks[r].exposed_kind_ps);
        EXPECT_EQ(got.ranks[r].pp_wait_ps, ref.ranks[r].pp_wait_ps);
        EXPECT_EQ(got.ranks[r].bubble_ps, ref.ranks[r].bubble_ps);
      }
      if (procs > 1 || threads > 1) {
        // The partition really was cut: windows are bounded by the lookahead.
        EXPECT_GT(got.stats.windows, 1u);
      }
    }
  }
}

// Issue 7: a METIS placement, and the same placement saved to a file and read back, give the
// tables of the sequential topology-placed reference, bit for bit.
TEST(Determinism, DigestNeedsNoFlowRecords) {
  // io/digest.hpp: the digest is the same whether flow records are kept or not, and equals the
  // digest recomputed from the gathered tables (collectives + every flow record).
  for (const Input& in : inputs()) {
    SCOPED_TRACE(in.name);
    const auto lean = run_on(MPI_COMM_WORLD, in, 1);
    const auto full = run_on(MPI_COMM_WORLD, in, 0, /*keep_flows=*/true);  // 0: threads from the spec
    EXPECT_EQ(lean.digest, full.digest);
    EXPECT_EQ(lean.flows, full.flows);
    EXPECT_TRUE(lean.flow_records.empty());
    ASSERT_EQ(full.flow_records.size(), full.flows);
    fabricsim::io::FlowDigest d;
    for (const auto& f : full.flow_records) d.add(f);
    const std::string tables = fabricsim::io::results_digest_sum(MPI_COMM_SELF, full.collectives, d);
    // (run_simulation folds the fabric counters in after this table part.) The table part does
    // not depend on the order in which records are folded in:
    fabricsim::io::FlowDigest rev;
    for (auto it = full.flow_records.rbegin(); it != full.flow_records.rend(); ++it) rev.add(*it);
    EXPECT_EQ(fabricsim::io::results_digest_sum(MPI_COMM_SELF, full.collectives, rev), tables);
    EXPECT_EQ(d.count, full.flows);
  }
}

TEST(Determinism, MetisAndPartitionFileMatchTopologyPlacement) {
  if (!fabricsim::partition::have_metis()) GTEST_SKIP() << "built without METIS";
  const int procs = world_procs();
  for (const Input& base : inputs()) {
    if (std::string(base.name) != "hybrid_tp8_dp4" && std::string(base.name) != "allreduce16") continue;
    SCOPED_TRACE(base.name);
    const auto ref = run_on(MPI_COMM_SELF, base, 1);
    const fabricsim::testing::ScratchDir scratch(std::string("part_") + base.name);
    for (unsigned threads : {1u, 2u}) {
      SCOPED_TRACE("threads=" + std::to_string(threads) + " processes=" + std::to_string(procs));
      const std::string file = scratch.path() + "/" + std::to_string(procs) + "x" + std::to_string(threads) + ".txt";
      Input metis = base;
      metis.sets.push_back("sim.partition=metis");
      metis.sets.push_back("sim.save_partition=" + file);
      const auto got = run_on(MPI_COMM_WORLD, metis, threads);
      EXPECT_EQ(got.digest, ref.digest);
      EXPECT_EQ(got.stats.events, ref.stats.events);
      EXPECT_EQ(got.meta.simulated_time_ps, ref.meta.simulated_time_ps);
      MPI_Barrier(MPI_COMM_WORLD);  // rank 0 wrote the file
      Input reuse = base;
      reuse.sets.push_back("sim.partition=" + file);
      const auto again = run_on(MPI_COMM_WORLD, reuse, threads);
      EXPECT_EQ(again.digest, ref.digest);
      EXPECT_EQ(again.stats.windows, got.stats.windows);
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
}

}  // namespace
