// PHOLD: committed events and checksum are identical to an independent sequential reference for
// every thread count and MPI process count.
#include <gtest/gtest.h>
#include <mpi.h>

#include <queue>
#include <tuple>
#include <vector>

#include "engine/errors.hpp"
#include "engine/event.hpp"
#include "engine/rng.hpp"
#include "bench/phold/phold_lp.hpp"
#include "tests/support/mpi.hpp"

using fabricsim::testing::world_procs;

namespace fabricsim::models {
namespace {

using engine::Event;
using engine::EventLater;
using engine::LpId;
using engine::SimTime;

// A plain one-queue discrete-event loop (no windows, no threads, no MPI) over the same hop rule.
struct Reference {
  std::uint64_t events = 0;
  std::uint64_t checksum = 0;
};
Reference sequential_phold(const PholdConfig& cfg) {
  std::vector<engine::CounterRng> rng;
  std::vector<std::uint64_t> seq(cfg.lps, 0), count(cfg.lps, 0);
  std::vector<SimTime> last(cfg.lps, 0);
  std::priority_queue<Event, std::vector<Event>, EventLater> q;
  auto push = [&](LpId src, LpId dst, SimTime t) {
    Event e;
    e.time = t;
    e.src = src;
    e.dst = dst;
    e.seq = seq[src]++;
    q.push(e);
  };
  for (LpId i = 0; i < cfg.lps; ++i) {
    rng.emplace_back(cfg.seed, i);
    for (std::uint32_t k = 0; k < cfg.population; ++k) {
      const SimTime t = phold_initial_delay(rng[i], cfg);
      if (t < cfg.end_time_ps) push(i, i, t);
    }
  }
  SimTime prev = 0;
  while (!q.empty()) {
    const Event e = q.top();
    q.pop();
    EXPECT_GE(e.time, prev);
    prev = e.time;
    ++count[e.dst];
    last[e.dst] = e.time;
    const PholdHop h = phold_next_hop(rng[e.dst], cfg, e.dst, e.time);
    EXPECT_GE(h.time, e.time + cfg.lookahead_ps);
    if (h.time < cfg.end_time_ps) push(e.dst, h.dst, h.time);
  }
  Reference r;
  for (LpId i = 0; i < cfg.lps; ++i) {
    r.events += count[i];
    r.checksum += phold_lp_checksum(i, count[i], last[i]);
  }
  return r;
}

PholdConfig small_config() {
  PholdConfig c;
  c.lps = 64;
  c.population = 4;
  c.remote_fraction = 0.5;
  c.mean_delay_ps = 1000;
  c.lookahead_ps = 100;
  c.end_time_ps = 100'000;  // about 23k events
  c.seed = 12345;
  return c;
}

TEST(Phold, Placement) {
  const auto pl = phold_placement(10, 2, 2);
  EXPECT_EQ(pl.threads, 2u);
  const std::vector<std::int32_t> proc = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
  const std::vector<std::uint16_t> thr = {0, 0, 0, 1, 1, 0, 0, 0, 1, 1};
  EXPECT_EQ(pl.proc, proc);
  EXPECT_EQ(pl.thread, thr);
  const auto one = phold_placement(3, 4, 2);  // more blocks than LPs: some are empty
  for (std::size_t i = 1; i < 3; ++i) EXPECT_GE(one.proc[i] * 2 + one.thread[i], one.proc[i - 1] * 2 + one.thread[i - 1]);
}

TEST(Phold, HopRule) {
  PholdConfig c = small_config();
  engine::CounterRng r(1, 5);
  int remote = 0;
  for (int i = 0; i < 10'000; ++i) {
    const PholdHop h = phold_next_hop(r, c, 5, 1000);
    ASSERT_LT(h.dst, c.lps);
    ASSERT_GE(h.time, 1000 + c.lookahead_ps);
    remote += h.dst != 5;
  }
  EXPECT_NEAR(remote, 5000, 250);
  c.remote_fraction = 0;
  for (int i = 0; i < 100; ++i) EXPECT_EQ(phold_next_hop(r, c, 5, 0).dst, 5u);
  c.remote_fraction = 1;
  for (int i = 0; i < 100; ++i) EXPECT_NE(phold_next_hop(r, c, 5, 0).dst, 5u);
}

TEST(Phold, ThreadsMatchSequentialReference) {
  const PholdConfig base = small_config();
  const Reference ref = sequential_phold(base);
  EXPECT_GT(ref.events, 10'000u);
  for (std::uint32_t threads : {1u, 2u, 3u}) {
    PholdConfig c = base;
    c.threads = threads;
    const PholdResult r = run_phold(MPI_COMM_SELF, c);
    EXPECT_EQ(r.events, ref.events) << threads << " threads";
    EXPECT_EQ(r.checksum, ref.checksum) << threads << " threads";
    EXPECT_EQ(r.stats.events, r.events);
    EXPECT_EQ(r.stats.remote_events, 0u);
    if (threads > 1) {
      EXPECT_GT(r.stats.thread_events, 0u);
    }
    EXPECT_LT(r.stats.end_time_ps, c.end_time_ps);
  }
}

TEST(Phold, MpiMatchesSelfAndReference) {
  // Reference per process on MPI_COMM_SELF, then the run over all processes.
  for (std::uint32_t threads : {1u, 2u}) {
    PholdConfig c = small_config();
    c.threads = threads;
    const PholdResult self = run_phold(MPI_COMM_SELF, c);
    const PholdResult world = run_phold(MPI_COMM_WORLD, c);
    EXPECT_EQ(world.events, self.events) << threads << " threads";
    EXPECT_EQ(world.checksum, self.checksum) << threads << " threads";
    EXPECT_EQ(world.stats.processes, static_cast<std::uint32_t>(world_procs()));
    if (world_procs() > 1) {
      EXPECT_GT(world.stats.remote_events, 0u);
    }
    // All processes agree on the result.
    unsigned long long mine[2] = {world.events, world.checksum}, lo[2], hi[2];
    MPI_Allreduce(mine, lo, 2, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(mine, hi, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(lo[0], hi[0]);
    EXPECT_EQ(lo[1], hi[1]);
  }
}

TEST(Phold, EdgeCases) {
  for (double remote : {0.0, 1.0}) {
    PholdConfig c = small_config();
    c.remote_fraction = remote;
    c.lps = 7;  // not a multiple of the process count
    c.threads = 2;
    const Reference ref = sequential_phold(c);
    const PholdResult r = run_phold(MPI_COMM_WORLD, c);
    EXPECT_EQ(r.events, ref.events) << "remote " << remote;
    EXPECT_EQ(r.checksum, ref.checksum) << "remote " << remote;
    if (remote == 0.0) {
      EXPECT_EQ(r.stats.remote_events, 0u);
      EXPECT_EQ(r.stats.thread_events, 0u);
    }
  }
  PholdConfig one = small_config();
  one.lps = 1;
  one.remote_fraction = 1.0;  // no other LP: every hop stays
  const Reference ref = sequential_phold(one);
  const PholdResult r = run_phold(MPI_COMM_WORLD, one);
  EXPECT_EQ(r.events, ref.events);
  EXPECT_EQ(r.checksum, ref.checksum);
}

TEST(Phold, SeedChangesResult) {
  PholdConfig a = small_config(), b = small_config();
  b.seed = a.seed + 1;
  EXPECT_NE(run_phold(MPI_COMM_SELF, a).checksum, run_phold(MPI_COMM_SELF, b).checksum);
}

TEST(Phold, InvalidConfigIsInputError) {
  auto bad = [](auto mutate) {
    PholdConfig c = small_config();
    mutate(c);
    EXPECT_THROW(run_phold(MPI_COMM_SELF, c), engine::InputError);
  };
  bad([](PholdConfig& c) { c.lps = 0; });
  bad([](PholdConfig& c) { c.remote_fraction = 1.5; });
  bad([](PholdConfig& c) { c.remote_fraction = -0.1; });
  bad([](PholdConfig& c) { c.lookahead_ps = 0; });
  bad([](PholdConfig& c) { c.mean_delay_ps = -1; });
  bad([](PholdConfig& c) { c.end_time_ps = 0; });
  bad([](PholdConfig& c) { c.threads = 0; });
}

}  // namespace
}  // namespace fabricsim::models
