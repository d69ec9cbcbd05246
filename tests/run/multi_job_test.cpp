// Several jobs on one fabric (jobs: specs, docs/jobs_and_faults.md): jobs with no shared link run
// exactly as alone; overlapping placements and too many GPUs are refused naming the key.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/errors.hpp"
#include "tests/support/mpi.hpp"
#include "jobs/run.hpp"

namespace {

namespace fs = std::filesystem;
namespace j = fabricsim::jobs;

/// Two 16-GPU jobs (TP 8 x DP 2, one GPT-3 13B layer) on 4 hosts, 2 per leaf, with `placement`
/// lines per job (YAML text after each job's name).
std::string spec_file(const std::string& name, const std::string& hosts, const std::string& a, const std::string& b) {
  const char* tmp = std::getenv("TMPDIR");
  const fs::path dir = fs::path(tmp ? tmp : "/tmp") / "fabricsim_multi_job_test";
  fs::create_directories(dir);
  const fs::path p = dir / (name + ".yaml");
  const std::string gen =
      "    workload:\n      generator: {model: gpt3-13b, layers: 1, gpu: H100, tp: 8, dp: 2, gpus: 16, global_batch: 2, "
      "micro_batch: 1, seq_len: 512}\n";
  // Under several MPI processes only rank 0 writes the file; the others wait for it.
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
  std::ofstream(p) << "cluster:\n  hosts: " << hosts
                   << "\n  gpus_per_host: 8\n  topology: leaf_spine\n  nics_per_leaf: 16\n  oversubscription: \"4:1\"\n"
                      "jobs:\n  - name: a\n"
                   << a << gen << "  - name: b\n" << b << gen;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return p.string();
}

j::RunResult run(const std::string& spec, bool isolated, MPI_Comm comm = MPI_COMM_WORLD, unsigned threads = 1) {
  j::RunOptions o;
  o.spec_path = spec;
  o.write_h5 = false;
  o.quiet = true;
  o.log_level = "error";
  o.isolated = isolated;
  o.threads = threads;
  return j::run_simulation(o, comm, "test", "");
}

// Each job on its own leaf: their DP rings stay below their leaf, no link is shared, so each
// runs exactly (to the picosecond) as it does alone on the same hosts.
TEST(MultiJob, DisjointLeavesRunExactlyAsAlone) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const auto r = run(spec_file("disjoint", "4", "    placement: leaf\n", "    placement: leaf\n"), true);
  ASSERT_EQ(r.jobs.size(), 2u);
  for (const auto& job : r.jobs) {
    EXPECT_GT(job.iteration_ps, 0);
    EXPECT_EQ(job.iteration_ps, job.alone_iteration_ps) << job.name;
  }
  // Disjoint hosts: job a on leaf 0 (hosts 0, 1), job b on leaf 1.
  EXPECT_EQ(r.jobs[0].gpus.front(), 0u);
  EXPECT_EQ(r.jobs[1].gpus.front(), 16u);
  // No switch link carried data of both jobs (the per-link totals, HDF5 /link_totals).
  ASSERT_FALSE(r.link_totals.empty());
  for (const auto& l : r.link_totals) EXPECT_LE(l.jobs, 1u) << l.link_id;
  // The job column (schema 5): each rank is tagged with the job that holds its GPU.
  for (std::size_t k = 0; k < r.jobs.size(); ++k) {
    for (const std::uint32_t g : r.jobs[k].gpus) EXPECT_EQ(r.ranks[g].job, static_cast<std::int32_t>(k)) << g;
  }
}

// The same jobs dealt round-robin over the leaves share the leaf uplinks: neither is faster than
// alone, and the pair is slower in total.
TEST(MultiJob, SharedUplinksSlowTheJobsDown) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const auto r = run(spec_file("shared", "4", "    placement: spread\n", "    placement: spread\n"), true);
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_GE(r.jobs[0].iteration_ps, r.jobs[0].alone_iteration_ps);
  EXPECT_GE(r.jobs[1].iteration_ps, r.jobs[1].alone_iteration_ps);
  EXPECT_GT(r.jobs[0].iteration_ps + r.jobs[1].iteration_ps, r.jobs[0].alone_iteration_ps + r.jobs[1].alone_iteration_ps);
  // Both jobs' data crossed the leaf uplinks: those links are marked shared (jobs 2, mask 0b11),
  // and every collective record names the job of its communicator.
  std::size_t shared = 0;
  for (const auto& l : r.link_totals) {
    if (l.jobs < 2) continue;
    ++shared;
    EXPECT_EQ(l.job_mask, 3u);
    EXPECT_GT(l.bytes, 0u);
  }
  EXPECT_GT(shared, 0u);
  for (const auto& c : r.collectives) {
    if (c.ranks > 1) {
      EXPECT_GE(c.job, 0) << c.group;
    }
  }
}

void expect_input_error(const std::string& spec, const std::string& key, const std::string& word) {
  try {
    run(spec, false);
    ADD_FAILURE() << "no error for " << spec;
  } catch (const fabricsim::engine::InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(key), std::string::npos) << m;
    EXPECT_NE(m.find(word), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(MultiJob, OverlappingPlacementIsRefused) {
  FABRICSIM_SEQUENTIAL_ONLY("input errors");
  expect_input_error(spec_file("overlap", "4", "    hosts: \"0-1\"\n", "    hosts: \"1-2\"\n"), "jobs[1].hosts", "overlap");
}

TEST(MultiJob, MoreGpusThanTheClusterIsRefused) {
  FABRICSIM_SEQUENTIAL_ONLY("input errors");
  expect_input_error(spec_file("toomany", "3", "", ""), "jobs:", "cluster.hosts >= 4");
}

// Two jobs sharing links are simulated identically on any number of processes and threads:
// equal digests (collectives, flows, fabric counters), per-job iteration times and per-link
// totals (multi_job_test_mpi2 runs this on 2 processes against one).
TEST(MultiJob, SharedRunIsIdenticalOnAnyProcessCount) {
  const std::string spec = spec_file("shared_det", "4", "    placement: spread\n", "    placement: spread\n");
  const auto alone = run(spec, false, MPI_COMM_SELF);
  for (unsigned threads : {1u, 2u}) {
    const auto all = run(spec, false, MPI_COMM_WORLD, threads);
    EXPECT_EQ(all.digest, alone.digest) << threads << " threads";
    ASSERT_EQ(all.jobs.size(), alone.jobs.size());
    for (std::size_t k = 0; k < all.jobs.size(); ++k) EXPECT_EQ(all.jobs[k].iteration_ps, alone.jobs[k].iteration_ps);
    ASSERT_EQ(all.link_totals.size(), alone.link_totals.size());
    for (std::size_t i = 0; i < all.link_totals.size(); ++i) {
      EXPECT_EQ(all.link_totals[i].link_id, alone.link_totals[i].link_id);
      EXPECT_EQ(all.link_totals[i].bytes, alone.link_totals[i].bytes);
      EXPECT_EQ(all.link_totals[i].ecn_marks, alone.link_totals[i].ecn_marks);
      EXPECT_EQ(all.link_totals[i].job_mask, alone.link_totals[i].job_mask);
    }
  }
}

}  // namespace
