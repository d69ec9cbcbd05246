#include "bench/phold/phold_lp.hpp"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/checkpoint.hpp"
#include "engine/errors.hpp"
#include "engine/state_io.hpp"

namespace fabricsim::models {
namespace {

constexpr std::uint32_t kPholdEvent = 1;

void validate(const PholdConfig& cfg) {
  auto bad = [](const std::string& field, const std::string& problem, const std::string& fix) {
    throw engine::InputError("<phold>", field, problem, fix);
  };
  if (cfg.lps == 0) bad("lps", "must be at least 1", "give --lps >= 1");
  if (!(cfg.remote_fraction >= 0.0 && cfg.remote_fraction <= 1.0)) {
    bad("remote_fraction", "must be in [0, 1]", "give a probability such as 0.5");
  }
  if (cfg.mean_delay_ps < 0) bad("mean_delay_ps", "must be >= 0", "give a non-negative mean delay");
  if (cfg.lookahead_ps < 1) bad("lookahead_ps", "must be >= 1 ps", "give a positive lookahead");
  if (cfg.end_time_ps <= 0) bad("end_time_ps", "must be > 0", "give a positive end time");
  if (cfg.threads == 0 || cfg.threads > 65535) bad("threads", "must be in 1..65535", "give --threads >= 1");
}

// std::llround for d >= 0 (or -0.0), without the libm call: truncate, then round half away
// from zero. d - trunc(d) is exact for d < 2^62 (the fraction's bits are d's own), so the result
// is bit-identical to llround; larger values (absurd means) take llround itself.
inline engine::SimTime round_non_negative(double d) {
  if (!(d < 0x1p62)) return static_cast<engine::SimTime>(std::llround(d));
  const auto i = static_cast<engine::SimTime>(d);
  return d - static_cast<double>(i) >= 0.5 ? i + 1 : i;
}

engine::SimTime exp_delay(engine::CounterRng& rng, const PholdConfig& cfg) {
  const double d = rng.next_exponential(static_cast<double>(cfg.mean_delay_ps));
  return cfg.lookahead_ps + round_non_negative(d);
}

}  // namespace

PholdHop phold_next_hop(engine::CounterRng& rng, const PholdConfig& cfg, engine::LpId self,
                        engine::SimTime now) {
  PholdHop hop;
  hop.dst = self;
  const double u = rng.next_unit();
  if (u < cfg.remote_fraction && cfg.lps > 1) {
    auto r = static_cast<engine::LpId>(rng.next_below(cfg.lps - 1));
    hop.dst = r >= self ? r + 1 : r;
  }
  hop.time = engine::sat_add(now, exp_delay(rng, cfg));
  return hop;
}

engine::SimTime phold_initial_delay(engine::CounterRng& rng, const PholdConfig& cfg) {
  return exp_delay(rng, cfg);
}

std::uint64_t phold_lp_checksum(engine::LpId lp, std::uint64_t events, engine::SimTime last_time) {
  using engine::mix64;
  return mix64(mix64(mix64(lp) ^ events) ^ static_cast<std::uint64_t>(last_time));
}

PholdLp::PholdLp(engine::LpId id, const PholdConfig& cfg) : cfg_(&cfg), id_(id), rng_(cfg.seed, id) {}

void PholdLp::init(engine::Context& ctx) {
  for (std::uint32_t i = 0; i < cfg_->population; ++i) {
    const engine::SimTime t = phold_initial_delay(rng_, *cfg_);
    if (t < cfg_->end_time_ps) ctx.send(id_, t, kPholdEvent);
  }
}

void PholdLp::handle(const engine::Event& ev, engine::Context& ctx) {
  ++events_;
  last_time_ = ev.time;
  const PholdHop hop = phold_next_hop(rng_, *cfg_, id_, ev.time);
  if (hop.time < cfg_->end_time_ps) ctx.send(hop.dst, hop.time, kPholdEvent);
}

engine::Placement phold_placement(std::uint32_t lps, int processes, std::uint32_t threads) {
  engine::Placement pl;
  pl.threads = threads;
  pl.proc.resize(lps);
  pl.thread.resize(lps);
  const std::uint64_t blocks = static_cast<std::uint64_t>(processes) * threads;
  for (std::uint32_t i = 0; i < lps; ++i) {
    const std::uint64_t b = static_cast<std::uint64_t>(i) * blocks / lps;
    pl.proc[i] = static_cast<std::int32_t>(b / threads);
    pl.thread[i] = static_cast<std::uint16_t>(b % threads);
  }
  return pl;
}

void PholdLp::save_state(engine::StateWriter& out) const {
  out.put<std::uint64_t>(rng_.counter());
  out.put<std::uint64_t>(events_);
  out.put<engine::SimTime>(last_time_);
}

void PholdLp::load_state(engine::StateReader& in) {
  rng_.set_counter(in.get<std::uint64_t>());
  events_ = in.get<std::uint64_t>();
  last_time_ = in.get<engine::SimTime>();
}

std::uint64_t phold_run_hash(const PholdConfig& cfg) {
  engine::StateWriter w;
  w.put(cfg.lps);
  w.put(cfg.population);
  w.put(cfg.remote_fraction);
  w.put(cfg.mean_delay_ps);
  w.put(cfg.lookahead_ps);
  w.put(cfg.end_time_ps);
  w.put(cfg.seed);
  return engine::checkpoint_checksum(w.bytes());
}

PholdResult run_phold(MPI_Comm comm, const PholdConfig& cfg_in, const PholdCheckpoints& ckpt) {
  validate(cfg_in);
  const PholdConfig cfg = cfg_in;  // the LPs keep a pointer to it
  int size = 1;
  MPI_Comm_size(comm, &size);
  // Every PHOLD hop is a link of latency lookahead_ps, so W = lookahead_ps whatever is cut.
  engine::Simulator sim(comm, phold_placement(cfg.lps, size, cfg.threads), cfg.lookahead_ps);
  std::vector<std::unique_ptr<PholdLp>> lps;
  for (engine::LpId i = 0; i < cfg.lps; ++i) {
    if (!sim.is_local(i)) continue;
    lps.push_back(std::make_unique<PholdLp>(i, cfg));
    sim.add_lp(i, lps.back().get());
  }
  engine::CheckpointIdentity id{ckpt.build, phold_run_hash(cfg), static_cast<std::uint32_t>(size), cfg.threads};
  if (!ckpt.restart.empty()) {
    const auto loaded = engine::read_checkpoint(comm, ckpt.restart, id);
    sim.load_state(loaded.payload, loaded.path);
  }
  if (!ckpt.at.empty() || ckpt.every_s > 0) {
    engine::RunControl control;
    control.checkpoint_at = ckpt.at;
    control.checkpoint_every_s = ckpt.every_s;
    control.on_checkpoint = [&](engine::SimTime t) {
      std::uint64_t events = 0;
      for (const auto& lp : lps) events += lp->events();
      const std::string path = engine::write_checkpoint(comm, ckpt.dir, id, t, events, sim.save_state());
      if (ckpt.written != nullptr) ckpt.written->push_back(path);
    };
    sim.set_control(std::move(control));
  }
  sim.run(cfg.end_time_ps);

  unsigned long long local[2] = {0, 0};
  for (const auto& lp : lps) {
    local[0] += lp->events();
    local[1] += lp->checksum();
  }
  unsigned long long global[2] = {0, 0};
  MPI_Allreduce(local, global, 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM, sim.comm());
  PholdResult r;
  r.events = global[0];
  r.checksum = global[1];
  r.stats = sim.global_stats();
  return r;
}

}  // namespace fabricsim::models
