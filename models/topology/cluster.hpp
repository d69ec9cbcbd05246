#pragma once
/// @file cluster.hpp
/// Cluster description (ClusterSpec) and the built topology (Topology): GPUs in scale-up
/// (NVLink) domains behind one NVSwitch each, NICs into an Ethernet fabric of any shape
/// (the kinds of models/topology/registry.hpp: Clos fabrics, grids, dragonflies, or a topology
/// file), with a shortest-path ECMP routing table. docs/topology.md describes the
/// builders, the file formats, the routing and the limits.
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/event.hpp"
#include "engine/rng.hpp"
#include "engine/time.hpp"
#include "models/topology/registry.hpp"

namespace fabricsim::models {

/// Name of a fabric kind as cluster.topology spells it ("rail_optimized", ...).
const char *fabric_kind_name(FabricKind k);

/// The cluster a run simulates. Builders validate it (engine::InputError); see docs/config.md
/// and docs/topology.md. Rates are bits/s per direction, latencies picoseconds, sizes bytes.
struct ClusterSpec {
  std::uint32_t hosts = 1;         ///< number of hosts (servers)
  std::uint32_t gpus_per_host = 8; ///< GPUs per host, one NIC each
  FabricKind fabric = FabricKind::kRailOptimized;
  std::uint32_t nics_per_leaf = 32;         ///< leaf downlinks (NIC ports per leaf)
  std::uint32_t spines = 32;                ///< spines (per pod, per plane, per rail for rail_only)
  std::uint64_t nic_bps = 400'000'000'000;  ///< NIC rate (bits/s); dual-plane: split over 2 ports
  engine::SimTime nic_latency_ps = 500'000; ///< NIC <-> leaf propagation delay
  std::uint64_t fabric_bps = 400'000'000'000;  ///< switch <-> switch (leaf-spine, torus) link rate
  engine::SimTime fabric_latency_ps = 500'000; ///< switch <-> switch propagation delay
  /// GPU <-> NVSwitch rate per direction. Default: H100 NVLink4, 900 GB/s bidirectional =
  /// 450 GB/s = 3.6 Tb/s per direction (NVIDIA H100 datasheet).
  std::uint64_t nvlink_bps = 3'600'000'000'000;
  /// Share of nvlink_bps that carries data (0 < x <= 1): NVLink links serialize at
  /// nvlink_bps x nvlink_efficiency. The spec default (cluster.nvlink_efficiency: auto) is NCCL's
  /// achievable per-link bandwidth over the link's signalling rate, NCCL 2.28 src/graph/topo.h
  /// (SM80_NVLINK_BW 20.0 / SM90_NVLINK_BW 20.6 / SM100_NVLINK_BW 40.1 GB/s per link against 25 /
  /// 25 / 50 GB/s per NVLink3/4/5 link and direction: 0.80 / 0.824 / 0.802); 1 keeps the raw rate.
  double nvlink_efficiency = 1.0;
  engine::SimTime nvlink_latency_ps = 100'000; ///< GPU <-> NVSwitch latency
  /// NVLink SHARP (NVLS): the rate at which one GPU moves multimem (ld_reduce / st) traffic to
  /// its NVSwitch, per direction; NVLS packets serialize at min(this, nvlink_bps). Default
  /// 306 GB/s = 2.448 Tb/s, derived from NCCL 2.28's NVLS model for 8 x H100 (tuning.cc: busBw
  /// = 8 heads x min(40 GB/s x nvlsEfficiency 0.85 x 7/8 x 2, 60) = 476 GB/s, algBw = 476 x 8/14
  /// = 272 GB/s, and an NVLS AllReduce moves (1 + 1/8) x algBw per port and direction). Not fitted
  /// to nccl-tests data (docs/simccl.md compares with it).
  std::uint64_t nvls_bps = 2'448'000'000'000;
  /// Network packet payload (bytes), kMinMtuBytes..kMaxMtuBytes.
  std::uint32_t mtu_bytes = 4096;
  /// NVLink transfer unit (largest; docs/fabric.md), kMinMtuBytes..kMaxMtuBytes.
  std::uint32_t nvlink_mtu_bytes = 4096;
  /// Smallest cluster.mtu / cluster.nvlink_mtu (bytes): 256 B, the smallest InfiniBand path MTU,
  /// which RoCEv2 uses (IBTA InfiniBand Architecture Specification Vol. 1, PMTU 256/512/1024/
  /// 2048/4096; NVLink packets also carry at most 256 B of data). Below it no real fabric runs,
  /// and the packet count (one event chain per packet) grows so large that a run seems to hang
  /// (cluster.mtu=1 cuts every byte into a packet).
  static constexpr std::uint32_t kMinMtuBytes = 256;
  /// Largest cluster.mtu / cluster.nvlink_mtu (bytes): 16 MiB. Real frames stop at Ethernet jumbo
  /// frames of 9,000-9,216 B; larger units are a coarse-graining device of the packet rung (whole
  /// messages store-and-forward), used up to 16 MiB by docs/validation_iterations.md and
  /// tests/generators. Coarser than that, the flow rung (sim.fidelity: flow) is the model to use.
  static constexpr std::uint32_t kMaxMtuBytes = 16u << 20;
  /// Most ports of one generated Ethernet switch (a leaf's nics_per_leaf + one uplink per spine,
  /// a torus/mesh switch's NIC ports): 4,096, four times the largest single-chip switches (a
  /// 102.4 Tb/s chip of 100G lanes, e.g. Broadcom Tomahawk 6, has 1,024 ports; 51.2 Tb/s
  /// Tomahawk 5 512), leaving room for a modular chassis modelled as one switch. More is not a
  /// switch: cluster.nics_per_leaf=100000 also made 100,000 auto spines. Large fabrics grow in
  /// leaves, spines per pod and pods, which stay unbounded here.
  static constexpr std::uint32_t kMaxSwitchPorts = 4096;
  /// NVSwitches forward cut-through (egress starts at a unit's first bit) instead of
  /// store-and-forward; the flow and analytical rungs still assume store-and-forward.
  bool nvswitch_cut_through = false;
  std::uint64_t seed = 1;                      ///< ECMP hash seeds derive from it
  std::string source = "<spec>";               ///< file the spec came from (for error messages)
  /// cluster.degraded_nics: (GPU, rate in bits/s) pairs. Every link from that GPU to an Ethernet
  /// switch (its NIC ports) runs at the rate, in both directions, for the whole run (a NIC that
  /// trained at a lower speed or runs throttled). Applied when the topology is built; the rate
  /// must lie below the link's. simccl plans with the configured cluster.nic_bandwidth.
  std::vector<std::pair<std::uint32_t, std::uint64_t>> degraded_nics;
  std::string degraded_nics_file;  ///< where cluster.degraded_nics came from (error messages)

  // --- general topologies (docs/topology.md) ---
  std::uint32_t tiers = 2;    ///< Clos tiers above the NICs: 2 (leaf, spine) or 3 (+ core)
  std::uint32_t pods = 1;     ///< tiers = 3: pods (each with its own spines) under the core
  double oversub_leaf = 0;    ///< leaf down:up capacity ratio (0 = not given: `spines` decides)
  double oversub_spine = 0;   ///< spine down:up ratio toward the core (0 = non-blocking)
  std::uint64_t core_bps = 0; ///< spine <-> core rate (0 = fabric_bps)
  engine::SimTime core_latency_ps = 0; ///< spine <-> core latency (0 = fabric_latency_ps)
  bool dual_plane = false;         ///< each NIC has 2 ports (nic_bps/2 each) into 2 planes (HPN)
  std::uint32_t nvlink_domain = 0; ///< GPUs per scale-up domain (0 = gpus_per_host)
  std::vector<std::uint32_t> dims; ///< torus/mesh switch grid, e.g. {4, 4} (first = slowest)
  std::string topology_file;       ///< fabric == kFile: path of the topology file
  /// A builder's own keys (those under cluster.<kind>., e.g. "cluster.dragonfly.a") as written,
  /// by dotted path; the builder parses and checks them (models/topology/builders/).
  std::map<std::string, std::string> topology_params;

  std::uint32_t gpus() const { return hosts * gpus_per_host; }
  /// GPUs per scale-up domain (nvlink_domain, or gpus_per_host when 0).
  std::uint32_t domain_size() const { return nvlink_domain ? nvlink_domain : gpus_per_host; }
};

/// Default cluster sized to `ranks` GPUs: H100-class hosts of 8 GPUs behind an NVSwitch, one
/// 400 Gb/s NIC per GPU, non-blocking rail-optimized two-tier fabric (spines = nics_per_leaf).
ClusterSpec default_cluster(std::uint32_t ranks);

/// Kind of a topology node (each node is one LP). LP ids are grouped by kind in this order.
enum class NodeKind : std::uint8_t {
  kGpu,      ///< tier 0: a GPU with its NIC port(s); never forwards packets for others
  kNvSwitch, ///< tier 0: the scale-up (NVLink) switch of one domain
  kLeaf,     ///< tier 1: leaf / ToR (also every torus/mesh switch)
  kSpine,    ///< tier 2: spine / aggregation
  kCore,     ///< tier >= 3: core
};

/// Name of a node kind ("gpu", "nvswitch", "leaf", "spine", "core").
const char *node_kind_name(NodeKind k);

/// One directed port of a node: where its egress link goes.
struct Port {
  engine::LpId peer = 0;          ///< LP at the far end
  std::uint64_t rate_bps = 0;     ///< link rate
  engine::SimTime latency_ps = 0; ///< propagation delay
  std::uint32_t mtu_bytes = 0;    ///< packet payload size on this link
  std::uint32_t peer_port = 0;    ///< index of this link's port at `peer` (the reverse direction)
};

/// A topology as plain data, before routing: nodes (kind, tier) and undirected links. Builders
/// and file readers produce it; Topology consumes it. Nodes must be grouped by kind in
/// NodeKind order (GPUs first, so GPU i == LP i == rank i) and switches sorted by tier.
struct TopoGraph {
  /// One undirected link (a full-duplex cable: one port at each end).
  struct Link {
    engine::LpId a = 0, b = 0;
    std::uint64_t rate_bps = 0;     ///< per direction
    engine::SimTime latency_ps = 0; ///< propagation delay
    std::uint32_t mtu_bytes = 0;    ///< packet payload
  };
  std::vector<NodeKind> kind;      ///< per node
  std::vector<std::uint8_t> tier;  ///< per node: 0 GPU/NVSwitch, 1 leaf, 2 spine, 3+ core
  std::vector<Link> links;         ///< in the order ports are created
  /// Per node, optional (empty = none): the routing group of each Ethernet switch (kNoGroup for
  /// GPUs and NVSwitches). With groups, routes are group-minimal: a packet at a switch of group I
  /// bound for a GPU attached in group J only uses switches of I and J (dragonfly minimal
  /// routing: local, global, local hops), and `fabricsim topo` cuts the groups in halves for the
  /// bisection. Every Ethernet switch then has a group and each GPU's NICs attach in one group.
  std::vector<std::uint32_t> group;
  static constexpr std::uint32_t kNoGroup = 0xFFFFFFFFu; ///< group of a non-switch node
  std::uint32_t gpus_per_host = 0; ///< for ClusterSpec::gpus_per_host of file topologies

  /// Appends a node. @returns its LP id.
  engine::LpId add(NodeKind k, std::uint8_t t) {
    kind.push_back(k);
    tier.push_back(t);
    return static_cast<engine::LpId>(kind.size() - 1);
  }
};

/// Builds the graph of the spec's kind with its registered builder (models/topology/registry.hpp).
/// @throws engine::InputError on inconsistent sizes (field named, with a fix) or a bad topology
/// file.
TopoGraph build_graph(const ClusterSpec &spec);

/// The built topology with its routing table.
///
/// Port order: every node's ports are sorted by peer LP id (parallel links keep their order),
/// so a GPU's port 0 is its NVLink port when its domain has > 1 GPU, then its NIC port(s).
/// Routing: per Ethernet switch and destination class (GPUs whose NICs attach to the same set
/// of switches), the equal-cost next hops on shortest paths through the switches (BFS).
/// Memory: 6 bytes per (class, switch) + 12 bytes per GPU NIC port + the interned next-hop lists.
class Topology {
public:
  /// Builds from a spec (generated, or read from spec.topology_file).
  /// @throws engine::InputError on inconsistent sizes or a bad topology file.
  explicit Topology(const ClusterSpec &spec);
  /// Builds from an explicit graph (file readers, tests). `spec` supplies seed, MTUs and source.
  Topology(const ClusterSpec &spec, TopoGraph graph);

  const ClusterSpec &spec() const { return spec_; }
  std::uint32_t num_nodes() const { return static_cast<std::uint32_t>(kinds_.size()); }
  /// GPUs: LP ids [0, num_gpus()).
  std::uint32_t num_gpus() const { return gpus_; }
  NodeKind kind(engine::LpId n) const { return kinds_[n]; }
  /// 0 = GPU or NVSwitch, 1 = leaf/ToR, 2 = spine/aggregation, 3 = core (higher in files).
  std::uint32_t tier(engine::LpId n) const { return tiers_[n]; }
  const std::vector<Port> &ports(engine::LpId n) const { return ports_[n]; }
  /// Nodes of one kind: LP ids [first_lp(k), first_lp(k) + count(k)).
  std::uint32_t count(NodeKind k) const { return count_[static_cast<int>(k)]; }
  engine::LpId first_lp(NodeKind k) const { return first_[static_cast<int>(k)]; }
  std::uint32_t num_leaves() const { return count(NodeKind::kLeaf); }
  std::uint32_t num_spines() const { return count(NodeKind::kSpine); }
  std::uint32_t num_cores() const { return count(NodeKind::kCore); }
  engine::LpId leaf_lp(std::uint32_t leaf) const { return first_lp(NodeKind::kLeaf) + leaf; }
  engine::LpId spine_lp(std::uint32_t s) const { return first_lp(NodeKind::kSpine) + s; }
  engine::LpId core_lp(std::uint32_t c) const { return first_lp(NodeKind::kCore) + c; }

  /// True when GPUs a and b share an NVLink domain of > 1 GPU (their traffic uses NVLink).
  bool same_scaleup_domain(std::uint32_t a, std::uint32_t b) const {
    return domain_[a] == domain_[b] && domain_switch_[domain_[a]] != kNoLp;
  }
  /// Scale-up domain index of a GPU; domains with > 1 GPU own one NVSwitch LP.
  std::uint32_t domain_of(std::uint32_t gpu) const { return domain_[gpu]; }
  std::uint32_t num_domains() const { return static_cast<std::uint32_t>(domain_switch_.size()); }
  /// The NVSwitch LP of a domain, or kNoLp for a 1-GPU domain.
  engine::LpId domain_switch(std::uint32_t domain) const { return domain_switch_[domain]; }
  /// NVSwitch of host `host` (its first GPU's domain). Precondition: that domain has > 1 GPU.
  engine::LpId nvswitch_lp(std::uint32_t host) const {
    return domain_switch_[domain_[host * spec_.gpus_per_host]];
  }
  std::uint32_t host_of(std::uint32_t gpu) const { return gpu / spec_.gpus_per_host; }
  /// Leaf index (among leaves) of the first switch the NIC of `gpu` attaches to, and its port
  /// there.
  std::uint32_t leaf_of(std::uint32_t gpu) const;
  std::uint32_t leaf_port_of(std::uint32_t gpu) const;
  /// Hop count (links) of the path GPU a -> GPU b: NVLink (2) inside a domain, else through the
  /// fabric. kUnreachable when no path exists (e.g. across rails of a rail_only fabric).
  std::uint32_t hops(std::uint32_t a, std::uint32_t b) const;
  /// Fabric hops from GPU a to GPU b ignoring NVLink (kUnreachable if none); fabric_hops(a, a) = 0.
  std::uint32_t fabric_hops(std::uint32_t a, std::uint32_t b) const;

  /// Egress port at node `at` for a packet to GPU `dst`: candidates(at, dst)[mix64(flow_hash ^
  /// switch_seed(at)) % size] (the only candidate when there is one).
  /// @throws engine::InputError (field cluster.topology) when no path exists.
  std::uint32_t route(engine::LpId at, std::uint32_t dst, std::uint64_t flow_hash) const {
    const auto c = candidates(at, dst);
    if (c.size() == 1)
      return c[0];
    if (c.empty())
      no_path(at, dst);
    return c[engine::mix64(flow_hash ^ switch_seed_[at]) % c.size()];
  }
  /// Every equal-cost egress port at node `at` toward GPU `dst` on shortest paths (ECMP set, in
  /// port order). GPU: NVLink port inside its domain, else its NIC ports that start a shortest
  /// path. NVSwitch: the port to dst (same domain only). Switch: next hops from the routing
  /// table. Empty only when no path exists (then route() throws).
  std::span<const std::uint32_t> candidates(engine::LpId at, std::uint32_t dst) const;
  /// Per-switch ECMP hash seed (derived from ClusterSpec::seed and the LP id).
  std::uint64_t switch_seed(engine::LpId at) const { return switch_seed_[at]; }

  /// Every undirected link as (a, b, latency), for partitioning and lookahead.
  struct Link {
    engine::LpId a, b;
    engine::SimTime latency_ps;
  };
  std::vector<Link> links() const;
  /// Human-readable description of an LP ("gpu 3", "leaf 2", ...).
  std::string describe(engine::LpId n) const;
  /// Stable node name for files ("gpu3", "nvswitch0", "leaf2", "spine1", "core0").
  std::string node_name(engine::LpId n) const;

  /// Routing groups of the graph (0 = none; TopoGraph::group). group(n) of a switch is its group.
  std::uint32_t num_groups() const { return groups_; }
  std::uint32_t group(engine::LpId n) const { return group_[n]; }

  /// Routing classes (distinct NIC attachment sets) and the largest next-hop set at a switch.
  std::uint32_t num_classes() const { return classes_; }
  /// Routing class of a GPU (GPUs of one class share every switch's next-hop sets).
  std::uint32_t route_class(std::uint32_t gpu) const { return class_of_[gpu]; }
  /// Largest ECMP set at any Ethernet switch over all destinations.
  std::uint32_t max_switch_ecmp() const { return max_switch_ecmp_; }
  /// Bytes held by the routing table (per-class arrays + next-hop pool + per-GPU attachments).
  std::size_t routing_bytes() const;

  static constexpr engine::LpId kNoLp = 0xFFFFFFFFu;         ///< "no such node"
  static constexpr std::uint32_t kUnreachable = 0xFFFFFFFFu; ///< hops() without a path

private:
  [[noreturn]] void no_path(engine::LpId at, std::uint32_t dst) const;
  void finish(TopoGraph graph);
  void build_routes();
  // Group-minimal switch distances to `gpu` (attached in group `to`), written to dist[e].
  void group_distances(std::uint32_t gpu, std::uint32_t to,
                       const std::vector<std::vector<std::uint32_t>> &members,
                       std::uint16_t *dist) const;

  ClusterSpec spec_;
  std::uint32_t gpus_ = 0;
  std::uint32_t count_[5] = {0, 0, 0, 0, 0};
  engine::LpId first_[5] = {0, 0, 0, 0, 0};
  std::vector<NodeKind> kinds_;
  std::vector<std::uint8_t> tiers_;
  std::vector<std::vector<Port>> ports_;
  std::vector<std::uint64_t> switch_seed_;
  std::vector<std::uint32_t> port_id_; // identity 0..max ports, for single-port candidate spans
  // Scale-up domains.
  std::vector<std::uint32_t> domain_;       // per GPU
  std::vector<engine::LpId> domain_switch_; // per domain (kNoLp: 1-GPU domain)
  std::vector<std::uint32_t> nvl_port_;     // per GPU: its port index at its NVSwitch
  // NIC attachments: GPU g's links to Ethernet switches are att_[att_off_[g] .. att_off_[g+1]),
  // sorted by switch; nic_first_[g] = the GPU's first NIC port.
  std::vector<std::uint32_t> att_off_, att_sw_, att_port_;
  std::vector<std::uint8_t> nic_first_;
  // Routing table over the Ethernet switches (LPs [eth_first_, num_nodes)).
  engine::LpId eth_first_ = 0;
  std::uint32_t eth_count_ = 0;
  std::uint32_t classes_ = 0;
  std::vector<std::uint32_t> class_of_;     // per GPU
  std::vector<std::uint16_t> dist_;         // [class * eth_count + e]: switch hops to the class
  std::vector<std::uint32_t> cand_off_;     // [class * eth_count + e]: offset in pool_
  std::vector<std::uint32_t> gpu_cand_off_; // multi-homed only: [src class * classes + dst class]
  std::vector<std::uint32_t> pool_;         // interned lists: count, then ports
  std::uint32_t max_switch_ecmp_ = 0;
  std::vector<std::uint32_t> group_; // per node when the graph has groups, else empty
  std::uint32_t groups_ = 0;
};

} // namespace fabricsim::models
