#include "models/topology/cluster.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_map>

#include "engine/errors.hpp"
#include "engine/rng.hpp"

namespace fabricsim::models {

using engine::InputError;
using engine::InternalError;
using engine::LpId;

const char *node_kind_name(NodeKind k) {
  switch (k) {
  case NodeKind::kGpu:
    return "gpu";
  case NodeKind::kNvSwitch:
    return "nvswitch";
  case NodeKind::kLeaf:
    return "leaf";
  case NodeKind::kSpine:
    return "spine";
  case NodeKind::kCore:
    return "core";
  }
  return "?";
}

ClusterSpec default_cluster(std::uint32_t ranks) {
  ClusterSpec c;
  c.gpus_per_host = 8;
  c.hosts = std::max<std::uint32_t>(1, (ranks + c.gpus_per_host - 1) / c.gpus_per_host);
  c.fabric = FabricKind::kRailOptimized;
  c.nics_per_leaf = std::min<std::uint32_t>(c.hosts, 32);
  c.spines = c.nics_per_leaf; // non-blocking: uplink capacity equals downlink capacity
  return c;
}

Topology::Topology(const ClusterSpec &spec) : spec_(spec) {
  TopoGraph g = build_graph(spec);
  if (topology_builder(spec.fabric).fixes_gpus)
    spec_.gpus_per_host = std::max<std::uint32_t>(1, g.gpus_per_host);
  finish(std::move(g));
}

Topology::Topology(const ClusterSpec &spec, TopoGraph graph) : spec_(spec) {
  if (graph.gpus_per_host)
    spec_.gpus_per_host = graph.gpus_per_host;
  finish(std::move(graph));
}

void Topology::finish(TopoGraph g) {
  const std::string &f = spec_.fabric == FabricKind::kFile && !spec_.topology_file.empty()
                             ? spec_.topology_file
                             : spec_.source;
  const auto n = static_cast<std::uint32_t>(g.kind.size());
  if (g.tier.size() != n)
    throw InternalError("TopoGraph: kind and tier sizes differ");
  kinds_ = std::move(g.kind);
  tiers_ = std::move(g.tier);
  group_ = std::move(g.group);
  groups_ = 0;
  if (!group_.empty()) {
    if (group_.size() != n)
      throw InternalError("TopoGraph: kind and group sizes differ");
    for (LpId i = 0; i < n; ++i) {
      const bool sw = kinds_[i] != NodeKind::kGpu && kinds_[i] != NodeKind::kNvSwitch;
      if (sw != (group_[i] != TopoGraph::kNoGroup))
        throw InternalError("TopoGraph: every Ethernet switch, and only they, need a group");
      if (sw)
        groups_ = std::max(groups_, group_[i] + 1);
    }
  }
  for (LpId i = 0; i < n; ++i) {
    const int k = static_cast<int>(kinds_[i]);
    if (i > 0 && (kinds_[i] < kinds_[i - 1] || (k >= 2 && tiers_[i] < tiers_[i - 1]))) {
      throw InternalError("TopoGraph: nodes not grouped by kind and tier at node " +
                          std::to_string(i));
    }
    if (count_[k]++ == 0)
      first_[k] = i;
  }
  for (int k = 1; k < 5; ++k) {
    if (count_[k] == 0)
      first_[k] = k == 0 ? 0 : first_[k - 1] + count_[k - 1];
  }
  gpus_ = count_[0];
  if (gpus_ == 0)
    throw InputError(f, "cluster.topology", "the topology has no GPU", "add GPU nodes");
  spec_.hosts = std::max<std::uint32_t>(1, (gpus_ + spec_.gpus_per_host - 1) / spec_.gpus_per_host);

  // cluster.degraded_nics: the GPU's NIC links (GPU <-> Ethernet switch) run at the lower rate.
  for (const auto &[gpu, rate] : spec_.degraded_nics) {
    const std::string &df = spec_.degraded_nics_file.empty() ? f : spec_.degraded_nics_file;
    if (gpu >= gpus_)
      throw InputError(df, "cluster.degraded_nics", "GPU " + std::to_string(gpu) + " is not in this " +
                           std::to_string(gpus_) + "-GPU cluster", "give GPUs 0.." + std::to_string(gpus_ - 1));
    bool any = false;
    for (auto &l : g.links) {
      const LpId other = l.a == gpu ? l.b : l.b == gpu ? l.a : n;
      if (other >= n || kinds_[other] == NodeKind::kGpu || kinds_[other] == NodeKind::kNvSwitch)
        continue;
      if (rate >= l.rate_bps)
        throw InputError(df, "cluster.degraded_nics", "the rate for GPU " + std::to_string(gpu) + " is not below its NIC's " +
                             std::to_string(l.rate_bps) + " bps", "give a lower rate, e.g. " + std::to_string(gpu) + ":200Gbps");
      l.rate_bps = rate;
      any = true;
    }
    if (!any)
      throw InputError(df, "cluster.degraded_nics", "GPU " + std::to_string(gpu) + " has no NIC (no link to an Ethernet switch)",
                       "name GPUs with a NIC, or drop the entry");
  }

  // Ports in link order, each with its reverse index; then sorted by peer (stable).
  ports_.assign(n, {});
  for (const auto &l : g.links) {
    if (l.a >= n || l.b >= n || l.a == l.b)
      throw InternalError("TopoGraph: bad link endpoints");
    const auto pa = static_cast<std::uint32_t>(ports_[l.a].size());
    const auto pb = static_cast<std::uint32_t>(ports_[l.b].size());
    ports_[l.a].push_back(Port{l.b, l.rate_bps, l.latency_ps, l.mtu_bytes, pb});
    ports_[l.b].push_back(Port{l.a, l.rate_bps, l.latency_ps, l.mtu_bytes, pa});
  }
  std::vector<std::uint32_t> off(n + 1, 0), newpos;
  for (LpId a = 0; a < n; ++a)
    off[a + 1] = off[a] + static_cast<std::uint32_t>(ports_[a].size());
  newpos.resize(off[n]);
  for (LpId a = 0; a < n; ++a) {
    std::vector<std::uint32_t> idx(ports_[a].size());
    std::iota(idx.begin(), idx.end(), 0u);
    std::stable_sort(idx.begin(), idx.end(), [&](std::uint32_t x, std::uint32_t y) {
      return ports_[a][x].peer < ports_[a][y].peer;
    });
    for (std::uint32_t i = 0; i < idx.size(); ++i)
      newpos[off[a] + idx[i]] = i;
  }
  for (LpId a = 0; a < n; ++a) {
    std::vector<Port> sorted(ports_[a].size());
    for (std::uint32_t i = 0; i < ports_[a].size(); ++i) {
      Port p = ports_[a][i];
      p.peer_port = newpos[off[p.peer] + p.peer_port];
      sorted[newpos[off[a] + i]] = p;
    }
    ports_[a] = std::move(sorted);
  }

  switch_seed_.resize(n);
  for (LpId i = 0; i < n; ++i)
    switch_seed_[i] = engine::mix64(spec_.seed * 0x100000001B3ull + i);
  std::size_t max_ports = 0;
  for (const auto &p : ports_)
    max_ports = std::max(max_ports, p.size());
  port_id_.resize(max_ports);
  std::iota(port_id_.begin(), port_id_.end(), 0u);

  // Scale-up domains: one per NVSwitch, then one per GPU without an NVSwitch.
  const LpId nvs0 = first_lp(NodeKind::kNvSwitch);
  domain_.assign(gpus_, kNoLp);
  nvl_port_.assign(gpus_, 0);
  nic_first_.assign(gpus_, 0);
  domain_switch_.clear();
  for (std::uint32_t s = 0; s < count(NodeKind::kNvSwitch); ++s)
    domain_switch_.push_back(nvs0 + s);
  for (std::uint32_t s = 0; s < count(NodeKind::kNvSwitch); ++s) {
    const LpId id = nvs0 + s;
    for (std::uint32_t p = 0; p < ports_[id].size(); ++p) {
      const LpId peer = ports_[id][p].peer;
      if (kinds_[peer] != NodeKind::kGpu) {
        throw InputError(f, "cluster.topology", describe(id) + " links to " + describe(peer),
                         "an NVSwitch links only to the GPUs of its domain");
      }
      if (domain_[peer] != kNoLp && domain_[peer] != s) {
        throw InputError(f, "cluster.topology", describe(peer) + " links to two NVSwitches",
                         "give each GPU one scale-up switch");
      }
      if (domain_[peer] == kNoLp)
        nvl_port_[peer] = p;
      domain_[peer] = s;
    }
  }
  att_off_.assign(gpus_ + 1, 0);
  att_sw_.clear();
  att_port_.clear();
  for (std::uint32_t gpu = 0; gpu < gpus_; ++gpu) {
    if (domain_[gpu] == kNoLp) {
      domain_[gpu] = static_cast<std::uint32_t>(domain_switch_.size());
      domain_switch_.push_back(kNoLp);
    }
    std::uint8_t nvl = 0;
    for (const Port &p : ports_[gpu]) {
      if (kinds_[p.peer] == NodeKind::kGpu) {
        throw InputError(f, "cluster.topology", describe(gpu) + " links to " + describe(p.peer),
                         "GPUs link only to an NVSwitch and to Ethernet switches (NICs)");
      }
      if (kinds_[p.peer] == NodeKind::kNvSwitch) {
        ++nvl;
      } else {
        att_sw_.push_back(p.peer);
        att_port_.push_back(p.peer_port);
      }
    }
    nic_first_[gpu] = nvl;
    att_off_[gpu + 1] = static_cast<std::uint32_t>(att_sw_.size());
    if (att_off_[gpu + 1] == att_off_[gpu]) {
      throw InputError(f, "cluster.topology", describe(gpu) + " has no NIC link",
                       "link every GPU to at least one Ethernet switch");
    }
  }
  build_routes();
}

void Topology::build_routes() {
  const auto n = num_nodes();
  eth_first_ = first_lp(NodeKind::kLeaf);
  eth_count_ = n - eth_first_;
  // Classes: GPUs with the same first NIC port and the same attached switches share routes.
  std::map<std::vector<std::uint32_t>, std::uint32_t> cls;
  std::vector<std::uint32_t> rep; // a GPU of each class
  class_of_.resize(gpus_);
  bool multi_homed = false;
  for (std::uint32_t gpu = 0; gpu < gpus_; ++gpu) {
    std::vector<std::uint32_t> key(att_sw_.begin() + att_off_[gpu],
                                   att_sw_.begin() + att_off_[gpu + 1]);
    multi_homed |= key.size() > 1;
    key.push_back(nic_first_[gpu]);
    auto [it, fresh] = cls.emplace(std::move(key), static_cast<std::uint32_t>(rep.size()));
    if (fresh)
      rep.push_back(gpu);
    class_of_[gpu] = it->second;
  }
  classes_ = static_cast<std::uint32_t>(rep.size());
  const std::size_t cells = static_cast<std::size_t>(classes_) * eth_count_;
  dist_.assign(cells, 0xFFFF);
  cand_off_.assign(cells, 0);
  pool_.clear();
  std::unordered_map<std::string, std::uint32_t> interned;
  auto intern_list = [&](const std::vector<std::uint32_t> &list) {
    std::string key(reinterpret_cast<const char *>(list.data()),
                    list.size() * sizeof(std::uint32_t));
    auto [it, fresh] = interned.emplace(std::move(key), static_cast<std::uint32_t>(pool_.size()));
    if (fresh) {
      pool_.push_back(static_cast<std::uint32_t>(list.size()));
      pool_.insert(pool_.end(), list.begin(), list.end());
    }
    return it->second;
  };
  max_switch_ecmp_ = 0;
  std::vector<std::uint32_t> queue, next;
  queue.reserve(eth_count_);
  // Group-minimal routes (TopoGraph::group): the switches of each group, and whether a hop from
  // switch e to switch x may lie on a route to a GPU attached in group `to`.
  std::vector<std::vector<std::uint32_t>> members(groups_);
  for (std::uint32_t e = 0; e < eth_count_ && groups_ > 0; ++e)
    members[group_[eth_first_ + e]].push_back(e);
  auto allowed = [&](std::uint32_t e, std::uint32_t x, std::uint32_t to) {
    return groups_ == 0 || group_[eth_first_ + x] == to ||
           group_[eth_first_ + x] == group_[eth_first_ + e];
  };
  for (std::uint32_t c = 0; c < classes_; ++c) {
    std::uint16_t *dist = &dist_[static_cast<std::size_t>(c) * eth_count_];
    queue.clear();
    const std::uint32_t g = rep[c];
    const std::uint32_t to = groups_ > 0 ? group_[att_sw_[att_off_[g]]] : 0;
    if (groups_ > 0) {
      group_distances(g, to, members, dist);
    } else {
    for (std::uint32_t i = att_off_[g]; i < att_off_[g + 1]; ++i) {
      const std::uint32_t e = att_sw_[i] - eth_first_;
      if (dist[e] != 0) {
        dist[e] = 0;
        queue.push_back(e);
      }
    }
    for (std::size_t head = 0; head < queue.size(); ++head) {
      const std::uint32_t e = queue[head];
      for (const Port &p : ports_[eth_first_ + e]) {
        if (p.peer < eth_first_)
          continue; // GPUs never forward
        const std::uint32_t x = p.peer - eth_first_;
        if (dist[x] == 0xFFFF) {
          if (dist[e] + 1 >= 0xFFFF)
            throw InputError(spec_.source, "cluster.topology", "diameter above 65534 hops", "");
          dist[x] = static_cast<std::uint16_t>(dist[e] + 1);
          queue.push_back(x);
        }
      }
    }
    }
    for (std::uint32_t e = 0; e < eth_count_; ++e) {
      if (dist[e] == 0 || dist[e] == 0xFFFF)
        continue;
      next.clear();
      const auto &ps = ports_[eth_first_ + e];
      for (std::uint32_t p = 0; p < ps.size(); ++p) {
        if (ps[p].peer >= eth_first_ && dist[ps[p].peer - eth_first_] + 1 == dist[e] &&
            allowed(e, ps[p].peer - eth_first_, to))
          next.push_back(p);
      }
      max_switch_ecmp_ = std::max(max_switch_ecmp_, static_cast<std::uint32_t>(next.size()));
      cand_off_[static_cast<std::size_t>(c) * eth_count_ + e] = intern_list(next);
    }
  }
  // Multi-homed GPUs (dual-plane, files): the NIC ports that start a shortest path, per class pair.
  gpu_cand_off_.clear();
  if (multi_homed) {
    gpu_cand_off_.assign(static_cast<std::size_t>(classes_) * classes_, 0);
    for (std::uint32_t cs = 0; cs < classes_; ++cs) {
      const std::uint32_t g = rep[cs];
      for (std::uint32_t cd = 0; cd < classes_; ++cd) {
        const std::uint16_t *dist = &dist_[static_cast<std::size_t>(cd) * eth_count_];
        std::uint32_t best = 0xFFFF;
        for (std::uint32_t p = nic_first_[g]; p < ports_[g].size(); ++p) {
          best = std::min<std::uint32_t>(best, dist[ports_[g][p].peer - eth_first_]);
        }
        next.clear();
        for (std::uint32_t p = nic_first_[g]; p < ports_[g].size() && best != 0xFFFF; ++p) {
          if (dist[ports_[g][p].peer - eth_first_] == best)
            next.push_back(p);
        }
        gpu_cand_off_[static_cast<std::size_t>(cs) * classes_ + cd] = intern_list(next);
      }
    }
  }
}

void Topology::group_distances(std::uint32_t gpu, std::uint32_t to,
                               const std::vector<std::vector<std::uint32_t>> &members,
                               std::uint16_t *dist) const {
  // Inside the destination group: BFS from the GPU's switches over that group's switches.
  std::vector<std::uint32_t> queue;
  for (std::uint32_t i = att_off_[gpu]; i < att_off_[gpu + 1]; ++i) {
    const std::uint32_t e = att_sw_[i] - eth_first_;
    if (group_[att_sw_[i]] != to)
      throw InternalError("Topology: a GPU's NICs attach in two routing groups");
    if (dist[e] != 0) {
      dist[e] = 0;
      queue.push_back(e);
    }
  }
  for (std::size_t head = 0; head < queue.size(); ++head) {
    const std::uint32_t e = queue[head];
    for (const Port &p : ports_[eth_first_ + e]) {
      if (p.peer < eth_first_ || group_[p.peer] != to)
        continue;
      const std::uint32_t x = p.peer - eth_first_;
      if (dist[x] == 0xFFFF) {
        dist[x] = static_cast<std::uint16_t>(dist[e] + 1);
        queue.push_back(x);
      }
    }
  }
  // Every other group I: shortest paths over I's switches into the destination group, relaxed
  // until stable (unit hops; group sizes are small).
  for (std::uint32_t grp = 0; grp < groups_; ++grp) {
    if (grp == to)
      continue;
    for (bool changed = true; changed;) {
      changed = false;
      for (std::uint32_t e : members[grp]) {
        for (const Port &p : ports_[eth_first_ + e]) {
          if (p.peer < eth_first_ || (group_[p.peer] != to && group_[p.peer] != grp))
            continue;
          const std::uint32_t d = dist[p.peer - eth_first_];
          if (d != 0xFFFF && d + 1 < dist[e]) {
            if (d + 1 >= 0xFFFF)
              throw InputError(spec_.source, "cluster.topology", "diameter above 65534 hops", "");
            dist[e] = static_cast<std::uint16_t>(d + 1);
            changed = true;
          }
        }
      }
    }
  }
}

std::span<const std::uint32_t> Topology::candidates(LpId at, std::uint32_t dst) const {
  switch (kinds_[at]) {
  case NodeKind::kGpu: {
    if (domain_[at] == domain_[dst] && domain_switch_[domain_[at]] != kNoLp && at != dst)
      return {&port_id_[0], 1};
    const std::uint32_t cd = class_of_[dst];
    if (!gpu_cand_off_.empty()) {
      const std::uint32_t o =
          gpu_cand_off_[static_cast<std::size_t>(class_of_[at]) * classes_ + cd];
      return {&pool_[o + 1], pool_[o]};
    }
    const std::uint32_t p = nic_first_[at];
    const std::uint32_t e = ports_[at][p].peer - eth_first_;
    if (dist_[static_cast<std::size_t>(cd) * eth_count_ + e] == 0xFFFF)
      return {};
    return {&port_id_[p], 1};
  }
  case NodeKind::kNvSwitch:
    if (domain_switch_[domain_[dst]] != at)
      return {};
    return {&port_id_[nvl_port_[dst]], 1};
  default: {
    const std::size_t cell =
        static_cast<std::size_t>(class_of_[dst]) * eth_count_ + (at - eth_first_);
    if (dist_[cell] == 0) {
      std::uint32_t i = att_off_[dst], j = att_off_[dst + 1];
      while (i < j && att_sw_[i] != at)
        ++i;
      std::uint32_t k = i;
      while (k < j && att_sw_[k] == at)
        ++k;
      return {att_port_.data() + i, k - i};
    }
    if (dist_[cell] == 0xFFFF)
      return {};
    const std::uint32_t o = cand_off_[cell];
    return {&pool_[o + 1], pool_[o]};
  }
  }
}

void Topology::no_path(LpId at, std::uint32_t dst) const {
  throw InputError(
      spec_.source, "cluster.topology",
      std::string("no network path from ") + describe(at) + " to gpu " + std::to_string(dst) +
          " in the " + fabric_kind_name(spec_.fabric) + " fabric (" +
          (spec_.fabric == FabricKind::kRailOnly ? "rails do not interconnect" : "disconnected") +
          ")",
      "keep that traffic inside an NVLink domain (cross-rail traffic must use NVLink first, e.g. "
      "NCCL PXN) or choose a fabric that connects them (fabricsim topo SPEC shows unreachable "
      "pairs)");
}

std::uint32_t Topology::leaf_of(std::uint32_t gpu) const {
  return att_sw_[att_off_[gpu]] - first_lp(NodeKind::kLeaf);
}

std::uint32_t Topology::leaf_port_of(std::uint32_t gpu) const { return att_port_[att_off_[gpu]]; }

std::uint32_t Topology::fabric_hops(std::uint32_t a, std::uint32_t b) const {
  if (a == b)
    return 0;
  const std::uint16_t *dist = &dist_[static_cast<std::size_t>(class_of_[b]) * eth_count_];
  std::uint32_t best = 0xFFFF;
  for (std::uint32_t i = att_off_[a]; i < att_off_[a + 1]; ++i) {
    best = std::min<std::uint32_t>(best, dist[att_sw_[i] - eth_first_]);
  }
  return best == 0xFFFF ? kUnreachable : best + 2;
}

std::uint32_t Topology::hops(std::uint32_t a, std::uint32_t b) const {
  if (a == b)
    return 0;
  if (same_scaleup_domain(a, b))
    return 2;
  return fabric_hops(a, b);
}

std::size_t Topology::routing_bytes() const {
  return dist_.size() * sizeof(std::uint16_t) + cand_off_.size() * 4 + gpu_cand_off_.size() * 4 +
         pool_.size() * 4 +
         (att_off_.size() + att_sw_.size() + att_port_.size() + class_of_.size()) * 4;
}

std::vector<Topology::Link> Topology::links() const {
  std::vector<Link> out;
  for (LpId a = 0; a < num_nodes(); ++a) {
    for (const Port &p : ports_[a]) {
      if (p.peer > a)
        out.push_back(Link{a, p.peer, p.latency_ps});
    }
  }
  return out;
}

std::string Topology::describe(LpId n) const {
  if (n >= num_nodes())
    return "lp " + std::to_string(n);
  const NodeKind k = kinds_[n];
  return std::string(node_kind_name(k)) + " " + std::to_string(n - first_lp(k));
}

std::string Topology::node_name(LpId n) const {
  const NodeKind k = kinds_[n];
  return std::string(node_kind_name(k)) + std::to_string(n - first_lp(k));
}

} // namespace fabricsim::models
