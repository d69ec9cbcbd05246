// Stages `build_topology` and `place` of `fabricsim run`: the cluster and its LPs' placement.
#include <algorithm>

#include <fmt/format.h>

#include "engine/errors.hpp"
#include "jobs/run/context.hpp"

namespace fabricsim::jobs::run_stages {

std::string cluster_desc(const models::Topology& t) {
  const auto& c = t.spec();
  std::string shape = c.fabric == models::FabricKind::kRailOptimized ? "rail-optimized"
                      : c.fabric == models::FabricKind::kLeafSpine   ? "leaf-spine"
                                                                      : models::fabric_kind_name(c.fabric);
  if (c.dual_plane) shape += ", dual-plane";
  std::string counts = fmt::format("{} leaves, {} spines", t.num_leaves(), t.num_spines());
  if (t.num_cores() > 0) counts += fmt::format(", {} cores", t.num_cores());
  std::string domains;
  if (c.domain_size() != c.gpus_per_host) domains = fmt::format(", NVLink domains of {} GPUs", c.domain_size());
  return fmt::format("{} hosts x {} GPUs, {} ({}){}, NIC {:g} Gb/s, NVLink {:g} Gb/s, MTU {} B", c.hosts,
                     c.gpus_per_host, shape, counts, domains, static_cast<double>(c.nic_bps) / 1e9,
                     static_cast<double>(c.nvlink_bps) / 1e9, c.mtu_bytes);
}

void build_topology(RunContext& c) {
  const Spec& spec = c.spec;
  c.cspec = resolve_cluster(spec, c.w.ranks);
  c.topo.emplace(c.cspec);
  c.log->info("topology: {} ({} LPs) ({:.3f} s)", cluster_desc(*c.topo), c.topo->num_nodes(), now_s() - c.t0);
  c.fidelity = models::parse_fidelity(spec.fidelity, spec.file, "sim.fidelity");
  for (const Spec::Throttle& t : spec.throttles) {
    if (t.host_hi >= c.topo->spec().hosts) {
      throw engine::InputError(spec.file_of("compute.throttle"), "compute.throttle",
                               "host " + std::to_string(t.host_hi) + " is not in this " +
                                   std::to_string(c.topo->spec().hosts) + "-host cluster",
                               "give hosts 0.." + std::to_string(c.topo->spec().hosts - 1));
    }
  }
  // Flow rung: one network LP (id = num_nodes, after every topology node) owns all links.
  if (!spec.faults.empty()) {
    if (c.fidelity != models::Fidelity::kPacket) {
      throw engine::InputError(spec.file_of("faults"), "faults",
                               "link faults are simulated at the packet rung only, not at sim.fidelity: " + spec.fidelity,
                               "use sim.fidelity: packet, or drop the faults list");
    }
    c.spec.fabric.faults = resolve_faults(spec.faults, *c.topo);
  }
  c.net_lp = c.fidelity == models::Fidelity::kFlow;
  c.net_id = c.topo->num_nodes();
  c.ring_flows = models::parse_ring_flows(spec.ring_flows, spec.file, "sim.ring_flows");
  // sim.ring_flows: stream changes only the ring planner's rings at the coarse rungs: say so
  // where it does nothing (the summary line then leaves it out too).
  c.stream_applies = c.fidelity != models::Fidelity::kPacket && spec.planner == "ring";
  if (c.ring_flows == models::RingFlows::kStream && !c.stream_applies && c.rank == 0) {
    c.log->warn("{}: sim.ring_flows: stream has no effect {} (it streams the ring planner's rings at the flow and "
                "analytical rungs)", spec.file_of("sim.ring_flows"),
                c.fidelity == models::Fidelity::kPacket ? "at the packet rung" : "with simccl.planner: " + spec.planner);
  }
}

namespace {

/// The topology as the partitioner sees it: a scale-up domain's GPUs + NVSwitch as one block;
/// Ethernet switches (leaves, spines, cores, in LP order) and the flow rung's network LP loose;
/// leaves as edge switches. The network LP talks to each GPU with its smallest port latency at
/// least, which is the lookahead across that cut.
partition::SystemGraph system_graph(const models::Topology& topo, const models::ClusterSpec& cspec, bool net_lp,
                                    engine::LpId net_id) {
  partition::SystemGraph g;
  g.num_lps = topo.num_nodes() + (net_lp ? 1 : 0);
  g.domains.resize(topo.num_domains());
  for (std::uint32_t gpu = 0; gpu < topo.num_gpus(); ++gpu) g.domains[topo.domain_of(gpu)].push_back(gpu);
  for (std::uint32_t d = 0; d < topo.num_domains(); ++d) {
    if (topo.domain_switch(d) != models::Topology::kNoLp) g.domains[d].push_back(topo.domain_switch(d));
  }
  for (engine::LpId n = topo.first_lp(models::NodeKind::kLeaf); n < topo.num_nodes(); ++n) g.loose.push_back(n);
  if (net_lp) g.loose.push_back(net_id);
  for (std::uint32_t i = 0; i < topo.count(models::NodeKind::kLeaf); ++i) g.edge_switches.push_back(topo.leaf_lp(i));
  auto nvs = [&](engine::LpId n) { return n < topo.num_nodes() && topo.kind(n) == models::NodeKind::kNvSwitch; };
  for (const auto& l : topo.links()) g.links.push_back({l.a, l.b, l.latency_ps, nvs(l.a) || nvs(l.b)});
  if (net_lp) {
    const engine::SimTime gpu_net_ps = std::min(cspec.nvlink_latency_ps, cspec.nic_latency_ps);
    for (engine::LpId gpu = 0; gpu < topo.num_gpus(); ++gpu) g.links.push_back({gpu, net_id, gpu_net_ps, false});
  }
  g.scale_up_bps = cspec.nvlink_bps;
  g.scale_out_bps = cspec.nic_bps;
  return g;
}

}  // namespace

void place(RunContext& c) {
  const Spec& spec = c.spec;
  // validate --processes N: place (or read the partition file) for N processes.
  c.part_procs = c.opt.dry_run && c.opt.validate_processes > 0 ? c.opt.validate_processes
                                                               : static_cast<std::uint32_t>(c.nprocs);
  c.plan = partition::place_system(system_graph(*c.topo, c.cspec, c.net_lp, c.net_id), spec.partition, c.part_procs,
                                   spec.threads);
  if (c.plan.lookahead_ps < 1) {
    throw engine::InputError(spec.file_of("sim.partition"), "sim.partition",
                             "the placement cuts a zero-latency link, so no conservative window exists",
                             "keep such links inside one process/thread (sim.partition: topology or metis)");
  }
  if (!spec.save_partition.empty() && c.rank == 0 && !c.opt.dry_run) {
    partition::write_partition(spec.save_partition, c.plan.placement, static_cast<std::uint32_t>(c.nprocs));
  }
}

}  // namespace fabricsim::jobs::run_stages
