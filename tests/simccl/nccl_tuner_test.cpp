// The cost model's (algorithm, protocol, channels) per size for an
// 8xH100 NVSwitch node and for 2, 4 and 16 such nodes with 8x400 Gb/s NICs. Expected values are
// derived here, independently of simccl/nccl_tuner.cpp, from the formulas and tables of
// ../shared/reference/nccl.md §2 (NCCL 2.28 src/graph/tuning.cc, src/enqueue.cc), restricted to
// what simccl models (Ring, Tree and single-node NVLS; NVLSTree/CollNet/PAT unavailable).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "engine/errors.hpp"
#include "simccl/nccl_tuner.hpp"

namespace {

using namespace fabricsim::simccl;

struct Expect {
  Algo algo;
  Proto proto;
  int channels;
};

// Independent re-derivation for AllReduce on H100 (sm90, Intel CPU): Ring, Tree, NVLS on one node
// and NVLSTree across nodes (NVLS across nodes needs CollNet: unavailable).
// Graph: 1 node: NVLink 18 x 20.6 = 370.8 GB/s -> sm90 intra ladder 60 -> 6 channels -> dup to
// 12 x 30; comm channels 24. Multi-node: min(PCIe Gen5 48, NIC 50) -> inter ladder 48 ->
// 8 NICs x 1 = 8 channels x 48 (no dup: bw < 50 with > 4 channels on sm > 80); comm channels
// 8 x 2 (Hopper multi-node) x 2 (postset) = 32.
Expect derive(int nodes, std::uint64_t bytes) {
  const int ppn = 8, n = nodes * ppn, nsteps = 2 * (n - 1);
  const int gch = nodes == 1 ? 12 : 8;
  const double gbw = nodes == 1 ? 30.0 : 48.0;
  const int comm_ch = nodes == 1 ? 24 : 32;
  const int scale = nodes == 1 ? 0 : nodes == 2 ? 1 : 2;
  const double llmax[3] = {141.0, 39.0, 20.4};          // 1 node: Hopper row; multi-node: row 0 (Intel)
  const double ring_ll128_cap[3] = {36.7, 36.7, 36.7};  // perChMaxRingLL128Bws Hopper
  const double tree_cap[3] = {38.7, 41.4, 36.0};        // perChMaxTreeBws Hopper
  const double tree_ll128_cap[3] = {36.7, 36.7, 29.0};  // perChMaxTreeLL128Bws Hopper
  const double corr[3][23] = {
      {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
      {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
      {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};
  const double base[2][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}};            // Tree, Ring
  const double nvl[2][3] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}};              // NVLINK hw latency
  const double net[2][3] = {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}};               // NET hw latency
  const double bus = gch * gbw;
  double best = 1e300;
  Expect e{Algo::kRing, Proto::kSimple, 1};
  int logsz = -1;
  for (std::uint64_t v = bytes >> 6; v; v >>= 1) ++logsz;
  // NVLS (one node): graph = 8 heads; per channel the head's NVSwitch link carries 2 x bw and the
  // other 7 GPUs' 1 x bw (search.cc ncclTopoSearchTryNvls), so bwIntra = the largest sm90 intra
  // ladder speed <= 370.8 / 9 = 41.2 -> 40; bwInter = the ladder top 60 (pass 2 raises it);
  // busBw = 8 x min(40 x 0.85 x 7/8 x 2, 60) = 476; algBw = 476 x 8/14; latency = NVLINK NVLS 25 us.
  double nvls_t = 1e300;
  if (nodes == 1) {
    const double ladder[] = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
    double bw_intra = 3;
    for (double sp : ladder) {
      if (sp <= 18 * 20.6 / 9) {
        bw_intra = sp;
        break;
      }
    }
    const double per_ch = std::min(bw_intra * 0.85 * 7 / 8 * 2, 60.0);
    nvls_t = 25.0 + bytes / (1000.0 * 8 * per_ch * n / nsteps);
  }
  // NVLSTree (2+ nodes): the NVLS graph with 8 heads (one per NIC, NVIDIA/nccl#1041), bwIntra =
  // the largest sm90 inter-ladder speed <= 370.8 / 9 (48, 45, 42, 40 -> 40), bwInter = the first
  // inter-ladder speed <= min(PCIe Gen5 48, NIC 50) = 48, x2 on <= 2 nodes; per channel
  // min(40 x 0.85 x 7/8 x 2, bwInter, perChMaxNVLSTreeBw Hopper 57.7 (2 nodes) / 45.5 (more));
  // latency 0 + 25 (NVLINK) + 2 log2(nodes) x 20.9 (NET NVLSTree).
  double nvlstree_t = 1e300;
  if (nodes > 1) {
    const double per_ch = std::min({40 * 0.85 * 7 / 8 * 2, 48.0 * (nodes <= 2 ? 2 : 1), nodes == 2 ? 57.7 : 45.5});
    nvlstree_t = 25.0 + 2 * std::log2(nodes) * 20.9 + bytes / (1000.0 * 8 * per_ch * n / nsteps);
  }
  for (int a : {0, 1}) {      // Tree, Ring (NCCL index order)
    for (int p : {0, 1, 2}) {  // LL, LL128, Simple
      double bw, lat;
      if (a == 1) {
        double b = bus;
        if (p == 0) b = std::min(llmax[scale], bus * 0.5);
        if (p == 1) b = std::min(bus * 0.92, gch * ring_ll128_cap[scale]);
        bw = b * n / nsteps;
        const double il = nodes > 1 ? std::max(nvl[1][p], p == 2 ? 3.0 : 1.0) : nvl[1][p];
        const int inter = nodes > 1 ? 2 * (nodes - 1) : 0;
        lat = base[1][p] + (nsteps - inter) * il + inter * net[1][p];
        if (p == 2 && nodes > 1 && bytes / (std::uint64_t(comm_ch) * n) >= 64) lat *= 1.4;
      } else {
        double b = std::min(bus * 0.92, gch * tree_cap[scale]);
        if (p == 0) b = std::min(b / 3.8, llmax[scale]);
        if (p == 1) b = std::min(b * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), gch * tree_ll128_cap[scale]);
        bw = b * 0.5;
        if (logsz >= 0 && logsz < 23) bw *= corr[p][logsz];
        lat = base[0][p] + 2 * ((ppn - 1) * nvl[0][p] + std::log2(nodes) * net[0][p]);
      }
      const double t = lat + bytes / (1000.0 * bw);
      if (t < best) {
        best = t;
        e.algo = a == 0 ? Algo::kTree : Algo::kRing;
        e.proto = static_cast<Proto>(p);
      }
    }
  }
  if (nvls_t < best) return Expect{Algo::kNvls, Proto::kSimple, 16};  // NVLS_NCHANNELS_SM90, no reduction
  if (nvlstree_t < best) return Expect{Algo::kNvlsTree, Proto::kSimple, 16};
  // Channels: drop while nBytes < nc x nThreads x threshold (LL: 512 thr, 8 B (x nRanks for
  // Ring); LL128: 640, 8 B; Simple: 512, 64 B).
  const int nt = e.proto == Proto::kLL128 ? 640 : 512;
  std::uint64_t thr = e.proto == Proto::kSimple ? 64 : 8;
  if (e.proto == Proto::kLL && e.algo == Algo::kRing) thr *= n;
  int nc = comm_ch;
  while (nc > 1 && bytes < std::uint64_t(nc) * nt * thr) --nc;
  e.channels = nc;
  return e;
}

TuningTopology h100(int nodes) {
  TuningTopology t;
  t.n_ranks = 8 * nodes;
  t.n_nodes = nodes;
  t.ppn = 8;
  t.sm = 90;
  t.nic_GBps = 50;  // 400 Gb/s
  t.nics_per_node = 8;
  t.nvswitch_multicast = true;  // HGX H100: NVSwitch gen3 with NVLink SHARP
  return t;
}

TEST(NcclTuner, GraphsAndChannelsOfH100) {
  const NcclTuner one(h100(1), NcclSettings{});
  EXPECT_EQ(one.ring_graph().n_channels, 12);
  EXPECT_DOUBLE_EQ(one.ring_graph().bw_intra, 30.0);
  EXPECT_EQ(one.comm_channels(), 24);  // matches nccl.md §7's worked hint
  const NcclTuner two(h100(2), NcclSettings{});
  EXPECT_EQ(two.ring_graph().n_channels, 8);
  EXPECT_DOUBLE_EQ(two.ring_graph().bw_inter, 48.0);
  EXPECT_EQ(two.comm_channels(), 32);
  // §7: ring AllReduce busBw model 360 -> algBw 360 x 8/14; LL128 331 busBw; LL 141 busBw.
  EXPECT_NEAR(one.bandwidth(Func::kAllReduce, Algo::kRing, Proto::kSimple), 360.0 * 8 / 14, 1e-9);
  EXPECT_NEAR(one.bandwidth(Func::kAllReduce, Algo::kRing, Proto::kLL128), 331.2 * 8 / 14, 1e-9);
  EXPECT_NEAR(one.bandwidth(Func::kAllReduce, Algo::kRing, Proto::kLL), 141.0 * 8 / 14, 1e-9);
  EXPECT_NEAR(one.latency(Func::kAllReduce, Algo::kRing, Proto::kLL), 6.6 + 14 * 0.6, 1e-9);
  EXPECT_NEAR(one.latency(Func::kAllReduce, Algo::kTree, Proto::kSimple), 8.4 + 2 * 7 * 4.0, 1e-9);
}

TEST(NcclTuner, AllReduceChoicePerSizeFollowsTheReferenceFormulas) {
  for (int nodes : {1, 2, 4, 16}) {
    const NcclTuner t(h100(nodes), NcclSettings{});
    for (std::uint64_t bytes = 8; bytes <= (8ull << 30); bytes *= 2) {
      const Expect e = derive(nodes, bytes);
      const TuningDecision d = t.decide(Func::kAllReduce, bytes);
      SCOPED_TRACE("nodes " + std::to_string(nodes) + " bytes " + std::to_string(bytes));
      EXPECT_EQ(d.algo, e.algo);
      EXPECT_EQ(d.proto, e.proto);
      EXPECT_EQ(d.n_channels, e.channels);
    }
  }
}

TEST(NcclTuner, HandPickedPointsOnOneNode) {
  const NcclTuner t(h100(1), NcclSettings{});
  // 8 B: Ring/LL 15.0 us beats Tree/LL 15.2 us; 1 channel.
  auto d = t.decide(Func::kAllReduce, 8);
  EXPECT_EQ(d.algo, Algo::kRing);
  EXPECT_EQ(d.proto, Proto::kLL);
  EXPECT_EQ(d.n_channels, 1);
  // 8 MiB: NVLS 25 + 8388608/272000 = 55.8 us < Ring/LL128 40.6 + 8388608/189257 = 84.9 us.
  d = t.decide(Func::kAllReduce, 8u << 20);
  EXPECT_EQ(d.algo, Algo::kNvls);
  EXPECT_EQ(d.proto, Proto::kSimple);
  EXPECT_NEAR(d.time_us, 25 + 8388608.0 / (1000 * 476.0 * 8 / 14), 1e-6);
  EXPECT_EQ(d.n_channels, 16);
  EXPECT_EQ(d.n_threads, 640);
  // 1 GiB: NVLS (272 GB/s algBw) beats Ring/Simple (205.7).
  d = t.decide(Func::kAllReduce, 1u << 30);
  EXPECT_EQ(d.algo, Algo::kNvls);
  // Without NVLS (NCCL_NVLS_ENABLE=0, or no NVSwitch multicast): the ring cases of before.
  NcclSettings off;
  off.nvls_enable = 0;
  const NcclTuner t0(h100(1), off);
  EXPECT_EQ(t0.unavailable_reason(Func::kAllReduce, Algo::kNvls, Proto::kSimple), "disabled by NCCL_NVLS_ENABLE=0");
  d = t0.decide(Func::kAllReduce, 8u << 20);
  EXPECT_EQ(d.algo, Algo::kRing);
  EXPECT_EQ(d.proto, Proto::kLL128);
  EXPECT_NEAR(d.time_us, 40.6 + 8388608.0 / (1000 * 331.2 * 8 / 14), 1e-6);
  d = t0.decide(Func::kAllReduce, 1u << 30);
  EXPECT_EQ(d.algo, Algo::kRing);
  EXPECT_EQ(d.proto, Proto::kSimple);
  EXPECT_EQ(d.n_channels, 24);
}

TEST(NcclTuner, NvlsRowsFollowTheReference) {
  const NcclTuner one(h100(1), NcclSettings{});
  EXPECT_EQ(one.nvls_graph().n_channels, 8);
  EXPECT_DOUBLE_EQ(one.nvls_graph().bw_intra, 40.0);
  EXPECT_NEAR(one.bandwidth(Func::kAllReduce, Algo::kNvls, Proto::kSimple), 8 * 40 * 0.85 * 7 / 8 * 2 * 8 / 14, 1e-9);
  EXPECT_NEAR(one.latency(Func::kAllReduce, Algo::kNvls, Proto::kSimple), 25.0, 1e-12);
  EXPECT_EQ(one.unavailable_reason(Func::kAllReduce, Algo::kNvlsTree, Proto::kSimple),
            "NVLSTree is disabled on a single node");
  EXPECT_EQ(one.unavailable_reason(Func::kAllReduce, Algo::kNvls, Proto::kLL), "Simple protocol only");
  for (int nodes : {2, 4, 16}) {
    const NcclTuner t(h100(nodes), NcclSettings{});
    EXPECT_EQ(t.unavailable_reason(Func::kAllReduce, Algo::kNvls, Proto::kSimple),
              "NVLS on more than one node needs CollNet (SHARP), which is not modelled");
    EXPECT_EQ(t.nvls_graph().n_channels, 8);
    EXPECT_DOUBLE_EQ(t.nvls_graph().bw_intra, 40.0);
    EXPECT_DOUBLE_EQ(t.nvls_graph().bw_inter, 48.0);
    const int n = 8 * nodes;
    EXPECT_NEAR(t.bandwidth(Func::kAllReduce, Algo::kNvlsTree, Proto::kSimple),
                8 * (nodes == 2 ? 57.7 : 45.5) * n / (2.0 * (n - 1)), 1e-9);
    EXPECT_NEAR(t.latency(Func::kAllReduce, Algo::kNvlsTree, Proto::kSimple), 25 + 2 * std::log2(nodes) * 20.9, 1e-9);
  }
  // 2 nodes, 1 GiB: NVLSTree (66.8 us + 2^30 B / 246.2 GB/s) beats Ring/Simple (131.6 us + 2^30 / 204.8).
  EXPECT_EQ(NcclTuner(h100(2), NcclSettings{}).decide(Func::kAllReduce, 1u << 30).algo, Algo::kNvlsTree);
  TuningTopology uneven = h100(2);
  uneven.even_nodes = false;
  EXPECT_NE(NcclTuner(uneven, NcclSettings{}).unavailable_reason(Func::kAllReduce, Algo::kNvlsTree, Proto::kSimple), "");
  TuningTopology a100 = h100(1);
  a100.sm = 80;
  EXPECT_EQ(NcclTuner(a100, NcclSettings{}).unavailable_reason(Func::kAllReduce, Algo::kNvls, Proto::kSimple),
            "NVLS needs compute capability >= 90 (NVSwitch multicast)");
  TuningTopology flow = h100(1);
  flow.nvswitch_multicast = false;
  flow.no_nvls_reason = "coarse rung";
  EXPECT_EQ(NcclTuner(flow, NcclSettings{}).unavailable_reason(Func::kAllReduce, Algo::kNvls, Proto::kSimple),
            "coarse rung");
  // NCCL_ALGO=NVLS on 2 nodes leaves nothing (NVLSTree is another algorithm): an input error.
  NcclSettings only;
  for (auto& row : only.algo_enabled) row.fill(false);
  for (auto& row : only.algo_enabled) row[static_cast<std::size_t>(Algo::kNvls)] = true;
  only.algo_set = true;
  EXPECT_THROW((void)NcclTuner(h100(2), only).decide(Func::kAllReduce, 1 << 20), fabricsim::engine::InputError);
  EXPECT_EQ(NcclTuner(h100(1), only).decide(Func::kAllReduce, 1024).algo, Algo::kNvls);
}

TEST(NcclTuner, AllGatherAndBroadcastUseRingOnly) {
  const NcclTuner t(h100(2), NcclSettings{});
  for (std::uint64_t b : {1024ull, 1ull << 20, 1ull << 30}) {
    EXPECT_EQ(t.decide(Func::kAllGather, b).algo, Algo::kRing);
    EXPECT_EQ(t.decide(Func::kBroadcast, b).algo, Algo::kRing);
    EXPECT_LT(t.time_us(Func::kAllGather, Algo::kTree, Proto::kSimple, b), 0);
    EXPECT_LT(t.time_us(Func::kAllGather, Algo::kNvls, Proto::kSimple, b), 0);
  }
  EXPECT_NE(t.unavailable_reason(Func::kAllReduce, Algo::kNvls, Proto::kSimple).find("CollNet"), std::string::npos);
  // One node: NVLS AllGather/ReduceScatter busBw = 8 x min(40 x 0.85 x 7/8 x 7/8, 60) = 208.25
  // GB/s, not converted to algBw (tuning.cc: only ring-type AllGather/ReduceScatter are); the
  // ring (360 x 8/7 = 411 GB/s algBw, lower latency) still wins at every size.
  const NcclTuner one(h100(1), NcclSettings{});
  for (Func f : {Func::kAllGather, Func::kReduceScatter}) {
    EXPECT_NEAR(one.bandwidth(f, Algo::kNvls, Proto::kSimple), 8 * 40 * 0.85 * 7 / 8 * 7 / 8, 1e-9);
    EXPECT_NEAR(one.latency(f, Algo::kNvls, Proto::kSimple), 25.0, 1e-12);
    for (std::uint64_t b = 1024; b <= (8ull << 30); b *= 8) EXPECT_NE(one.decide(f, b).algo, Algo::kNvls) << b;
  }
}

TEST(NcclTuner, SettingsOverrideTheChoice) {
  NcclSettings s;
  s.algo_enabled = parse_algo_list("Tree", "t", "NCCL_ALGO");
  s.proto_enabled = parse_proto_list("Simple", "t", "NCCL_PROTO");
  s.max_nchannels = 4;
  const NcclTuner t(h100(2), s);
  EXPECT_EQ(t.comm_channels(), 4);
  const auto d = t.decide(Func::kAllReduce, 1u << 30);
  EXPECT_EQ(d.algo, Algo::kTree);
  EXPECT_EQ(d.proto, Proto::kSimple);
  EXPECT_EQ(d.n_channels, 4);
  NcclSettings m;
  m.min_nchannels = 40;
  EXPECT_EQ(NcclTuner(h100(1), m).comm_channels(), 40);
  EXPECT_THROW(t.decide(Func::kAllGather, 1024), fabricsim::engine::InputError);  // Tree only: no AllGather
}

TEST(NcclTuner, A100NodeGraph) {
  TuningTopology a = h100(1);
  a.sm = 80;  // 12 NVLinks x 20 = 240 GB/s -> default ladder 40 -> 6 ch -> dup 12 x 20 -> 24
  const NcclTuner t(a, NcclSettings{});
  EXPECT_EQ(t.ring_graph().n_channels, 12);
  EXPECT_DOUBLE_EQ(t.ring_graph().bw_intra, 20.0);
  EXPECT_EQ(t.comm_channels(), 24);
}

}  // namespace
