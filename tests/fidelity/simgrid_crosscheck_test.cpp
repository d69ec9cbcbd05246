// Issue 9, must-show 4: the flow rung against SimGrid's plain max-min model on the same flows
// over the same links.
//
// What runs on each side:
//  * fabricsim: the real flow rung. Every GPU is an injector LP that hands its flows to the
//    network at their start times with start_coarse_flow (what GpuRankLp does), and the network
//    is models::FlowNetLp, run by the engine; routes are Topology::route with each flow's hash.
//  * SimGrid 3.32 (tests/fidelity/simgrid_maxmin.cpp, a separate process: libsimgrid exports
//    SMPI's MPI_* symbols): one SimGrid link per directed fabricsim link with the same capacity,
//    each flow an explicit route over exactly the links of its fabricsim route, network/model
//    CM02 with weight-S 0, bandwidth/latency factors 1 and no cross-traffic: plain max-min.
//
// Latency accounting (docs/fidelity.md, "flow"): a flow of S bytes posted at t0 reaches the
// network LP at t1 = t0 + D (D = coarse_offset_ps, min(NVLink, NIC latency)); all its S bytes
// share links max-min until they are drained at t_d; its last packet then arrives at
// t_d + (L_1 - D) + tail', with the closed form tail' = tail_ps - last_share_ps
// = sum_{i>=2} (ser(p, R_i) + L_i) (first hop the bottleneck; TransferTiming in general).
// Sharing does not depend on latencies, so we give SimGrid zero-latency links and a comm of S
// bytes starting at t1, and subtract L_1 - D + tail' from our arrival: both sides then compute
// the same quantity, t_d. We assert the sharing phase t_d - t1 (the strictest measure: no fixed
// latency dilutes the error) and the
// flow completion time (arrival - t0) within 1% per flow, and print max and mean errors.
//
// Flows: 128 GPUs (16 hosts x 8) in two fabrics, a random permutation (1-16 MiB plus a partial
// last packet, starting over 100 us), an incast of 24 senders into one GPU (2 MiB, staggered by
// 1 us), and 12 flows from the first leaf to the last (8 MiB) crossing the spine (and the core
// layer of the 3-tier fabric), so flows start and finish while others are active and rates are
// re-solved many times. Flows on the same queue pair would queue in fabricsim (served in order,
// as the packet level's QP) but not in SimGrid, so every (src, dst) pair appears once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/rng.hpp"
#include "engine/simulator.hpp"
#include "models/topology/cluster.hpp"
#include "models/flow/flow_model.hpp"
#include "models/core/packet.hpp"
#include "tests/support/flow_lps.hpp"
#include "tests/support/scratch.hpp"

namespace {

namespace e = fabricsim::engine;
namespace m = fabricsim::models;
using e::SimTime;

constexpr std::uint32_t kEvInject = 200;  // injector LP to itself: post flow (payload index)

struct XFlow {
  std::uint32_t src = 0, dst = 0;
  std::uint64_t bytes = 0;
  SimTime start_ps = 0;
  std::uint64_t hash = 0;
  const char* kind = "";
};

/// A GPU that posts its flows at their start times, as the rank executor does, and records when
/// each flow's last byte arrives at its destination.
class Injector final : public e::Lp {
 public:
  Injector(const m::Topology& topo, e::LpId net, const std::vector<XFlow>& flows, std::vector<SimTime>* arrival)
      : topo_(topo), net_(net), flows_(flows), arrival_(arrival) {}
  void init(e::Context& ctx) override {
    for (std::uint64_t i = 0; i < flows_.size(); ++i) {
      if (flows_[i].src == ctx.self()) ctx.send(ctx.self(), flows_[i].start_ps, kEvInject, i);
    }
  }
  void handle(const e::Event& ev, e::Context& ctx) override {
    switch (ev.kind) {
      case kEvInject: {
        const auto i = ev.get<std::uint64_t>();
        const m::Packet head =
            fabricsim::testing::p2p_flow_head(i, flows_[i].bytes, flows_[i].src, flows_[i].dst, flows_[i].hash, ctx.now());
        m::start_coarse_flow(topo_, m::Fidelity::kFlow, net_, head, ctx, nullptr);
        return;
      }
      case m::kEvFlowArrive:
        (*arrival_)[ev.get<m::Packet>().flow_id] = ctx.now();
        return;
      case m::kEvFlowSent:
        return;
      default:
        FAIL() << "unexpected event " << ev.kind;
    }
  }

 private:
  const m::Topology& topo_;
  e::LpId net_;
  const std::vector<XFlow>& flows_;
  std::vector<SimTime>* arrival_;
};

using IdleSwitchLp = fabricsim::testing::IdleSwitchLp;

/// Runs the flows through the flow rung; returns each flow's arrival time (ps) and sets `solves`
/// to the number of max-min (re)computations the network LP made.
std::vector<SimTime> run_flow_rung(const m::Topology& topo, const std::vector<XFlow>& flows, std::uint64_t* solves) {
  const e::LpId net = topo.num_nodes();
  e::Placement placement;
  placement.proc.assign(net + 1, 0);
  placement.thread.assign(net + 1, 0);
  std::vector<SimTime> arrival(flows.size(), -1);
  e::Simulator sim(MPI_COMM_SELF, placement, e::kInfinity);
  std::vector<std::unique_ptr<e::Lp>> lps;
  for (e::LpId id = 0; id < net; ++id) {
    if (id < topo.num_gpus()) {
      lps.push_back(std::make_unique<Injector>(topo, net, flows, &arrival));
    } else {
      lps.push_back(std::make_unique<IdleSwitchLp>());
    }
    sim.add_lp(id, lps.back().get());
  }
  m::FlowNetLp network(topo, net);
  sim.add_lp(net, &network);
  sim.run();
  EXPECT_EQ(network.flows(), flows.size());
  *solves = network.solves();
  return arrival;
}

/// The flows described at the top of the file; seeded, so the same on every run.
std::vector<XFlow> make_flows(const m::Topology& topo, std::uint64_t seed) {
  const std::uint32_t G = topo.num_gpus();
  e::CounterRng rng(seed, 0);
  std::vector<XFlow> flows;
  std::set<std::pair<std::uint32_t, std::uint32_t>> pairs;
  auto add = [&](std::uint32_t s, std::uint32_t d, std::uint64_t bytes, SimTime start, const char* kind) {
    if (s == d || !pairs.emplace(s, d).second) return;
    flows.push_back({s, d, bytes, start, e::mix64(seed ^ (0x1000 + flows.size())), kind});
  };
  std::vector<std::uint32_t> perm(G);
  for (std::uint32_t i = 0; i < G; ++i) perm[i] = i;
  for (std::uint32_t i = G - 1; i > 0; --i) std::swap(perm[i], perm[rng.next_below(i + 1)]);
  for (std::uint32_t g = 0; g < G; ++g) {
    const std::uint64_t bytes = (1 + rng.next_below(16)) * (1u << 20) + rng.next_below(4096);
    add(g, perm[g], bytes, static_cast<SimTime>(rng.next_below(100'000'000)), "permutation");
  }
  const std::uint32_t victim = 77;
  for (std::uint32_t k = 0, added = 0; added < 24 && k < 4 * G; ++k) {
    const std::uint32_t s = static_cast<std::uint32_t>(rng.next_below(G));
    const std::size_t before = flows.size();
    add(s, victim, 2u << 20, 20'000'000 + static_cast<SimTime>(added) * 1'000'000, "incast");
    added += flows.size() > before ? 1 : 0;
  }
  const std::uint32_t per_leaf = topo.spec().nics_per_leaf;
  for (std::uint32_t k = 0; k < 12; ++k) {
    add(k, G - per_leaf + static_cast<std::uint32_t>(rng.next_below(per_leaf)), 8u << 20,
        static_cast<SimTime>(rng.next_below(30'000'000)), "far");
  }
  return flows;
}

struct Errors {
  double max_phase = 0, mean_phase = 0, max_fct = 0, mean_fct = 0;
  double max_phase_nic = 0;  // over flows that leave through the NIC (not NVLink)
  std::size_t flows = 0, shared = 0, spine = 0, worst = 0;
  std::uint64_t solves = 0;
};

Errors crosscheck(const std::string& name, const m::ClusterSpec& spec) {
  const m::Topology topo(spec);
  const std::vector<XFlow> flows = make_flows(topo, 12345);
  const m::LinkIndex index(topo);
  Errors err;
  const std::vector<double> cap = index.capacities(topo);

  // SimGrid input: the links the flows use and each flow's sharing phase.
  const fabricsim::testing::ScratchDir scratch("simgrid_" + name);  // kept if the test fails
  const std::string dir = scratch.path();
  const std::string in = dir + "/flows.txt", out = dir + "/simgrid.txt";
  std::vector<m::FlowPath> paths;
  std::vector<m::TransferTiming> timing;
  {
    std::set<std::uint32_t> used;
    std::ostringstream fl;
    for (std::size_t i = 0; i < flows.size(); ++i) {
      const XFlow& f = flows[i];
      paths.push_back(m::route_path(topo, &index, f.src, f.dst, f.hash));
      timing.push_back(m::transfer_timing(paths.back(), f.bytes));
      const m::FlowPath& p = paths.back();
      fl << "flow " << i << ' ' << f.src << ' ' << f.dst << ' ' << f.start_ps + m::coarse_offset_ps(topo) << ' '
         << f.bytes << ' ' << p.hops;
      for (std::uint32_t h = 0; h < p.hops; ++h) {
        fl << ' ' << p.link[h];
        used.insert(p.link[h]);
      }
      fl << '\n';
    }
    std::ofstream os(in);
    os << "# " << name << ": " << flows.size() << " flows on " << topo.num_gpus() << " GPUs\n";
    for (std::uint32_t l : used) os << "link " << l << ' ' << static_cast<std::uint64_t>(cap[l]) << '\n';
    os << fl.str();
  }
  const std::string cmd = std::string(FABRICSIM_SIMGRID_MAXMIN) + " " + in + " " + out;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::map<std::size_t, double> sg_finish;
  {
    std::ifstream is(out);
    std::string line;
    while (std::getline(is, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream ls(line);
      std::size_t id = 0;
      double t = 0;
      ls >> id >> t;
      sg_finish[id] = t;
    }
  }
  EXPECT_EQ(sg_finish.size(), flows.size());

  const std::vector<SimTime> arrival = run_flow_rung(topo, flows, &err.solves);
  err.flows = flows.size();
  for (std::size_t i = 0; i < flows.size(); ++i) {
    SCOPED_TRACE(name + " flow " + std::to_string(i) + " (" + flows[i].kind + ")");
    if (arrival[i] < 0 || sg_finish.count(i) == 0) {
      ADD_FAILURE() << "no completion: fabricsim " << arrival[i] << ", SimGrid " << sg_finish.count(i);
      continue;
    }
    const m::FlowPath& p = paths[i];
    const double t0 = static_cast<double>(flows[i].start_ps);
    const SimTime d = m::coarse_offset_ps(topo);
    const double t1 = t0 + static_cast<double>(d);
    const double tail = static_cast<double>(p.latency_ps[0] - d + timing[i].tail_ps - timing[i].last_share_ps);
    const double ours_drain = static_cast<double>(arrival[i]) - tail;
    const double sg_drain = sg_finish[i];
    const double phase = std::fabs(ours_drain - sg_drain) / (sg_drain - t1);
    const double fct = std::fabs(static_cast<double>(arrival[i]) - (sg_drain + tail)) / (sg_drain + tail - t0);
    EXPECT_LT(phase, 0.01) << "sharing phase: fabricsim " << ours_drain - t1 << " ps, SimGrid " << sg_drain - t1 << " ps";
    EXPECT_LT(fct, 0.01);
    if (phase > err.max_phase) err.worst = i;
    if (!topo.same_scaleup_domain(flows[i].src, flows[i].dst)) err.max_phase_nic = std::max(err.max_phase_nic, phase);
    err.max_phase = std::max(err.max_phase, phase);
    err.max_fct = std::max(err.max_fct, fct);
    err.mean_phase += phase / static_cast<double>(flows.size());
    err.mean_fct += fct / static_cast<double>(flows.size());
    // Non-triviality: a flow alone would drain at its bottleneck rate.
    const double alone = static_cast<double>(flows[i].bytes) * 8e12 / static_cast<double>(timing[i].bottleneck_bps);
    if (sg_drain - t1 > 1.05 * alone) ++err.shared;
    if (p.hops >= 4) ++err.spine;
  }
  const XFlow& w = flows[err.worst];
  std::printf("SimGrid cross-check %s: %zu flows (%zu slowed > 5%% by sharing, %zu through the spine), "
              "%llu max-min solves; relative error of the sharing phase max %.3g mean %.3g, of the FCT "
              "max %.3g mean %.3g (NIC flows: max %.3g); worst: flow %zu (%s, gpu %u -> %u, %u hops, %llu bytes)\n",
              name.c_str(), err.flows, err.shared, err.spine, static_cast<unsigned long long>(err.solves),
              err.max_phase, err.mean_phase, err.max_fct, err.mean_fct, err.max_phase_nic, err.worst, w.kind, w.src, w.dst,
              paths[err.worst].hops, static_cast<unsigned long long>(w.bytes));
  return err;
}

m::ClusterSpec cluster128() {
  m::ClusterSpec s;
  s.hosts = 16;
  s.gpus_per_host = 8;
  s.fabric = m::FabricKind::kLeafSpine;
  s.nics_per_leaf = 16;  // 8 leaves of 16 NICs
  s.source = "<simgrid cross-check>";
  return s;
}

// Leaf-spine, 4:1 oversubscribed leaves (16 x 400G down, 4 x 400G up: 4 spines).
TEST(SimGridCrossCheck, LeafSpineFourToOne) {
  m::ClusterSpec s = cluster128();
  s.oversub_leaf = 4;
  const Errors e = crosscheck("leaf_spine_4to1", s);
  EXPECT_GE(e.flows, 150u);
  EXPECT_GE(e.shared, e.flows / 4) << "too few flows actually shared a link: the check would prove little";
  EXPECT_GE(e.spine, e.flows / 2);
}

// 3-tier Clos, 2 pods: leaves 2:1 (8 spines per pod), spines 2:1 toward 16 cores; "far" flows
// cross pods (6 hops).
TEST(SimGridCrossCheck, ThreeTierTwoPodsTwoToOne) {
  m::ClusterSpec s = cluster128();
  s.tiers = 3;
  s.pods = 2;
  s.oversub_leaf = 2;
  s.oversub_spine = 2;
  const Errors e = crosscheck("clos3_2pods_2to1", s);
  EXPECT_GE(e.flows, 150u);
  EXPECT_GE(e.shared, e.flows / 4);
  EXPECT_GE(e.spine, e.flows / 2);
}

}  // namespace
