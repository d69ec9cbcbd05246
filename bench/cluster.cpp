// bench_cluster: end-to-end packet-level scenarios on the full model (jobs::run_simulation),
// writing one JSON record (rank 0): events, events/s, wall, peak RSS, processes, threads, the
// results digest (equal for every process/thread count), and memory per simulated GPU.
//
//   bench_cluster --scenario permutation [--hosts 128] [--bytes 4MiB]   one GPU per host, each
//                  host sends `bytes` to a random other host (a fixed-seed derangement), all at once
//   bench_cluster --scenario incast [--hosts 33] [--bytes 4MiB]         hosts-1 senders -> 1 receiver
//                  under one leaf (PFC pauses the senders)
//   bench_cluster --scenario allreduce [--gpus 1024] [--bytes 64MiB]    one world AllReduce
//   bench_cluster --scenario gpt3 [--gpus 128]                          GPT-3 175B iteration
//                  (Megatron generator, TP 8, PP 8, DP gpus/64)
//   bench_cluster --scenario spec --spec FILE                           any experiment spec, e.g.
//                  examples/moe_9216.yaml (gpus = the workload's ranks)
//   common: [--threads N] [--set key=value ...] [--json FILE]
//
// Packet hops: every packet (data, ACK/NACK/CNP) put on a link by a NIC or a switch, from the
// fabric counters (RunResult::fabric); packet_hops_per_s = hops / wall. The fabric defaults are
// PFC + ECN + DCQCN on (models/core/fabric_params.hpp).
#include <mpi.h>

#include "bench/bench_common.hpp"
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/errors.hpp"
#include "engine/rng.hpp"
#include "engine/units.hpp"
#include "jobs/nccl_tests.hpp"
#include "jobs/run.hpp"
#include "models/core/workload.hpp"

namespace {

using fabricsim::engine::InputError;
using fabricsim::engine::InternalError;
namespace models = fabricsim::models;

// Each rank r: a send of `bytes` to perm[r] and a receive from perm^-1[r], concurrent.
models::Workload permutation_workload(std::uint32_t n, std::uint64_t bytes, std::uint64_t seed) {
  std::vector<std::uint32_t> perm(n);
  for (std::uint32_t i = 0; i < n; ++i) perm[i] = i;
  fabricsim::engine::CounterRng rng(seed, 0);
  // Sattolo's algorithm: a uniformly random single cycle, so nobody sends to itself.
  for (std::uint32_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::uint32_t>(rng.next_below(i));
    std::swap(perm[i], perm[j]);
  }
  std::vector<std::uint32_t> inv(n);
  for (std::uint32_t i = 0; i < n; ++i) inv[perm[i]] = i;
  models::Workload w;
  w.source = "bench_cluster permutation";
  w.format = "chakra";
  w.ranks = n;
  models::CommGroup world;
  world.name = "world";
  for (std::uint32_t i = 0; i < n; ++i) world.ranks.push_back(i);
  w.groups.push_back(world);
  w.programs.resize(n);
  for (std::uint32_t r = 0; r < n; ++r) {
    models::WorkNode s;
    s.source_id = 0;
    s.name = "send";
    s.type = models::NodeType::kSend;
    s.bytes = bytes;
    s.peer = static_cast<std::int32_t>(perm[r]);
    s.tag = 1;
    models::WorkNode rv;
    rv.source_id = 1;
    rv.name = "recv";
    rv.type = models::NodeType::kRecv;
    rv.bytes = bytes;
    rv.peer = static_cast<std::int32_t>(inv[r]);
    rv.tag = 1;
    w.programs[r] = {s, rv};
  }
  return w;
}

int run(int argc, char** argv, int rank, int nprocs) {
  std::string scenario = "permutation", bytes_text, json_path, spec_path;
  std::uint32_t hosts = 128, gpus = 1024, threads = 1;
  std::vector<std::string> sets;
  CLI::App app{"end-to-end packet-level benchmark scenarios of fabricsim"};
  app.add_option("--scenario", scenario, "permutation | incast | allreduce | gpt3 | spec")->capture_default_str();
  app.add_option("--spec", spec_path, "spec: the experiment spec (YAML) to run");
  app.add_option("--hosts", hosts, "permutation: hosts (one GPU each)")->capture_default_str();
  app.add_option("--gpus", gpus, "allreduce/gpt3: GPUs (8 per host)")->capture_default_str();
  app.add_option("--bytes", bytes_text, "permutation: bytes per host (default 4MiB); allreduce: buffer (default 64MiB)");
  app.add_option("--threads", threads, "engine threads per MPI process")->capture_default_str();
  app.add_option("--set", sets, "spec override key=value (repeatable)");
  app.add_option("--json", json_path, "write the result as JSON to FILE (rank 0)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = rank == 0 ? app.exit(e) : e.get_exit_code();
    return rc == 0 ? 0 : 2;
  }
  fabricsim::jobs::RunOptions ro;
  ro.threads = threads;
  ro.write_h5 = false;
  ro.quiet = true;
  models::Workload w;
  std::uint64_t bytes = 0;
  std::uint32_t sim_gpus = 0;
  if (scenario == "permutation") {
    bytes = bytes_text.empty() ? 4ull << 20 : fabricsim::engine::parse_bytes(bytes_text, "<cli>", "--bytes");
    w = permutation_workload(hosts, bytes, 1);
    sim_gpus = hosts;
    ro.sets = {"cluster.gpus_per_host=1", "cluster.topology=leaf_spine"};
    ro.workload_data = &w;
  } else if (scenario == "incast") {
    bytes = bytes_text.empty() ? 4ull << 20 : fabricsim::engine::parse_bytes(bytes_text, "<cli>", "--bytes");
    const std::uint32_t n = std::max<std::uint32_t>(2, hosts == 128 ? 33 : hosts);
    w.source = "bench_cluster incast";
    w.format = "chakra";
    w.ranks = n;
    models::CommGroup world;
    world.name = "world";
    for (std::uint32_t i = 0; i < n; ++i) world.ranks.push_back(i);
    w.groups.push_back(world);
    w.programs.resize(n);
    for (std::uint32_t r = 0; r + 1 < n; ++r) {
      models::WorkNode s;
      s.name = "send";
      s.type = models::NodeType::kSend;
      s.bytes = bytes;
      s.peer = static_cast<std::int32_t>(n - 1);
      s.tag = r;
      w.programs[r].push_back(s);
      models::WorkNode rv;
      rv.name = "recv";
      rv.type = models::NodeType::kRecv;
      rv.bytes = bytes;
      rv.peer = static_cast<std::int32_t>(r);
      rv.tag = r;
      w.programs[n - 1].push_back(rv);
    }
    sim_gpus = n;
    ro.sets = {"cluster.gpus_per_host=1", "cluster.topology=leaf_spine", "cluster.nics_per_leaf=" + std::to_string(n)};
    ro.workload_data = &w;
  } else if (scenario == "allreduce") {
    bytes = bytes_text.empty() ? 64ull << 20 : fabricsim::engine::parse_bytes(bytes_text, "<cli>", "--bytes");
    w = fabricsim::jobs::nccl_tests_workload("all_reduce", gpus, bytes, 0);
    sim_gpus = gpus;
    ro.workload_data = &w;
  } else if (scenario == "gpt3") {
    sim_gpus = gpus;
    ro.sets = {"workload.generator.model=gpt3-175b", "workload.generator.gpu=A100",
               "workload.generator.tp=8", "workload.generator.pp=8",
               "workload.generator.dp=" + std::to_string(gpus / 64),
               "workload.generator.global_batch=" + std::to_string(2 * (gpus / 64) * 8),
               // NVLink as event granularity only: cut-through NVSwitches, units of up to 64 KiB
               // (same NVLink timing as 4 KiB units, ~5x fewer events; docs/fabric.md).
               "cluster.nvswitch_cut_through=true", "cluster.nvlink_mtu=64KiB"};
  } else if (scenario == "spec") {
    if (spec_path.empty()) throw InputError("<cli>", "--spec", "missing for --scenario spec", "name a spec file");
    ro.spec_path = spec_path;
  } else {
    throw InputError("<cli>", "--scenario", "unknown scenario '" + scenario + "'",
                     "use permutation, incast, allreduce, gpt3 or spec");
  }
  for (const auto& s : sets) ro.sets.push_back(s);
  const auto res = fabricsim::jobs::run_simulation(ro, MPI_COMM_WORLD, "bench", "");
  if (scenario == "spec") sim_gpus = static_cast<std::uint32_t>(res.ranks.size());

  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  long rss = ru.ru_maxrss, peak_rss = 0, sum_rss = 0;  // KiB on Linux
  MPI_Allreduce(&rss, &peak_rss, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&rss, &sum_rss, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    const auto& st = res.stats;
    nlohmann::json j;
    j["benchmark"] = scenario;
    j["gpus"] = sim_gpus;
    j["bytes"] = bytes;
    j["sets"] = ro.sets;
    j["processes"] = nprocs;
    j["threads"] = threads;
    j["events"] = st.events;
    j["events_per_s"] = st.events_per_s();
    const auto& f = res.fabric;
    const std::uint64_t hops = f.switch_packets + f.nic_data_packets + f.acks + f.nacks + f.cnps;
    j["packet_hops"] = hops;
    j["packet_hops_per_s"] = st.wall_s > 0 ? static_cast<double>(hops) / st.wall_s : 0.0;
    j["packet_hops_per_s_per_core"] = st.wall_s > 0 ? static_cast<double>(hops) / st.wall_s / (nprocs * threads) : 0.0;
    j["fabric"] = {{"pause_frames", f.pause_frames}, {"ecn_marks", f.ecn_marks}, {"cnps", f.cnps},
                   {"drops", f.drops}, {"retransmits", f.retransmits}, {"acks", f.acks},
                   {"max_buffer_bytes", f.max_buffer_bytes}};
    j["wall_s"] = st.wall_s;
    j["sync_s"] = st.sync_s;
    j["remote_events"] = st.remote_events;
    j["exchange_bytes"] = st.exchange_bytes;
    j["exchange_messages"] = st.exchange_messages;
    j["windows"] = st.windows;
    j["lookahead_ps"] = st.lookahead_ps;
    j["simulated_time_ps"] = res.meta.simulated_time_ps;
    j["peak_rss_kb"] = peak_rss;
    j["sum_rss_kb"] = sum_rss;
    // CPU seconds of this process (rank 0), the whole run (workload generation and set-up
    // included): on a shared machine wall time depends on the load, CPU time much less.
    j["cpu_user_s"] = static_cast<double>(ru.ru_utime.tv_sec) + 1e-6 * static_cast<double>(ru.ru_utime.tv_usec);
    j["cpu_sys_s"] = static_cast<double>(ru.ru_stime.tv_sec) + 1e-6 * static_cast<double>(ru.ru_stime.tv_usec);
    j["rss_per_gpu_kb"] = static_cast<double>(sum_rss) / sim_gpus;
    j["digest"] = res.digest;
    std::printf("%s: gpus=%u processes=%d threads=%u events=%llu wall=%.3f s events/s=%.4g packet_hops/s=%.4g "
                "pauses=%llu cnps=%llu simulated=%.3f us peak_rss=%ld KiB digest=%s\n",
                scenario.c_str(), sim_gpus, nprocs, threads, static_cast<unsigned long long>(st.events),
                st.wall_s, st.events_per_s(), j["packet_hops_per_s"].get<double>(),
                static_cast<unsigned long long>(f.pause_frames), static_cast<unsigned long long>(f.cnps), static_cast<double>(res.meta.simulated_time_ps) * 1e-6,
                peak_rss, res.digest.c_str());
    if (const int rc = fabricsim::bench::write_json(json_path, j); rc != 0) return rc;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return fabricsim::bench::bench_main(argc, argv, [&](int rank, int nprocs) {
    (void)nprocs;
    return run(argc, argv, rank, nprocs);
  });
}
