// The folded-Clos engine (docs/topology.md, "Clos fabrics"): GPUs and NVSwitches, then leaves,
// spines and cores in LP order, one link per (leaf, spine) and (spine, core group member) pair.
#include "models/topology/builders/clos.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/errors.hpp"
#include "models/topology/builders/common.hpp"

namespace fabricsim::models::builders {

using engine::InputError;
using engine::LpId;

namespace {

constexpr ParamDecl kClosParams[] = {
    {"cluster.spines", "auto-int", "auto", "spine switches (per pod, per plane; per rail for rail_only), one uplink per leaf each; auto = nics_per_leaf (non-blocking) or from cluster.oversubscription", ""},
    {"cluster.tiers", "int", "2", "Clos tiers: 2 (leaf, spine) or 3 (leaf, spine/aggregation per pod, core)", ""},
    {"cluster.pods", "int", "1", "tiers 3: pods (leaf-spine blocks) joined by the core; must divide the leaves", ""},
    {"cluster.oversubscription", "string", "", "down:up capacity per tier, leaf first: \"3:1\" or \"1:1,4:1\" (leaf, spine->core); sets spines (and cores); empty = non-blocking", ""},
    {"cluster.core_bandwidth", "rate", "fabric_bandwidth", "spine <-> core link rate per direction", ""},
    {"cluster.core_latency", "time", "fabric_latency", "spine <-> core propagation delay", ""},
    {"cluster.dual_plane", "bool", "false", "each NIC has two ports (nic_bandwidth/2 each) to leaves of two separate planes (Alibaba HPN)", ""},
};

struct Clos {
  const ClusterSpec &s;
  ClosShape shape;
  TopoGraph g;
  std::uint32_t G = 0, planes = 1, leaves = 0, pods = 1, leaves_per_pod = 0, spines = 0,
                cores_per_group = 0;
  std::uint64_t port_bps = 0, core_bps = 0;
  engine::SimTime core_lat = 0;
  bool rail_only = false;
  LpId first_leaf = 0, first_spine = 0, first_core = 0;

  Clos(const ClusterSpec &spec, ClosShape sh) : s(spec), shape(sh) {}

  std::uint32_t leaf_of(std::uint32_t gpu) const {
    if (shape.nic_major)
      return gpu / s.nics_per_leaf;
    const std::uint32_t h = gpu / s.gpus_per_host, j = gpu % s.gpus_per_host;
    return (h / s.nics_per_leaf) * s.gpus_per_host + j;
  }

  void size() {
    const std::string &f = s.source;
    G = s.hosts * s.gpus_per_host;
    planes = s.dual_plane ? 2 : 1;
    port_bps = s.dual_plane ? s.nic_bps / 2 : s.nic_bps;
    rail_only = shape.rail_only;
    const bool strict = s.dual_plane || s.tiers == 3 || rail_only;
    // NIC holders per leaf group: hosts (rails) or NICs (leaf-spine).
    const std::uint32_t holders = shape.nic_major ? G : s.hosts;
    if (strict && holders > s.nics_per_leaf && holders % s.nics_per_leaf != 0) {
      throw InputError(
          f, "cluster.nics_per_leaf",
          std::to_string(s.nics_per_leaf) + " does not divide the " + std::to_string(holders) +
              (shape.nic_major ? " NICs" : " hosts of each rail"),
          "choose nics_per_leaf dividing " + std::to_string(holders) + " (every leaf full)");
    }
    leaves = shape.nic_major
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
    add_gpus_and_nvswitches(g, s);
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
};

} // namespace

ParamDecls clos_params() { return kClosParams; }

TopoGraph build_clos(const ClusterSpec &s, ClosShape shape) { return Clos(s, shape).build(); }

} // namespace fabricsim::models::builders
