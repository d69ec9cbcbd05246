// dragonfly: groups of routers, fully connected inside a group by local links, groups joined by
// global links (Kim, Dally, Scott, Abts, "Technology-Driven, Highly-Scalable Dragonfly
// Topology", ISCA 2008, section 3). p terminals (NIC ports) per router, a routers per group, h
// global links per router, g <= a*h + 1 groups; the balanced choice a = 2p = 2h (section 3)
// gives the defaults. Routing is minimal (local, global, local; Topology's group-minimal routes)
// with ECMP over every minimal path.
//
// Global links, consecutive arrangement: router r of group i owns global channels r*h .. r*h+h-1
// of its group; with m = floor(a*h / (g-1)) links per group pair, channel c < m*(g-1) of group i
// is instance c / (g-1) of the link to group j = o < i ? o : o+1, o = c % (g-1), and meets the
// same instance's channel of group j toward i. In a maximal dragonfly (g = a*h+1, m = 1) every
// group pair has exactly one global link; the a*h - m*(g-1) remaining channels of smaller ones
// stay unconnected.
#include <algorithm>
#include <string>

#include "engine/errors.hpp"
#include "models/topology/builders/common.hpp"
#include "models/topology/registry.hpp"

namespace fabricsim::models {

namespace {

using builders::param_uint;
using engine::InputError;
using engine::LpId;

constexpr ParamDecl kDragonflyParams[] = {
    {"cluster.dragonfly.p", "auto-int", "auto", "dragonfly: terminals (NIC ports) per router; auto = a/2, else h, else the smallest balanced dragonfly (a = 2p = 2h, g = a*h+1) that holds the NICs", "Kim et al., ISCA 2008, sec. 3"},
    {"cluster.dragonfly.a", "auto-int", "auto", "dragonfly: routers per group, fully connected by local links; auto = 2p", "Kim et al., ISCA 2008, sec. 3"},
    {"cluster.dragonfly.h", "auto-int", "auto", "dragonfly: global links per router; auto = p", "Kim et al., ISCA 2008, sec. 3"},
    {"cluster.dragonfly.g", "auto-int", "auto", "dragonfly: groups, at most a*h+1 (one global link per group pair); auto = a*h+1", "Kim et al., ISCA 2008, sec. 3"},
};

/// The dragonfly's sizes, auto values filled in.
struct DragonflyParams {
  std::uint32_t p = 0; ///< terminals per router
  std::uint32_t a = 0; ///< routers per group
  std::uint32_t h = 0; ///< global links per router
  std::uint32_t g = 0; ///< groups
};

DragonflyParams params(const ClusterSpec &s) {
  const std::uint64_t nics = static_cast<std::uint64_t>(s.hosts) * s.gpus_per_host;
  DragonflyParams d;
  const std::uint32_t a_in = param_uint(s, "cluster.dragonfly.a", 0, 1);
  const std::uint32_t h_in = param_uint(s, "cluster.dragonfly.h", 0, 1);
  std::uint32_t p_auto = 1;
  if (a_in) {
    p_auto = std::max<std::uint32_t>(1, a_in / 2);
  } else if (h_in) {
    p_auto = h_in;
  } else {
    // Smallest balanced dragonfly holding the NICs: (2p^2 + 1) groups x 2p routers x p ports.
    while (p_auto < 64 &&
           (2ull * p_auto * p_auto + 1) * 2ull * p_auto * p_auto < nics)
      ++p_auto;
  }
  d.p = param_uint(s, "cluster.dragonfly.p", p_auto, 1);
  d.a = a_in ? a_in : 2 * d.p;
  d.h = h_in ? h_in : d.p;
  const std::uint64_t g_max = static_cast<std::uint64_t>(d.a) * d.h + 1;
  d.g = param_uint(s, "cluster.dragonfly.g", static_cast<std::uint32_t>(std::min<std::uint64_t>(g_max, 0xFFFFFFFFull)), 1);
  if (d.g > g_max) {
    throw InputError(s.source, "cluster.dragonfly.g",
                     std::to_string(d.g) + " groups need more than the a*h = " +
                         std::to_string(g_max - 1) + " global links of a group",
                     "give g <= a*h+1 = " + std::to_string(g_max) + " or raise cluster.dragonfly.a / h");
  }
  return d;
}

void check_sizes(const ClusterSpec &s, const DragonflyParams &d) {
  const std::string &f = s.source;
  if (s.dual_plane)
    throw InputError(f, "cluster.dual_plane", "is not supported for dragonfly", "set it to false");
  if (s.tiers != 2 || s.pods != 1) {
    throw InputError(f, "cluster.tiers", "a dragonfly has no Clos tiers",
                     "drop cluster.tiers/cluster.pods");
  }
  const std::uint64_t ports = static_cast<std::uint64_t>(d.p) + (d.a - 1) + d.h;
  if (ports > ClusterSpec::kMaxSwitchPorts) {
    throw InputError(f, "cluster.dragonfly.a",
                     "p + (a-1) + h = " + std::to_string(ports) + " router ports is more than " +
                         std::to_string(ClusterSpec::kMaxSwitchPorts),
                     "give smaller cluster.dragonfly.p / a / h");
  }
  const std::uint64_t routers = static_cast<std::uint64_t>(d.g) * d.a;
  if (routers > (1u << 20)) {
    throw InputError(f, "cluster.dragonfly.g", "g*a is more than 1,048,576 routers",
                     "give fewer groups or routers per group");
  }
  const std::uint64_t nics = static_cast<std::uint64_t>(s.hosts) * s.gpus_per_host;
  if (nics > routers * d.p) {
    throw InputError(f, "cluster.hosts",
                     std::to_string(nics) + " NICs do not fit on g*a*p = " +
                         std::to_string(d.g) + "*" + std::to_string(d.a) + "*" +
                         std::to_string(d.p) + " = " + std::to_string(routers * d.p) +
                         " router ports",
                     "use fewer hosts or raise cluster.dragonfly.p / a / g");
  }
}

TopoGraph build(const ClusterSpec &s) {
  const DragonflyParams d = params(s);
  check_sizes(s, d);
  TopoGraph g;
  builders::add_gpus_and_nvswitches(g, s);
  const std::uint32_t G = s.hosts * s.gpus_per_host;
  const LpId first = static_cast<LpId>(g.kind.size());
  g.group.assign(g.kind.size(), TopoGraph::kNoGroup);
  for (std::uint32_t i = 0; i < d.g * d.a; ++i) {
    g.add(NodeKind::kLeaf, 1);
    g.group.push_back(i / d.a);
  }
  auto router = [&](std::uint32_t grp, std::uint32_t r) { return first + grp * d.a + r; };
  for (std::uint32_t gpu = 0; gpu < G; ++gpu)
    g.links.push_back({gpu, first + gpu / d.p, s.nic_bps, s.nic_latency_ps, s.mtu_bytes});
  for (std::uint32_t grp = 0; grp < d.g; ++grp) {
    for (std::uint32_t r = 0; r < d.a; ++r) {
      for (std::uint32_t t = r + 1; t < d.a; ++t) {
        g.links.push_back({router(grp, r), router(grp, t), s.fabric_bps, s.fabric_latency_ps,
                           s.mtu_bytes});
      }
    }
  }
  if (d.g > 1) {
    const std::uint32_t span = d.g - 1;
    const std::uint32_t used = (d.a * d.h / span) * span; // channels wired per group
    for (std::uint32_t i = 0; i < d.g; ++i) {
      for (std::uint32_t c = 0; c < used; ++c) {
        const std::uint32_t o = c % span, j = o < i ? o : o + 1;
        if (j < i)
          continue; // the pair's link was added from group j
        const std::uint32_t peer_c = (c / span) * span + i; // group j's channel toward i (i < j)
        g.links.push_back({router(i, c / d.h), router(j, peer_c / d.h), s.fabric_bps,
                           s.fabric_latency_ps, s.mtu_bytes});
      }
    }
  }
  return g;
}

} // namespace

const TopologyBuilder kDragonflyBuilder = {
    FabricKind::kDragonfly, "dragonfly",
    "groups of fully connected routers joined by global links (Kim et al., ISCA 2008)",
    kDragonflyParams, build, nullptr, nullptr, false};

} // namespace fabricsim::models
