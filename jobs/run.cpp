#include "jobs/run.hpp"

#include <cstdio>

#include "engine/errors.hpp"
#include "engine/units.hpp"
#include "jobs/run/context.hpp"

namespace fabricsim::jobs {

std::string validate_only(const RunOptions& opt, MPI_Comm comm) {
  RunOptions o = opt;
  o.dry_run = true;
  o.write_h5 = false;
  return run_simulation(o, comm, "", "").summary_text;
}

// The stages of a run, in order (jobs/run/context.hpp); each hands its results on in `c`.
RunResult run_simulation(const RunOptions& opt_in, MPI_Comm comm, const std::string& version,
                         const std::string& git_commit) {
  RunOptions isolated_opt;
  if (opt_in.isolated && opt_in.only_job < 0 && !opt_in.dry_run) {
    // --isolated: each job alone on the same placement first (nothing written), then all together.
    const Spec spec = load_spec(opt_in.spec_path, opt_in.sets);
    if (spec.jobs.empty()) {
      throw engine::InputError("<cli>", "--isolated", "the spec has no jobs: list",
                               "drop --isolated, or give a spec with jobs:");
    }
    isolated_opt = opt_in;
    isolated_opt.alone_iter_ps.clear();
    for (std::size_t k = 0; k < spec.jobs.size(); ++k) {
      RunOptions o = opt_in;
      o.isolated = false;
      o.only_job = static_cast<int>(k);
      o.write_h5 = false;
      o.print_summary = false;
      o.progress = ProgressOptions{};
      o.checkpoint_at.clear();
      o.checkpoint_every_s = 0;
      o.checkpoint_at_signal = false;
      o.restart.clear();
      const RunResult alone = run_simulation(o, comm, version, git_commit);
      if (alone.stopped) return alone;
      isolated_opt.alone_iter_ps.push_back(alone.jobs.at(0).iteration_ps);
    }
  }
  const RunOptions& opt = opt_in.isolated && opt_in.only_job < 0 && !opt_in.dry_run ? isolated_opt : opt_in;
  run_stages::RunContext c(opt, comm, version, git_commit);
  run_stages::resolve(c);
  run_stages::load_workloads(c);
  run_stages::draw_stragglers(c);
  run_stages::build_topology(c);
  run_stages::fold_replicas(c);
  run_stages::place(c);
  run_stages::make_planner(c);
  if (opt.dry_run) return run_stages::dry_run_result(c);
  run_stages::build_lps(c);
  run_stages::setup_checkpoints(c);
  run_stages::simulate(c);
  if (c.sim->stopped()) return run_stages::stopped_result(c);
  run_stages::gather(c);
  run_stages::report(c);
  // The summary goes out (flushed) before the outputs are written, so a job killed during the
  // writing, or later, still has it in its log; the "output:" line once the file is in place.
  const bool print = opt.print_summary && c.rank == 0;
  if (print) {
    std::fwrite(c.summary_body.data(), 1, c.summary_body.size(), stdout);
    std::fflush(stdout);
  }
  run_stages::write_outputs(c);
  if (print) {
    const std::string rest = c.res.summary_text.substr(c.summary_body.size());
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fflush(stdout);
  }
  c.log->info("done: iteration {}, {} events, wall {:.3f} s", engine::format_time(c.res.meta.simulated_time_ps),
              c.res.stats.events, run_stages::now_s() - c.t0);
  return std::move(c.res);
}

}  // namespace fabricsim::jobs
