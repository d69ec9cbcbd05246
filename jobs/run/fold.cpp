// Stage `fold_replicas` of `fabricsim run` (sim.fold: dp, docs/folding.md): whether the DP
// replicas of the job may be simulated as one, and the fold map.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/errors.hpp"
#include "jobs/run/context.hpp"

namespace fabricsim::jobs::run_stages {

namespace {

/// One InputError line naming sim.fold.
[[noreturn]] void refuse(const RunContext& c, const std::string& problem, const std::string& fix) {
  throw engine::InputError(c.spec.file_of("sim.fold"), "sim.fold", "dp: " + problem, fix + ", or set sim.fold: none");
}

/// The fabric gives every replica the same, unshared first hop (each GPU and its representative
/// have ports of the same rates) and no switch has less capacity toward the tier above than toward
/// the tier below (an oversubscribed switch makes the replicas share its uplinks).
void check_fabric(const RunContext& c, const models::FoldMap& fold) {
  const models::Topology& t = *c.topo;
  const models::FabricKind k = t.spec().fabric;
  if (k != models::FabricKind::kRailOptimized && k != models::FabricKind::kLeafSpine && k != models::FabricKind::kRailOnly) {
    refuse(c, fmt::format("the {} fabric is not a leaf-spine tree whose hosts are alike", models::fabric_kind_name(k)),
           "use cluster.topology rail_optimized, leaf_spine or rail_only");
  }
  for (std::uint32_t g = 0; g < fold.world; ++g) {
    const std::uint32_t r = fold.rep(g);
    const auto& a = t.ports(g);
    const auto& b = t.ports(r);
    bool same = a.size() == b.size();
    for (std::size_t p = 0; same && p < a.size(); ++p) {
      same = a[p].rate_bps == b[p].rate_bps && a[p].latency_ps == b[p].latency_ps &&
             t.kind(a[p].peer) == t.kind(b[p].peer) && t.ports(a[p].peer)[a[p].peer_port].rate_bps ==
                                                          t.ports(b[p].peer)[b[p].peer_port].rate_bps;
    }
    if (!same) {
      refuse(c, fmt::format("GPU {} and GPU {} (its image in replica 0) have different links", g, r),
             "give every host the same NICs and links");
    }
  }
  for (engine::LpId n = t.num_gpus(); n < t.num_nodes(); ++n) {
    if (t.kind(n) == models::NodeKind::kNvSwitch) continue;
    double down = 0, up = 0;
    for (const auto& p : t.ports(n)) {
      (t.tier(p.peer) > t.tier(n) ? up : down) += static_cast<double>(p.rate_bps);
    }
    if (up > 0 && up < down) {
      refuse(c, fmt::format("the fabric is oversubscribed (switch {} has {:.0f} Gb/s toward its hosts and {:.0f} Gb/s up), "
                            "so the replicas would share its uplinks", n, down / 1e9, up / 1e9),
             "use a non-blocking fabric (cluster.oversubscription empty)");
    }
  }
}

/// Every replica runs replica 0's program and names the images under the shift of replica 0's
/// communicators and peers; a communicator named by both is mapped onto itself.
void check_replicas(const RunContext& c, const models::FoldMap& fold) {
  const models::Workload& w = c.w;
  if (!w.shared()) {
    refuse(c, "the generated workload has one program per rank, so its replicas are not known to be identical",
           "keep the generator's shared programs");
  }
  std::vector<std::int8_t> invariant(w.groups.size(), -1);  // the shift maps the group onto itself
  auto is_invariant = [&](std::int32_t g) {
    std::int8_t& v = invariant[static_cast<std::size_t>(g)];
    if (v < 0) {
      std::vector<char> in(w.ranks, 0);
      for (std::uint32_t r : w.groups[g].ranks) in[r] = 1;
      v = 1;
      for (std::uint32_t r : w.groups[g].ranks) v = v && in[fold.shift(r, 1)];
    }
    return v == 1;
  };
  for (std::uint32_t r = 0; r < fold.world; ++r) {
    const std::uint32_t j = fold.replica(r);
    if (j == 0) continue;
    const std::uint32_t r0 = fold.rep(r);
    if (w.program_of[r] != w.program_of[r0]) {
      refuse(c, fmt::format("rank {} (replica {}) runs another program than rank {} of replica 0", r, j, r0),
             "fold only jobs whose replicas are identical");
    }
    for (std::uint32_t i = 0; i < w.group_width; ++i) {
      const std::int32_t g = w.group_slots[std::size_t{r} * w.group_width + i];
      const std::int32_t g0 = w.group_slots[std::size_t{r0} * w.group_width + i];
      if (g < 0 && g0 < 0) continue;
      bool ok = g >= 0 && g0 >= 0;
      if (ok && g == g0) {
        ok = is_invariant(g);
        // A communicator spanning the replicas with more than one member in each (DP·CP under
        // CP > 1): its ring has edges between two members of one replica, which the shift does not
        // map onto a representative's own images (GpuRankLp::check_fold_plan would refuse its
        // first collective, after the run has simulated up to it).
        std::size_t in_rep0 = 0;
        for (std::uint32_t m : w.groups[g].ranks) in_rep0 += fold.replica(m) == 0 ? 1 : 0;
        if (ok && in_rep0 > 1) {
          refuse(c, fmt::format("communicator '{}' ({} ranks) has {} members in each DP replica (its ring joins ranks of "
                                "one replica, which the DP shift does not map onto a rank's own images)",
                                w.groups[g].name, w.groups[g].ranks.size(), in_rep0),
                 "fold only jobs whose DP communicators hold one rank per replica (cp: 1)");
        }
      } else if (ok) {
        const auto& a = w.groups[g].ranks;
        const auto& b = w.groups[g0].ranks;
        ok = a.size() == b.size();
        for (std::size_t k = 0; ok && k < a.size(); ++k) ok = a[k] == fold.shift(b[k], j);
      }
      if (!ok) {
        refuse(c, fmt::format("communicator '{}' of rank {} (replica {}) is not the image of '{}' of rank {}: the replicas "
                              "share or differ in that communicator",
                              g >= 0 ? w.groups[g].name : "-", r, j, g0 >= 0 ? w.groups[g0].name : "-", r0),
               "fold only jobs whose replicas talk to each other through DP communicators alone (no EP)");
      }
    }
    for (std::uint32_t i = 0; i < w.peer_width; ++i) {
      const std::int32_t p = w.peer_slots[std::size_t{r} * w.peer_width + i];
      const std::int32_t p0 = w.peer_slots[std::size_t{r0} * w.peer_width + i];
      if (p < 0 && p0 < 0) continue;
      if (p < 0 || p0 < 0 || static_cast<std::uint32_t>(p) != fold.shift(static_cast<std::uint32_t>(p0), j)) {
        refuse(c, fmt::format("rank {} (replica {}) sends to or receives from rank {}, not the image of rank {}'s peer {}", r,
                              j, p, r0, p0),
               "fold only jobs whose replicas are identical");
      }
    }
  }
}

}  // namespace

void fold_replicas(RunContext& c) {
  const Spec& spec = c.spec;
  if (spec.fold != "dp") return;
  if (c.fidelity == models::Fidelity::kPacket) {
    refuse(c, "the packet rung's NIC queue pairs and switch buffers are not folded", "use sim.fidelity: flow or analytical");
  }
  if (!c.compute_factor.empty()) {
    refuse(c, "compute.stragglers / compute.straggler_dist make the DP replicas' compute differ",
           "drop the stragglers");
  }
  if (!c.gen.used) {
    refuse(c, "needs a generated workload (workload.generator): a trace's per-rank programs are not known to be identical "
              "replicas",
           "generate the job");
  }
  if (c.ring_flows == models::RingFlows::kStream && c.stream_applies) {
    refuse(c, "sim.ring_flows: stream passes its completion tokens rank to rank around the whole DP ring",
           "use sim.ring_flows: step");
  }
  if (c.gen.ep > 1) {
    refuse(c, fmt::format("EP {} carves its expert groups out of the DP replicas, so replicas exchange tokens", c.gen.ep),
           "use ep 1");
  }
  models::FoldMap fold;
  fold.world = c.gen.tp * c.gen.cp * c.gen.replicas * c.gen.pp;
  fold.stride = c.gen.tp * c.gen.cp;
  fold.replicas = c.gen.replicas;
  if (fold.world != c.w.ranks) throw engine::InternalError("fold: the generated job's sizes do not match its ranks");
  if (fold.replicas <= 1) {
    c.log->info("sim.fold: dp with DP 1: nothing to fold");
    return;
  }
  const models::Topology& t = *c.topo;
  std::uint32_t domain = 0;  // GPUs in GPU 0's NVLink domain
  for (std::uint32_t g = 0; g < t.num_gpus(); ++g) domain += t.domain_of(g) == t.domain_of(0) ? 1 : 0;
  if (fold.stride % domain != 0) {
    refuse(c, fmt::format("a replica's pipeline stage (TP·CP = {} GPUs) does not fill whole NVLink domains of {} GPUs, so the "
                          "replicas share hosts",
                          fold.stride, domain),
           "make tp*cp a multiple of the GPUs per NVLink domain");
  }
  check_fabric(c, fold);
  check_replicas(c, fold);
  c.fold = fold;
  for (std::uint32_t g = 0; g < fold.world; ++g) {
    if (t.leaf_of(g) == t.leaf_of(fold.rep(g))) continue;
    // The shift then moves GPUs between leaf groups: the DP rings' edges between groups cross
    // spine links (ECMP collisions, longer paths) that no flow of the representative takes.
    refuse(c, fmt::format("replicas sit under different leaves (GPU {} on leaf {}, its image {} in replica 0 on leaf {}), so "
                          "DP ring edges between leaf groups cross spine links the folded run does not see",
                          g, t.leaf_of(g), fold.rep(g), t.leaf_of(fold.rep(g))),
           "put all hosts of a rail on one leaf (cluster.nics_per_leaf >= hosts)");
  }
  c.log->info("sim.fold: dp: {} replicas of {} ranks simulated as one", fold.replicas, fold.world / fold.replicas);
}

}  // namespace fabricsim::jobs::run_stages
