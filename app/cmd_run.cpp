// `fabricsim run` and `fabricsim validate`.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>

#include "app/commands.hpp"
#include "engine/errors.hpp"
#include "engine/stop_signal.hpp"
#include "engine/units.hpp"
#include "jobs/run.hpp"

namespace fabricsim::app {
namespace {

/// Exit code of a run a stop signal ended (EX_TEMPFAIL of sysexits.h: retry later, e.g. requeue).
constexpr int kExitStopped = 75;

void add_common(CLI::App* sub, jobs::RunOptions& opt) {
  sub->add_option("spec", opt.spec_path, "experiment spec (YAML); optional with --workload")->check(CLI::ExistingFile);
  sub->add_option("--workload", opt.workload, "workload: Chakra ET prefix (PREFIX.<rank>.et) or SimAI/AICB file");
  sub->add_option("--gpus", opt.gpus, "world size for SimAI/AICB files without all_gpus (SimAI's -g), or to replicate "
                                      "a Chakra trace of rank 0 only to")
      ->check(CLI::Range(1u, 1u << 24));
  sub->add_option("--set", opt.sets, "override a spec key: --set cluster.nic_bandwidth=200Gbps (repeatable)");
  sub->add_option("--threads", opt.threads, "engine threads per MPI process (default: sim.threads or OMP_NUM_THREADS)")
      ->check(CLI::Range(1u, 256u));
}

/// --threads unset: OMP_NUM_THREADS in 1..256 gives the engine threads (run and validate alike).
void threads_from_env(jobs::RunOptions& opt) {
  if (opt.threads != 0) return;
  if (const char* omp = std::getenv("OMP_NUM_THREADS")) {
    const int t = std::atoi(omp);
    if (t >= 1 && t <= 256) {
      opt.threads = static_cast<std::uint32_t>(t);
    } else if (is_root()) {
      std::fprintf(stderr, "fabricsim: warning: OMP_NUM_THREADS=%s is not in 1..256; using sim.threads\n", omp);
    }
  }
}

/// --progress and --progress-interval (given as `given`: mode, interval text) into
/// opt.progress. Default mode: tty when stderr is a terminal, else lines; off with --quiet
/// unless --progress is given. @throws engine::InputError naming the flag and the fix.
void set_progress(const CLI::App& run, const std::pair<std::string, std::string>& given, jobs::RunOptions& opt) {
  jobs::ProgressOptions& p = opt.progress;
  if (run.count("--progress") > 0) {
    p.mode = jobs::parse_progress_mode(given.first);
  } else {
    p.mode = opt.quiet ? jobs::ProgressMode::kOff : jobs::default_progress_mode(::isatty(STDERR_FILENO) != 0);
  }
  if (run.count("--progress-interval") > 0) {
    p.interval_s = engine::parse_wall_seconds(given.second, "<cli>", "--progress-interval");
  }
}

}  // namespace

Action add_run(CLI::App& app) {
  auto opt = std::make_shared<jobs::RunOptions>();
  CLI::App* run = app.add_subcommand("run", "simulate a workload on a cluster");
  add_common(run, *opt);
  run->add_option("-o,--output", opt->out_h5, "HDF5 results file (default: output.h5 key, fabricsim_results.h5)");
  run->add_option("--summary-json", opt->summary_json, "write the summary as JSON");
  run->add_flag("--isolated", opt->isolated,
                "jobs: specs: first run each job alone on the same placement, then report each job's slowdown "
                "against alone (docs/jobs_and_faults.md)");
  run->add_flag("--stats", opt->stats, "print engine statistics (events, windows, events/s, remote events, sync time)");
  run->add_flag("-q,--quiet", opt->quiet, "no summary on stdout");
  run->add_option("--log-level", opt->log_level, "stderr log: error, warn (default), info (phases, wall times) or debug")
      ->check(CLI::IsMember({"error", "warn", "info", "debug"}));
  auto fidelity = std::make_shared<std::string>();
  run->add_option("--fidelity", *fidelity, "network rung: packet (default), flow or analytical (sim.fidelity)");
  auto part = std::make_shared<std::pair<std::string, std::string>>();
  run->add_option("--partition", part->first, "LP placement: topology, metis or a partition file (sim.partition)");
  run->add_option("--save-partition", part->second, "write the placement to FILE for reuse (sim.save_partition)");
  auto progress = std::make_shared<std::pair<std::string, std::string>>();
  run->add_option("--progress", progress->first,
                  "progress on stderr: off, tty (one line rewritten in place) or lines (a complete line per interval, "
                  "for logs); default tty when stderr is a terminal, else lines; off with --quiet (docs/progress.md)");
  run->add_option("--progress-interval", progress->second,
                  "wall time between progress reports, e.g. 500ms, 10s, 2min (default 60s)");
  auto trace = std::make_shared<std::pair<std::string, std::string>>();
  run->add_option("--trace", trace->first, "write a Perfetto / Chrome trace-event JSON (output.trace)");
  run->add_option("--trace-ranks", trace->second, "ranks to trace: A-B, A or all (output.trace_ranks, default 0-15)");
  // Checkpoints (docs/checkpoint.md).
  auto ckpt = std::make_shared<std::pair<std::string, std::string>>();  // --checkpoint-at, --checkpoint-every
  run->add_option("--checkpoint-at", ckpt->first,
                  "write a checkpoint at these simulated times, comma-separated (e.g. 1ms,2ms)");
  run->add_option("--checkpoint-every", ckpt->second, "write a checkpoint every wall-clock DURATION (e.g. 30min, 1h)");
  run->add_flag("--checkpoint-at-signal", opt->checkpoint_at_signal,
                "on SIGTERM/SIGUSR1 write a checkpoint before stopping (exit 75)");
  run->add_option("--checkpoint-dir", opt->checkpoint_dir,
                  "directory for checkpoints: DIR/ckpt-t<ps>ps/ and DIR/latest (needed by the flags above)");
  run->add_option("--restart", opt->restart, "continue from a checkpoint: its directory, or a --checkpoint-dir (latest)");
  return [run, opt, fidelity, trace, part, ckpt, progress]() -> int {
    if (!*run) return -1;
    set_progress(*run, *progress, *opt);
    if (run->count("--checkpoint-at") > 0) {
      std::string list = ckpt->first;
      std::size_t start = 0;
      while (start <= list.size()) {
        const std::size_t comma = std::min(list.find(',', start), list.size());
        const std::string item = list.substr(start, comma - start);
        opt->checkpoint_at.push_back(engine::parse_time_ps(item, "<cli>", "--checkpoint-at"));
        start = comma + 1;
      }
    }
    if (run->count("--checkpoint-every") > 0) {
      opt->checkpoint_every_s = engine::parse_wall_seconds(ckpt->second, "<cli>", "--checkpoint-every");
      if (opt->checkpoint_every_s < 1) {
        throw engine::InputError("<cli>", "--checkpoint-every", "'" + ckpt->second + "' is shorter than 1 s",
                                 "checkpoint at most once a second, e.g. 90s, 30min or 1h");
      }
    }
    if (run->count("--restart") > 0 && opt->restart.empty()) {
      throw engine::InputError("<cli>", "--restart", "the path is empty", "give a checkpoint directory");
    }
    opt->stop_flag = engine::install_stop_signals();
    if (run->count("--partition") > 0) opt->sets.push_back("sim.partition=" + part->first);
    if (run->count("--save-partition") > 0) opt->sets.push_back("sim.save_partition=" + part->second);
    if (run->count("--fidelity") > 0) opt->sets.push_back("sim.fidelity=" + *fidelity);
    if (run->count("--trace") > 0) {
      if (trace->first.empty()) throw engine::InputError("<cli>", "--trace", "the path is empty", "give a file name");
      opt->sets.push_back("output.trace=" + trace->first);
    }
    if (run->count("--trace-ranks") > 0) opt->sets.push_back("output.trace_ranks=" + trace->second);
    if (run->count("-o") > 0 && opt->out_h5.empty()) {
      throw engine::InputError("<cli>", "-o", "the output path is empty", "give a file name, e.g. -o out.h5");
    }
    if (run->count("--summary-json") > 0 && opt->summary_json.empty()) {
      throw engine::InputError("<cli>", "--summary-json", "the path is empty", "give a file name");
    }
    threads_from_env(*opt);
    // run_simulation prints the summary (rank 0) as soon as it is known, flushed.
    opt->print_summary = !opt->quiet;
    const auto res = jobs::run_simulation(*opt, MPI_COMM_WORLD, FABRICSIM_VERSION, FABRICSIM_GIT_COMMIT);
    if (res.stopped) {
      // The one final status line of a run a signal stopped (docs/checkpoint.md); no output file.
      if (is_root()) {
        std::cerr << "fabricsim: stopped by a signal at simulated time " << engine::format_time(res.stopped_at_ps)
                  << " after " << res.stats.events << " events; "
                  << (res.checkpoint.empty() ? std::string("no checkpoint") : "checkpoint " + res.checkpoint)
                  << "; no output written\n";
      }
      return kExitStopped;
    }
    return 0;
  };
}

Action add_validate(CLI::App& app) {
  auto opt = std::make_shared<jobs::RunOptions>();
  CLI::App* sub = app.add_subcommand("validate", "run every check of `run` (spec, workload, topology, partition, NCCL settings, schedules, output paths) without simulating");
  add_common(sub, *opt);
  sub->add_option("--processes", opt->validate_processes,
                  "check the partition (sim.partition file, or the placement and its lookahead) for a run on N MPI "
                  "processes, 1..1048576 (default: the processes validate runs on)")
      ->check(CLI::Range(1u, 1u << 20));
  return [sub, opt]() -> int {
    if (!*sub) return -1;
    opt->write_h5 = false;
    threads_from_env(*opt);
    const std::string d = jobs::validate_only(*opt);
    if (is_root()) std::cout << "ok\n" << d;
    return 0;
  };
}

}  // namespace fabricsim::app
