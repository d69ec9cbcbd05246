// bench_phold: PHOLD (Fujimoto 1990) on the fabricsim engine. Measures committed events per wall
// second over MPI processes x threads; prints a summary and writes a JSON record (rank 0).
//
//   bench_phold [--lps N] [--population N] [--remote F] [--mean 1us | --mean-ps N]
//               [--lookahead 100ns | --lookahead-ps N] [--end-time 60us | --end-time-ps N]
//               [--threads N] [--seed N] [--json FILE]
#include <mpi.h>

#include "bench/bench_common.hpp"
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/errors.hpp"
#include "engine/units.hpp"
#include "bench/phold/phold_lp.hpp"

namespace {

using fabricsim::engine::InputError;
using fabricsim::engine::InternalError;
using fabricsim::engine::SimTime;

int run(int argc, char** argv, int rank) {
  fabricsim::models::PholdConfig cfg;
  cfg.lps = 16384;
  cfg.population = 16;
  cfg.remote_fraction = 0.5;
  cfg.mean_delay_ps = 1'000'000;
  cfg.lookahead_ps = 100'000;
  cfg.end_time_ps = 25'000'000;  // 25 us: about 5.9e6 events with the defaults (~3 s on one core)
  cfg.seed = 1;
  cfg.threads = 1;
  std::string mean, lookahead, end_time, json_path;

  CLI::App app{"PHOLD benchmark of the fabricsim PDES engine (Fujimoto 1990)"};
  app.add_option("--lps", cfg.lps, "number of LPs")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--population", cfg.population, "initial events per LP")->capture_default_str();
  app.add_option("--remote", cfg.remote_fraction, "probability a hop goes to another LP")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  auto* o_mean = app.add_option("--mean", mean, "mean exponential delay with unit (e.g. 1us)");
  app.add_option("--mean-ps", cfg.mean_delay_ps, "mean exponential delay, ps")->capture_default_str()->excludes(o_mean);
  auto* o_la = app.add_option("--lookahead", lookahead, "fixed hop delay = window width, with unit (e.g. 100ns)");
  app.add_option("--lookahead-ps", cfg.lookahead_ps, "fixed hop delay, ps")->capture_default_str()->excludes(o_la);
  auto* o_end = app.add_option("--end-time", end_time, "simulated end time with unit (e.g. 60us)");
  app.add_option("--end-time-ps", cfg.end_time_ps, "simulated end time, ps")->capture_default_str()->excludes(o_end);
  app.add_option("--threads", cfg.threads, "engine threads per MPI process")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seed", cfg.seed, "random seed")->capture_default_str();
  app.add_option("--json", json_path, "write the result as JSON to FILE (rank 0)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help/version print and exit 0; errors exit 2 like InputError.
    const int rc = rank == 0 ? app.exit(e) : e.get_exit_code();
    return rc == 0 ? 0 : 2;
  }
  if (!mean.empty()) cfg.mean_delay_ps = fabricsim::engine::parse_time_ps(mean, "<cli>", "--mean");
  if (!lookahead.empty()) cfg.lookahead_ps = fabricsim::engine::parse_time_ps(lookahead, "<cli>", "--lookahead");
  if (!end_time.empty()) cfg.end_time_ps = fabricsim::engine::parse_time_ps(end_time, "<cli>", "--end-time");

  const auto r = fabricsim::models::run_phold(MPI_COMM_WORLD, cfg);

  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  long rss = ru.ru_maxrss, peak_rss = 0;  // KiB on Linux
  MPI_Allreduce(&rss, &peak_rss, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);

  if (rank == 0) {
    nlohmann::json j;
    j["benchmark"] = "phold";
    j["lps"] = cfg.lps;
    j["population"] = cfg.population;
    j["remote_fraction"] = cfg.remote_fraction;
    j["mean_delay_ps"] = cfg.mean_delay_ps;
    j["lookahead_ps"] = cfg.lookahead_ps;
    j["end_time_ps"] = cfg.end_time_ps;
    j["seed"] = cfg.seed;
    j["processes"] = r.stats.processes;
    j["threads"] = r.stats.threads;
    j["events"] = r.events;
    j["events_per_s"] = r.stats.events_per_s();
    j["wall_s"] = r.stats.wall_s;
    j["windows"] = r.stats.windows;
    j["remote_events"] = r.stats.remote_events;
    j["thread_events"] = r.stats.thread_events;
    j["sync_s"] = r.stats.sync_s;
    j["exchange_bytes"] = r.stats.exchange_bytes;
    j["exchange_messages"] = r.stats.exchange_messages;
    j["last_event_ps"] = r.stats.end_time_ps;
    j["peak_rss_kb"] = peak_rss;
    char hex[19];
    std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(r.checksum));
    j["checksum"] = hex;
    std::printf(
        "phold: lps=%u population=%u remote=%.3f processes=%u threads=%u\n"
        "  events=%llu wall=%.3f s events/s=%.4g windows=%llu remote_events=%llu sync=%.3f s\n"
        "  exchange: %llu messages, %llu bytes\n"
        "  peak_rss=%ld KiB checksum=%s\n",
        cfg.lps, cfg.population, cfg.remote_fraction, r.stats.processes, r.stats.threads,
        static_cast<unsigned long long>(r.events), r.stats.wall_s, r.stats.events_per_s(),
        static_cast<unsigned long long>(r.stats.windows),
        static_cast<unsigned long long>(r.stats.remote_events), r.stats.sync_s,
        static_cast<unsigned long long>(r.stats.exchange_messages),
        static_cast<unsigned long long>(r.stats.exchange_bytes), peak_rss, hex);
    if (const int rc = fabricsim::bench::write_json(json_path, j); rc != 0) return rc;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return fabricsim::bench::bench_main(argc, argv, [&](int rank, int nprocs) {
    (void)nprocs;
    return run(argc, argv, rank);
  });
}
