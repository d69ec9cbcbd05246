// Stage `report` of `fabricsim run`: derived figures (per-rank means, inference metrics, MFU),
// the summary text and the summary JSON.
#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <sstream>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/units.hpp"
#include "jobs/run/context.hpp"

namespace fabricsim::jobs::run_stages {

namespace fs = std::filesystem;

namespace {

/// Per-rank sums, inference metrics and MFU of the gathered results; sets RunResult::ttft_ps and
/// tpot_ps for inference workloads.
RunMetrics compute_metrics(RunContext& c) {
  RunMetrics mt;
  const GenInfo& gen = c.gen;
  const double it = c.res.iterations;
  for (const auto& r : c.res.ranks) {
    mt.comp += static_cast<double>(r.compute_ps);
    mt.commu += static_cast<double>(r.comm_ps);
    mt.exposed += static_cast<double>(r.exposed_comm_ps);
    mt.bubble += static_cast<double>(r.bubble_ps);
    mt.comp_max = std::max(mt.comp_max, static_cast<double>(r.compute_ps) / it);
    mt.exposed_max = std::max(mt.exposed_max, static_cast<double>(r.exposed_comm_ps) / it);
    mt.bubble_max = std::max(mt.bubble_max, static_cast<double>(r.bubble_ps) / it);
    for (std::size_t k = 0; k < models::kCommKinds; ++k) {
      mt.exposed_kind[k] += static_cast<double>(r.exposed_kind_ps[k]);
      mt.exposed_kind_max[k] = std::max(mt.exposed_kind_max[k], static_cast<double>(r.exposed_kind_ps[k]) / it);
    }
  }
  mt.nr = std::max<double>(1, static_cast<double>(c.res.ranks.size()));
  // Per-rank sums cover every iteration; reported per iteration like the iteration time.
  mt.comp /= it;
  mt.commu /= it;
  mt.exposed /= it;
  mt.bubble /= it;
  for (double& v : mt.exposed_kind) v /= it;
  // Inference: time to first token (end of the prefill), time per output token (mean decode step,
  // as vLLM's benchmark counts TPOT: (end-to-end - TTFT) / (output tokens - 1)), throughput.
  if (gen.infer.used) {
    const auto& phase_end = c.phase_end;
    mt.decode_steps = gen.output_tokens - 1;
    mt.ttft = phase_end[0];
    mt.tpot = mt.decode_steps > 0 ? (phase_end[mt.decode_steps] - phase_end[0]) / mt.decode_steps : 0;
    mt.out_tok_s = c.sim_end > 0 ? double(gen.replicas) * gen.batch * gen.output_tokens / (double(c.sim_end) * 1e-12)
                                 : 0.0;
    mt.prompt_tok_s =
        mt.ttft > 0 ? double(gen.replicas) * gen.batch * gen.prompt_tokens / (double(mt.ttft) * 1e-12) : 0.0;
    c.res.ttft_ps = mt.ttft;
    c.res.tpot_ps = mt.decode_steps > 0 ? mt.tpot : -1;
  }
  if (gen.used && c.iter > 0) {
    mt.tflops_per_gpu = gen.stats.model_flops / (static_cast<double>(c.iter) * 1e-12) / mt.nr / 1e12;
    mt.mfu = mt.tflops_per_gpu * 1e12 / gen.peak_flops;
  }
  return mt;
}

/// Inference lines: requests, time to first token, time per output token, end-to-end throughput.
void inference_lines(const RunContext& c, std::ostream& out) {
  const GenInfo& gen = c.gen;
  const RunMetrics& mt = c.metrics;
  const auto& phase_end = c.phase_end;
  const std::uint32_t decode_steps = mt.decode_steps;
  out << fmt::format("inference: {} requests per replica x {} replica(s), prompt {} tokens, {} output tokens each "
                     "({} decode steps after the prefill)\n",
                     gen.batch, gen.replicas, gen.prompt_tokens, gen.output_tokens, decode_steps);
  out << fmt::format("time to first token: {}  ({} ps; end of the prefill)\n", engine::format_time(mt.ttft), mt.ttft);
  if (decode_steps > 0) {
    out << fmt::format("time per output token: {}  ({} ps; mean of {} decode steps, first {}, last {})\n",
                       engine::format_time(mt.tpot), mt.tpot, decode_steps,
                       engine::format_time(phase_end[1] - phase_end[0]),
                       engine::format_time(phase_end[decode_steps] - phase_end[decode_steps - 1]));
  } else {
    out << "time per output token: - (output_tokens 1: no decode step)\n";
  }
  out << fmt::format("end-to-end: {}  ({} ps)   throughput: {:.1f} output tokens/s, prefill {:.1f} prompt tokens/s "
                     "(all replicas)\n",
                     engine::format_time(c.sim_end), c.sim_end, mt.out_tok_s, mt.prompt_tok_s);
}

/// The step breakdown (docs/hdf5_schema.md, "/ranks"): exposed communication per group kind and
/// the bubble, per rank and iteration, mean / max over ranks. "other" is shown when not zero.
void breakdown_lines(const RunContext& c, std::ostream& out) {
  const RunMetrics& mt = c.metrics;
  auto t = [](double ps) { return engine::format_time(static_cast<engine::SimTime>(ps)); };
  out << fmt::format("breakdown (per rank{}, mean / max over ranks): compute {} / {}, bubble {} / {}\n",
                     c.gen.infer.used ? "" : " and iteration", t(mt.comp / mt.nr), t(mt.comp_max),
                     t(mt.bubble / mt.nr), t(mt.bubble_max));
  static constexpr const char* kLabel[models::kCommKinds] = {"TP", "DP", "EP", "PP", "CP", "other"};
  std::string parts;
  for (std::size_t k = 0; k < models::kCommKinds; ++k) {
    if (k + 1 == models::kCommKinds && mt.exposed_kind_max[k] == 0) continue;
    parts += fmt::format("{}{} {} / {}", parts.empty() ? "" : ", ", kLabel[k], t(mt.exposed_kind[k] / mt.nr),
                         t(mt.exposed_kind_max[k]));
  }
  out << "  exposed communication by group: " << parts << "\n";
}

/// Shares of the generated compute time (all ranks) by source, in percent: measured table points
/// or database rows, interpolated, extrapolated by the tables' edge rule, modelled.
std::array<double, 4> kernel_source_shares(const GenStats& st) {
  double total = 0;
  for (double v : st.compute_ps_by_source) total += v;
  std::array<double, 4> pct{};
  for (std::size_t i = 0; i < 4; ++i) pct[i] = total > 0 ? 100.0 * st.compute_ps_by_source[i] / total : 0.0;
  return pct;
}

/// "compute time: X% measured, Y% interpolated, Z% extrapolated, W% model (...)".
std::string kernel_sources_line(const GenStats& st) {
  const auto p = kernel_source_shares(st);
  return fmt::format("compute time: {:.1f}% measured, {:.1f}% interpolated, {:.1f}% extrapolated, {:.1f}% model ({})",
                     p[0], p[1], p[2], p[3],
                     st.kernel_table.empty()
                         ? std::string("no measured kernel tables used: efficiency/roofline model")
                         : "measured tables kernels/data/measured/" + st.kernel_table + "; other kernels modelled");
}

/// Leaf down:up capacity: cluster.oversubscription's leaf ratio when given; else, for a
/// single-plane two-tier rail-optimized or leaf-spine fabric (every leaf has one uplink to each
/// spine), NIC ports per leaf x NIC rate over spines x fabric rate; 0 otherwise (not shown).
double leaf_oversubscription(const models::Topology& t) {
  const models::ClusterSpec& s = t.spec();
  if (s.oversub_leaf > 0) return s.oversub_leaf;
  const bool clos = s.fabric == models::FabricKind::kRailOptimized || s.fabric == models::FabricKind::kLeafSpine;
  const bool two_tier = clos && s.tiers == 2 && !s.dual_plane;
  if (!two_tier || t.num_spines() == 0 || s.fabric_bps == 0) return 0;
  return static_cast<double>(s.nics_per_leaf) * static_cast<double>(s.nic_bps) /
         (static_cast<double>(t.num_spines()) * static_cast<double>(s.fabric_bps));
}

/// "simulated: ..." in words: GPUs, the generated job's parallelism, the fabric (with its leaf
/// oversubscription when above 1:1) and the network rung.
std::string simulated_line(const RunContext& c) {
  const models::ClusterSpec& s = c.topo->spec();
  std::string job;
  if (c.gen.used) {
    const std::uint32_t mp = c.gen.tp * c.gen.pp * c.gen.cp;
    job = fmt::format(" as TP {} x PP {}{} x DP {}{}", c.gen.tp, c.gen.pp,
                      c.gen.cp > 1 ? fmt::format(" x CP {}", c.gen.cp) : "", c.w.ranks / std::max<std::uint32_t>(mp, 1),
                      c.gen.ep > 1 ? fmt::format(" (EP {})", c.gen.ep) : "");
  }
  const double ov = leaf_oversubscription(*c.topo);
  const std::string oversub = ov > 1.0 + 1e-9 ? fmt::format(", leaves oversubscribed {:.3g}:1", ov) : "";
  static constexpr const char* kRung[] = {
      "packet rung: every packet through NIC and switch queues, with PFC, ECN and congestion control",
      "flow rung: flows share links max-min fairly, no packets or switch queues",
      "analytical rung: each transfer alone at its path's bottleneck rate"};
  const auto rung = static_cast<std::size_t>(c.fidelity);
  return fmt::format("simulated: {} GPUs{} on {} hosts, {} fabric{}; {}{}", c.w.ranks, job, s.hosts,
                     s.fabric == models::FabricKind::kRailOptimized ? "rail-optimized"
                     : s.fabric == models::FabricKind::kLeafSpine   ? "leaf-spine"
                                                                    : models::fabric_kind_name(s.fabric),
                     oversub, rung < 3 ? kRung[rung] : models::fidelity_name(c.fidelity),
                     c.ring_flows == models::RingFlows::kStream && c.stream_applies ? " (ring flows: stream)" : "");
}

/// "where the time went" per rank and iteration (means over ranks): compute, exposed
/// communication by group kind (the pipeline waits counted in the bubble, not in PP) and the
/// bubble, each with its share of the iteration time; they add up to it (docs/hdf5_schema.md).
void where_time_went_line(const RunContext& c, std::ostream& out) {
  const RunMetrics& mt = c.metrics;
  const double it = static_cast<double>(c.iter);
  if (it <= 0 || c.gen.infer.used) return;
  double pp_wait = 0;
  for (const auto& r : c.res.ranks) pp_wait += static_cast<double>(r.pp_wait_ps);
  pp_wait /= c.res.iterations * mt.nr;
  auto part = [&](double ps) {
    return fmt::format("{} ({:.1f}%)", engine::format_time(static_cast<engine::SimTime>(ps)), 100.0 * ps / it);
  };
  static constexpr const char* kLabel[models::kCommKinds] = {"TP", "DP", "EP", "PP", "CP", "other"};
  std::string kinds;
  for (std::size_t k = 0; k < models::kCommKinds; ++k) {
    double v = mt.exposed_kind[k] / mt.nr - (k == 3 ? pp_wait : 0.0);
    if (v <= 0) continue;
    kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", kLabel[k], part(v));
  }
  out << fmt::format("where the time went (mean per rank): compute {}, exposed communication {}{}, bubble/idle {}\n",
                     part(mt.comp / mt.nr), part(mt.exposed / mt.nr - pp_wait),
                     kinds.empty() ? "" : " = " + kinds, part(mt.bubble / mt.nr));
}

/// Header of the summary: version, workload, cluster, fidelity, times, per-rank means, MFU, memory.
void summary_head(const RunContext& c, std::ostream& out) {
  const GenInfo& gen = c.gen;
  const RunMetrics& mt = c.metrics;
  const engine::SimTime iter = c.iter;
  out << "fabricsim " << c.version << "\n";
  out << simulated_line(c) << "\n";
  out << "workload:  " << workload_desc(c.w) << "\n";
  out << "cluster:   " << cluster_desc(*c.topo) << "\n";
  if (c.fidelity != models::Fidelity::kPacket) {
    out << "fidelity:  " << models::fidelity_name(c.fidelity)
        << (c.ring_flows == models::RingFlows::kStream && c.stream_applies ? " (ring flows: stream)" : "") << "\n";
  }
  if (c.fold.active()) {
    std::string how;
    if (c.fidelity == models::Fidelity::kFlow && c.fold_switch_flows > 0) {
      how = fmt::format("within a bound: {} flows crossed switch-to-switch links, where the mirrored replicas' share is "
                        "not counted",
                        c.fold_switch_flows);
    } else {
      how = "exact: every replica on its representative's leaves, no flow between switches";
    }
    if (c.fold.block == 1) {
      out << fmt::format("fold:      dp, {} replicas of {} ranks simulated as 1 ({}; docs/folding.md)\n", c.fold.replicas,
                         c.fold.world / c.fold.replicas, how);
    } else {
      out << fmt::format("fold:      dp, {} images of {} DP replicas ({} ranks each) simulated as 1 ({}; docs/folding.md)\n",
                         c.fold.replicas, c.fold.block, c.fold.world / c.fold.replicas, how);
    }
  }
  if (gen.infer.used) {
    inference_lines(c, out);
  } else if (c.res.iterations > 1) {
    out << fmt::format("iteration time: {}  ({} ps; mean of {} iterations, simulated time {})\n",
                       engine::format_time(iter), iter, c.res.iterations, engine::format_time(c.sim_end));
  } else {
    out << fmt::format("iteration time: {}  ({} ps)\n", engine::format_time(iter), iter);
  }
  where_time_went_line(c, out);
  out << fmt::format("per rank (mean{}): compute {}, communication {}, exposed communication {}\n",
                     gen.infer.used ? "" : ", per iteration",
                     engine::format_time(static_cast<engine::SimTime>(mt.comp / mt.nr)),
                     engine::format_time(static_cast<engine::SimTime>(mt.commu / mt.nr)),
                     engine::format_time(static_cast<engine::SimTime>(mt.exposed / mt.nr)));
  breakdown_lines(c, out);
  if (gen.used && iter > 0) {
    out << fmt::format("model FLOPs: {:.4g} per {}, {:.1f} TFLOP/s per GPU, MFU {:.1f}% of {} dense peak\n",
                       gen.stats.model_flops, gen.infer.used ? "request batch (prefill + decode)" : "iteration",
                       mt.tflops_per_gpu, 100 * mt.mfu, gen.fp8 ? "FP8" : "BF16/FP16");
  }
  if (gen.used) out << kernel_sources_line(gen.stats) << "\n";
  if (gen.used && !gen.stats.memory.stages.empty()) {
    const auto& mem = gen.stats.memory;
    const auto& pk = mem.peak();
    out << fmt::format(
        "memory per GPU (estimate, lower bound): {:.1f} GB on pipeline rank {} ({} {:.1f} GB, {} "
        "{:.1f} GB) of {:.0f} GB HBM{}\n",
        pk.total_bytes() / 1e9, pk.pp_rank, gen.infer.used ? "weights" : "model states",
        (pk.weights_bytes + pk.grads_bytes + pk.optimizer_bytes) / 1e9,
        gen.infer.used ? "KV cache and activations" : "activations", pk.activation_bytes / 1e9,
        mem.capacity_bytes / 1e9, mem.exceeds() ? "  ** exceeds the GPU's memory **" : "");
  }
}

/// The collectives line and table. Per (op, communicator size, bytes): count, mean time, and the
/// bus bandwidth of that mean time (as nccl-tests computes busbw from its average time; a mean of
/// per-instance busbw would disagree with the mean time whenever instances differ). Size-1
/// communicators are no-ops and only counted.
void collective_table(const RunResult& res, std::ostream& out) {
  out << fmt::format("collectives: {}   flows: {}\n", res.collectives.size(), res.flows);
  struct Agg {
    std::uint64_t count = 0;
    double time_s = 0;
    double factor = 0;  // busbw / algbw of the op at this size (nccl-tests factors)
  };
  std::map<std::tuple<std::string, std::uint32_t, std::uint64_t>, Agg> agg;
  std::uint64_t trivial = 0;
  for (const auto& c : res.collectives) {
    if (c.ranks <= 1) {
      ++trivial;
      continue;
    }
    Agg& a = agg[{c.op, c.ranks, c.bytes}];
    ++a.count;
    a.time_s += static_cast<double>(c.end_ps - c.start_ps) * 1e-12;
    if (c.algbw_GBps > 0) a.factor = c.busbw_GBps / c.algbw_GBps;
  }
  if (!agg.empty()) {
    out << fmt::format("  {:<15} {:>6} {:>14} {:>6} {:>14} {:>11}\n", "op", "ranks", "bytes", "count",
                       "mean time", "busbw GB/s");
    std::size_t shown = 0;
    for (const auto& [k, a] : agg) {
      if (++shown > 30) {
        out << fmt::format("  ... {} more kinds; every collective is in the HDF5 file (/collectives)\n",
                           agg.size() - 30);
        break;
      }
      const double n = static_cast<double>(a.count);
      const double mean_s = a.time_s / n;
      const double busbw = mean_s > 0 ? static_cast<double>(std::get<2>(k)) / mean_s / 1e9 * a.factor : 0.0;
      out << fmt::format("  {:<15} {:>6} {:>14} {:>6} {:>14} {:>11.2f}\n", std::get<0>(k), std::get<1>(k),
                         std::get<2>(k), a.count, engine::format_time(static_cast<engine::SimTime>(mean_s * 1e12)),
                         busbw);
    }
  }
  if (!agg.empty()) {
    out << "  (time: first rank's start to last rank's end, so it includes waiting for late ranks; "
           "busbw from the mean time, nccl-tests factors)\n";
  }
  if (trivial) out << fmt::format("  ({} collectives on single-rank communicators take no time)\n", trivial);
}

/// --stats: the partition report, engine synchronisation counters, and the flow solver's.
void stats_lines(const RunContext& c, std::ostream& out) {
  const engine::EngineStats& stats = c.stats;
  const engine::SimTime w_ps = c.plan.lookahead_ps;
  out << partition::partition_report(c.plan.placement, c.plan.edges, c.plan.lp_weight);
  out << fmt::format("stats: lookahead {}, remote events {}, cross-thread events {}, time in sync {:.3f} s, "
                     "exchange {} messages {} B, cut links {}\n",
                     w_ps == engine::kInfinity ? std::string("none (nothing cut)") : engine::format_time(w_ps),
                     stats.remote_events, stats.thread_events, stats.sync_s, stats.exchange_messages,
                     stats.exchange_bytes, partition::cut_edges(c.plan.placement, c.plan.edges));
  if (c.net_lp) {
    // Summed over processes at gather: the network LP's counters wherever it lives, and the
    // flows the GPUs delivered without it (models::FlowSource: single-packet flows whose answer
    // is known at the source; they never reach the solver).
    const RunContext::FlowCounters& f = c.flow_counters;
    out << fmt::format("flow solver: {} flows ({} delivered by their GPU, {} through the network LP), {} admitted "
                       "by the network LP, {} re-solves, {} flows re-solved ({:.1f} per re-solve)\n",
                       f.direct + f.handed, f.direct, f.handed, f.net_flows, f.solves, f.resolved,
                       f.solves ? double(f.resolved) / double(f.solves) : 0.0);
    out << fmt::format("flow routes: {} look-ups, {} misses ({:.1f}%), {} cache entries\n", f.route_lookups,
                       f.route_misses, f.route_lookups ? 100.0 * double(f.route_misses) / double(f.route_lookups) : 0.0,
                       f.route_entries);
  }
}

std::string links_summary(const RunContext& c);

/// The summary printed by `fabricsim run`, up to the results digest (summary_output_line follows).
std::string summary_text(const RunContext& c) {
  const RunResult& res = c.res;
  const Spec& spec = c.spec;
  std::ostringstream out;
  summary_head(c, out);
  collective_table(res, out);
  if (!c.jobs.empty()) out << jobs_summary(c, job_metrics(c));
  if (const std::string s = straggler_summary(c, res.ranks); !s.empty()) out << s << "\n";
  if (const std::string s = throttle_summary(c); !s.empty()) out << s << "\n";
  if (c.fidelity == models::Fidelity::kPacket && res.fabric.nic_data_packets > 0) {
    const FabricTotals& f = res.fabric;
    // The congestion signals first (what a newcomer looks for), then the settings and volume.
    out << fmt::format("fabric: {} ECN marks, {} PFC pauses ({} paused), {} drops, {} retransmits, {} CNPs, "
                       "max buffer {} B (largest switch buffer occupancy); cc {}, pfc {}, routing {}; "
                       "{} switch packet hops\n",
                       f.ecn_marks, f.pause_frames,
                       engine::format_time(static_cast<engine::SimTime>(f.switch_paused_ps + f.nic_paused_ps)),
                       f.drops, f.retransmits, f.cnps, f.max_buffer_bytes, models::cc_name(spec.fabric.nic.cc),
                       spec.fabric.sw.pfc ? "on" : "off", models::routing_name(spec.fabric.sw.routing),
                       f.switch_packets);
    if (!spec.faults.empty()) {
      out << fmt::format("faults: {} link faults; {} drops at down links, {} frames lost to bit errors, "
                         "{} packets ({} B) retransmitted, {} timeouts",
                         spec.faults.size(), f.down_drops, f.ber_drops, f.retransmits, f.retransmit_bytes, f.timeouts);
      if (spec.fabric.sw.link_retry) {
        out << fmt::format("; link-level retry: {} units ({} B) sent again", f.link_retransmits, f.link_retransmit_bytes);
      }
      out << "\n";
    }
    const models::NicParams& nic = spec.fabric.nic;
    if (nic.profile != "ideal" || nic.qp_cache > 0 || nic.msg_rate_per_s > 0 || c.opt.stats) {
      out << fmt::format("nic: profile {}; QP-context cache {}: {} hits, {} misses ({} each); message rate {}\n",
                         nic.profile, nic.qp_cache > 0 ? std::to_string(nic.qp_cache) + " per NIC" : "unlimited",
                         f.qp_ctx_hits, f.qp_ctx_misses, engine::format_time(nic.qp_miss_ps),
                         nic.msg_rate_per_s > 0 ? fmt::format("{:.4g}/s per NIC", nic.msg_rate_per_s) : "unlimited");
    }
    out << links_summary(c);
  }
  out << fmt::format("engine: {} events, {} windows, {:.3g} events/s, {} processes x {} threads, wall {:.3f} s\n",
                     c.stats.events, c.stats.windows, c.stats.events_per_s(), c.nprocs, spec.threads, c.stats.wall_s);
  if (c.opt.stats) stats_lines(c, out);
  out << "results digest: " << res.digest << "\n";
  return out.str();
}

/// The summary's last line, naming the HDF5 file ("" when none is written).
std::string summary_output_line(const RunResult& res) {
  return res.output_h5.empty() ? std::string() : "output: " + fs::absolute(res.output_h5).string() + "\n";
}

/// JSON `fabric`: the packet-fabric settings and counters.
/// The per-link lines of a packet run of a `jobs:` spec: the switch links that carried data of
/// more than one job (the shared links) with their totals, the XOFF frames their switches sent,
/// and the busiest of them. "" for a single-job spec.
std::string links_summary(const RunContext& c) {
  const models::Topology& topo = *c.topo;
  const bool multi = !c.jobs.empty();
  if (!multi) return {};  // single-job runs: the per-link totals are in the JSON and HDF5 only
  std::vector<const io::LinkTotalRecord*> sel;
  for (const auto& r : c.res.link_totals) {
    if (multi ? r.jobs > 1 : (r.tier >= 2 && r.bytes > 0)) sel.push_back(&r);
  }
  std::string out;
  if (sel.empty()) return multi ? "shared links: none (no switch link carried data of more than one job)\n" : out;
  std::uint64_t bytes = 0, marks = 0, pauses = 0, drops = 0, llr = 0;
  engine::SimTime paused = 0;
  double util = 0;
  for (const auto* r : sel) {
    bytes += r->bytes;
    marks += r->ecn_marks;
    pauses += r->pfc_pauses;
    paused += r->pause_ps;
    drops += r->drops;
    llr += r->link_retransmits;
    util += r->utilization;
  }
  out += fmt::format("{}: {} links, {} B, mean utilization {:.1f}%, {} ECN marks, {} PFC pauses ({} paused), {} drops",
                     multi ? "shared links (switch egress links carrying data of more than one job)"
                           : "switch-to-switch links with data",
                     sel.size(), bytes, 100.0 * util / static_cast<double>(sel.size()), marks, pauses,
                     engine::format_time(paused), drops);
  if (c.spec.fabric.sw.link_retry) out += fmt::format(", {} link-level retransmits", llr);
  out += "\n";
  if (multi) {
    // PFC where the shared links start: the XOFF frames their switches sent, by whom they paused.
    // In a two-tier fabric the congested shared links are leaf uplinks whose ingress ports are the
    // NICs, so the pauses land on both jobs' NICs.
    std::vector<engine::LpId> at;
    for (const auto* r : sel) at.push_back(r->from_node);
    std::sort(at.begin(), at.end());
    at.erase(std::unique(at.begin(), at.end()), at.end());
    std::vector<std::uint64_t> to_job(c.jobs.size(), 0);
    std::uint64_t to_switch = 0, total = 0;
    for (const auto& r : c.res.link_totals) {
      if (r.pfc_sent == 0 || !std::binary_search(at.begin(), at.end(), r.from_node)) continue;
      total += r.pfc_sent;
      if (topo.kind(r.to_node) == models::NodeKind::kGpu && r.to_node < c.job_of_gpu.size() && c.job_of_gpu[r.to_node] >= 0) {
        to_job[static_cast<std::size_t>(c.job_of_gpu[r.to_node])] += r.pfc_sent;
      } else if (topo.kind(r.to_node) != models::NodeKind::kGpu) {
        to_switch += r.pfc_sent;
      }
    }
    std::string who;
    for (std::size_t k = 0; k < c.jobs.size(); ++k) who += fmt::format("{} to job {}'s NICs, ", to_job[k], c.jobs[k].name);
    out += fmt::format("  PFC at the {} switches the shared links leave: {} XOFF frames sent ({}{} to switches)\n",
                       at.size(), total, who, to_switch);
  }
  std::vector<const io::LinkTotalRecord*> top = sel;
  std::stable_sort(top.begin(), top.end(), [](const auto* a, const auto* b) {
    return a->pfc_pauses + a->ecn_marks != b->pfc_pauses + b->ecn_marks ? a->pfc_pauses + a->ecn_marks > b->pfc_pauses + b->ecn_marks
                                                                        : a->bytes > b->bytes;
  });
  if (top.size() > 4) top.resize(4);
  for (const auto* r : top) {
    out += fmt::format("  {}->{}: {} B, utilization {:.1f}%, {} ECN marks, {} PFC pauses ({} paused), {} drops\n",
                       topo.node_name(r->from_node), topo.node_name(r->to_node), r->bytes, 100.0 * r->utilization,
                       r->ecn_marks, r->pfc_pauses, engine::format_time(r->pause_ps), r->drops);
  }
  return out;
}

/// The summary JSON's `links` list: the switch-to-switch links of RunResult::link_totals.
nlohmann::json links_json(const RunContext& c) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : c.res.link_totals) {
    if (r.tier < 2) continue;  // switch-to-switch links only (NIC downlinks are in the HDF5 file)
    nlohmann::json jobs = nlohmann::json::array();
    for (std::uint32_t j = 0; j < 64 && j < c.jobs.size(); ++j) {
      if (r.job_mask >> j & 1u) jobs.push_back(c.jobs[j].name);
    }
    list.push_back({{"link_id", r.link_id}, {"from", c.topo->node_name(r.from_node)}, {"to", c.topo->node_name(r.to_node)},
                    {"bytes", r.bytes}, {"utilization", r.utilization}, {"pause_ps", r.pause_ps},
                    {"pfc_pauses", r.pfc_pauses}, {"ecn_marks", r.ecn_marks}, {"drops", r.drops},
                    {"link_retransmits", r.link_retransmits}, {"jobs", std::move(jobs)}});
  }
  return list;
}

nlohmann::json fabric_json(const Spec& spec, const FabricTotals& f) {
  return {{"cc", models::cc_name(spec.fabric.nic.cc)}, {"pfc", spec.fabric.sw.pfc},
          {"routing", models::routing_name(spec.fabric.sw.routing)},
          {"switch_packets", f.switch_packets}, {"nic_data_packets", f.nic_data_packets},
          {"pause_frames", f.pause_frames}, {"resume_frames", f.resume_frames},
          {"switch_paused_ps", f.switch_paused_ps}, {"nic_paused_ps", f.nic_paused_ps},
          {"ecn_marks", f.ecn_marks}, {"drops", f.drops}, {"headroom_drops", f.headroom_drops},
          {"retransmits", f.retransmits}, {"timeouts", f.timeouts}, {"nacks", f.nacks},
          {"cnps", f.cnps}, {"acks", f.acks}, {"max_buffer_bytes", f.max_buffer_bytes},
          {"nvls_absorbed", f.nvls_absorbed}, {"nvls_copies", f.nvls_copies},
          {"down_drops", f.down_drops}, {"ber_drops", f.ber_drops}, {"retransmit_bytes", f.retransmit_bytes},
          {"link_retransmits", f.link_retransmits}, {"link_retransmit_bytes", f.link_retransmit_bytes},
          {"nic_profile", spec.fabric.nic.profile}, {"qp_ctx_hits", f.qp_ctx_hits}, {"qp_ctx_misses", f.qp_ctx_misses}};
}

/// JSON `model_flops`, `tflops_per_gpu`, `mfu` and `memory_per_gpu` of a generated workload.
void generator_json(const RunContext& c, nlohmann::json& j) {
  const GenInfo& gen = c.gen;
  j["model_flops"] = gen.stats.model_flops;
  j["tflops_per_gpu"] = c.metrics.tflops_per_gpu;
  j["mfu"] = c.metrics.mfu;
  const auto p = kernel_source_shares(gen.stats);
  j["compute_time_sources"] = {{"measured_pct", p[0]},
                               {"interpolated_pct", p[1]},
                               {"extrapolated_pct", p[2]},
                               {"model_pct", p[3]},
                               {"table", gen.stats.kernel_table.empty() ? nlohmann::json(nullptr)
                                                                         : nlohmann::json(gen.stats.kernel_table)}};
  if (!gen.stats.memory.stages.empty()) {
    const auto& mem = gen.stats.memory;
    const auto& pk = mem.peak();
    j["memory_per_gpu"] = {{"estimate_bytes", pk.total_bytes()},
                           {"pp_rank", pk.pp_rank},
                           {"weights_bytes", pk.weights_bytes},
                           {"grads_bytes", pk.grads_bytes},
                           {"optimizer_bytes", pk.optimizer_bytes},
                           {"activation_bytes", pk.activation_bytes},
                           {"inflight_microbatches", pk.inflight},
                           {"hbm_bytes", mem.capacity_bytes},
                           {"exceeds_hbm", mem.exceeds()}};
  }
}

/// JSON `inference`: the request shape, TTFT, TPOT, throughputs, FLOPs and every decode step.
nlohmann::json inference_json(const RunContext& c) {
  const GenInfo& gen = c.gen;
  const RunMetrics& mt = c.metrics;
  nlohmann::json inf;
  inf["batch"] = gen.batch;
  inf["replicas"] = gen.replicas;
  inf["prompt_tokens"] = gen.prompt_tokens;
  inf["output_tokens"] = gen.output_tokens;
  inf["decode_steps"] = mt.decode_steps;
  inf["ttft_ps"] = mt.ttft;
  inf["tpot_ps"] = mt.tpot;
  inf["total_ps"] = c.sim_end;
  inf["output_tokens_per_s"] = mt.out_tok_s;
  inf["prompt_tokens_per_s"] = mt.prompt_tok_s;
  inf["prefill_flops"] = gen.infer.phase_flops.empty() ? 0.0 : gen.infer.phase_flops[0];
  double dec = 0;
  for (std::size_t i = 1; i < gen.infer.phase_flops.size(); ++i) dec += gen.infer.phase_flops[i];
  inf["decode_flops"] = dec;
  std::vector<engine::SimTime> steps;
  for (std::uint32_t k = 1; k <= mt.decode_steps; ++k) steps.push_back(c.phase_end[k] - c.phase_end[k - 1]);
  inf["decode_step_ps"] = steps;
  return inf;
}

/// The summary JSON (--summary-json), as text.
std::string summary_json(const RunContext& c) {
  const RunResult& res = c.res;
  const RunMetrics& mt = c.metrics;
  nlohmann::json j;
  j["simulated_time_ps"] = c.sim_end;
  j["iteration_time_ps"] = c.iter;
  j["iterations"] = res.iterations;
  j["events"] = c.stats.events;
  j["windows"] = c.stats.windows;
  j["wall_s"] = res.meta.wall_s;
  j["processes"] = c.nprocs;
  j["threads"] = c.spec.threads;
  j["fidelity"] = models::fidelity_name(c.fidelity);
  j["fold_replicas"] = c.fold.active() ? c.fold.replicas : 1;
  j["fold_block"] = c.fold.active() ? c.fold.block : 1;  // DP replicas simulated whole per image
  j["ranks"] = c.w.ranks;
  j["workload"] = c.w.source;
  j["format"] = c.w.format;
  j["digest"] = res.digest;
  j["nccl_env"] = nlohmann::json::object();
  for (const auto& [name, value] : c.nccl_env) j["nccl_env"][name] = value;
  j["flows"] = res.flows;
  j["fabric"] = fabric_json(c.spec, res.fabric);
  if (c.fidelity == models::Fidelity::kPacket) j["links"] = links_json(c);
  j["output_h5"] = res.output_h5;
  j["compute_ps_mean"] = mt.comp / mt.nr;
  j["comm_ps_mean"] = mt.commu / mt.nr;
  j["exposed_comm_ps_mean"] = mt.exposed / mt.nr;
  // The step breakdown (docs/hdf5_schema.md): per rank and iteration, mean and max over ranks.
  j["compute_ps_max"] = mt.comp_max;
  j["exposed_comm_ps_max"] = mt.exposed_max;
  for (std::size_t k = 0; k < models::kCommKinds; ++k) {
    const std::string name = models::comm_kind_name(static_cast<models::CommKind>(k));
    j["exposed_" + name + "_ps_mean"] = mt.exposed_kind[k] / mt.nr;
    j["exposed_" + name + "_ps_max"] = mt.exposed_kind_max[k];
  }
  j["bubble_ps_mean"] = mt.bubble / mt.nr;
  j["bubble_ps_max"] = mt.bubble_max;
  const io::RunMeta& meta = res.meta;
  if (meta.fits_memory >= 0) {
    j["fits_memory"] = meta.fits_memory == 1;
  } else {
    j["fits_memory"] = nullptr;  // no estimate for this workload (trace files)
  }
  if (c.gen.used) generator_json(c, j);
  if (c.gen.infer.used) j["inference"] = inference_json(c);
  // One entry per (op, bytes, ranks), so the file stays small at any scale (a 9,216-GPU MoE
  // iteration has ~500 K collective instances); every instance is in the HDF5 /collectives.
  struct Agg {
    std::uint64_t count = 0;
    double time_sum = 0, algbw_sum = 0, busbw_sum = 0;
    engine::SimTime time_min = 0, time_max = 0;
    double busbw_min = 0, busbw_max = 0;
  };
  std::map<std::tuple<std::string, std::uint64_t, std::uint32_t>, Agg> aggs;
  for (const auto& r : res.collectives) {
    Agg& a = aggs[{r.op, r.bytes, r.ranks}];
    const engine::SimTime t = r.end_ps - r.start_ps;
    if (a.count == 0) {
      a.time_min = a.time_max = t;
      a.busbw_min = a.busbw_max = r.busbw_GBps;
    }
    ++a.count;
    a.time_sum += static_cast<double>(t);
    a.algbw_sum += r.algbw_GBps;
    a.busbw_sum += r.busbw_GBps;
    a.time_min = std::min(a.time_min, t);
    a.time_max = std::max(a.time_max, t);
    a.busbw_min = std::min(a.busbw_min, r.busbw_GBps);
    a.busbw_max = std::max(a.busbw_max, r.busbw_GBps);
  }
  j["collectives_total"] = res.collectives.size();
  j["collectives"] = nlohmann::json::array();
  for (const auto& [key, a] : aggs) {
    const double n = static_cast<double>(a.count);
    j["collectives"].push_back({{"op", std::get<0>(key)}, {"bytes", std::get<1>(key)}, {"ranks", std::get<2>(key)},
                                {"count", a.count}, {"time_ps_mean", a.time_sum / n}, {"time_ps_min", a.time_min},
                                {"time_ps_max", a.time_max}, {"algbw_GBps_mean", a.algbw_sum / n},
                                {"busbw_GBps_mean", a.busbw_sum / n}, {"busbw_GBps_min", a.busbw_min},
                                {"busbw_GBps_max", a.busbw_max}});
  }
  if (!c.jobs.empty()) j["jobs"] = nlohmann::json::parse(jobs_json(c, job_metrics(c)));
  return j.dump(2) + "\n";
}

}  // namespace

void report(RunContext& c) {
  c.metrics = compute_metrics(c);
  if (!c.jobs.empty()) {
    const std::vector<JobMetrics> m = job_metrics(c);
    for (std::size_t k = 0; k < c.jobs.size(); ++k) {
      const JobRun& jr = c.jobs[k];
      if (!jr.simulated) continue;
      JobResult r;
      r.name = jr.name;
      r.gpus = jr.gpus;
      r.start_ps = jr.start_ps;
      r.iterations = jr.iterations;
      r.finish_ps = m[k].finish_ps;
      r.iteration_ps = m[k].iter_ps;
      r.alone_iteration_ps = k < c.opt.alone_iter_ps.size() ? c.opt.alone_iter_ps[k] : -1;
      r.compute_ps = m[k].compute_ps;
      r.comm_ps = m[k].comm_ps;
      r.exposed_comm_ps = m[k].exposed_ps;
      c.res.jobs.push_back(std::move(r));
    }
  }
  c.summary_body = summary_text(c);
  c.res.summary_text = c.summary_body + summary_output_line(c.res);
  if (!c.spec.summary_json.empty()) c.json_text = summary_json(c);
}

}  // namespace fabricsim::jobs::run_stages
