// Stages `make_planner` and `build_lps` of `fabricsim run`: the collective planner, the engine and
// this process's LPs.
#include <algorithm>

#include <fmt/format.h>

#include "engine/errors.hpp"
#include "engine/units.hpp"
#include "jobs/run/context.hpp"
#include "simccl/planner_factory.hpp"

namespace fabricsim::jobs::run_stages {

void make_planner(RunContext& c) {
  Spec& spec = c.spec;
  c.planned = simccl::make_planner(spec.planner, spec.nccl, spec.file, spec.gpu_sm, c.cspec, true, spec.simccl_extras);
  for (const auto& warning : c.planned.warnings) c.log->warn("{}", engine::printable(warning));
  // NCCL_* taken from the shell changed the run: record them with the spec (HDF5 spec_text,
  // summary JSON nccl_env) so the results file says what it was run with.
  for (const auto& a : c.planned.from_env) c.nccl_env.emplace_back(a.name, a.value);
  spec.text = spec_text_with_env_nccl(spec.text, c.nccl_env);
  c.log->info("planner {}; fabric: cc {}, pfc {}, ecn {}, routing {}, {} QP(s) per connection", spec.planner,
              models::cc_name(spec.fabric.nic.cc), spec.fabric.sw.pfc, spec.fabric.sw.ecn,
              models::routing_name(spec.fabric.sw.routing), spec.fabric.nic.qps_per_connection);
  if (!spec.fabric.nic.qps_given && c.planned.qps_given) {
    spec.fabric.nic.qps_per_connection = static_cast<std::uint32_t>(std::max(1, c.planned.ib_qps_per_connection));
    spec.fabric.nic.split_data_on_qps = c.planned.ib_split_data_on_qps;
  }
  make_job_planners(c);  // jobs with NCCL settings of their own
  simccl::check_workload_plans(c.planner(), c.w);
}

RunResult dry_run_result(const RunContext& c) {
  const engine::SimTime w_ps = c.plan.lookahead_ps;
  RunResult r;
  r.summary_text = "workload: " + workload_desc(c.w) + "\ncluster: " + cluster_desc(*c.topo) + "\n" +
                   fmt::format("partition: {} process(es) x {} thread(s), lookahead {}\n", c.part_procs,
                               c.spec.threads,
                               w_ps >= engine::kInfinity ? std::string("none (nothing cut)") : engine::format_time(w_ps));
  return r;
}

namespace {

/// The GPU LP of rank / node `id`, set up for this run's fidelity, sampling, trace and watches.
std::unique_ptr<models::GpuRankLp> make_gpu(RunContext& c, engine::LpId id) {
  const Spec& spec = c.spec;
  const models::Workload& w = c.w;
  std::shared_ptr<const models::ProgramIndex> index;
  // sim.fold: dp: the GPUs of replicas other than the representative run no program.
  const bool runs = id < w.ranks && c.fold.simulated(id);
  if (runs && models::ProgramIndex::shareable(w, id)) {
    auto& shared = c.shared_index[w.program_of[id]];
    if (!shared) shared = models::ProgramIndex::of_shared(w, w.program_of[id]);
    index = shared;
  }
  auto g = std::make_unique<models::GpuRankLp>(*c.topo, id, id < w.ranks && !runs ? nullptr : &w, c.planner(),
                                                spec.fabric, std::move(index));
  g->set_fidelity(c.fidelity, c.net_id);
  g->set_ring_flows(c.ring_flows);
  g->set_fold(&c.fold);
  if (id < c.compute_factor.size()) g->set_compute_factor(c.compute_factor[id]);
  if (!spec.throttles.empty() && id < c.topo->num_gpus()) {
    const std::uint32_t host = id / c.topo->spec().gpus_per_host;
    std::vector<models::GpuRankLp::ThrottleWindow> win;
    for (const Spec::Throttle& t : spec.throttles) {
      if (host >= t.host_lo && host <= t.host_hi) win.push_back({t.at_ps, t.until_ps, t.factor});
    }
    std::sort(win.begin(), win.end(), [](const auto& a, const auto& b) { return a.at_ps < b.at_ps; });
    if (!win.empty()) g->set_throttle(std::move(win));
  }
  g->keep_flows(c.keep_flow_records);
  if (c.write_h5 || c.opt.keep_flows || !spec.trace_path.empty()) g->enable_sampling(spec.sample_interval_ps);
  if (!spec.trace_path.empty() && id < w.ranks && id >= spec.trace_rank_lo && id <= spec.trace_rank_hi) {
    g->enable_trace();
  }
  if (c.gen.infer.used && runs && !c.gen.infer.phase_end_nodes[id].empty()) {
    g->watch_nodes(c.gen.infer.phase_end_nodes[id]);
  }
  return g;
}

}  // namespace

void build_lps(RunContext& c) {
  const models::Topology& topo = *c.topo;
  // Flow records are kept only where they are read: the HDF5 /flows table (output.flows) or
  // RunResult::flow_records; the digest needs none of them (io/digest.hpp).
  c.keep_flow_records = c.opt.keep_flows || (c.write_h5 && c.spec.output_flows);
  // `jobs:` specs: switches count each job's bytes per port (the per-link table).
  c.spec.fabric.job_of_gpu = c.job_of_gpu;
  c.spec.fabric.jobs = static_cast<std::uint32_t>(c.jobs.size());
  c.sim.emplace(c.comm, c.plan.placement, c.plan.lookahead_ps);
  engine::Simulator& sim = *c.sim;
  c.shared_index.resize(c.w.shared() ? c.w.programs.size() : 0);
  for (engine::LpId id = 0; id < topo.num_nodes(); ++id) {
    if (!sim.is_local(id)) continue;
    if (topo.kind(id) == models::NodeKind::kGpu) {
      c.gpus.push_back(make_gpu(c, id));
      sim.add_lp(id, c.gpus.back().get());
    } else {
      c.switches.push_back(std::make_unique<models::SwitchLp>(topo, id, c.spec.fabric,
                                                                topo.kind(id) == models::NodeKind::kNvSwitch));
      if (c.write_h5 || c.opt.keep_flows) c.switches.back()->enable_sampling(c.spec.sample_interval_ps);
      sim.add_lp(id, c.switches.back().get());
    }
  }
  if (c.net_lp && sim.is_local(c.net_id)) {
    c.net = std::make_unique<models::FlowNetLp>(topo, c.net_id);
    c.net->set_groups(&c.w.groups);
    c.net->set_fold(&c.fold);
    sim.add_lp(c.net_id, c.net.get());
  }
}

}  // namespace fabricsim::jobs::run_stages
