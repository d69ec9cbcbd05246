// Stage `gather` of `fabricsim run`: every process's results made global (MPI), the digest.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "engine/errors.hpp"
#include "engine/rng.hpp"
#include "engine/units.hpp"
#include "io/digest.hpp"
#include "jobs/run/context.hpp"
#include "simccl/custom_planner.hpp"
#include "simccl/nccl_planner.hpp"

namespace fabricsim::jobs::run_stages {

namespace {

/// The planner's algorithm, protocol and channels for a collective record (NCCL planner: its cost
/// model's decision for the call; ring planner: its fixed schedule, one channel, Simple).
void describe_algorithm(const models::CollectivePlanner& planner, const models::Workload& w, models::CollOp op,
                        io::CollectiveRecord& c) {
  if (const auto* custom = dynamic_cast<const simccl::CustomPlanner*>(&planner); custom != nullptr && c.ranks > 1) {
    models::CollRequest req;
    req.op = op;
    req.bytes = c.bytes;
    req.ranks = &w.groups[c.group].ranks;
    if (const simccl::CustomSchedule* s = custom->match(req)) {
      c.algorithm = s->format == "msccl" ? "MSCCL" : "TE-CCL";  // replayed schedule (simccl/custom_planner.hpp)
      c.protocol = "Simple";
      c.channels = 1;
      return;
    }
    describe_algorithm(custom->base(), w, op, c);
    return;
  }
  if (const auto* nccl = dynamic_cast<const simccl::NcclPlanner*>(&planner); nccl != nullptr && c.ranks > 1) {
    models::CollRequest req;
    req.op = op;
    req.bytes = c.bytes;
    req.ranks = &w.groups[c.group].ranks;
    const simccl::TuningDecision d = nccl->decision(req);
    c.algorithm = simccl::algo_name(d.algo);
    c.protocol = simccl::proto_name(d.proto);
    c.channels = static_cast<std::uint32_t>(d.n_channels);
    return;
  }
  if (c.ranks <= 1) {
    c.algorithm = "none";
    c.protocol = "none";
    c.channels = 0;
    return;
  }
  switch (op) {
    case models::CollOp::kBroadcast:
    case models::CollOp::kReduce: c.algorithm = "Chain"; break;
    case models::CollOp::kAllToAll: c.algorithm = "Direct"; break;
    default: c.algorithm = "Ring"; break;
  }
  c.protocol = "Simple";
  c.channels = 1;
}

/// The collective op named `name` (models::coll_op_name); all-reduce for an unknown name.
models::CollOp op_of_name(const std::string& name) {
  for (int o = 0; o <= static_cast<int>(models::CollOp::kAllToAll); ++o) {
    if (name == models::coll_op_name(static_cast<models::CollOp>(o))) return static_cast<models::CollOp>(o);
  }
  return models::CollOp::kAllReduce;
}

/// This process's rank records, flow records and flow digest into the context; @returns its
/// collective partials (one per rank and collective instance).
std::vector<models::CollectivePartial> collect_local(RunContext& c) {
  std::vector<models::CollectivePartial> local_parts;
  for (const auto& g : c.gpus) {
    const io::RankRecord rr = g->rank_record();
    if (rr.rank < c.w.ranks) c.local_ranks.push_back(rr);
    c.local_flows.insert(c.local_flows.end(), g->flow_records().begin(), g->flow_records().end());
    c.local_flow_digest.merge(g->flow_digest());
    local_parts.insert(local_parts.end(), g->collective_partials().begin(), g->collective_partials().end());
  }
  return local_parts;
}

/// Every collective instance, by (group, instance): first rank's start to last rank's end,
/// bandwidths, and the algorithm the planner chose.
std::vector<io::CollectiveRecord> merge_collectives(const RunContext& c,
                                                    const std::vector<models::CollectivePartial>& all_parts) {
  std::map<std::pair<std::uint32_t, std::uint32_t>, io::CollectiveRecord> merged;
  for (const auto& p : all_parts) {
    auto [it, fresh] = merged.try_emplace({p.group, p.instance});
    io::CollectiveRecord& r = it->second;
    if (fresh) {
      r.group = p.group;
      r.instance = p.instance;
      r.op = models::coll_op_name(p.op);
      r.bytes = p.bytes;
      r.ranks = p.ranks;
      r.start_ps = p.start_ps;
      r.end_ps = p.end_ps;
    } else {
      r.start_ps = std::min(r.start_ps, p.start_ps);
      r.end_ps = std::max(r.end_ps, p.end_ps);
    }
  }
  std::vector<io::CollectiveRecord> out;
  for (auto& [k, r] : merged) {
    const engine::SimTime dt = r.end_ps - r.start_ps;
    const models::CollOp op = op_of_name(r.op);
    r.algbw_GBps = dt > 0 ? static_cast<double>(r.bytes) / (static_cast<double>(dt) * 1e-12) / 1e9 : 0.0;
    r.busbw_GBps = r.algbw_GBps * models::busbw_factor(op, r.ranks);
    describe_algorithm(c.planner(), c.w, op, r);
    out.push_back(r);
  }
  return out;
}

/// Inference: a phase (prefill, decode step k) ends when the last of its sampling nodes (one per
/// last-stage rank of every replica) completes. @returns the end of each phase (ps).
std::vector<engine::SimTime> gather_phase_ends(const RunContext& c) {
  struct Mark {
    std::uint32_t rank, phase;
    engine::SimTime ps;
  };
  std::vector<Mark> local_marks;
  for (const auto& g : c.gpus) {
    const auto& v = g->watched_done_ps();
    for (std::size_t i = 0; i < v.size(); ++i) {
      local_marks.push_back(Mark{g->rank_record().rank, static_cast<std::uint32_t>(i), v[i]});
    }
  }
  const std::vector<Mark> all_marks = allgather_pod(c.comm, local_marks);
  std::vector<engine::SimTime> phase_end(c.gen.output_tokens, 0);
  for (const Mark& mk : all_marks) {
    if (mk.phase < phase_end.size()) phase_end[mk.phase] = std::max(phase_end[mk.phase], mk.ps);
  }
  return phase_end;
}

/// Packet-fabric counters summed (buffer occupancy: maximum) over every switch and NIC.
FabricTotals fabric_totals(const RunContext& c) {
  std::uint64_t sums[24] = {};
  std::uint64_t maxbuf = 0;
  for (const auto& sw : c.switches) {
    const auto& k = sw->counters();
    sums[0] += k.packets;
    sums[2] += k.pause_frames;
    sums[3] += k.resume_frames;
    sums[4] += static_cast<std::uint64_t>(k.paused_ps);
    sums[7] += k.ecn_marks;
    sums[8] += k.drops;
    sums[9] += k.headroom_drops;
    sums[15] += k.nvls_absorbed;
    sums[16] += k.nvls_copies;
    sums[17] += k.down_drops;
    sums[18] += k.ber_drops;
    sums[20] += k.link_retransmits;
    sums[21] += k.link_retransmit_bytes;
    maxbuf = std::max(maxbuf, k.max_buffer_bytes);
  }
  for (const auto& g : c.gpus) {
    const auto& k = g->nic().counters();
    sums[1] += k.data_packets;
    sums[5] += static_cast<std::uint64_t>(k.paused_ps);
    sums[6] += k.pauses_received;
    sums[10] += k.retransmits;
    sums[11] += k.timeouts;
    sums[12] += k.nacks_sent;
    sums[13] += k.cnps_sent;
    sums[14] += k.acks_sent;
    sums[19] += k.retransmit_bytes;
    sums[22] += k.qp_ctx_hits;
    sums[23] += k.qp_ctx_misses;
  }
  MPI_Allreduce(MPI_IN_PLACE, sums, 24, MPI_UINT64_T, MPI_SUM, c.comm);
  MPI_Allreduce(MPI_IN_PLACE, &maxbuf, 1, MPI_UINT64_T, MPI_MAX, c.comm);
  return FabricTotals{sums[0], sums[1], sums[2], sums[3], sums[4], sums[5], sums[6], sums[7],
                     sums[8], sums[9], sums[10], sums[11], sums[12], sums[13], sums[14], maxbuf,
                     sums[15], sums[16], sums[17], sums[18], sums[19],
                     sums[20], sums[21], sums[22], sums[23]};
}

/// The packet-rung counters as RunMeta::fabric_counters (name, value) for the HDF5 file.
std::vector<std::pair<std::string, std::uint64_t>> fabric_counter_list(const FabricTotals& f) {
  return {{"switch_packets", f.switch_packets}, {"nic_data_packets", f.nic_data_packets},
          {"pause_frames", f.pause_frames},     {"resume_frames", f.resume_frames},
          {"switch_paused_ps", f.switch_paused_ps}, {"nic_paused_ps", f.nic_paused_ps},
          {"nic_pauses", f.nic_pauses},         {"ecn_marks", f.ecn_marks},
          {"drops", f.drops},                   {"headroom_drops", f.headroom_drops},
          {"retransmits", f.retransmits},       {"timeouts", f.timeouts},
          {"nacks", f.nacks},                   {"cnps", f.cnps},
          {"acks", f.acks},                     {"max_buffer_bytes", f.max_buffer_bytes},
          {"nvls_absorbed", f.nvls_absorbed},   {"nvls_copies", f.nvls_copies},
          {"down_drops", f.down_drops},         {"ber_drops", f.ber_drops},
          {"retransmit_bytes", f.retransmit_bytes}, {"link_retransmits", f.link_retransmits},
          {"link_retransmit_bytes", f.link_retransmit_bytes}};
}

/// Every switch egress port's totals with traffic or events, by link_id (link ids as in
/// /links: directed ports numbered in (LP id, port index) order over the topology).
std::vector<io::LinkTotalRecord> link_totals(const RunContext& c) {
  const models::Topology& topo = *c.topo;
  std::vector<std::uint32_t> base(topo.num_nodes() + 1, 0);
  for (engine::LpId n = 0; n < topo.num_nodes(); ++n) {
    base[n + 1] = base[n] + static_cast<std::uint32_t>(topo.ports(n).size());
  }
  const std::uint32_t jobs = c.spec.fabric.jobs;
  std::vector<io::LinkTotalRecord> local;
  for (const auto& sw : c.switches) {
    const engine::LpId id = sw->lp_id();
    const auto& pc = sw->port_counters();
    const auto& jb = sw->port_job_bytes();
    for (std::uint32_t p = 0; p < pc.size(); ++p) {
      const models::PortCounters& k = pc[p];
      const std::uint64_t sent = sw->port_pauses()[p];
      if (k.data_bytes == 0 && k.pfc_pauses == 0 && k.ecn_marks == 0 && k.drops == 0 && k.link_retransmits == 0 &&
          sent == 0) {
        continue;
      }
      const models::Port& port = topo.ports(id)[p];
      io::LinkTotalRecord r;
      r.link_id = base[id] + p;
      r.from_node = id;
      r.to_node = port.peer;
      r.tier = link_tier(topo, id, port.peer);
      r.bytes = k.data_bytes;
      r.utilization = c.sim_end > 0 ? static_cast<double>(k.data_bytes) * 8.0 /
                                          (static_cast<double>(port.rate_bps) * static_cast<double>(c.sim_end) * 1e-12)
                                    : 0.0;
      r.pause_ps = k.paused_ps;
      r.pfc_pauses = k.pfc_pauses;
      r.ecn_marks = k.ecn_marks;
      r.drops = k.drops;
      r.link_retransmits = k.link_retransmits;
      r.pfc_sent = sent;
      for (std::uint32_t j = 0; j < jobs && !jb.empty(); ++j) {
        if (jb[static_cast<std::size_t>(p) * jobs + j] == 0) continue;
        ++r.jobs;
        if (j < 64) r.job_mask |= std::uint64_t{1} << j;
      }
      local.push_back(r);
    }
  }
  std::vector<io::LinkTotalRecord> all = allgather_pod(c.comm, local);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.link_id < b.link_id; });
  return all;
}

/// `jobs:` specs: the job column of the rank, collective and flow records (schema 5).
void tag_jobs(RunContext& c) {
  if (c.jobs.empty()) return;
  const auto job = [&](std::uint32_t gpu) { return gpu < c.job_of_gpu.size() ? c.job_of_gpu[gpu] : -1; };
  for (auto* v : {&c.res.ranks, &c.local_ranks}) {
    for (auto& r : *v) r.job = job(r.rank);
  }
  for (auto& col : c.res.collectives) {
    for (std::size_t k = 0; k < c.jobs.size(); ++k) {
      if (col.group >= c.jobs[k].group_begin && col.group < c.jobs[k].group_end) col.job = static_cast<std::int32_t>(k);
    }
  }
  for (auto& f : c.local_flows) f.job = job(f.src);
}

/// The results digest (io::results_digest_sum over collectives and flows) with the fabric
/// counters folded in: equal digests also mean equal pauses, marks, drops, retransmits.
std::string run_digest(const RunContext& c, const RunResult& res) {
  std::string digest = io::results_digest_sum(c.comm, res.collectives, c.local_flow_digest);
  const FabricTotals& f = res.fabric;
  const std::uint64_t v[] = {f.switch_packets, f.nic_data_packets, f.pause_frames, f.resume_frames,
                             f.switch_paused_ps, f.nic_paused_ps, f.ecn_marks, f.drops, f.retransmits,
                             f.timeouts, f.cnps, f.acks, f.max_buffer_bytes};
  std::uint64_t h = std::stoull(digest, nullptr, 16);
  for (std::uint64_t x : v) h = engine::mix64(h ^ (x + 0x9E3779B97F4A7C15ull));
  return fmt::format("{:016x}", h);
}

/// RunResult::meta: the run's identity and sizes (the HDF5 file's attributes).
void fill_meta(RunContext& c) {
  io::RunMeta& m = c.res.meta;
  m.spec_text = c.spec.text;
  m.version = c.version;
  m.git_commit = c.git_commit;
  m.workload = c.w.source;
  m.seed = c.spec.seed;
  m.processes = static_cast<std::uint32_t>(c.nprocs);
  m.threads = c.spec.threads;
  m.ranks = c.w.ranks;
  m.events = c.stats.events;
  m.simulated_time_ps = c.sim_end;
  m.wall_s = now_s() - c.t0;
  m.sample_interval_ps = c.spec.sample_interval_ps;
  if (c.gen.used && !c.gen.stats.memory.stages.empty()) {
    const MemoryEstimate& mem = c.gen.stats.memory;
    m.fits_memory = mem.exceeds() ? 0 : 1;
    m.memory_estimate_bytes = static_cast<std::uint64_t>(std::llround(mem.peak().total_bytes()));
    m.memory_capacity_bytes = static_cast<std::uint64_t>(std::llround(mem.capacity_bytes));
  }
}

}  // namespace

void gather(RunContext& c) {
  RunResult& res = c.res;
  const std::vector<models::CollectivePartial> local_parts = collect_local(c);
  std::vector<io::RankRecord> all_ranks = allgather_pod(c.comm, c.local_ranks);
  std::sort(all_ranks.begin(), all_ranks.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  if (c.fold.active()) {
    // sim.fold: dp: a replica's ranks did what their representatives did (docs/folding.md).
    for (auto& r : all_ranks) {
      const std::uint32_t rep = c.fold.rep(r.rank);
      if (rep != r.rank) {
        const std::uint32_t rank = r.rank;
        r = all_ranks[rep];
        r.rank = rank;
      }
    }
    unsigned long long mine = c.net ? c.net->fold_switch_flows() : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, c.comm);
    c.fold_switch_flows = all;
  }
  if (!c.spec.throttles.empty()) {
    std::vector<RunContext::ThrottleCost> local;
    for (const auto& g : c.gpus) {
      if (g->throttle_added_ps() > 0) local.push_back({g->rank_record().rank, g->throttle_added_ps()});
    }
    c.throttle_added = allgather_pod(c.comm, local);
    std::sort(c.throttle_added.begin(), c.throttle_added.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  }
  res.collectives = merge_collectives(c, allgather_pod(c.comm, local_parts));
  if (c.gen.infer.used) c.phase_end = gather_phase_ends(c);
  long long nflows = static_cast<long long>(c.local_flow_digest.count), total_flows = nflows;
  MPI_Allreduce(&nflows, &total_flows, 1, MPI_LONG_LONG, MPI_SUM, c.comm);
  res.flows = static_cast<std::uint64_t>(total_flows);
  if (c.net_lp) {
    // --stats: the flow rung's counters from whichever processes hold the GPUs and the network LP.
    unsigned long long mine[8] = {}, all[8] = {};
    for (const auto& g : c.gpus) {
      mine[0] += g->flow_source().direct_flows();
      mine[1] += g->flow_source().net_flows();
    }
    if (const models::FlowNetLp* net = c.net.get()) {
      mine[2] = net->flows();
      mine[3] = net->solves();
      mine[4] = net->resolved_flows();
      mine[5] = net->route_lookups();
      mine[6] = net->route_misses();
      mine[7] = net->route_entries();
    }
    MPI_Allreduce(mine, all, 8, MPI_UNSIGNED_LONG_LONG, MPI_SUM, c.comm);
    c.flow_counters = RunContext::FlowCounters{all[0], all[1], all[2], all[3], all[4], all[5], all[6], all[7]};
  }
  res.ranks = std::move(all_ranks);
  res.stats = c.stats;
  for (const auto& r : res.ranks) c.sim_end = std::max(c.sim_end, r.finish_ps);
  // Compute and exposed communication are disjoint parts of [0, finish_ps]; the rest of the run
  // and the exposed waits for a neighbour stage's data are the rank's bubble.
  // (c.local_ranks too: the HDF5 file is written from each process's own rows.)
  for (auto* v : {&res.ranks, &c.local_ranks}) {
    for (auto& r : *v) r.bubble_ps = c.sim_end - r.compute_ps - r.exposed_comm_ps + r.pp_wait_ps;
  }
  res.iterations = c.gen.used ? c.gen.iterations : 1;
  // Mean iteration time (the simulated time when the workload is one iteration).
  c.iter = c.sim_end / res.iterations;
  fill_meta(c);
  res.fabric = fabric_totals(c);
  if (c.fidelity == models::Fidelity::kPacket) {
    res.meta.fabric_counters = fabric_counter_list(res.fabric);
    res.link_totals = link_totals(c);
  }
  tag_jobs(c);
  if (c.opt.keep_flows) {
    res.flow_records = allgather_pod(c.comm, c.local_flows);
    std::sort(res.flow_records.begin(), res.flow_records.end(),
              [](const io::FlowRecord& a, const io::FlowRecord& b) { return a.flow_id < b.flow_id; });
  }
  // A fault that starts at or after the run's end never took effect: a spec mistake (a time in
  // the wrong unit, or a fault meant for a longer workload). The same on every process (sim_end
  // is global). Runs of one job alone (run --isolated's baselines) may end earlier: not checked.
  if (c.opt.only_job < 0) {
    for (std::size_t i = 0; i < c.spec.faults.size(); ++i) {
      const FaultEntry& e = c.spec.faults[i];
      if (e.fault.at_ps < c.sim_end) continue;
      const std::string key = "faults[" + std::to_string(i) + "].time";
      throw engine::InputError(e.file, key,
                               engine::format_time(e.fault.at_ps) + " is at or after the end of the run (" +
                                   engine::format_time(c.sim_end) + "): the fault never takes effect",
                               "set " + key + " before " + engine::format_time(c.sim_end) + " or remove the entry");
    }
  }
  res.digest = run_digest(c, res);
  if (c.write_h5) res.output_h5 = c.spec.output_h5;
}

}  // namespace fabricsim::jobs::run_stages
