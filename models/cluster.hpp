#pragma once
/// @file cluster.hpp
/// Cluster description and its topology: hosts of G GPUs behind an NVSwitch, one NIC per GPU,
/// and a two-tier leaf-spine Ethernet fabric (rail-optimized or plain).
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/event.hpp"
#include "engine/time.hpp"

namespace fabricsim::models {

/// How NICs attach to leaves.
enum class FabricKind : std::uint8_t {
  kRailOptimized,  ///< NIC j of every host in a group of `nics_per_leaf` hosts goes to rail-j's leaf
  kLeafSpine,      ///< NICs fill leaves in order (host-major), `nics_per_leaf` per leaf
};

/// The cluster a run simulates. All fields validated by validate(); see docs/config.md.
struct ClusterSpec {
  std::uint32_t hosts = 1;                  ///< number of hosts (servers)
  std::uint32_t gpus_per_host = 8;          ///< GPUs per host, one NIC each
  FabricKind fabric = FabricKind::kRailOptimized;
  std::uint32_t nics_per_leaf = 32;         ///< leaf downlinks (NIC ports per leaf)
  std::uint32_t spines = 32;                ///< spine switches; each leaf has one uplink to each
  std::uint64_t nic_bps = 400'000'000'000;  ///< NIC <-> leaf link rate (bits/s), per direction
  engine::SimTime nic_latency_ps = 500'000;      ///< NIC <-> leaf propagation delay
  std::uint64_t fabric_bps = 400'000'000'000;    ///< leaf <-> spine link rate
  engine::SimTime fabric_latency_ps = 500'000;   ///< leaf <-> spine propagation delay
  /// GPU <-> NVSwitch rate per direction. Default: H100 NVLink4, 900 GB/s bidirectional =
  /// 450 GB/s = 3.6 Tb/s per direction (NVIDIA H100 datasheet).
  std::uint64_t nvlink_bps = 3'600'000'000'000;
  engine::SimTime nvlink_latency_ps = 100'000;   ///< GPU <-> NVSwitch latency
  std::uint32_t mtu_bytes = 4096;                ///< network packet payload
  std::uint32_t nvlink_mtu_bytes = 4096;         ///< NVLink transfer unit
  std::uint64_t seed = 1;                        ///< ECMP hash seeds derive from it
  std::string source = "<spec>";                ///< file the spec came from (for error messages)

  std::uint32_t gpus() const { return hosts * gpus_per_host; }
};

/// Default cluster sized to `ranks` GPUs: H100-class hosts of 8 GPUs behind an NVSwitch, one
/// 400 Gb/s NIC per GPU, non-blocking rail-optimized two-tier fabric (spines = nics_per_leaf).
ClusterSpec default_cluster(std::uint32_t ranks);

/// Kind of a topology node (each node is one LP).
enum class NodeKind : std::uint8_t { kGpu, kNvSwitch, kLeaf, kSpine };

/// One directed port of a node: where its egress link goes.
struct Port {
  engine::LpId peer = 0;            ///< LP at the far end
  std::uint64_t rate_bps = 0;       ///< link rate
  engine::SimTime latency_ps = 0;   ///< propagation delay
  std::uint32_t mtu_bytes = 0;      ///< packet payload size on this link
  std::uint32_t peer_port = 0;      ///< index of this link's port at `peer` (the reverse direction)
};

/// The built topology: LP ids are GPUs [0, G*H), NVSwitches, leaves, spines in that order.
/// GPU LP id == global GPU index == rank (ranks are placed on GPUs in order).
class Topology {
 public:
  /// Builds from a validated spec. @throws InputError on inconsistent sizes.
  explicit Topology(const ClusterSpec& spec);

  const ClusterSpec& spec() const { return spec_; }
  std::uint32_t num_nodes() const { return static_cast<std::uint32_t>(kinds_.size()); }
  NodeKind kind(engine::LpId n) const { return kinds_[n]; }
  const std::vector<Port>& ports(engine::LpId n) const { return ports_[n]; }
  std::uint32_t num_leaves() const { return leaves_; }
  std::uint32_t num_spines() const { return spines_; }
  engine::LpId nvswitch_lp(std::uint32_t host) const { return gpus_ + host; }
  engine::LpId leaf_lp(std::uint32_t leaf) const { return gpus_ + spec_.hosts + leaf; }
  engine::LpId spine_lp(std::uint32_t s) const { return gpus_ + spec_.hosts + leaves_ + s; }
  std::uint32_t host_of(std::uint32_t gpu) const { return gpu / spec_.gpus_per_host; }
  /// Leaf index and its down-port number for the NIC of `gpu`.
  std::uint32_t leaf_of(std::uint32_t gpu) const;
  std::uint32_t leaf_port_of(std::uint32_t gpu) const;
  /// Hop count (links) from GPU a to GPU b.
  std::uint32_t hops(std::uint32_t a, std::uint32_t b) const;

  /// Egress port at node `at` for a packet to GPU `dst` with flow hash `flow_hash` (ECMP on leaves).
  /// GPU ports: 0 = NVLink, 1 = NIC. NVSwitch: port i = local GPU i. Leaf: [0, nics_per_leaf) down,
  /// then one up-port per spine. Spine: port l = leaf l.
  std::uint32_t route(engine::LpId at, std::uint32_t dst, std::uint64_t flow_hash) const;
  /// Every equal-cost egress port at node `at` toward GPU `dst` (ECMP set, in port order); route()
  /// picks one by hash, packet spraying and adaptive routing pick among them per packet.
  std::span<const std::uint32_t> candidates(engine::LpId at, std::uint32_t dst) const;
  /// Per-switch ECMP hash seed (derived from ClusterSpec::seed).
  std::uint64_t switch_seed(engine::LpId at) const { return switch_seed_[at]; }

  /// Every undirected link as (a, b, latency), for partitioning and lookahead.
  struct Link {
    engine::LpId a, b;
    engine::SimTime latency_ps;
  };
  std::vector<Link> links() const;
  /// Human-readable description of an LP ("gpu 3", "leaf 2", ...).
  std::string describe(engine::LpId n) const;

 private:
  ClusterSpec spec_;
  std::uint32_t gpus_ = 0;
  std::uint32_t leaves_ = 0;
  std::uint32_t spines_ = 0;
  std::vector<NodeKind> kinds_;
  std::vector<std::vector<Port>> ports_;
  std::vector<std::uint64_t> switch_seed_;
  std::vector<std::uint32_t> leaf_up_;  // the up-ports of a leaf: [nics_per_leaf, +spines)
  std::vector<std::uint32_t> port_id_;  // identity 0..max ports, for single-port candidate spans
};

}  // namespace fabricsim::models
