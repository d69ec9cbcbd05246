#include "models/cluster.hpp"

#include <algorithm>

#include "engine/errors.hpp"
#include "engine/rng.hpp"

namespace fabricsim::models {

using engine::InputError;
using engine::LpId;

ClusterSpec default_cluster(std::uint32_t ranks) {
  ClusterSpec c;
  c.gpus_per_host = 8;
  c.hosts = std::max<std::uint32_t>(1, (ranks + c.gpus_per_host - 1) / c.gpus_per_host);
  c.fabric = FabricKind::kRailOptimized;
  c.nics_per_leaf = std::min<std::uint32_t>(c.hosts, 32);
  c.spines = c.nics_per_leaf;  // non-blocking: uplink capacity equals downlink capacity
  return c;
}

Topology::Topology(const ClusterSpec& spec) : spec_(spec) {
  const std::string& f = spec.source;
  if (spec.hosts == 0) throw InputError(f, "cluster.hosts", "must be >= 1", "set cluster.hosts");
  if (spec.gpus_per_host == 0) {
    throw InputError(f, "cluster.gpus_per_host", "must be >= 1", "set cluster.gpus_per_host");
  }
  if (spec.nics_per_leaf == 0) {
    throw InputError(f, "cluster.nics_per_leaf", "must be >= 1", "set cluster.nics_per_leaf");
  }
  if (spec.mtu_bytes == 0 || spec.nvlink_mtu_bytes == 0) {
    throw InputError(f, "cluster.mtu", "must be > 0 bytes", "use e.g. 4KiB");
  }
  gpus_ = spec.hosts * spec.gpus_per_host;
  if (spec.fabric == FabricKind::kRailOptimized) {
    leaves_ = ((spec.hosts + spec.nics_per_leaf - 1) / spec.nics_per_leaf) * spec.gpus_per_host;
  } else {
    leaves_ = (gpus_ + spec.nics_per_leaf - 1) / spec.nics_per_leaf;
  }
  spines_ = spec.spines;
  if (leaves_ > 1 && spines_ == 0) {
    throw InputError(f, "cluster.spines",
                     "is 0 but the fabric has " + std::to_string(leaves_) + " leaves",
                     "set cluster.spines >= 1 so leaves can reach each other");
  }
  if (leaves_ == 1) spines_ = 0;  // a single leaf needs no spine layer
  const std::uint32_t n = gpus_ + spec.hosts + leaves_ + spines_;
  kinds_.resize(n);
  ports_.resize(n);
  switch_seed_.resize(n);
  for (LpId i = 0; i < n; ++i) switch_seed_[i] = engine::mix64(spec.seed * 0x100000001B3ull + i);
  for (std::uint32_t g = 0; g < gpus_; ++g) {
    kinds_[g] = NodeKind::kGpu;
    ports_[g] = {Port{nvswitch_lp(host_of(g)), spec.nvlink_bps, spec.nvlink_latency_ps, spec.nvlink_mtu_bytes},
                 Port{leaf_lp(leaf_of(g)), spec.nic_bps, spec.nic_latency_ps, spec.mtu_bytes}};
  }
  for (std::uint32_t h = 0; h < spec.hosts; ++h) {
    const LpId s = nvswitch_lp(h);
    kinds_[s] = NodeKind::kNvSwitch;
    for (std::uint32_t j = 0; j < spec.gpus_per_host; ++j) {
      ports_[s].push_back(Port{h * spec.gpus_per_host + j, spec.nvlink_bps, spec.nvlink_latency_ps,
                               spec.nvlink_mtu_bytes});
    }
  }
  for (std::uint32_t l = 0; l < leaves_; ++l) {
    const LpId id = leaf_lp(l);
    kinds_[id] = NodeKind::kLeaf;
    // Down ports: unused slots point back at the leaf itself and are never routed to.
    ports_[id].assign(spec.nics_per_leaf, Port{id, spec.nic_bps, spec.nic_latency_ps, spec.mtu_bytes});
    for (std::uint32_t s = 0; s < spines_; ++s) {
      ports_[id].push_back(Port{spine_lp(s), spec.fabric_bps, spec.fabric_latency_ps, spec.mtu_bytes});
    }
  }
  for (std::uint32_t g = 0; g < gpus_; ++g) {
    ports_[leaf_lp(leaf_of(g))][leaf_port_of(g)].peer = g;
  }
  for (std::uint32_t s = 0; s < spines_; ++s) {
    const LpId id = spine_lp(s);
    kinds_[id] = NodeKind::kSpine;
    for (std::uint32_t l = 0; l < leaves_; ++l) {
      ports_[id].push_back(Port{leaf_lp(l), spec.fabric_bps, spec.fabric_latency_ps, spec.mtu_bytes});
    }
  }
  // Reverse port of every link: the k-th link from a to b pairs with the k-th link from b to a.
  std::size_t max_ports = 0;
  for (LpId a = 0; a < n; ++a) {
    max_ports = std::max(max_ports, ports_[a].size());
    for (std::uint32_t p = 0; p < ports_[a].size(); ++p) {
      Port& fwd = ports_[a][p];
      if (fwd.peer == a) continue;  // unused leaf slot
      const auto& back = ports_[fwd.peer];
      std::uint32_t k = 0;
      for (std::uint32_t q = 0; q < p; ++q) k += ports_[a][q].peer == fwd.peer;
      for (std::uint32_t q = 0; q < back.size(); ++q) {
        if (back[q].peer == a && k-- == 0) {
          fwd.peer_port = q;
          break;
        }
      }
    }
  }
  for (std::uint32_t s = 0; s < spines_; ++s) leaf_up_.push_back(spec.nics_per_leaf + s);
  port_id_.resize(max_ports);
  for (std::uint32_t p = 0; p < max_ports; ++p) port_id_[p] = p;
}

std::span<const std::uint32_t> Topology::candidates(LpId at, std::uint32_t dst) const {
  if (kinds_[at] == NodeKind::kLeaf && leaf_of(dst) != at - leaf_lp(0)) {
    return {leaf_up_.data(), leaf_up_.size()};
  }
  const std::uint32_t p = route(at, dst, 0);
  return {&port_id_[p], 1};
}

std::uint32_t Topology::leaf_of(std::uint32_t gpu) const {
  const std::uint32_t h = gpu / spec_.gpus_per_host;
  const std::uint32_t j = gpu % spec_.gpus_per_host;
  if (spec_.fabric == FabricKind::kRailOptimized) {
    return (h / spec_.nics_per_leaf) * spec_.gpus_per_host + j;
  }
  return gpu / spec_.nics_per_leaf;
}

std::uint32_t Topology::leaf_port_of(std::uint32_t gpu) const {
  if (spec_.fabric == FabricKind::kRailOptimized) {
    return (gpu / spec_.gpus_per_host) % spec_.nics_per_leaf;
  }
  return gpu % spec_.nics_per_leaf;
}

std::uint32_t Topology::hops(std::uint32_t a, std::uint32_t b) const {
  if (a == b) return 0;
  if (host_of(a) == host_of(b)) return 2;
  return leaf_of(a) == leaf_of(b) ? 2 : 4;
}

std::uint32_t Topology::route(LpId at, std::uint32_t dst, std::uint64_t flow_hash) const {
  switch (kinds_[at]) {
    case NodeKind::kGpu:
      return host_of(at) == host_of(dst) ? 0u : 1u;
    case NodeKind::kNvSwitch:
      return dst % spec_.gpus_per_host;
    case NodeKind::kLeaf: {
      const std::uint32_t leaf = at - leaf_lp(0);
      if (leaf_of(dst) == leaf) return leaf_port_of(dst);
      const std::uint64_t h = engine::mix64(flow_hash ^ switch_seed_[at]);
      return spec_.nics_per_leaf + static_cast<std::uint32_t>(h % spines_);
    }
    case NodeKind::kSpine:
      return leaf_of(dst);
  }
  return 0;
}

std::vector<Topology::Link> Topology::links() const {
  std::vector<Link> out;
  for (LpId a = 0; a < num_nodes(); ++a) {
    for (const Port& p : ports_[a]) {
      if (p.peer > a) out.push_back(Link{a, p.peer, p.latency_ps});
    }
  }
  return out;
}

std::string Topology::describe(LpId n) const {
  switch (kinds_[n]) {
    case NodeKind::kGpu: return "gpu " + std::to_string(n);
    case NodeKind::kNvSwitch: return "nvswitch " + std::to_string(n - gpus_);
    case NodeKind::kLeaf: return "leaf " + std::to_string(n - leaf_lp(0));
    case NodeKind::kSpine: return "spine " + std::to_string(n - spine_lp(0));
  }
  return "lp " + std::to_string(n);
}

}  // namespace fabricsim::models
