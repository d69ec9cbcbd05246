// Progress reports (jobs/progress.hpp, docs/progress.md): the ETA's closed form on synthetic
// reports, the work done of a real run against its closed form, a positive ETA during the last
// collective, and results that do not depend on progress. Registered sequentially and under
// mpiexec -n 2 (the reports then sum both processes' ranks).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/errors.hpp"
#include "engine/units.hpp"
#include "jobs/progress.hpp"
#include "jobs/run.hpp"
#include "tests/support/mpi.hpp"
#include "tests/support/workloads.hpp"

namespace {

namespace m = fabricsim::models;
using fabricsim::engine::InputError;
using fabricsim::engine::ProgressInfo;
using fabricsim::engine::SimTime;
using fabricsim::jobs::estimate_progress;

ProgressInfo info(SimTime now, std::uint64_t events, double wall, double done, double total) {
  ProgressInfo p;
  p.now_ps = now;
  p.events = events;
  p.wall_s = wall;
  p.work = {done, total};
  return p;
}

TEST(ProgressEstimate, EtaIsElapsedTimesRemainingOverDone) {
  // 250 of 1000 units of work in 10 s: the remaining 750 take 30 s at that speed.
  const auto e = estimate_progress(info(5, 1000, 10.0, 250.0, 1000.0));
  EXPECT_DOUBLE_EQ(e.fraction, 0.25);
  EXPECT_DOUBLE_EQ(e.eta_s, 30.0);
  EXPECT_DOUBLE_EQ(e.events_per_s, 100.0);
  // Another point: 0.9 done after 4.5 s leaves 0.5 s.
  const auto f = estimate_progress(info(5, 9, 4.5, 9.0, 10.0));
  EXPECT_NEAR(f.eta_s, 4.5 * 1.0 / 9.0, 1e-12);
}

TEST(ProgressEstimate, LaterReportsUseTheLastIntervalsSpeed) {
  fabricsim::jobs::ProgressEstimator est;
  // First report: average speed, 750 left at 25 per s.
  EXPECT_DOUBLE_EQ(est.next(info(1, 10, 10.0, 250.0, 1000.0)).eta_s, 750.0 * 10.0 / 250.0);
  // 50 more in 2 s: 700 left at 25 per s -> 28 s (the average speed would give 700 * 12 / 300).
  EXPECT_DOUBLE_EQ(est.next(info(2, 20, 12.0, 300.0, 1000.0)).eta_s, 700.0 * 2.0 / 50.0);
  // A slow phase, 10 in 4 s: 690 left at 2.5 per s.
  EXPECT_DOUBLE_EQ(est.next(info(3, 30, 16.0, 310.0, 1000.0)).eta_s, 690.0 * 4.0 / 10.0);
  // No work in the last interval: back to the average speed, 690 * 18 / 310.
  EXPECT_DOUBLE_EQ(est.next(info(4, 40, 18.0, 310.0, 1000.0)).eta_s, 690.0 * 18.0 / 310.0);
  // The end.
  EXPECT_DOUBLE_EQ(est.next(info(5, 50, 19.0, 1000.0, 1000.0)).eta_s, 0.0);
}

TEST(ProgressEstimate, UnknownBeforeAnyWorkAndZeroAtTheEnd) {
  EXPECT_LT(estimate_progress(info(0, 0, 3.0, 0.0, 100.0)).eta_s, 0);    // nothing done yet
  EXPECT_LT(estimate_progress(info(0, 10, 0.0, 5.0, 100.0)).eta_s, 0);   // no wall time yet
  EXPECT_DOUBLE_EQ(estimate_progress(info(0, 10, 2.0, 100.0, 100.0)).eta_s, 0.0);
  EXPECT_DOUBLE_EQ(estimate_progress(info(0, 10, 2.0, 100.0, 100.0)).fraction, 1.0);
  EXPECT_DOUBLE_EQ(estimate_progress(info(0, 0, 0.0, 0.0, 0.0)).fraction, 0.0);
  // Anything short of the total leaves a positive ETA.
  EXPECT_GT(estimate_progress(info(0, 10, 2.0, 99.999, 100.0)).eta_s, 0.0);
}

TEST(ProgressEstimate, TextAndWallFormat) {
  EXPECT_EQ(fabricsim::jobs::format_wall(-1), "?");
  EXPECT_EQ(fabricsim::jobs::format_wall(0), "0.0 s");
  EXPECT_EQ(fabricsim::jobs::format_wall(0.01), "0.1 s");  // positive never shows as 0
  EXPECT_EQ(fabricsim::jobs::format_wall(3.21), "3.3 s");
  EXPECT_EQ(fabricsim::jobs::format_wall(42.4), "42 s");
  EXPECT_EQ(fabricsim::jobs::format_wall(187), "3 min 07 s");
  EXPECT_EQ(fabricsim::jobs::format_wall(7500), "2 h 05 min");
  const auto p = info(1'500'000, 1000, 10.0, 250.0, 1000.0);
  const std::string t = fabricsim::jobs::progress_text(p, estimate_progress(p));
  EXPECT_EQ(t, "simulated " + fabricsim::engine::format_time(1'500'000) +
                   ", 25.0% of work, 1000 events, 100 events/s, wall 10 s, ETA 30 s");
}

TEST(ProgressOptions, ParsesModesAndIntervals) {
  using fabricsim::jobs::ProgressMode;
  EXPECT_EQ(fabricsim::jobs::parse_progress_mode("off"), ProgressMode::kOff);
  EXPECT_EQ(fabricsim::jobs::parse_progress_mode("tty"), ProgressMode::kTty);
  EXPECT_EQ(fabricsim::jobs::parse_progress_mode("lines"), ProgressMode::kLines);
  EXPECT_THROW(fabricsim::jobs::parse_progress_mode("line"), InputError);
  EXPECT_EQ(fabricsim::jobs::default_progress_mode(true), ProgressMode::kTty);
  EXPECT_EQ(fabricsim::jobs::default_progress_mode(false), ProgressMode::kLines);
  using fabricsim::engine::parse_wall_seconds;
  EXPECT_DOUBLE_EQ(parse_wall_seconds("1s", "<cli>", "f"), 1.0);
  EXPECT_DOUBLE_EQ(parse_wall_seconds("500ms", "<cli>", "f"), 0.5);
  EXPECT_DOUBLE_EQ(parse_wall_seconds("2min", "<cli>", "f"), 120.0);
  EXPECT_DOUBLE_EQ(parse_wall_seconds("1.5h", "<cli>", "f"), 5400.0);
  for (const char* bad : {"0", "0s", "-1s", "5", "abc", "10parsecs", "", "inf s", "nan"}) {
    EXPECT_THROW(parse_wall_seconds(bad, "<cli>", "--progress-interval"), InputError) << bad;
  }
}

/// `ranks` ranks, each a chain of `k` compute nodes of `d` ps, then (when `bytes` > 0) one
/// AllReduce of `bytes` on the world after the last of them.
m::Workload chain_workload(std::uint32_t ranks, std::uint32_t k, SimTime d, std::uint64_t bytes) {
  m::Workload w = fabricsim::testing::world_workload(ranks);
  for (auto& p : w.programs) {
    for (std::uint32_t i = 0; i < k; ++i) {
      m::WorkNode n;
      n.name = std::to_string(i);  // ("c" + std::to_string(i) trips GCC 12's -Wrestrict)
      n.type = m::NodeType::kCompute;
      n.duration_ps = d;
      if (i > 0) n.deps = {i - 1};
      p.push_back(n);
    }
  }
  if (bytes > 0) {
    fabricsim::testing::add_collective(w, m::CollOp::kAllReduce, bytes, "last_allreduce");
    for (auto& p : w.programs) p.back().deps = {k - 1};
  }
  return w;
}

/// Runs `w` on `comm` with `threads` threads; with `reports` set, a report at every event check
/// (interval 0, a clock read per event) goes into it (rank 0 only).
fabricsim::jobs::RunResult run(const m::Workload& w, MPI_Comm comm, unsigned threads, std::vector<ProgressInfo>* reports) {
  fabricsim::jobs::RunOptions opt;
  opt.workload_data = &w;
  opt.write_h5 = false;
  opt.quiet = true;
  opt.threads = threads;
  // Two hosts of 4 GPUs: processes and threads get LPs joined by links, so windows are bounded
  // and the reports are rounds at window boundaries summed over processes.
  opt.sets = {"cluster.gpus_per_host=4"};
  if (reports != nullptr) {
    opt.progress.interval_s = 0;
    opt.progress.check_events = 1;
    opt.progress.observer = [reports](const ProgressInfo& p) { reports->push_back(p); };
  }
  return fabricsim::jobs::run_simulation(opt, comm, "test", "test");
}

int rank_of(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}

// Chains of equal compute nodes: every rank has done the share now / (k d) of its work, the +1 ps
// per node included (m nodes done and a share s of the next: (m + s)(d + 1) of k (d + 1)).
TEST(ProgressRun, ComputeChainWorkDoneIsTheElapsedShare) {
  constexpr std::uint32_t kRanks = 8, kNodes = 50;
  constexpr SimTime kD = 1'000'000;  // 1 us
  const m::Workload w = chain_workload(kRanks, kNodes, kD, 0);
  for (unsigned threads : {1u, 2u}) {
    SCOPED_TRACE(threads);
    for (MPI_Comm comm : {MPI_COMM_SELF, MPI_COMM_WORLD}) {
      std::vector<ProgressInfo> reports;
      run(w, comm, threads, &reports);
      if (rank_of(comm) != 0) continue;
      EXPECT_FALSE(reports.empty());  // (no ASSERT: every process must reach the next run)
      for (const auto& p : reports) {
        const double expect = static_cast<double>(p.now_ps) / (static_cast<double>(kNodes) * kD);
        EXPECT_NEAR(estimate_progress(p).fraction, std::min(1.0, expect), 1e-12) << p.now_ps;
        EXPECT_DOUBLE_EQ(p.work.total, kRanks * kNodes * (kD + 1.0));
      }
    }
  }
}

// The last node is a collective: from the end of the compute chain on, the work done grows but
// stays below the total, so the ETA is positive (once wall time has elapsed) until the end.
// Progress reports at every event leave the results digest as it is without them.
TEST(ProgressRun, PositiveEtaDuringTheLastCollective) {
  constexpr std::uint32_t kRanks = 8, kNodes = 4;
  constexpr SimTime kD = 1'000'000;
  const m::Workload w = chain_workload(kRanks, kNodes, kD, 4 << 20);
  const auto ref = run(w, MPI_COMM_SELF, 1, nullptr);
  for (unsigned threads : {1u, 2u}) {
    SCOPED_TRACE(threads);
    for (MPI_Comm comm : {MPI_COMM_SELF, MPI_COMM_WORLD}) {
      std::vector<ProgressInfo> reports;
      const auto res = run(w, comm, threads, &reports);
      EXPECT_EQ(res.digest, ref.digest);
      // Several units: the reports came from rounds at window boundaries.
      if (res.stats.processes * res.stats.threads > 1) {
        EXPECT_GT(res.stats.windows, 1u);
      }
      if (rank_of(comm) != 0) continue;
      EXPECT_EQ(res.collectives.size(), 1u);  // (no ASSERT: every process must reach the next run)
      if (res.collectives.size() != 1) continue;
      const SimTime coll_start = res.collectives[0].start_ps, coll_end = res.collectives[0].end_ps;
      EXPECT_EQ(coll_start, kNodes * kD);
      std::vector<double> during;
      double last = 0;
      fabricsim::jobs::ProgressEstimator est;
      for (const auto& p : reports) {
        const auto e = est.next(p);
        EXPECT_GE(e.fraction, last) << "work done went back at " << p.now_ps;
        last = e.fraction;
        if (p.now_ps <= coll_start || p.now_ps >= coll_end) continue;
        EXPECT_LT(p.work.done, p.work.total) << p.now_ps;
        if (p.wall_s > 0) {
          EXPECT_GT(e.eta_s, 0.0) << p.now_ps;
        }
        during.push_back(e.fraction);
      }
      // The collective's progress shows: reports inside it, with a growing share of work done
      // (node counting showed no change until the collective completed).
      EXPECT_GE(during.size(), 2u);
      if (during.size() < 2) continue;
      EXPECT_GT(during.back(), during.front());
      EXPECT_GT(during.front(), 0.0);
    }
  }
}

}  // namespace
