// Simulator rules: a two-LP ping-pong with a closed-form end time on every placement, lookahead
// violations, bad sends and bad placements.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/errors.hpp"
#include "engine/simulator.hpp"
#include "tests/support/mpi.hpp"

using fabricsim::testing::world_procs;

namespace fabricsim::engine {
namespace {

// Two LPs bounce one message `hops` times; each hop takes `delay` ps.
struct Ball {
  std::uint32_t hop;
};
class PingPong : public Lp {
 public:
  PingPong(LpId self, std::uint32_t hops, SimTime delay) : self_(self), hops_(hops), delay_(delay) {}
  void init(Context& ctx) override {
    if (self_ == 0) ctx.send(1, ctx.now() + delay_, 7, Ball{1});
  }
  void handle(const Event& ev, Context& ctx) override {
    EXPECT_EQ(ev.kind, 7u);
    EXPECT_EQ(ev.dst, self_);
    EXPECT_EQ(ev.src, 1 - self_);
    EXPECT_EQ(ctx.now(), ev.time);
    const Ball b = ev.get<Ball>();
    EXPECT_EQ(ev.time, static_cast<SimTime>(b.hop) * delay_);
    ++received;
    if (b.hop < hops_) ctx.send(1 - self_, ctx.now() + delay_, 7, Ball{b.hop + 1});
  }
  int received = 0;

 private:
  LpId self_;
  std::uint32_t hops_;
  SimTime delay_;
};

struct PingPongCase {
  MPI_Comm comm;
  std::int32_t proc1;     // process of LP 1 (LP 0 is on process 0)
  std::uint32_t threads;  // threads per process; LP 1 on the last thread
};

EngineStats run_ping_pong(const PingPongCase& c, std::uint32_t hops, SimTime latency, SimTime delay,
                          SimTime end_time = kInfinity) {
  Placement pl;
  pl.proc = {0, c.proc1};
  pl.thread = {0, static_cast<std::uint16_t>(c.threads - 1)};
  pl.threads = c.threads;
  Simulator sim(c.comm, pl, latency);
  std::vector<std::unique_ptr<PingPong>> lps;
  for (LpId i = 0; i < 2; ++i) {
    if (!sim.is_local(i)) continue;
    lps.push_back(std::make_unique<PingPong>(i, hops, delay));
    sim.add_lp(i, lps.back().get());
  }
  sim.run(end_time);
  return sim.global_stats();
}

std::vector<PingPongCase> ping_pong_cases() {
  std::vector<PingPongCase> v = {{MPI_COMM_SELF, 0, 1}, {MPI_COMM_SELF, 0, 2}, {MPI_COMM_SELF, 0, 3},
                                 {MPI_COMM_WORLD, 0, 1}};
  if (world_procs() > 1) {
    v.push_back({MPI_COMM_WORLD, world_procs() - 1, 1});
    v.push_back({MPI_COMM_WORLD, 1, 2});
  }
  return v;
}

TEST(Simulator, PingPongClosedForm) {
  // Hop delay = 1 us propagation + 4 KiB at 400 Gb/s (81.92 ns); lookahead = propagation only.
  const SimTime latency = kPsPerUs;
  const SimTime delay = latency + serialization_ps(4096, 400'000'000'000ull);
  ASSERT_EQ(delay, 1'081'920);
  const std::uint32_t hops = 1000;
  for (const auto& c : ping_pong_cases()) {
    SCOPED_TRACE(::testing::Message() << "proc1=" << c.proc1 << " threads=" << c.threads
                                    << (c.comm == MPI_COMM_SELF ? " self" : " world"));
    const EngineStats s = run_ping_pong(c, hops, latency, delay);
    EXPECT_EQ(s.events, hops);
    EXPECT_EQ(s.end_time_ps, static_cast<SimTime>(hops) * delay);
    const bool cut_thread = c.threads > 1 && c.proc1 == 0;
    const bool cut_proc = c.proc1 != 0;
    // Windows: the ball's holder is the only unit (thread of a process) with an event. Cut
    // between units, the next hop belongs to the other unit, whose window ends at T + W: one
    // event per window. Both LPs on one unit, that unit's window is widened to T + 2W (no other
    // unit can send to it before T + W + W, simulator.hpp "Widened window") and holds two hops,
    // since W <= delay < 2W.
    ASSERT_TRUE(latency <= delay && delay < 2 * latency);
    EXPECT_EQ(s.windows, cut_thread || cut_proc ? hops : hops / 2);
    EXPECT_EQ(s.thread_events, cut_thread ? hops : 0u);
    EXPECT_EQ(s.remote_events, cut_proc ? hops : 0u);
  }
}

TEST(Simulator, EndTimeStopsBeforeEvent) {
  const SimTime delay = 1000;
  for (const auto& c : ping_pong_cases()) {
    // Events at 1000, 2000, ...; end at 10000 handles the nine events before it.
    const EngineStats s = run_ping_pong(c, 100, delay, delay, 10 * delay);
    EXPECT_EQ(s.events, 9u);
    EXPECT_EQ(s.end_time_ps, 9 * delay);
  }
}

// LP 0 wakes itself at t=10, then sends to LP 1 only `gap` ps later.
class Impatient : public Lp {
 public:
  Impatient(LpId self, SimTime gap) : self_(self), gap_(gap) {}
  void init(Context& ctx) override {
    if (self_ == 0) ctx.send(0, 10, 1);
  }
  void handle(const Event& ev, Context& ctx) override {
    if (self_ == 0 && ev.src == 0) ctx.send(1, ctx.now() + gap_, 2);
    ++received;
  }
  int received = 0;

 private:
  LpId self_;
  SimTime gap_;
};

std::uint64_t run_impatient(MPI_Comm comm, std::int32_t proc1, std::uint32_t threads,
                            std::uint16_t thread1, SimTime gap, SimTime lookahead) {
  Placement pl;
  pl.proc = {0, proc1};
  pl.thread = {0, thread1};
  pl.threads = threads;
  Simulator sim(comm, pl, lookahead);
  std::vector<std::unique_ptr<Impatient>> lps;
  for (LpId i = 0; i < 2; ++i) {
    if (!sim.is_local(i)) continue;
    lps.push_back(std::make_unique<Impatient>(i, gap));
    sim.add_lp(i, lps.back().get());
  }
  sim.run();
  return sim.global_stats().events;
}

TEST(Simulator, LookaheadViolationAcrossThreadsThrows) {
  EXPECT_THROW(run_impatient(MPI_COMM_SELF, 0, 2, 1, 1, 1000), InternalError);
  EXPECT_THROW(run_impatient(MPI_COMM_SELF, 0, 2, 1, 999, 1000), InternalError);
  EXPECT_EQ(run_impatient(MPI_COMM_SELF, 0, 2, 1, 1000, 1000), 2u);  // exactly the lookahead: fine
}

TEST(Simulator, LookaheadViolationAcrossProcessesThrowsEverywhere) {
  FABRICSIM_NEEDS_PROCS(2);
  // Only process 0 detects it; the others must fail too instead of hanging.
  EXPECT_THROW(run_impatient(MPI_COMM_WORLD, 1, 1, 0, 1, 1000), InternalError);
  EXPECT_EQ(run_impatient(MPI_COMM_WORLD, 1, 1, 0, 1000, 1000), 2u);
}

TEST(Simulator, ShortDelayInsideOneThreadIsAllowed) {
  // The lookahead bounds only links cut by the placement.
  EXPECT_EQ(run_impatient(MPI_COMM_SELF, 0, 1, 0, 1, 1000), 2u);
  EXPECT_EQ(run_impatient(MPI_COMM_SELF, 0, 2, 0, 1, 1000), 2u);
}

// The widened window of the unit holding the minimum alone must stop one lookahead after the
// other units' next events, counting events still in flight to them. LP 0 has a timer at 100 and
// an event in flight to LP 1 at 150; LP 1 answers at 150 + W = 1150. LP 0's window may reach
// min(150, 100 + W) + W = 1150 but not further: its timers at 500, 1000, 1149 run in that window,
// then the answer at 1150 before its timer at 1200. Had the in-flight event been ignored, LP 0
// would run to 100 + 2W and the answer would arrive inside its window (a lookahead error).
class Widened : public Lp {
 public:
  explicit Widened(LpId self) : self_(self) {}
  void init(Context& ctx) override {
    if (self_ != 0) return;
    ctx.send(1, 150, 2);
    ctx.send(0, 100, 1);
  }
  void handle(const Event& ev, Context& ctx) override {
    seen.push_back(ev.time);
    if (self_ == 1) {
      ctx.send(0, ctx.now() + kW, 3);
    } else if (ev.kind == 1) {
      for (SimTime t : {500, 1000, 1149, 1200}) ctx.send(0, t, 4);
    }
  }
  static constexpr SimTime kW = 1000;
  std::vector<SimTime> seen;

 private:
  LpId self_;
};

TEST(Simulator, WidenedWindowCountsEventsInFlight) {
  for (const auto& c : ping_pong_cases()) {
    SCOPED_TRACE(::testing::Message() << "proc1=" << c.proc1 << " threads=" << c.threads);
    Placement pl;
    pl.proc = {0, c.proc1};
    pl.thread = {0, static_cast<std::uint16_t>(c.threads - 1)};
    pl.threads = c.threads;
    Simulator sim(c.comm, pl, Widened::kW);
    Widened a(0), b(1);
    if (sim.is_local(0)) sim.add_lp(0, &a);
    if (sim.is_local(1)) sim.add_lp(1, &b);
    ASSERT_NO_THROW(sim.run());
    if (sim.is_local(0)) {
      EXPECT_EQ(a.seen, (std::vector<SimTime>{100, 500, 1000, 1149, 1150, 1200}));
    }
    if (sim.is_local(1)) {
      EXPECT_EQ(b.seen, (std::vector<SimTime>{150}));
    }
    EXPECT_EQ(sim.global_stats().events, 7u);
  }
}

class BadSender : public Lp {
 public:
  enum Mode { kPast, kSameTimeOther, kNoSuchLp };
  explicit BadSender(Mode m) : mode_(m) {}
  void init(Context& ctx) override {
    if (ctx.self() == 0) ctx.send(0, 100, 1);
  }
  void handle(const Event&, Context& ctx) override {
    if (ctx.self() != 0) return;
    if (mode_ == kPast) ctx.send(0, ctx.now() - 1, 1);
    if (mode_ == kSameTimeOther) ctx.send(1, ctx.now(), 1);
    if (mode_ == kNoSuchLp) ctx.send(5, ctx.now() + 1000, 1);
  }

 private:
  Mode mode_;
};

TEST(Simulator, BadSendsThrow) {
  for (auto mode : {BadSender::kPast, BadSender::kSameTimeOther, BadSender::kNoSuchLp}) {
    Placement pl;
    pl.proc = {0, 0};
    pl.thread = {0, 0};
    Simulator sim(MPI_COMM_SELF, pl, 10);
    BadSender a(mode), b(mode);
    sim.add_lp(0, &a);
    sim.add_lp(1, &b);
    EXPECT_THROW(sim.run(), InternalError) << "mode " << mode;
  }
}

TEST(Simulator, BadPlacementIsInputError) {
  Placement pl;
  pl.proc = {0, 1};  // process 1 does not exist in MPI_COMM_SELF
  pl.thread = {0, 0};
  EXPECT_THROW(Simulator(MPI_COMM_SELF, pl, 10), InputError);
  pl.proc = {0, 0};
  pl.thread = {0, 2};
  pl.threads = 2;
  EXPECT_THROW(Simulator(MPI_COMM_SELF, pl, 10), InputError);
}

TEST(Simulator, UnregisteredLpThrows) {
  Placement pl;
  pl.proc = {0, 0};
  pl.thread = {0, 0};
  Simulator sim(MPI_COMM_SELF, pl, 10);
  BadSender a(BadSender::kPast);
  sim.add_lp(0, &a);
  EXPECT_THROW(sim.run(), InternalError);
}

}  // namespace
}  // namespace fabricsim::engine
