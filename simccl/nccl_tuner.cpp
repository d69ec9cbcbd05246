#include "simccl/nccl_tuner.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "engine/errors.hpp"

namespace fabricsim::simccl {

namespace {

constexpr int kTree = 0, kRing = 1, kCnDirect = 2, kCnChain = 3, kNvls = 4, kNvlsTree = 5, kPat = 6;
constexpr int kLL = 0, kLL128 = 1, kSimple = 2;
constexpr int kHwNvlink = 0, kHwNet = 2;

// src/graph/tuning.cc baseLatencies[algo][proto], us (nccl.md §2.1).
constexpr double kBaseLat[kNumAlgos][kNumProtos] = {
    {6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {8.0, 8.0, 8.0}};
// src/graph/tuning.cc hwLatencies[hw][algo][proto], us (nccl.md §2.2); hw NVLINK, PCI, NET.
constexpr double kHwLat[3][kNumAlgos][kNumProtos] = {
    {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}},
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}},
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}}};
// src/graph/tuning.cc per-arch caps, GB/s, [compCap idx][scale: 1 node, 2 nodes, >=3 nodes] (§2.3).
constexpr double kLlMaxBw[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282, 90, 70}};
constexpr double kPerChMaxRingLL128Bw[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {73.4, 34.6, 73.4}};
constexpr double kPerChMaxTreeLL128Bw[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChMaxTreeBw[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
constexpr double kPerChMaxNvlsTreeBw[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0, 57.7, 45.5}, {0, 96.0, 43.8}};
// src/graph/tuning.cc treeCorrectionFactor[proto][log2(nBytes >> 6)] (§2.6), v2.28: 23 entries.
constexpr double kTreeCorrection[kNumProtos][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
// src/graph/search.cc speed ladders, GB/s per channel (§3.2).
const std::vector<double> kIntraDefault = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
const std::vector<double> kIntraSm90 = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
const std::vector<double> kIntraSm100 = {90, 80, 70, 60, 50, 40, 30, 24, 20, 19, 18};
const std::vector<double> kInterDefault = {48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12};
const std::vector<double> kInterSm90 = {48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
const std::vector<double> kInterSm100 = {96, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
constexpr int kMaxChannels = 64;  // MAXCHANNELS, src/include/device.h
// src/graph/tuning.cc nvlsEfficiency per compCap index (Volta, Ampere, Hopper, Blackwell), §2.3.
constexpr double kNvlsEfficiency[4] = {0, 0, 0.85, 0.74};
constexpr int kMaxNvlsArity = 32;  // NCCL_MAX_NVLS_ARITY, src/include/device.h

int log2i(std::uint64_t v) {
  int l = -1;
  while (v) {
    v >>= 1;
    ++l;
  }
  return l;
}

Func func_index_check(Func f) { return f; }

}  // namespace

double nvlink_per_link_GBps(int sm) {
  if (sm >= 100) return 40.1;
  if (sm >= 90) return 20.6;
  if (sm == 86) return 12.0;
  if (sm >= 70) return 20.0;
  return 18.0;
}

int nvlinks_per_gpu(int sm) {
  if (sm >= 90) return 18;  // H100 / B200 SXM: 18 NVLinks
  if (sm >= 80) return 12;  // A100 SXM: 12 NVLink3
  return 6;                 // V100 SXM2: 6 NVLink2
}

double nvlink_raw_per_link_GBps(int sm) { return sm >= 100 ? 50.0 : 25.0; }

double nvlink_data_efficiency(int sm) {
  return std::min(1.0, nvlink_per_link_GBps(sm) / nvlink_raw_per_link_GBps(sm));
}

double nvls_port_GBps(int sm) {
  if (sm < 90) return 0;
  TuningTopology t;
  t.n_ranks = 8;
  t.n_nodes = 1;
  t.ppn = 8;
  t.sm = sm;
  t.nvswitch_multicast = true;
  const NcclTuner tuner(t, NcclSettings{});
  const double alg = tuner.bandwidth(Func::kAllReduce, Algo::kNvls, Proto::kSimple);
  return alg * 9.0 / 8.0;
}

NcclTuner::NcclTuner(const TuningTopology& topo, const NcclSettings& settings) : topo_(topo), settings_(settings) {
  if (topo_.nvlink_GBps <= 0) topo_.nvlink_GBps = nvlinks_per_gpu(topo_.sm) * nvlink_per_link_GBps(topo_.sm);
  if (topo_.pci_GBps <= 0) topo_.pci_GBps = topo_.sm >= 90 ? 48.0 : (topo_.sm >= 80 ? 24.0 : 12.0);
  cc_idx_ = topo_.sm < 80 ? 0 : topo_.sm < 90 ? 1 : topo_.sm < 100 ? 2 : 3;
  compute_graphs();
  compute_tables();
}

void NcclTuner::compute_graphs() {
  // Simplified ncclTopoCompute for the fabricsim host (NVSwitch, one NIC per GPU on its own
  // PCIe switch): pick the first ladder speed the hardware sustains and as many channels as the
  // per-GPU bandwidth holds at that speed (every ring channel crosses each GPU's NVSwitch link
  // once per direction); multi-node rings start and end at a NIC, one channel per NIC per
  // speed step (§3.2).
  const int sm = topo_.sm;
  GraphInfo g;
  if (topo_.n_nodes <= 1) {
    const auto& ladder = sm >= 100 ? kIntraSm100 : sm >= 90 ? kIntraSm90 : kIntraDefault;
    const double total = topo_.nvlink_GBps;
    double speed = ladder.back();
    for (double s : ladder) {
      if (s <= total) {
        speed = s;
        break;
      }
    }
    g.n_channels = std::clamp(static_cast<int>(std::floor(total / speed + 1e-9)), 1, kMaxChannels / 2);
    g.bw_intra = g.bw_inter = speed;
  } else {
    const auto& ladder = sm >= 100 ? kInterSm100 : sm >= 90 ? kInterSm90 : kInterDefault;
    const double max_bw = std::min(topo_.pci_GBps, topo_.nic_GBps);
    double speed = ladder.back();
    for (double s : ladder) {
      if (s <= max_bw) {
        speed = s;
        break;
      }
    }
    const int per_nic = std::max(1, static_cast<int>(std::floor(max_bw / speed + 1e-9)));
    g.n_channels = std::clamp(per_nic * std::max(1, std::min(topo_.nics_per_node, topo_.ppn)), 1, kMaxChannels / 2);
    g.bw_intra = g.bw_inter = speed;
  }
  // ncclTopoDupChannels (search.cc): duplicate up to 2x at half bandwidth when bwIntra >= 25,
  // except on compCap > 80 with bwIntra < 50 and more than 4 channels.
  if (g.bw_intra >= 25.0 && !(sm > 80 && g.bw_intra < 50.0 && g.n_channels > 4)) {
    const int dup = std::min(2 * g.n_channels, kMaxChannels / 2);
    g.bw_intra = g.bw_intra * g.n_channels / dup;
    g.bw_inter = g.bw_inter * g.n_channels / dup;
    g.n_channels = dup;
  }
  ring_ = g;
  tree_ = g;  // tree graph: channels = ring's (init.cc); same per-channel bandwidth
  // NVLS graph (single node; multi-node NVLS needs CollNet and is not tuned here).
  {
    const bool multi = topo_.n_nodes > 1;
    const auto& ladder = multi ? (sm >= 100 ? kInterSm100 : sm >= 90 ? kInterSm90 : kInterDefault)
                               : (sm >= 100 ? kIntraSm100 : sm >= 90 ? kIntraSm90 : kIntraDefault);
    GraphInfo v;
    v.n_channels = std::clamp(multi ? std::min(topo_.ppn, topo_.nics_per_node) : topo_.ppn, 1, kMaxNvlsArity);
    v.bw_intra = ladder.back();
    for (double s : ladder) {
      if ((v.n_channels + 1) * s <= topo_.nvlink_GBps + 1e-9) {
        v.bw_intra = s;
        break;
      }
    }
    v.bw_inter = ladder.front();
    if (multi) {
      const double path = std::min(topo_.pci_GBps, topo_.nic_GBps);
      v.bw_inter = ladder.back();
      for (double s : ladder) {
        if (s <= path + 1e-9) {
          v.bw_inter = s;
          break;
        }
      }
    }
    nvls_ = v;
  }
  nvls_channels_ = sm >= 100 ? (topo_.n_nodes > 1 ? 32 : 24) : 16;
  int nch = std::min(ring_.n_channels, tree_.n_channels);
  // Hopper+ multi-node with a fast ring: x2 (init.cc); ncclTopoPostset: x2 (max 64).
  if (topo_.n_nodes > 1 && sm >= 90 && ring_.bw_intra > 45.0 && nch < 16) nch *= 2;
  nch = std::min(kMaxChannels, 2 * nch);
  if (settings_.max_nchannels > 0) nch = std::min(nch, settings_.max_nchannels);
  if (settings_.min_nchannels > 0) nch = std::max(nch, settings_.min_nchannels);
  comm_channels_ = std::max(1, nch);
}

void NcclTuner::compute_tables() {
  const int n = topo_.n_ranks, nodes = topo_.n_nodes, ppn = topo_.ppn;
  const int scale = nodes <= 1 ? 0 : nodes == 2 ? 1 : 2;
  const int ll_row = nodes <= 1 ? cc_idx_ : (topo_.intel_cpu ? 0 : 1);  // llMaxBws quirk (§2.3)
  const double ll_max = kLlMaxBw[ll_row][scale];
  const double net_overhead = settings_.net_overhead_us >= 0 ? settings_.net_overhead_us : (topo_.intel_cpu ? 1.0 : 2.0);
  for (int f = 0; f < kNumFuncs; ++f) {
    const auto func = static_cast<Func>(f);
    const int nsteps = func == Func::kAllReduce ? 2 * (n - 1)
                       : (func == Func::kAllGather || func == Func::kReduceScatter) ? n - 1
                                                                                    : n;
    for (int a = 0; a < kNumAlgos; ++a) {
      for (int p = 0; p < kNumProtos; ++p) {
        double& bwv = bw_[f][a][p];
        double& latv = lat_[f][a][p];
        const char*& why = why_[f][a][p];
        bwv = 0;
        latv = 0;
        why = "";
        // Which combinations exist (tuning.cc loops, nccl.md §1.1).
        if (a == kTree && func != Func::kAllReduce) { why = "Tree is only tuned for AllReduce"; continue; }
        if (a == kPat && !(func == Func::kAllGather || func == Func::kReduceScatter)) { why = "PAT only for AllGather/ReduceScatter"; continue; }
        if ((a == kCnDirect || a == kCnChain || a == kNvls || a == kNvlsTree) &&
            !(func == Func::kAllReduce || ((func == Func::kAllGather || func == Func::kReduceScatter) &&
                                          (a == kCnDirect || a == kNvls)))) {
          why = "combination does not exist in NCCL";
          continue;
        }
        if ((a == kCnDirect || a == kCnChain || a == kNvls || a == kNvlsTree || a == kPat) && p != kSimple) {
          why = "Simple protocol only";
          continue;
        }
        if (a == kCnDirect || a == kCnChain) { why = "CollNet (SHARP) is not modelled (NCCL_COLLNET_ENABLE=0)"; continue; }
        // NVLS / NVLSTree rules (tuning.cc, nccl.md §1.1).
        if (a == kNvls || a == kNvlsTree) {
          if (settings_.nvls_enable == 0) { why = "disabled by NCCL_NVLS_ENABLE=0"; continue; }
          if (topo_.sm < 90) { why = "NVLS needs compute capability >= 90 (NVSwitch multicast)"; continue; }
          if (!topo_.nvswitch_multicast) { why = topo_.no_nvls_reason; continue; }
          if (a == kNvlsTree) {
            if (nodes <= 1) { why = "NVLSTree is disabled on a single node"; continue; }
            if (func != Func::kAllReduce) { why = "combination does not exist in NCCL"; continue; }
            if (!topo_.even_nodes) { why = "simccl plans NVLSTree only with the same number of ranks on every node"; continue; }
            if (nvls_.n_channels < 2) { why = "NVLS needs >= 2 graph channels"; continue; }
          }
          if (a == kNvls && nodes > 1) { why = "NVLS on more than one node needs CollNet (SHARP), which is not modelled"; continue; }
          if (func != Func::kAllReduce && ppn > kMaxNvlsArity) { why = "NVLS AllGather/ReduceScatter need <= 32 local ranks"; continue; }
          if (nvls_.n_channels < 2) { why = "NVLS needs >= 2 graph channels"; continue; }
        }
        if (a == kPat) {
          why = n == nodes ? "PAT is not modelled by simccl" : "PAT needs one GPU per node";
          continue;
        }
        if (!settings_.algo_enabled[f][a]) { why = "disabled by NCCL_ALGO"; continue; }
        if (!settings_.proto_enabled[f][p]) { why = "disabled by NCCL_PROTO"; continue; }
        if (n <= 1) { why = "single rank"; continue; }
        // LL128 rules (tuning.cc): compCap >= 70, NVLink inside the node, NIC at <= PXB: holds on
        // the fabricsim host (one NIC per GPU under its PCIe switch).
        if (p == kLL128 && topo_.sm < 70) { why = "LL128 needs compute capability >= 70"; continue; }

        const GraphInfo& gr = a == kTree ? tree_ : (a == kNvls || a == kNvlsTree) ? nvls_ : ring_;
        const int nch = gr.n_channels;
        double bw = nodes <= 2 ? gr.bw_intra : gr.bw_inter;
        if (a == kNvls || a == kNvlsTree) {
          // tuning.cc: per-channel NVLS busBw = min(bwIntra x nvlsEfficiency x (nCh-1)/nCh, x2 for
          // AllReduce (the switch reduces and multicasts in one pass), bwInter (x2 for NVLSTree on
          // <= 2 nodes), NVLSTree: perChMaxNVLSTreeBw).
          double intra = gr.bw_intra * kNvlsEfficiency[cc_idx_] * (nch - 1) / nch;
          intra *= func == Func::kAllReduce ? 2.0 : static_cast<double>(ppn - 1) / ppn;
          const double inter = gr.bw_inter * ((a == kNvlsTree && nodes <= 2) ? 2.0 : 1.0);
          bw = std::min(intra, inter);
          if (a == kNvlsTree) bw = std::min(bw, kPerChMaxNvlsTreeBw[cc_idx_][scale]);
        }
        double bus = nch * bw;
        if (a == kRing && p == kLL) bus = std::min(ll_max, bus * 0.5);
        if (a == kRing && p == kLL128) bus = std::min(bus * 0.92, nch * kPerChMaxRingLL128Bw[cc_idx_][scale]);
        if (a == kTree && func == Func::kAllReduce) {
          bus = std::min(bus * 0.92, nch * kPerChMaxTreeBw[cc_idx_][scale]);
          if (p == kLL) bus = std::min(bus / 3.8, ll_max);
          if (p == kLL128) {
            bus = std::min(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), nch * kPerChMaxTreeLL128Bw[cc_idx_][scale]);
          }
        }
        // busBw -> algBw (tuning.cc): Ring and NVLS x nRanks/nsteps, Tree x 0.5; AllGather and
        // ReduceScatter with a non-ring algorithm (NVLS) are not converted.
        double ratio = (a == kRing || a == kNvls || a == kNvlsTree) ? static_cast<double>(n) / nsteps : 0.5;
        if (a != kRing && (func == Func::kAllGather || func == Func::kReduceScatter)) ratio = 1.0;
        bwv = bus * ratio;

        // Latency (tuning.cc, §2.5).
        const int intra_hw = kHwNvlink;  // NVSwitch: graph.typeIntra == NVL
        const double intra_lat = kHwLat[intra_hw][a][p];
        const double inter_lat = ppn == 1 ? kHwLat[kHwNet][kTree][p] : kHwLat[kHwNet][a][p];
        double lat = kBaseLat[a][p];
        if (a == kRing) {
          if (func == Func::kBroadcast || func == Func::kReduce) {
            // sameChannels graphs: base + one hop latency of the hw class.
            lat += nodes == 1 ? intra_lat : kHwLat[kHwNet][a][p];
          } else {
            double il = intra_lat;
            if (nodes > 1) il = std::max(il, p == kSimple ? 3 * net_overhead : net_overhead);
            const int inter_steps = nodes <= 1 ? 0 : func == Func::kAllReduce ? 2 * (nodes - 1) : nodes - 1;
            lat += (nsteps - inter_steps) * il + inter_steps * inter_lat;
          }
        } else if (a == kTree) {
          lat += 2 * ((ppn - 1) * intra_lat + log2i(static_cast<std::uint64_t>(nodes)) * inter_lat);
        } else if (a == kNvls) {
          lat = intra_lat + (nodes > 1 ? inter_lat : 0.0);  // base latency ignored (tuning.cc)
        } else if (a == kNvlsTree) {
          lat += intra_lat + 2 * log2i(static_cast<std::uint64_t>(nodes)) * inter_lat;
        }
        latv = lat;
      }
    }
  }
}

double NcclTuner::hop_latency_us(Algo a, Proto p, bool net_hop) const {
  const auto ai = static_cast<std::size_t>(a), pi = static_cast<std::size_t>(p);
  if (net_hop) return topo_.ppn == 1 ? kHwLat[kHwNet][kTree][pi] : kHwLat[kHwNet][ai][pi];
  double lat = kHwLat[kHwNvlink][ai][pi];
  if (a == Algo::kRing && topo_.n_nodes > 1) {
    const double net_overhead = settings_.net_overhead_us >= 0 ? settings_.net_overhead_us : (topo_.intel_cpu ? 1.0 : 2.0);
    lat = std::max(lat, p == Proto::kSimple ? 3 * net_overhead : net_overhead);
  }
  return lat;
}

double NcclTuner::base_latency_us(Algo a, Proto p) {
  return kBaseLat[static_cast<std::size_t>(a)][static_cast<std::size_t>(p)];
}

double p2p_latency_us(Proto p, bool across_nodes) {
  const auto pi = static_cast<std::size_t>(p);
  return kBaseLat[kRing][pi] + kHwLat[across_nodes ? kHwNet : kHwNvlink][kRing][pi];
}

std::string NcclTuner::unavailable_reason(Func f, Algo a, Proto p) const {
  if (bw_[idx(f)][idx(a)][idx(p)] > 0) return "";
  const char* w = why_[idx(f)][idx(a)][idx(p)];
  return w && *w ? w : "no bandwidth";
}

double NcclTuner::time_us(Func f, Algo a, Proto p, std::uint64_t nbytes) const {
  double bw = bw_[idx(f)][idx(a)][idx(p)];
  if (bw <= 0) return -1;
  double lat = lat_[idx(f)][idx(a)][idx(p)];
  const int log_size = log2i(nbytes >> 6);
  if (a == Algo::kTree && f == Func::kAllReduce && log_size >= 0 && log_size < 23) {
    bw *= kTreeCorrection[idx(p)][log_size];
  }
  // "Ring plateau" (tuning.cc): multi-node Ring/Simple AllReduce latency x1.4 (x1.9 on Volta).
  if (a == Algo::kRing && p == Proto::kSimple && f == Func::kAllReduce && topo_.n_nodes > 1 &&
      nbytes / (static_cast<std::uint64_t>(comm_channels_) * static_cast<std::uint64_t>(topo_.n_ranks)) >= 64) {
    lat *= topo_.sm >= 80 ? 1.4 : 1.9;
  }
  return lat + static_cast<double>(nbytes) / (1000.0 * bw);
}

CostTable NcclTuner::cost_table(Func f, std::uint64_t nbytes) const {
  CostTable t{};
  for (int a = 0; a < kNumAlgos; ++a) {
    for (int p = 0; p < kNumProtos; ++p) t[a][p] = time_us(f, static_cast<Algo>(a), static_cast<Proto>(p), nbytes);
  }
  return t;
}

TuningDecision NcclTuner::decide(Func f, std::uint64_t nbytes) const {
  const CostTable t = cost_table(func_index_check(f), nbytes);
  int best_a = -1, best_p = -1;
  double best = 0;
  for (int a = 0; a < kNumAlgos; ++a) {
    for (int p = 0; p < kNumProtos; ++p) {
      if (t[a][p] < 0) continue;
      if (best_a < 0 || t[a][p] < best) {
        best = t[a][p];
        best_a = a;
        best_p = p;
      }
    }
  }
  if (best_a < 0) {
    // NCCL refuses the call as well: topoGetAlgoInfo (src/enqueue.cc, NCCL 2.28.9) returns
    // ncclInvalidUsage when NCCL_ALGO / NCCL_PROTO leave no (algorithm, protocol) (nccl.md §2.6).
    std::string reasons;
    bool simple_only_off = false;  // an algorithm that runs only Simple (nccl.md §1.1), Simple disabled
    for (int a = 0; a < kNumAlgos; ++a) {
      if (!settings_.algo_enabled[idx(f)][a]) continue;
      std::string r = unavailable_reason(f, static_cast<Algo>(a), Proto::kSimple);
      if (a != kRing && a != kTree && !settings_.proto_enabled[idx(f)][kSimple]) {
        r += " (it runs only the Simple protocol)";
        simple_only_off = true;
      }
      reasons += std::string(reasons.empty() ? "" : "; ") + algo_name(static_cast<Algo>(a)) + ": " + r;
    }
    throw engine::InputError(!settings_.algo_origin.empty() ? settings_.algo_origin
                             : !settings_.proto_origin.empty() ? settings_.proto_origin
                                                               : std::string("<nccl>"),
                             std::string(settings_.algo_set ? "NCCL_ALGO" : "") +
                                 (settings_.algo_set && settings_.proto_set ? "/" : "") +
                                 (settings_.proto_set ? "NCCL_PROTO" : "") + (settings_.algo_set || settings_.proto_set ? " " : "") +
                                 func_name(f),
                             "no algorithm/protocol simccl can plan is enabled (" + reasons + ")",
                             simple_only_off ? "add Simple to NCCL_PROTO, or enable Ring (and Tree for AllReduce) in NCCL_ALGO"
                                             : "enable Ring (and Tree for AllReduce) with a protocol in NCCL_ALGO / NCCL_PROTO");
  }
  TuningDecision d;
  d.algo = static_cast<Algo>(best_a);
  d.proto = static_cast<Proto>(best_p);
  d.time_us = best;
  // topoGetAlgoInfo (§2.7): threads per protocol, then drop channels while each would get less
  // than threshold bytes per thread.
  int nt = 512;
  if (best_p == kLL128) nt = 640;
  if (best_a == kRing && best_p == kSimple && ring_.bw_intra * ring_.n_channels <= 12.0) nt = 256;  // PCI_BW
  std::uint64_t thr = best_p == kSimple ? 64 : 8;                                  // src/include/comm.h
  if (best_a == kRing && best_p == kLL) thr *= static_cast<std::uint64_t>(topo_.n_ranks);
  if (best_a == kNvls || best_a == kNvlsTree) {
    // topoGetAlgoInfo: NVLS uses nvlsChannels and NCCL_MAX_NTHREADS (640) threads, no reduction.
    d.n_channels = nvls_channels_;
    d.n_threads = 640;
    return d;
  }
  int nc = comm_channels_;
  while (nc > 1 && nbytes < static_cast<std::uint64_t>(nc) * static_cast<std::uint64_t>(nt) * thr) --nc;
  while (nt % 128 == 0 && nt > 128 && nbytes < static_cast<std::uint64_t>(nc) * static_cast<std::uint64_t>(nt) * thr) nt /= 2;
  if (best_p == kSimple) nt += best_a == kRing ? 32 : 128;
  if (best_a == kTree) nt = 640;
  d.n_channels = nc;
  d.n_threads = nt;
  return d;
}

std::string NcclTuner::report(Func f, std::uint64_t nbytes) const {
  std::string out = fmt::format(
      "{} {} B: {} ranks, {} nodes, {} per node, sm{}; ring graph {} ch x {:.1f} GB/s (intra) {:.1f} (inter), "
      "comm channels {}\n",
      func_name(f), nbytes, topo_.n_ranks, topo_.n_nodes, topo_.ppn, topo_.sm, ring_.n_channels, ring_.bw_intra,
      ring_.bw_inter, comm_channels_);
  out += fmt::format("  {:<14} {:>24} {:>24} {:>24}\n", "algorithm", "LL lat/bw/time", "LL128 lat/bw/time",
                     "Simple lat/bw/time");
  for (int a = 0; a < kNumAlgos; ++a) {
    out += fmt::format("  {:<14}", algo_name(static_cast<Algo>(a)));
    for (int p = 0; p < kNumProtos; ++p) {
      const double t = time_us(f, static_cast<Algo>(a), static_cast<Proto>(p), nbytes);
      if (t < 0) {
        out += fmt::format(" {:>24}", "-");
      } else {
        out += fmt::format(" {:>7.1f}/{:>6.1f}/{:>9.1f}", lat_[idx(f)][a][p], bw_[idx(f)][a][p], t);
      }
    }
    out += "\n";
  }
  const TuningDecision d = decide(f, nbytes);
  out += fmt::format("  chosen: {}/{} with {} channels, {} threads, est. {:.2f} us\n", algo_name(d.algo),
                     proto_name(d.proto), d.n_channels, d.n_threads, d.time_us);
  return out;
}

}  // namespace fabricsim::simccl
