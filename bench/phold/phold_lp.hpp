#pragma once
/// @file phold_lp.hpp
/// PHOLD, the standard synthetic PDES benchmark: a fixed population of events hops between LPs,
/// each hop to a random LP (with probability remote_fraction) or back to the same LP, after
/// lookahead + an exponentially distributed delay. Source: R. M. Fujimoto, "Performance of Time
/// Warp under synthetic workloads", Proc. SCS Multiconference on Distributed Simulation, 1990.
///
/// Used to measure the engine (bench/phold.cpp) and to check that results do not depend on the
/// number of MPI processes or threads (tests/engine).
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/lp.hpp"
#include "engine/rng.hpp"
#include "engine/simulator.hpp"
#include "engine/time.hpp"

namespace fabricsim::models {

/// PHOLD parameters.
struct PholdConfig {
  std::uint32_t lps = 16384;          ///< number of LPs (>= 1)
  std::uint32_t population = 16;      ///< events started by each LP at time 0
  double remote_fraction = 0.5;       ///< probability that a hop goes to another LP, in [0, 1]
  engine::SimTime mean_delay_ps = 1'000'000;  ///< mean of the exponential part of a hop delay (>= 0)
  engine::SimTime lookahead_ps = 100'000;     ///< fixed part of every hop delay (>= 1); the window width
  engine::SimTime end_time_ps = 20'000'000;   ///< events at or after this time are dropped (> 0)
  std::uint64_t seed = 1;             ///< RNG seed; LP i draws from CounterRng(seed, i)
  std::uint32_t threads = 1;          ///< engine threads per MPI process (>= 1)
};

/// Result of run_phold: identical for every process/thread count given the same config.
struct PholdResult {
  std::uint64_t events = 0;    ///< committed events, all processes
  std::uint64_t checksum = 0;  ///< sum over LPs of phold_lp_checksum(), all processes (mod 2^64)
  engine::EngineStats stats;   ///< engine counters summed over processes (global_stats())
};

/// Where the next hop of a PHOLD event goes.
struct PholdHop {
  engine::LpId dst = 0;
  engine::SimTime time = 0;
};

/// Draws the next hop for an event handled by `self` at `now`: one uniform draw decides remote vs
/// self; a remote hop draws a uniformly random *other* LP; then one exponential draw for the delay.
/// time = now + lookahead + round(exp(mean)). Shared by PholdLp and the tests' sequential reference.
PholdHop phold_next_hop(engine::CounterRng& rng, const PholdConfig& cfg, engine::LpId self,
                        engine::SimTime now);

/// The delay of an initial event (lookahead + round(exp(mean))).
engine::SimTime phold_initial_delay(engine::CounterRng& rng, const PholdConfig& cfg);

/// Per-LP contribution to the checksum: mix64 of (lp, committed events, time of last event).
std::uint64_t phold_lp_checksum(engine::LpId lp, std::uint64_t events, engine::SimTime last_time);

/// One PHOLD LP. Counts the events it commits and remembers the time of the last one.
class PholdLp : public engine::Lp {
 public:
  PholdLp(engine::LpId id, const PholdConfig& cfg);
  void init(engine::Context& ctx) override;
  void handle(const engine::Event& ev, engine::Context& ctx) override;

  engine::LpId id() const { return id_; }
  std::uint64_t events() const { return events_; }
  engine::SimTime last_time() const { return last_time_; }
  /// Checkpoints: the state is the RNG counter, the event count and the last event's time.
  bool checkpointable() const override { return true; }
  std::string_view type_name() const override { return "PholdLp"; }
  void save_state(engine::StateWriter& out) const override;
  void load_state(engine::StateReader& in) override;
  std::uint64_t checksum() const { return phold_lp_checksum(id_, events_, last_time_); }

 private:
  const PholdConfig* cfg_;
  engine::LpId id_;
  engine::CounterRng rng_;
  std::uint64_t events_ = 0;
  engine::SimTime last_time_ = 0;
};

/// Block placement: LPs split into processes*threads contiguous, nearly equal blocks; block b
/// runs on process b / threads, thread b % threads.
engine::Placement phold_placement(std::uint32_t lps, int processes, std::uint32_t threads);

/// Checkpoints of a PHOLD run (docs/checkpoint.md; the engine's checkpoint tests use them).
struct PholdCheckpoints {
  std::vector<engine::SimTime> at;  ///< simulated times (ps) to checkpoint at
  double every_s = 0;               ///< wall seconds between checkpoints (0: off)
  std::string dir;                  ///< where (engine::write_checkpoint); needed with `at`
  std::string restart;              ///< checkpoint to continue from ("" = start at time 0)
  std::string build = "phold";      ///< build string the checkpoints carry (tests vary it)
  std::vector<std::string>* written = nullptr;  ///< receives the checkpoint directories written
};

/// Hash of the fields of `cfg` that decide a run's events (the run hash of its checkpoints).
std::uint64_t phold_run_hash(const PholdConfig& cfg);

/// Runs PHOLD on every process of `comm` (collective). Validates cfg first.
/// @throws engine::InputError on an invalid config (same on every process), or a checkpoint
///   to restart from that does not fit (engine::read_checkpoint).
PholdResult run_phold(MPI_Comm comm, const PholdConfig& cfg, const PholdCheckpoints& ckpt = {});

}  // namespace fabricsim::models
