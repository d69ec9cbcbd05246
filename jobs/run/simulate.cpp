// Stage `simulate` of `fabricsim run`: the engine run, its progress line, and the check that
// every rank's DAG completed.
#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "engine/errors.hpp"
#include "engine/heap_pages.hpp"
#include "engine/units.hpp"
#include "jobs/run/context.hpp"

namespace fabricsim::jobs::run_stages {

using engine::InputError;

namespace {

/// Progress on stderr for long runs: rank 0, only on a terminal and without --quiet. The share
/// of DAG nodes done is taken over the GPU LPs of engine thread 0 (the callback runs there).
/// `printed` turns true once a line was printed.
void install_progress(RunContext& c, bool& printed) {
  if (c.rank != 0 || c.opt.quiet || !::isatty(STDERR_FILENO)) return;
  std::vector<const models::GpuRankLp*> mine;
  std::uint64_t total_nodes = 0;
  for (const auto& g : c.gpus) {
    const auto id = g->rank_record().rank;
    if (c.plan.placement.thread[id] == 0 && g->total_nodes() > 0) {
      mine.push_back(g.get());
      total_nodes += g->total_nodes();
    }
  }
  c.sim->set_progress([mine, total_nodes, &printed](const engine::ProgressInfo& p) {
    std::uint64_t done = 0;
    for (const auto* g : mine) done += g->done_nodes();
    const double frac = total_nodes ? static_cast<double>(done) / static_cast<double>(total_nodes) : 0.0;
    std::string eta = "?";
    if (frac > 0.001) eta = fmt::format("{:.0f} s", p.wall_s * (1.0 - frac) / frac);
    std::fprintf(stderr, "\rfabricsim: simulated %s, %.1f%% of DAG nodes, %.3g events/s, ETA %s   ",
                 engine::format_time(p.now_ps).c_str(), 100.0 * frac,
                 p.wall_s > 0 ? static_cast<double>(p.events) / p.wall_s : 0.0, eta.c_str());
    std::fflush(stderr);
    printed = true;
  });
}

/// Runs the engine. The engine knows no file names: its horizon error says "<spec>"; it is
/// rethrown naming the inputs whose values decide simulated time (the workload's durations, the
/// spec's rates and latencies).
void run_engine(RunContext& c) {
  const Spec& spec = c.spec;
  try {
    c.sim->run();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    const std::string engine_prefix = "<spec>: simulated time: ";
    if (msg.rfind(engine_prefix, 0) != 0) throw;
    const std::string where = !spec.workload_path.empty()
                                  ? spec.workload_path + (spec.file != "<spec>" ? " with " + spec.file : std::string())
                                  : spec.file_of_any({"workload.generator.model"}) == "<cli>" || spec.file == "<spec>"
                                        ? std::string("<cli>")
                                        : spec.file;
    throw InputError(InputError::Whole{}, where + ": simulated time: " + msg.substr(engine_prefix.size()));
  }
}

/// Deadlock / mismatch detection: every rank's DAG must have completed. Collective: every
/// process throws the same error, naming the lowest process's first stuck rank.
void check_completed(const RunContext& c) {
  struct Stuck {
    std::int64_t rank;
    std::int64_t node;
  };
  const models::Workload& w = c.w;
  Stuck local_stuck{-1, -1};
  for (const auto& g : c.gpus) {
    const std::int64_t n = g->first_unfinished();
    const std::int64_t r = static_cast<std::int64_t>(g->rank_record().rank);
    if (n >= 0 && r < static_cast<std::int64_t>(w.ranks) && local_stuck.rank < 0) local_stuck = {r, n};
  }
  const auto all_stuck = allgather_pod(c.comm, std::vector<Stuck>{local_stuck});
  for (const Stuck& s : all_stuck) {
    if (s.rank < 0) continue;
    const auto& node = w.program(static_cast<std::uint32_t>(s.rank))[static_cast<std::size_t>(s.node)];
    throw InputError(w.source, "rank " + std::to_string(s.rank) + " node " + std::to_string(node.source_id) +
                                   " ('" + node.name + "')",
                     "never completed: its collective or receive has no matching peer",
                     "make every rank of a communicator issue the same collectives in the same order, "
                     "and give every recv a matching send (same tag)");
  }
}

}  // namespace

void simulate(RunContext& c) {
  install_progress(c, c.progress_printed);
  const engine::SimTime w_ps = c.plan.lookahead_ps;
  c.log->info("simulating on {} process(es) x {} thread(s), lookahead {}, heap pages: {}", c.nprocs, c.spec.threads,
              w_ps == engine::kInfinity ? std::string("none") : engine::format_time(w_ps), engine::heap_pages_note());
  run_engine(c);
  c.log->info("simulated ({:.3f} s)", now_s() - c.t0);
  if (c.progress_printed) std::fprintf(stderr, "\n");
  c.stats = c.sim->global_stats();
  if (c.sim->stopped()) return;  // a stop request: the DAGs are unfinished by design
  check_completed(c);
}

}  // namespace fabricsim::jobs::run_stages
