// Stage `simulate` of `fabricsim run`: the engine run, its progress line, and the check that
// every rank's DAG completed.
#include <cstdio>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "engine/errors.hpp"
#include "engine/heap_pages.hpp"
#include "engine/units.hpp"
#include "jobs/progress.hpp"
#include "jobs/run/context.hpp"

namespace fabricsim::jobs::run_stages {

using engine::InputError;

namespace {

/// Progress reports (jobs/progress.hpp, docs/progress.md): every process gives its GPU ranks
/// their work weights and samples their work; the engine sums the samples to rank 0, which
/// prints (tty: one line rewritten with a carriage return; lines: one flushed line per report).
/// `printed` turns true once a tty line was printed (it then needs a newline at the end).
void install_progress(RunContext& c, bool& printed) {
  const ProgressOptions& po = c.opt.progress;
  if (po.mode == ProgressMode::kOff && !po.observer) return;
  std::vector<const models::GpuRankLp*> ranks;
  // Total work per (program, weight): ranks of one shared program share it.
  std::map<std::pair<const void*, double>, double> totals;
  for (const auto& g : c.gpus) {
    const std::uint32_t r = g->rank_record().rank;
    if (g->total_nodes() == 0 || r >= c.w.ranks) continue;
    // Communication at the GPU's slowest port (ps per byte = 8e12 / rate_bps).
    std::uint64_t rate = 0;
    for (const models::Port& p : c.topo->ports(r)) {
      if (p.rate_bps > 0 && (rate == 0 || p.rate_bps < rate)) rate = p.rate_bps;
    }
    const double ps_per_byte = rate > 0 ? 8e12 / static_cast<double>(rate) : 0.0;
    const auto& prog = c.w.program(r);
    auto [it, fresh] = totals.try_emplace({static_cast<const void*>(&prog), ps_per_byte}, 0.0);
    if (fresh) {
      for (const auto& n : prog) it->second += models::GpuRankLp::node_work(n, ps_per_byte);
    }
    g->set_work_weights(ps_per_byte, it->second);
    ranks.push_back(g.get());
  }
  auto sample = [ranks](engine::SimTime now) {
    engine::ProgressWork w;
    for (const auto* g : ranks) {
      w.done += g->work_done(now);
      w.total += g->work_total();
    }
    return w;
  };
  const ProgressMode mode = po.mode;
  const auto observer = po.observer;
  const bool print = c.rank == 0;
  auto report = [mode, observer, print, &printed, eta = ProgressEstimator{}](const engine::ProgressInfo& p) mutable {
    const ProgressEstimate e = eta.next(p);
    if (print && mode == ProgressMode::kTty) {
      std::fprintf(stderr, "\rfabricsim: %s   ", progress_text(p, e).c_str());
      std::fflush(stderr);
      printed = true;
    } else if (print && mode == ProgressMode::kLines) {
      std::fprintf(stderr, "fabricsim: progress: %s\n", progress_text(p, e).c_str());
      std::fflush(stderr);
    }
    if (observer) observer(p);
  };
  c.sim->set_progress(sample, report, po.interval_s, po.check_events);
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
  try {
    run_engine(c);
  } catch (...) {
    if (c.progress_printed) std::fputc('\n', stderr);  // the error line starts on a line of its own
    throw;
  }
  c.log->info("simulated ({:.3f} s)", now_s() - c.t0);
  if (c.progress_printed) {
    std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }
  c.stats = c.sim->global_stats();
  if (c.sim->stopped()) return;  // a stop request: the DAGs are unfinished by design
  check_completed(c);
}

}  // namespace fabricsim::jobs::run_stages
