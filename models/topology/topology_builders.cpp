// Generated topologies (build_graph): Clos fabrics (rail-optimized, leaf-spine, rail-only; 2 or
// 3 tiers; single or dual plane) and switch grids (torus, mesh). docs/topology.md has the shapes.
#include <cmath>
#include <string>

#include "engine/errors.hpp"
#include "models/topology/cluster.hpp"

namespace fabricsim::models {

using engine::InputError;
using engine::LpId;

namespace {

std::uint32_t ceil_div(std::uint64_t a, std::uint64_t b) {
  return static_cast<std::uint32_t>((a + b - 1) / b);
}

void check_spec(const ClusterSpec &s) {
  const std::string &f = s.source;
  auto positive = [&](std::uint64_t v, const char *key, const char *fix) {
    if (v == 0)
      throw InputError(f, key, "must be > 0", fix);
  };
  positive(s.hosts, "cluster.hosts", "set cluster.hosts >= 1");
  positive(s.gpus_per_host, "cluster.gpus_per_host", "set cluster.gpus_per_host >= 1");
  positive(s.nics_per_leaf, "cluster.nics_per_leaf", "set cluster.nics_per_leaf >= 1");
  if (s.mtu_bytes == 0 || s.nvlink_mtu_bytes == 0)
    throw InputError(f, "cluster.mtu", "must be > 0 bytes", "use e.g. 4KiB");
  positive(s.nic_bps, "cluster.nic_bandwidth", "give a rate like 400Gbps");
  positive(s.fabric_bps, "cluster.fabric_bandwidth", "give a rate like 400Gbps");
  positive(s.nvlink_bps, "cluster.nvlink_bandwidth", "give a rate like 3600Gbps");
  positive(s.nic_latency_ps, "cluster.nic_latency",
           "give a latency like 500ns (it is the lookahead)");
  positive(s.fabric_latency_ps, "cluster.fabric_latency",
           "give a latency like 500ns (it is the lookahead)");
  positive(s.nvlink_latency_ps, "cluster.nvlink_latency",
           "give a latency like 100ns (it is the lookahead)");
  if (s.tiers != 2 && s.tiers != 3)
    throw InputError(f, "cluster.tiers", "must be 2 or 3", "use 2 (leaf-spine) or 3 (+ core)");
  if (s.pods == 0)
    throw InputError(f, "cluster.pods", "must be >= 1", "set cluster.pods >= 1");
  if (s.pods > 1 && s.tiers != 3) {
    throw InputError(f, "cluster.pods", "pods need a core layer",
                     "set cluster.tiers: 3 (or cluster.pods: 1)");
  }
  // A scale-up domain holds whole hosts (NVL72: 18 trays of 4 GPUs) or a host holds whole
  // domains; a domain taking part of a host would put that host's GPUs behind two NVSwitches.
  if (s.nvlink_domain != 0 && s.nvlink_domain % s.gpus_per_host != 0 &&
      s.gpus_per_host % s.nvlink_domain != 0) {
    throw InputError(f, "cluster.nvlink_domain",
                     std::to_string(s.nvlink_domain) + " GPUs per NVLink domain with " +
                         std::to_string(s.gpus_per_host) +
                         " GPUs per host: a domain would take part of a host",
                     "give a multiple of cluster.gpus_per_host (whole hosts per domain, e.g. 72 "
                     "with 4) or a divisor of it");
  }
  if (s.nics_per_leaf > ClusterSpec::kMaxSwitchPorts) {
    throw InputError(f, "cluster.nics_per_leaf",
                     std::to_string(s.nics_per_leaf) + " NIC ports on one switch is more than " +
                         std::to_string(ClusterSpec::kMaxSwitchPorts),
                     "give the leaf's real downlink count (e.g. 32 or 64); a larger fabric has "
                     "more leaves, not larger ones");
  }
  if (s.oversub_leaf < 0 || s.oversub_spine < 0) {
    throw InputError(f, "cluster.oversubscription", "ratios must be > 0",
                     "write e.g. \"3:1\" or \"1:1,4:1\"");
  }
}

struct Clos {
  const ClusterSpec &s;
  TopoGraph g;
  std::uint32_t G = 0, planes = 1, leaves = 0, pods = 1, leaves_per_pod = 0, spines = 0,
                cores_per_group = 0;
  std::uint64_t port_bps = 0, core_bps = 0;
  engine::SimTime core_lat = 0;
  bool rail_only = false;
  LpId first_leaf = 0, first_spine = 0, first_core = 0;

  explicit Clos(const ClusterSpec &spec) : s(spec) {}

  std::uint32_t leaf_of(std::uint32_t gpu) const {
    if (s.fabric == FabricKind::kLeafSpine)
      return gpu / s.nics_per_leaf;
    const std::uint32_t h = gpu / s.gpus_per_host, j = gpu % s.gpus_per_host;
    return (h / s.nics_per_leaf) * s.gpus_per_host + j;
  }

  void size() {
    const std::string &f = s.source;
    G = s.hosts * s.gpus_per_host;
    planes = s.dual_plane ? 2 : 1;
    port_bps = s.dual_plane ? s.nic_bps / 2 : s.nic_bps;
    rail_only = s.fabric == FabricKind::kRailOnly;
    const bool strict = s.dual_plane || s.tiers == 3 || rail_only;
    // NIC holders per leaf group: hosts (rails) or NICs (leaf-spine).
    const std::uint32_t holders = s.fabric == FabricKind::kLeafSpine ? G : s.hosts;
    if (strict && holders > s.nics_per_leaf && holders % s.nics_per_leaf != 0) {
      throw InputError(
          f, "cluster.nics_per_leaf",
          std::to_string(s.nics_per_leaf) + " does not divide the " + std::to_string(holders) +
              (s.fabric == FabricKind::kLeafSpine ? " NICs" : " hosts of each rail"),
          "choose nics_per_leaf dividing " + std::to_string(holders) + " (every leaf full)");
    }
    leaves = s.fabric == FabricKind::kLeafSpine
                 ? ceil_div(G, s.nics_per_leaf)
                 : ceil_div(s.hosts, s.nics_per_leaf) * s.gpus_per_host;
    if (rail_only && s.tiers == 3) {
      throw InputError(f, "cluster.tiers", "rail_only has no core layer",
                       "use cluster.tiers: 2 with rail_only");
    }
    pods = s.tiers == 3 ? s.pods : 1;
    if (leaves % pods != 0) {
      throw InputError(f, "cluster.pods",
                       std::to_string(pods) + " does not divide the " + std::to_string(leaves) +
                           " leaves per plane",
                       "choose pods dividing " + std::to_string(leaves));
    }
    leaves_per_pod = leaves / pods;
    spines = s.spines;
    if (s.oversub_leaf > 0) {
      spines = std::max<std::uint32_t>(
          1, static_cast<std::uint32_t>(
                 std::ceil(static_cast<double>(s.nics_per_leaf) * static_cast<double>(port_bps) /
                               (s.oversub_leaf * static_cast<double>(s.fabric_bps)) -
                           1e-9)));
    }
    const std::uint32_t leaves_per_rail = rail_only ? leaves / s.gpus_per_host : leaves;
    const bool need_spines = rail_only ? leaves_per_rail > 1 : leaves > 1;
    if (need_spines && spines == 0) {
      throw InputError(f, "cluster.spines",
                       "is 0 but the fabric has " + std::to_string(leaves) + " leaves",
                       "set cluster.spines >= 1 so leaves can reach each other");
    }
    if (!need_spines)
      spines = 0; // a single leaf (per rail) needs no spine layer
    // One uplink per spine: a leaf has nics_per_leaf + spines ports (per plane).
    if (static_cast<std::uint64_t>(s.nics_per_leaf) + spines > ClusterSpec::kMaxSwitchPorts) {
      throw InputError(f, s.oversub_leaf > 0 ? "cluster.oversubscription" : "cluster.spines",
                       std::to_string(spines) + " spines give each leaf " +
                           std::to_string(static_cast<std::uint64_t>(s.nics_per_leaf) + spines) +
                           " ports (" + std::to_string(s.nics_per_leaf) + " NIC ports + one uplink per spine), more than " +
                           std::to_string(ClusterSpec::kMaxSwitchPorts),
                       "give fewer spines or fewer NIC ports per leaf (auto spines = nics_per_leaf, non-blocking)");
    }
    core_bps = s.core_bps ? s.core_bps : s.fabric_bps;
    core_lat = s.core_latency_ps ? s.core_latency_ps : s.fabric_latency_ps;
    if (s.tiers == 3 && spines > 0) {
      cores_per_group = leaves_per_pod; // non-blocking: spine up capacity = down capacity
      if (s.oversub_spine > 0) {
        cores_per_group = std::max<std::uint32_t>(
            1, static_cast<std::uint32_t>(std::ceil(
                   static_cast<double>(leaves_per_pod) * static_cast<double>(s.fabric_bps) /
                       (s.oversub_spine * static_cast<double>(core_bps)) -
                   1e-9)));
      }
    }
  }

  TopoGraph build() {
    size();
    const std::uint32_t D = s.domain_size();
    for (std::uint32_t i = 0; i < G; ++i)
      g.add(NodeKind::kGpu, 0);
    add_nvswitches(g, G, D, s);
    first_leaf = static_cast<LpId>(g.kind.size());
    for (std::uint32_t i = 0; i < planes * leaves; ++i)
      g.add(NodeKind::kLeaf, 1);
    first_spine = static_cast<LpId>(g.kind.size());
    const std::uint32_t spines_per_plane = rail_only ? spines * s.gpus_per_host : spines * pods;
    for (std::uint32_t i = 0; i < planes * spines_per_plane; ++i)
      g.add(NodeKind::kSpine, 2);
    first_core = static_cast<LpId>(g.kind.size());
    const std::uint32_t cores_per_plane = spines * cores_per_group;
    for (std::uint32_t i = 0; i < planes * cores_per_plane; ++i)
      g.add(NodeKind::kCore, 3);
    for (std::uint32_t gpu = 0; gpu < G; ++gpu) {
      for (std::uint32_t p = 0; p < planes; ++p) {
        g.links.push_back(
            {gpu, first_leaf + p * leaves + leaf_of(gpu), port_bps, s.nic_latency_ps, s.mtu_bytes});
      }
    }
    for (std::uint32_t p = 0; p < planes; ++p) {
      for (std::uint32_t l = 0; l < leaves; ++l) {
        const LpId leaf = first_leaf + p * leaves + l;
        for (std::uint32_t k = 0; k < spines; ++k) {
          const std::uint32_t group = rail_only ? l % s.gpus_per_host : l / leaves_per_pod;
          const LpId sp = first_spine + p * spines_per_plane + group * spines + k;
          g.links.push_back({leaf, sp, s.fabric_bps, s.fabric_latency_ps, s.mtu_bytes});
        }
      }
      // Core group k serves spine k of every pod.
      for (std::uint32_t q = 0; q < pods && cores_per_group > 0; ++q) {
        for (std::uint32_t k = 0; k < spines; ++k) {
          const LpId sp = first_spine + p * spines_per_plane + q * spines + k;
          for (std::uint32_t i = 0; i < cores_per_group; ++i) {
            const LpId core = first_core + p * cores_per_plane + k * cores_per_group + i;
            g.links.push_back({sp, core, core_bps, core_lat, s.mtu_bytes});
          }
        }
      }
    }
    return std::move(g);
  }

  static void add_nvswitches(TopoGraph &g, std::uint32_t G, std::uint32_t D, const ClusterSpec &s) {
    for (std::uint32_t d = 0; d * D < G; ++d) {
      const std::uint32_t lo = d * D, hi = std::min(G, lo + D);
      if (hi - lo < 2)
        continue; // a 1-GPU domain has no scale-up switch
      const LpId nvs = g.add(NodeKind::kNvSwitch, 0);
      for (std::uint32_t gpu = lo; gpu < hi; ++gpu) {
        g.links.push_back({gpu, nvs, s.nvlink_bps, s.nvlink_latency_ps, s.nvlink_mtu_bytes});
      }
    }
  }
};

TopoGraph build_grid(const ClusterSpec &s) {
  const std::string &f = s.source;
  const bool torus = s.fabric == FabricKind::kTorus;
  if (s.dims.empty() || s.dims.size() > 3) {
    throw InputError(f, "cluster.dims", "a torus/mesh needs 1 to 3 dimensions",
                     "write e.g. \"4x4\" or \"4x4x2\"");
  }
  if (s.dual_plane)
    throw InputError(f, "cluster.dual_plane", "is not supported for torus/mesh", "set it to false");
  if (s.tiers != 2 || s.pods != 1) {
    throw InputError(f, "cluster.tiers", "torus/mesh have no Clos tiers",
                     "drop cluster.tiers/cluster.pods");
  }
  std::uint64_t n = 1;
  for (std::uint32_t d : s.dims) {
    if (d == 0)
      throw InputError(f, "cluster.dims", "a dimension is 0", "give sizes >= 1, e.g. \"4x4\"");
    n *= d;
  }
  if (n > (1u << 20))
    throw InputError(f, "cluster.dims", "more than 1,048,576 switches", "use a smaller grid");
  const std::uint32_t G = s.hosts * s.gpus_per_host;
  if (ceil_div(G, s.nics_per_leaf) > n) {
    throw InputError(f, "cluster.dims",
                     std::to_string(n) + " switches x " + std::to_string(s.nics_per_leaf) +
                         " NIC ports hold fewer than the " + std::to_string(G) + " NICs",
                     "enlarge cluster.dims or cluster.nics_per_leaf");
  }
  TopoGraph g;
  for (std::uint32_t i = 0; i < G; ++i)
    g.add(NodeKind::kGpu, 0);
  Clos::add_nvswitches(g, G, s.domain_size(), s);
  const LpId first = static_cast<LpId>(g.kind.size());
  for (std::uint64_t i = 0; i < n; ++i)
    g.add(NodeKind::kLeaf, 1);
  for (std::uint32_t gpu = 0; gpu < G; ++gpu) {
    g.links.push_back(
        {gpu, first + gpu / s.nics_per_leaf, s.nic_bps, s.nic_latency_ps, s.mtu_bytes});
  }
  // Row-major coordinates, dims[0] slowest; one link per neighbour pair in the + direction.
  std::uint64_t stride = n;
  for (std::size_t k = 0; k < s.dims.size(); ++k) {
    const std::uint32_t size = s.dims[k];
    stride /= size;
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t c = (i / stride) % size;
      std::uint64_t j;
      if (c + 1 < size) {
        j = i + stride;
      } else if (torus && size > 2) {
        j = i - c * stride; // wrap to coordinate 0
      } else {
        continue;
      }
      g.links.push_back({first + static_cast<LpId>(i), first + static_cast<LpId>(j), s.fabric_bps,
                         s.fabric_latency_ps, s.mtu_bytes});
    }
  }
  return g;
}

} // namespace

TopoGraph build_graph(const ClusterSpec &spec) {
  check_spec(spec);
  if (static_cast<std::uint64_t>(spec.hosts) * spec.gpus_per_host > (1u << 20)) {
    throw InputError(spec.source, "cluster.hosts",
                     "hosts x gpus_per_host is more than 1,048,576 GPUs", "use fewer hosts");
  }
  switch (spec.fabric) {
  case FabricKind::kRailOptimized:
  case FabricKind::kLeafSpine:
  case FabricKind::kRailOnly:
    return Clos(spec).build();
  case FabricKind::kTorus:
  case FabricKind::kMesh:
    return build_grid(spec);
  case FabricKind::kFile:
    break;
  }
  throw InputError(spec.source, "cluster.topology", "a topology file needs cluster.topology_file",
                   "set cluster.topology_file");
}

} // namespace fabricsim::models
