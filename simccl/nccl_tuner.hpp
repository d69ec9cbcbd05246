#pragma once
/// @file nccl_tuner.hpp
/// NCCL 2.28's cost model (src/graph/tuning.cc ncclTopoTuneModel / ncclTopoGetAlgoTime,
/// src/enqueue.cc topoGetAlgoInfo) on a simulated communicator: graph channels and bandwidths
/// from a simplified graph search (src/graph/search.cc), the per-(collective, algorithm,
/// protocol) latency (us) and bandwidth (GB/s) tables, the time estimate, and the selection of
/// algorithm, protocol and channel count per message size. All constants are from
/// ../shared/reference/nccl.md §2-3 with the NCCL source file named at each table.
#include <array>
#include <cstdint>
#include <string>

#include "simccl/nccl_settings.hpp"

namespace fabricsim::simccl {

/// What the cost model needs to know about a communicator and its hardware.
struct TuningTopology {
  int n_ranks = 8;          ///< ranks in the communicator
  int n_nodes = 1;          ///< distinct hosts among them
  int ppn = 8;              ///< ranks per node (the largest, for uneven communicators)
  int sm = 90;              ///< compute capability x10 (80 A100, 90 H100, 100 B200)
  double nvlink_GBps = 0;   ///< NCCL's per-GPU NVLink bw to the NVSwitch (links x per-link, topo.h); 0 = from sm
  double nic_GBps = 50;     ///< one NIC, GB/s (NCCL: speed Mb/s / 8000)
  double pci_GBps = 0;      ///< GPU <-> NIC PCIe path bw; 0 = from sm (Gen4 x16 24, Gen5 x16 48)
  int nics_per_node = 8;    ///< NICs per node (one per GPU in fabricsim)
  bool intel_cpu = true;    ///< CPU vendor (net overhead 1 us Intel, 2 us AMD; llMaxBw row)
  /// NCCL's nvlsSupport minus the NCCL_NVLS_ENABLE check (done by the tuner): the node's GPUs
  /// hang off an NVSwitch with multicast (compute capability >= 90) and the simulated network
  /// reduces/replicates in the switch.
  bool nvswitch_multicast = false;
  /// Why nvswitch_multicast is false (shown as the NVLS rows' reason).
  const char* no_nvls_reason = "no NVSwitch multicast";  ///< a string literal
  bool even_nodes = true;  ///< every node holds the same number of the communicator's ranks
};

/// A graph (ring or tree) as the search leaves it (src/graph/search.cc).
struct GraphInfo {
  int n_channels = 1;    ///< after ncclTopoDupChannels, before ncclTopoPostset's x2
  double bw_intra = 0;   ///< GB/s per channel inside a node
  double bw_inter = 0;   ///< GB/s per channel across nodes
};

/// The model's choice for one collective call.
struct TuningDecision {
  Algo algo = Algo::kRing;
  Proto proto = Proto::kSimple;
  int n_channels = 1;  ///< channels this call uses (after the per-size reduction)
  int n_threads = 512;
  double time_us = 0;  ///< estimated time of the chosen combination
};

/// Costs per (algorithm, protocol) for one call: estimated us, or -1 when not available.
using CostTable = std::array<std::array<double, kNumProtos>, kNumAlgos>;

/// NCCL's tuner on one communicator. Stateless after construction; thread-safe.
class NcclTuner {
 public:
  /// @throws engine::InputError if NCCL_MIN/MAX_NCHANNELS leave no channel.
  NcclTuner(const TuningTopology& topo, const NcclSettings& settings);

  const TuningTopology& topo() const { return topo_; }
  const GraphInfo& ring_graph() const { return ring_; }
  const GraphInfo& tree_graph() const { return tree_; }
  /// NVLS graph (search.cc ncclTopoSearchTryNvls), also NVLSTree's: one channel per head GPU
  /// (single node: every local GPU, at most 32; several nodes: the GPUs with a NIC, 8 on an
  /// 8-NIC H100 node as NVIDIA/nccl#1041 shows); bw_intra = the largest ladder speed s (intra
  /// ladder on one node, inter ladder across nodes) with (heads + 1) x s <= the GPU's NVLink
  /// bandwidth (per channel the head's NVSwitch link carries 2 s, the others s); bw_inter = one
  /// node: the ladder top (pass 2 raises bwInter, which a single-node search never checks);
  /// several nodes: the first inter-ladder speed the GPU -> NIC path carries (min(PCIe, NIC)).
  /// Simplified search, see docs/simccl.md.
  const GraphInfo& nvls_graph() const { return nvls_; }
  /// Channels (CTAs) an NVLS call uses: NVLS_NCHANNELS_SM90 16 on Hopper; Blackwell 24 (one NVL
  /// domain) or 32 (nccl.md §3.1).
  int nvls_channels() const { return nvls_channels_; }
  /// comm->nChannels: min(ring, tree) graph channels, doubled by ncclTopoPostset (max 64),
  /// doubled again on Hopper+ multi-node when bwIntra > 45 and fewer than 16 (init.cc), then
  /// clamped by NCCL_MAX_NCHANNELS and raised to NCCL_MIN_NCHANNELS.
  int comm_channels() const { return comm_channels_; }
  /// Algorithm bandwidth (GB/s) of a combination; 0 = unavailable (tuning.cc).
  double bandwidth(Func f, Algo a, Proto p) const { return bw_[idx(f)][idx(a)][idx(p)]; }
  /// Latency (us) of a combination (tuning.cc).
  double latency(Func f, Algo a, Proto p) const { return lat_[idx(f)][idx(a)][idx(p)]; }
  /// Latency (us) of one pipeline step over one hop of (algorithm, protocol), the per-step term
  /// of the latency model (tuning.cc, nccl.md §2.5): a NET hop (`net_hop`, to another node)
  /// hwLatencies[NET][a][p] (the Tree NET value when one rank per node); a hop inside a node
  /// hwLatencies[NVLINK][a][p] (this tuner's intra class: the node's GPUs sit on an NVSwitch),
  /// for Ring on several nodes at least the network overhead (x3 Simple, §2.2).
  double hop_latency_us(Algo a, Proto p, bool net_hop) const;
  /// baseLatencies[a][p] (us, tuning.cc, nccl.md §2.1).
  static double base_latency_us(Algo a, Proto p);
  /// Why a combination is unavailable ("" if available).
  std::string unavailable_reason(Func f, Algo a, Proto p) const;
  /// Estimated time (us) of `nbytes` (NCCL's nBytes: per-rank max(send, recv); for AllGather and
  /// ReduceScatter the full nRanks x count buffer) with one combination (ncclTopoGetAlgoTime);
  /// -1 when unavailable.
  double time_us(Func f, Algo a, Proto p, std::uint64_t nbytes) const;
  /// Whole cost table for one call.
  CostTable cost_table(Func f, std::uint64_t nbytes) const;
  /// NCCL's choice: the fastest enabled combination (ties: lowest algo then proto index), then
  /// channels reduced while nBytes < nc x nThreads x threshold (topoGetAlgoInfo).
  /// @throws engine::InputError when NCCL_ALGO/NCCL_PROTO leave nothing simccl can plan.
  TuningDecision decide(Func f, std::uint64_t nbytes) const;
  /// Multi-line report of the tables and the choice (NCCL_DEBUG_SUBSYS=TUNING counterpart).
  std::string report(Func f, std::uint64_t nbytes) const;

 private:
  template <class E>
  static std::size_t idx(E e) {
    return static_cast<std::size_t>(e);
  }
  void compute_graphs();
  void compute_tables();

  TuningTopology topo_;
  NcclSettings settings_;
  GraphInfo ring_, tree_, nvls_;
  int comm_channels_ = 1;
  int nvls_channels_ = 16;
  int cc_idx_ = 2;  ///< 0 Volta, 1 Ampere, 2 Hopper, 3 Blackwell
  std::array<std::array<std::array<double, kNumProtos>, kNumAlgos>, kNumFuncs> bw_{};
  std::array<std::array<std::array<double, kNumProtos>, kNumAlgos>, kNumFuncs> lat_{};
  std::array<std::array<std::array<const char*, kNumProtos>, kNumAlgos>, kNumFuncs> why_{};
};

/// Start-up latency (us) simccl charges a point-to-point NCCL operation (a send/recv pair, and
/// each peer exchange of an AllToAll, which NCCL runs as grouped send/recv), which NCCL's cost
/// model does not tune and has no latency entry for. simccl's choice, from the same tables: the
/// Ring model's latency of a single step, as tuning.cc gives it for Ring Broadcast/Reduce on
/// sameChannels graphs (nccl.md §2.5): baseLatencies[Ring][p] + hwLatencies[hw][Ring][p], hw
/// NVLINK inside a node, NET across nodes. LL: 6.6 + 0.6 = 7.2 us, 6.6 + 2.7 = 9.3 us; Simple:
/// 8.4 + 3.4 = 11.8 us, 8.4 + 14.0 = 22.4 us. @param p LL or Simple (p2p uses no LL128)
/// @param across_nodes a peer on another node.
double p2p_latency_us(Proto p, bool across_nodes);

/// NCCL's per-link NVLink bandwidth in GB/s for a compute capability (src/graph/topo.h:
/// SM60 18.0, SM70 20.0, SM80 20.0, SM86 12.0, SM90 20.6, SM100 40.1).
double nvlink_per_link_GBps(int sm);
/// NVLinks per GPU to the NVSwitch for a generation (V100 6, A100 12, H100 18, B200 18).
int nvlinks_per_gpu(int sm);
/// Signalling rate of one NVLink per direction in GB/s for a generation: NVLink2/3/4 25 GB/s
/// (V100 6 x 25 = 150, A100 12 x 25 = 300, H100 18 x 25 = 450 GB/s per direction), NVLink5
/// 50 GB/s (B200 18 x 50 = 900 GB/s); NVIDIA V100/A100/H100/B200 datasheets.
double nvlink_raw_per_link_GBps(int sm);
/// Share of the NVLink signalling rate that carries collective data: NCCL's achievable per-link
/// bandwidth (topo.h) over the link's rate, nvlink_per_link_GBps(sm) / nvlink_raw_per_link_GBps(sm):
/// sm80 20 / 25 = 0.80, sm90 20.6 / 25 = 0.824, sm100 40.1 / 50 = 0.802 (at most 1).
double nvlink_data_efficiency(int sm);
/// A GPU's NVLS (multimem) rate to its NVSwitch per direction, in GB/s, as NCCL's NVLS model
/// implies for one 8-GPU NVSwitch node of that generation: NVLS AllReduce busBw from the tuner
/// (tuning.cc: heads x min(bwIntra x nvlsEfficiency x (nCh-1)/nCh x 2, bwInter)), converted to
/// algBw (x 8/14) and to the bytes one port carries per direction in an NVLS AllReduce (x 9/8).
/// sm90: 476 -> 306 GB/s; sm100: 720 -> 463 GB/s. 0 where the generation has no NVLS (sm < 90).
double nvls_port_GBps(int sm);

}  // namespace fabricsim::simccl
