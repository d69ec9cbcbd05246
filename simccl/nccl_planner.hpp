#pragma once
/// @file nccl_planner.hpp
/// The NCCL-faithful collective planner: per communicator it runs NCCL 2.28's cost model
/// (simccl/nccl_tuner.hpp) to pick algorithm, protocol and channels, then expands the call the
/// way NCCL's kernels and proxies move data (../shared/reference/nccl.md §1.2-1.6, §3.3-3.4):
///  * Ring AllReduce / AllGather / ReduceScatter: data split over channels, each channel its own
///    rail-aligned ring; per channel, loops of nRanks chunks; each step's chunk is sent in
///    slices (Ring+Simple: chunk = 4 steps, slice = 2 steps of NCCL_BUFFSIZE/8); a send waits for
///    the receive of the previous step of the same slice and for the channel's previous send.
///  * Tree AllReduce: per channel a chain inside each node and a double binary tree over nodes
///    (channels of the first half on tree 0, the second half on tree 1); reduce up, broadcast
///    down, pipelined per chunk.
///  * NVLS AllReduce (single node, Hopper+ on an NVSwitch): per NVLS channel, loops of nRanks
///    chunks (NCCL_NVLS_CHUNKSIZE, shrunk for small calls); rank s owns chunk s of a loop. Every
///    rank sends its copy of chunk s into the NVSwitch's reduction (multimem.ld_reduce, P2pOp::nvls
///    kNvlsReduce); the owner receives the reduced chunk from the switch and multicasts it
///    (multimem.st, kNvlsMulticast) to all ranks. Per GPU port and direction (1 + 1/n) x S.
///  * Broadcast / Reduce: per channel a pipelined chain along the ring from / to the root.
///  * AllToAll: grouped point-to-point; per peer 1..n channel parts cut in p2p chunks; a peer on
///    another node whose NIC is on another rail is reached through the local GPU on the peer's
///    rail (PXN: NVLink to that GPU, then its NIC) unless NCCL_PXN_DISABLE=1 or
///    NCCL_P2P_PXN_LEVEL=0.
/// Protocol wire efficiency is applied to the bytes sent: LL carries 8 data bytes per 16-byte line
/// (50%), LL128 120 per 128-byte line (15/16), Simple 100%.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "models/core/comm_plan.hpp"
#include "simccl/nccl_settings.hpp"
#include "simccl/nccl_tuner.hpp"

namespace fabricsim::simccl {

/// Hardware and settings the planner works from.
struct NcclPlannerConfig {
  std::uint32_t gpus_per_host = 8;  ///< rank r runs on GPU r; host = r / gpus_per_host
  /// GPUs per NVLink domain (cluster.nvlink_domain) when it spans several hosts (MNNVL, e.g. 72 on
  /// GB200 NVL72), else 0. NCCL fuses the topology of a multi-node NVLink clique into one node
  /// (NCCL 2.28 src/graph/topo.cc ncclTopoFuseXml, NCCL_MNNVL_ENABLE), so the cost model, rings,
  /// trees and NVLS see one node per domain: r / nvlink_domain.
  std::uint32_t nvlink_domain = 0;
  int sm = 90;                      ///< compute capability x10 of every GPU
  double nic_GBps = 50;             ///< one NIC's rate, GB/s (cost model)
  double nvlink_GBps = 0;           ///< cost model per-GPU NVLink bw; 0 = NCCL's per-link constant x links
  int nics_per_host = 0;            ///< NICs per node for the cost model (0 = one per GPU); NCCL_TOPO_FILE
  double pci_GBps = 0;              ///< GPU<->NIC PCIe bw, GB/s (0 = from sm)
  /// Ring AllReduce / AllGather / ReduceScatter, Tree AllReduce and NVLS / NVLSTree plans in lazy
  /// form (RankPlan::lazy_channels, lazy_tree, lazy_nvls: O(channels) memory, ops produced as the
  /// executor reaches them) instead of materialized
  /// ops. Same ops, tags and dependencies either way; the plan then refers to this planner, which
  /// must outlive it for RankPlan::expanded().
  bool lazy_rings = false;
  /// simccl.launch_latency=nccl: each tuned collective starts after a launch delay
  /// (start_latency_ps): the base latency baseLatencies[algo][proto] (NCCL 2.28.9
  /// src/graph/tuning.cc, nccl.md §2.1) when step_latency charges its hops (Ring, Tree), else
  /// the cost model's whole latency of its (algorithm, protocol) (tuning.cc, nccl.md §2.5:
  /// NVLS, NVLSTree). Each point-to-point operation (AllToAll, workload sends) starts after
  /// p2p_latency_us (p2p_start_latency_ps).
  bool launch_latency = false;
  /// simccl.step_latency=nccl: NCCL's per-step pipeline synchronization as timed dependencies:
  /// every send of a Ring (AllReduce / AllGather / ReduceScatter, Broadcast / Reduce chain) or
  /// Tree plan waits, once its dependencies are met, the hop latency hwLatencies[hw][algo][proto]
  /// of the protocol the tuner chose and the link class (NcclTuner::hop_latency_us: NET to
  /// another node, else NVLink; tuning.cc, nccl.md §2.2) before it starts (P2pOp::delay_ps,
  /// LazyChannelRing::step_delay_ps, LazyTree::Channel::up_delay_ps / child_delay_ps).
  bool step_latency = false;
  /// simccl.proxy=nccl: each network send and each network receive of a GPU takes NCCL's
  /// network overhead (getNetOverhead, src/graph/tuning.cc: NCCL_NET_OVERHEAD, else 1 us on an
  /// Intel or non-x86 CPU and 2 us on AMD; nccl.md §2.2) of the GPU's one proxy thread
  /// (src/proxy.cc progresses every channel's network operations of a GPU in turn), served
  /// first come first served (proxy_op_ps).
  bool proxy = false;
  /// The network reduces and replicates in the NVSwitch (NVLink SHARP; every rung does). False:
  /// the NVLS rows of the cost model are unavailable.
  bool nvls_network = true;
  /// The node's GPUs sit on an NVSwitch (false when NCCL_TOPO_FILE describes a node without NVLink).
  bool nvswitch = true;
  NcclSettings settings;
};

/// Bytes on the wire for `data` bytes with a protocol: LL 16 B lines of 8 data bytes, LL128
/// 128 B lines of 120 data bytes, Simple the data (src/include/device.h, nccl.md §1.2).
std::uint64_t wire_bytes(Proto p, std::uint64_t data);

/// The planner (thread-safe: per-communicator state is computed once under a lock).
class NcclPlanner final : public models::CollectivePlanner {
 public:
  explicit NcclPlanner(NcclPlannerConfig cfg);
  models::RankPlan plan(const models::CollRequest& req) const override;
  /// PXN for workload Send nodes (nccl.md §3.4): a send to a rank on another host whose local
  /// GPU index (rail) differs from the sender's goes through the sender-host GPU with the
  /// receiver's local index (NVLink to it, then its NIC on the receiver's rail) when
  /// NCCL_PXN_DISABLE=0 and NCCL_P2P_PXN_LEVEL is 1 or 2. With one NIC per GPU, both levels
  /// pick that NIC: level 1 takes the peer's preferred NIC (the NIC of the receiver's rail,
  /// reachable through NVLink at path type PXN), level 2 the NIC of the local GPU with the
  /// receiver's local index. Level 0 or NCCL_PXN_DISABLE=1: direct over the sender's own NIC.
  /// Chunks: NCCL_CHUNK_SIZE if set, else NCCL_P2P_NET_CHUNKSIZE, at most NCCL_BUFFSIZE/8.
  models::P2pRoute p2p_route(std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) const override;
  /// With NcclPlannerConfig::launch_latency: the launch delay in ps: the base latency (nccl.md
  /// §2.1) of the chosen algorithm and protocol when steps_carry_latency(), else the cost
  /// model's latency (us, base + per-step hop latencies, nccl.md §2.5); AllToAll (not tuned:
  /// grouped send/recv) p2p_latency_us of its protocol (decision()), across nodes when the
  /// communicator spans several; single-rank and 0-byte calls 0. Without it 0.
  std::int64_t start_latency_ps(const models::CollRequest& req) const override;
  /// With NcclPlannerConfig::launch_latency: p2p_latency_us in ps, LL for `bytes` <=
  /// NCCL_P2P_LL_THRESHOLD else Simple (as decision() picks for AllToAll), across nodes when
  /// `src` and `dst` are on different hosts; 0 for 0 bytes or src == dst. Without it 0.
  std::int64_t p2p_start_latency_ps(std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) const override;
  /// With NcclPlannerConfig::proxy: NCCL's network overhead in ps (NCCL_NET_OVERHEAD, else 1 us
  /// Intel / 2 us AMD, as the cost model's), else 0.
  std::int64_t proxy_op_ps() const override;

  /// The cost model of the communicator `ranks` (global ranks).
  const NcclTuner& tuner(const std::vector<std::uint32_t>& ranks) const;
  /// What the planner picks for a request (AllToAll: protocol of the per-peer messages).
  TuningDecision decision(const models::CollRequest& req) const;
  const NcclPlannerConfig& config() const { return cfg_; }

  struct CommInfo;  ///< per-communicator layout (nodes, rings, trees)

 private:
  struct PlanCtx;  ///< one request's planning inputs (simccl/nccl_plan_detail.hpp)

  std::shared_ptr<const CommInfo> comm(const std::vector<std::uint32_t>& ranks) const;
  /// Plans `req`: picks algorithm, protocol and channels (decision()), then expands the call with
  /// the algorithm family's planner below; `lazy` asks for the lazy form where one exists.
  models::RankPlan plan_impl(const models::CollRequest& req, bool lazy) const;
  /// AllToAll as grouped point-to-point with PXN relays (simccl/plan_p2p.cpp).
  models::RankPlan plan_alltoall(const PlanCtx& x) const;
  /// NVLS AllReduce / ReduceScatter / AllGather inside one node (simccl/plan_nvls.cpp).
  models::RankPlan plan_nvls(const PlanCtx& x) const;
  /// NVLSTree AllReduce: NVSwitch inside nodes, double binary tree of nodes (simccl/plan_nvls.cpp).
  models::RankPlan plan_nvls_tree(const PlanCtx& x) const;
  /// Tree AllReduce: chains inside nodes, double binary tree across them (simccl/plan_tree.cpp).
  models::RankPlan plan_tree(const PlanCtx& x) const;
  /// Broadcast / Reduce as a pipelined chain along each channel's ring (simccl/plan_ring.cpp).
  models::RankPlan plan_chain(const PlanCtx& x) const;
  /// Ring AllReduce / AllGather / ReduceScatter, materialized (simccl/plan_ring.cpp).
  models::RankPlan plan_ring(const PlanCtx& x) const;
  /// The same ring in lazy form (models::LazyChannelRing); materialized when tags would pass 32
  /// bits (simccl/plan_ring.cpp).
  models::RankPlan plan_ring_lazy(const PlanCtx& x) const;
  /// With NcclPlannerConfig::step_latency: the ps a step of (a, p) sent from global rank `from`
  /// to `to` waits before it starts (NcclTuner::hop_latency_us, a NET hop when the two are on
  /// different hosts); without it 0.
  std::int64_t step_delay_ps(const CommInfo& ci, Algo a, Proto p, std::uint32_t from, std::uint32_t to) const;
  /// True when the plans of algorithm `a` carry NCCL's per-hop latencies as step delays
  /// (NcclPlannerConfig::step_latency and `a` is Ring or Tree).
  bool steps_carry_latency(Algo a) const;
  /// GPUs of one NCCL node: the NVLink domain when it spans hosts (MNNVL), else the host.
  std::uint32_t node_gpus() const {
    return cfg_.nvlink_domain > cfg_.gpus_per_host ? cfg_.nvlink_domain : std::max<std::uint32_t>(1, cfg_.gpus_per_host);
  }
  /// A lazy plan's `materialize`: plan_impl(req, false) with the communicator's ranks taken from
  /// the cached `ci` (shared by all its ranks, kept alive by the closure) instead of a per-rank copy.
  std::function<models::RankPlan()> materializer(const models::CollRequest& req,
                                                 std::shared_ptr<const CommInfo> ci) const;
  /// Builds the lazy NVLS / NVLSTree plan (models::LazyNvls) of `req` into `out`: nc channels of
  /// S bytes in loops of `loop` bytes, tag stride max_loops loops, heads[0..m) (owned by `ci`),
  /// this rank head q. @returns false when op indices or tags would pass 32 bits (the caller then
  /// materializes, which reports it).
  bool lazy_nvls(const models::CollRequest& req, const std::shared_ptr<const CommInfo>& ci, Proto proto,
                 std::uint32_t nc, std::uint64_t S, std::uint64_t loop, std::uint64_t max_loops,
                 const std::uint32_t* heads, std::uint32_t m, std::uint32_t q, std::uint32_t tags_per_loop,
                 bool reduce, bool mcast, const models::LazyNvls::Links links[2], models::RankPlan& out) const;

  NcclPlannerConfig cfg_;
  mutable std::mutex mu_;
  mutable std::map<std::vector<std::uint32_t>, std::shared_ptr<const CommInfo>> comms_;
};

/// NCCL's double binary tree (src/graph/trees.cc, nccl.md §1.6) for `rank` of `n` (n >= 1):
/// tree 0 is the binary tree on ranks where a rank's parent flips its lowest set bit upwards;
/// tree 1 mirrors it (n even) or shifts it by one (n odd).
struct TreeLinks {
  int parent = -1;
  int child0 = -1;
  int child1 = -1;
};
TreeLinks dbtree_links(int n, int rank, int tree);

}  // namespace fabricsim::simccl
