// Stage `fold_replicas` of `fabricsim run` (sim.fold: dp, docs/folding.md): whether the DP
// replicas of the job may be simulated as one, and the fold map.
#include <algorithm>
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

/// Why the images of `fold` are not copies of image 0 ("" when they are): every rank of image j
/// runs its representative's program and names the image under the shift of its
/// representative's communicators and peers, or the same communicator when the shift maps that
/// communicator onto itself (the DP groups; several members per image are allowed, the ring's
/// neighbours are checked where each collective starts, GpuRankLp::check_fold_plan). A
/// communicator that is neither (an EP group spanning images) makes a larger k necessary.
std::string replica_problem(const RunContext& c, const models::FoldMap& fold, std::uint32_t node_gpus) {
  const models::Workload& w = c.w;
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
      return fmt::format("rank {} (image {}) runs another program than rank {} of image 0", r, j, r0);
    }
    for (std::uint32_t i = 0; i < w.group_width; ++i) {
      const std::int32_t g = w.group_slots[std::size_t{r} * w.group_width + i];
      const std::int32_t g0 = w.group_slots[std::size_t{r0} * w.group_width + i];
      if (g < 0 && g0 < 0) continue;
      bool ok = g >= 0 && g0 >= 0;
      if (ok && g == g0) {
        ok = is_invariant(g);
      } else if (ok) {
        const auto& a = w.groups[g].ranks;
        const auto& b = w.groups[g0].ranks;
        ok = a.size() == b.size();
        for (std::size_t k = 0; ok && k < a.size(); ++k) ok = a[k] == fold.shift(b[k], j);
      }
      if (!ok) {
        return fmt::format("communicator '{}' of rank {} (image {}) is not the image of '{}' of rank {}: the images "
                           "share or differ in that communicator",
                           g >= 0 ? w.groups[g].name : "-", r, j, g0 >= 0 ? w.groups[g0].name : "-", r0);
      }
    }
    for (std::uint32_t i = 0; i < w.peer_width; ++i) {
      const std::int32_t p = w.peer_slots[std::size_t{r} * w.peer_width + i];
      const std::int32_t p0 = w.peer_slots[std::size_t{r0} * w.peer_width + i];
      if (p < 0 && p0 < 0) continue;
      if (p < 0 || p0 < 0 || static_cast<std::uint32_t>(p) != fold.shift(static_cast<std::uint32_t>(p0), j)) {
        return fmt::format("rank {} (image {}) sends to or receives from rank {}, not the image of rank {}'s peer {}", r,
                           j, p, r0, p0);
      }
    }
  }
  // simccl's NCCL rings (NcclPlanner::comm) visit a communicator's nodes in order, ascending
  // inside even nodes and descending inside odd ones: with several members per node the shift
  // maps the rings onto themselves only when it moves the nodes by an even count.
  if (c.spec.planner == "nccl") {
    for (std::size_t g = 0; g < invariant.size(); ++g) {
      if (invariant[g] != 1) continue;
      std::vector<std::uint32_t> nodes;
      for (std::uint32_t m : w.groups[g].ranks) {
        if (fold.simulated(m)) nodes.push_back(m / node_gpus);
      }
      const std::size_t members = nodes.size();
      std::sort(nodes.begin(), nodes.end());
      nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
      if (members > nodes.size() && nodes.size() % 2 == 1) {
        return fmt::format("communicator '{}' has {} nodes with {} members in each image, an odd count, and NCCL's rings "
                           "alternate direction from node to node, so the shift does not map them onto themselves",
                           w.groups[g].name, nodes.size(), members);
      }
    }
  }
  return "";
}

}  // namespace

void fold_replicas(RunContext& c) {
  const Spec& spec = c.spec;
  if (spec.fold != "dp") return;
  if (c.fidelity == models::Fidelity::kPacket) {
    refuse(c, "the packet rung's NIC queue pairs and switch buffers are not folded", "use sim.fidelity: flow or analytical");
  }
  if (!spec.throttles.empty()) {
    refuse(c, "compute.throttle slows some hosts' GPUs, so the DP replicas' compute differs", "drop compute.throttle");
  }
  if (!c.compute_factor.empty()) {
    refuse(c, "compute.stragglers / compute.straggler_dist make the DP replicas' compute differ",
           "drop the stragglers");
  }
  // The replica layout: a generated job's sizes (rank order tp-cp-dp-pp), or the reader's (a
  // SimAI file with pp > 1: tp-pp-dp).
  std::uint32_t below = 0, dp = 0;  // ranks below the DP index, DP
  if (c.gen.used) {
    below = c.gen.tp * c.gen.cp;
    dp = c.gen.replicas;
    if (below * dp * c.gen.pp != c.w.ranks) throw engine::InternalError("fold: the generated job's sizes do not match its ranks");
  } else if (c.w.replica_stride > 0 && c.w.replicas > 0) {
    below = c.w.replica_stride;
    dp = c.w.replicas;
  } else {
    refuse(c, "the workload's data-parallel replicas are not known (a Chakra trace, or a SimAI file with pp: 1, has one "
              "program per rank)",
           "generate the job, or give a SimAI file with pp > 1");
  }
  if (!c.w.shared()) {
    refuse(c, "the workload has one program per rank, so its replicas are not known to be identical",
           "keep the generator's shared programs");
  }
  if (c.ring_flows == models::RingFlows::kStream && c.stream_applies) {
    refuse(c, "sim.ring_flows: stream passes its completion tokens rank to rank around the whole DP ring",
           "use sim.ring_flows: step");
  }
  if (below * dp == 0 || c.w.ranks % (below * dp) != 0) throw engine::InternalError("fold: replica layout does not divide the ranks");
  if (dp <= 1) {
    c.log->info("sim.fold: dp with DP 1: nothing to fold");
    return;
  }
  const models::Topology& t = *c.topo;
  std::uint32_t domain = 0;  // GPUs in GPU 0's NVLink domain
  for (std::uint32_t g = 0; g < t.num_gpus(); ++g) domain += t.domain_of(g) == t.domain_of(0) ? 1 : 0;
  // k: the fewest consecutive DP replicas that fill whole NVLink domains and close every
  // communicator the shift does not map onto itself (EP groups carved out of DP). k = DP folds
  // nothing: refused with the reason k = 1 (or the smallest k filling domains) failed.
  models::FoldMap fold;
  std::string problem;
  bool fills = false;
  for (std::uint32_t k = 1; k < dp; ++k) {
    if (dp % k != 0) continue;
    models::FoldMap f;
    f.world = c.w.ranks;
    f.stride = below * k;
    f.replicas = dp / k;
    f.block = k;
    if (f.stride % domain != 0) continue;
    fills = true;
    std::string why = replica_problem(c, f, std::max(domain, t.spec().gpus_per_host));
    if (why.empty()) {
      fold = f;
      break;
    }
    if (problem.empty()) problem = std::move(why);
  }
  if (!fold.active()) {
    if (!fills) {
      refuse(c, fmt::format("no group of fewer than DP = {} replicas ({} GPUs each) fills whole NVLink domains of {} GPUs, "
                            "so the folded images would share hosts",
                            dp, below, domain),
             "make the GPUs of a replica's pipeline stage (tp*cp) a multiple of the GPUs per NVLink domain");
    }
    refuse(c, "no group of fewer than DP = " + std::to_string(dp) + " replicas is closed under the job's communicators: " +
                  problem,
           "fold only jobs whose replicas are identical and talk across replica groups through DP communicators alone");
  }
  check_fabric(c, fold);
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
  c.log->info("sim.fold: dp: {} images of {} DP replica(s) ({} ranks each) simulated as one", fold.replicas, fold.block,
              fold.world / fold.replicas);
}

}  // namespace fabricsim::jobs::run_stages
