#include "models/topology/topology_stats.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace fabricsim::models {

using engine::LpId;

TopologyStats topology_stats(const Topology &topo) {
  TopologyStats s;
  for (int k = 0; k < 5; ++k)
    s.nodes[k] = topo.count(static_cast<NodeKind>(k));
  std::map<std::uint32_t, TierCapacity> tiers;
  s.clos = true;
  for (LpId a = 0; a < topo.num_nodes(); ++a) {
    const std::uint32_t ta = topo.tier(a);
    const bool sw_a = ta >= 1;
    if (sw_a) {
      auto &t = tiers[ta];
      t.tier = ta;
      ++t.switches;
    }
    for (const Port &p : topo.ports(a)) {
      const std::uint32_t tb = topo.tier(p.peer);
      const bool sw_b = tb >= 1;
      if (p.peer > a) {
        ++s.links;
        if (topo.kind(a) == NodeKind::kNvSwitch || topo.kind(p.peer) == NodeKind::kNvSwitch) {
          ++s.nvlink_links;
        } else if (sw_a && sw_b) {
          ++s.fabric_links;
          if (ta + 1 != tb && tb + 1 != ta)
            s.clos = false;
        } else {
          ++s.nic_links;
        }
      }
      if (topo.kind(a) == NodeKind::kGpu && sw_b)
        s.nic_bps += p.rate_bps;
      if (!sw_a)
        continue;
      auto &t = tiers[ta];
      if (tb < ta)
        t.down_bps += p.rate_bps;
      else if (tb > ta)
        t.up_bps += p.rate_bps;
      else
        t.lateral_bps += p.rate_bps;
    }
  }
  for (auto &[k, t] : tiers)
    s.tiers.push_back(t);

  // Classes, their members and the domains they span.
  const std::uint32_t G = topo.num_gpus();
  s.classes = topo.num_classes();
  s.routing_bytes = topo.routing_bytes();
  s.switch_ecmp = topo.max_switch_ecmp();
  std::vector<std::vector<std::uint32_t>> members(s.classes);
  for (std::uint32_t g = 0; g < G; ++g)
    members[topo.route_class(g)].push_back(g);
  std::vector<std::map<std::uint32_t, std::uint64_t>> doms(s.classes);
  for (std::uint32_t c = 0; c < s.classes; ++c) {
    for (std::uint32_t g : members[c]) {
      if (topo.domain_switch(topo.domain_of(g)) != Topology::kNoLp)
        ++doms[c][topo.domain_of(g)];
    }
  }
  const std::uint32_t cap =
      std::min<std::uint32_t>(s.classes, 4096); // keeps `topo` fast on huge fabrics
  for (std::uint32_t cs = 0; cs < cap; ++cs) {
    const std::uint32_t a = members[cs][0];
    for (std::uint32_t cd = 0; cd < cap; ++cd) {
      // b: a member of cd in another domain than a (and not a itself), if any.
      std::uint32_t b = Topology::kNoLp;
      for (std::uint32_t x : members[cd]) {
        if (x != a && !topo.same_scaleup_domain(a, x)) {
          b = x;
          break;
        }
      }
      const std::uint32_t h =
          b == Topology::kNoLp ? Topology::kUnreachable : topo.fabric_hops(a, b);
      if (b != Topology::kNoLp && h == Topology::kUnreachable) {
        // Every cross-domain pair of these classes is unreachable (reachability depends on classes
        // only).
        std::uint64_t pairs = static_cast<std::uint64_t>(members[cs].size()) * members[cd].size();
        if (cs == cd)
          pairs -= members[cs].size();
        std::uint64_t same = 0;
        for (const auto &[d, n] : doms[cs]) {
          if (auto it = doms[cd].find(d); it != doms[cd].end())
            same += n * it->second - (cs == cd ? n : 0);
        }
        s.unreachable_pairs += pairs - same;
      } else if (b != Topology::kNoLp) {
        s.diameter_hops = std::max(s.diameter_hops, h);
        s.gpu_ecmp = std::max(s.gpu_ecmp, static_cast<std::uint32_t>(topo.candidates(a, b).size()));
      }
    }
  }
  if (s.unreachable_pairs > 0) {
    s.bisection_bps = 0;
    s.bisection_method = "0: the fabric does not connect every GPU pair";
  } else if (topo.num_groups() > 1) {
    // Grouped graph (dragonfly): groups [0, n/2) against the rest.
    const std::uint32_t half = topo.num_groups() / 2;
    const LpId first = topo.first_lp(NodeKind::kLeaf);
    std::uint64_t cut = 0;
    for (LpId a = first; a < topo.num_nodes(); ++a) {
      for (const Port &p : topo.ports(a)) {
        if (p.peer >= first && topo.group(a) < half && topo.group(p.peer) >= half)
          cut += p.rate_bps;
      }
    }
    s.bisection_bps = std::min(cut, s.nic_bps / 2);
    s.bisection_method = "groups: min(NIC capacity / 2, capacity across the cut between the first "
                         "floor(groups/2) routing groups and the rest)";
  } else if (s.clos) {
    std::uint64_t b = s.nic_bps;
    for (const auto &t : s.tiers) {
      if (t.up_bps > 0)
        b = std::min(b, t.up_bps);
    }
    s.bisection_bps = b / 2;
    s.bisection_method = "Clos: min(NIC capacity, up capacity of each tier) / 2";
  } else {
    // General graph: the switches split in LP order (a grid's first, slowest dimension).
    const LpId first = topo.first_lp(NodeKind::kLeaf);
    const LpId mid = first + (topo.num_nodes() - first) / 2;
    std::uint64_t cut = 0;
    for (LpId a = first; a < mid; ++a) {
      for (const Port &p : topo.ports(a)) {
        if (p.peer >= mid)
          cut += p.rate_bps;
      }
    }
    s.bisection_bps = std::min(cut, s.nic_bps / 2);
    s.bisection_method =
        "general graph: min(NIC capacity / 2, capacity across the cut that halves the switches in "
        "LP order); "
        "an upper bound, exact for tori and meshes whose first dimension is the longest";
  }
  return s;
}

std::string format_topology_stats(const Topology &topo, const TopologyStats &s) {
  const auto &c = topo.spec();
  auto gbps = [](std::uint64_t bps) {
    return fmt::format("{:g} Gb/s", static_cast<double>(bps) / 1e9);
  };
  std::string out;
  out += fmt::format("topology: {}{}{}\n", fabric_kind_name(c.fabric),
                     c.fabric == FabricKind::kFile ? " (" + c.topology_file + ")" : "",
                     c.dual_plane ? ", dual-plane" : "");
  out += fmt::format("nodes: {} total: {} gpu, {} nvswitch, {} leaf (tier 1), {} spine (tier 2), "
                     "{} core (tier 3+)\n",
                     topo.num_nodes(), s.nodes[0], s.nodes[1], s.nodes[2], s.nodes[3], s.nodes[4]);
  out +=
      fmt::format("scale-up domains: {} ({} with an NVSwitch)\n", topo.num_domains(), s.nodes[1]);
  out += fmt::format("links: {} total: {} NVLink, {} NIC, {} switch-switch\n", s.links,
                     s.nvlink_links, s.nic_links, s.fabric_links);
  out += fmt::format("NIC capacity: {} (all GPU NIC ports, one direction)\n", gbps(s.nic_bps));
  for (const auto &t : s.tiers) {
    std::string ratio = t.up_bps ? fmt::format("{:.3g}:1", static_cast<double>(t.down_bps) /
                                                               static_cast<double>(t.up_bps))
                                 : std::string("top tier");
    out += fmt::format("tier {}: {} switches, down {}, up {}{}, oversubscription {}\n", t.tier,
                       t.switches, gbps(t.down_bps), gbps(t.up_bps),
                       t.lateral_bps ? ", lateral " + gbps(t.lateral_bps) : "", ratio);
  }
  out += fmt::format("bisection bandwidth: {} ({})\n", gbps(s.bisection_bps), s.bisection_method);
  if (s.diameter_hops > 0) {
    out += fmt::format("diameter: {} hops GPU to GPU through the fabric (NVLink pairs: 2)\n",
                       s.diameter_hops);
  } else {
    out += "diameter: no GPU pair crosses the fabric (every GPU pair shares an NVLink domain or "
           "is unreachable; NVLink pairs: 2 hops)\n";
  }
  if (s.unreachable_pairs) {
    out += fmt::format(
        "unreachable: {} ordered GPU pairs in different NVLink domains have no network path\n",
        s.unreachable_pairs);
  }
  out += fmt::format("ECMP width: up to {} next hops at a switch, {} NIC port(s) at a GPU\n",
                     s.switch_ecmp, s.gpu_ecmp);
  out += fmt::format("routing table: {} classes, {} bytes ({:.1f} B per GPU)\n", s.classes,
                     s.routing_bytes, static_cast<double>(s.routing_bytes) / topo.num_gpus());
  return out;
}

} // namespace fabricsim::models
