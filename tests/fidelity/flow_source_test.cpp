// The flow rung's direct path (models::FlowSource): a GPU delivers a
// single-packet flow itself, without the network LP, when the network LP's answer is already
// known. The claim is exactness: every flow arrives, and every send completes, at the same
// picosecond as when all flows go through models::FlowNetLp. Checked here by running the same
// flows both ways on a 4:1 oversubscribed leaf-spine (flows of one packet, of exactly one MTU,
// empty, and of many packets; several per instant on one queue pair; single-packet flows
// posted behind a large one on its queue pair, which must wait for it; an incast that shares
// links), plus the closed form of a lone single-packet flow.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/rng.hpp"
#include "engine/simulator.hpp"
#include "models/topology/cluster.hpp"
#include "models/flow/flow_model.hpp"
#include "models/core/packet.hpp"
#include "tests/support/flow_lps.hpp"

namespace {

namespace e = fabricsim::engine;
namespace m = fabricsim::models;
using e::SimTime;

constexpr std::uint32_t kEvPost = 300;  // GPU to itself: post batch (payload index)

struct TFlow {
  std::uint32_t src = 0, dst = 0;
  std::uint64_t bytes = 0;
  std::uint32_t channel = 0;  // queue pair: (src, dst, channel)
};

/// Flows posted by one GPU at one instant, in this order.
struct Batch {
  std::uint32_t src = 0;
  SimTime at_ps = 0;
  std::vector<std::uint32_t> flows;  // indices into the flow list
};

struct Outcome {
  std::vector<SimTime> arrival, sent;
  std::uint64_t direct = 0, net = 0;
};

class Gpu final : public e::Lp {
 public:
  Gpu(const m::Topology& topo, e::LpId net, bool direct, const std::vector<TFlow>& flows,
      const std::vector<Batch>& batches, Outcome* out)
      : topo_(topo), net_(net), direct_(direct), flows_(flows), batches_(batches), out_(out) {}
  ~Gpu() override {
    out_->direct += source_.direct_flows();
    out_->net += source_.net_flows();
  }
  void init(e::Context& ctx) override {
    for (std::uint64_t b = 0; b < batches_.size(); ++b) {
      if (batches_[b].src == ctx.self()) ctx.send(ctx.self(), batches_[b].at_ps, kEvPost, b);
    }
  }
  void handle(const e::Event& ev, e::Context& ctx) override {
    switch (ev.kind) {
      case kEvPost:
        for (std::uint32_t i : batches_[ev.get<std::uint64_t>()].flows) {
          m::Packet head = fabricsim::testing::p2p_flow_head(
              i, flows_[i].bytes, flows_[i].src, flows_[i].dst,
              e::mix64(0x5EED ^ (std::uint64_t{flows_[i].src} << 40) ^ (std::uint64_t{flows_[i].dst} << 8) ^ flows_[i].channel),
              ctx.now());
          head.conn = m::coarse_conn(flows_[i].channel, 0, 1);
          if (direct_) {
            source_.post(topo_, net_, head, ctx);
          } else {
            m::start_coarse_flow(topo_, m::Fidelity::kFlow, net_, head, ctx, nullptr);
          }
        }
        return;
      case m::kEvFlowArrive:
        out_->arrival[ev.get<m::Packet>().flow_id] = ctx.now();
        return;
      case m::kEvFlowSent:
        if (direct_ && ev.src == net_) source_.net_sent();
        out_->sent[ev.get<std::uint64_t>()] = ctx.now();
        return;
      default:
        FAIL() << "unexpected event " << ev.kind;
    }
  }

 private:
  const m::Topology& topo_;
  e::LpId net_;
  bool direct_;
  const std::vector<TFlow>& flows_;
  const std::vector<Batch>& batches_;
  Outcome* out_;
  m::FlowSource source_;
};

using IdleSwitchLp = fabricsim::testing::IdleSwitchLp;

Outcome run(const m::Topology& topo, const std::vector<TFlow>& flows, const std::vector<Batch>& batches, bool direct) {
  const e::LpId net = topo.num_nodes();
  e::Placement placement;
  placement.proc.assign(net + 1, 0);
  placement.thread.assign(net + 1, 0);
  Outcome out;
  out.arrival.assign(flows.size(), -1);
  out.sent.assign(flows.size(), -1);
  {
    e::Simulator sim(MPI_COMM_SELF, placement, e::kInfinity);
    std::vector<std::unique_ptr<e::Lp>> lps;
    for (e::LpId id = 0; id < net; ++id) {
      if (id < topo.num_gpus()) {
        lps.push_back(std::make_unique<Gpu>(topo, net, direct, flows, batches, &out));
      } else {
        lps.push_back(std::make_unique<IdleSwitchLp>());
      }
      sim.add_lp(id, lps.back().get());
    }
    m::FlowNetLp network(topo, net);
    sim.add_lp(net, &network);
    sim.run();
  }  // the GPUs add their FlowSource counts when destroyed
  return out;
}

m::ClusterSpec leaf_spine16() {
  m::ClusterSpec s;
  s.hosts = 4;
  s.gpus_per_host = 4;
  s.fabric = m::FabricKind::kLeafSpine;
  s.nics_per_leaf = 8;  // 2 leaves
  s.oversub_leaf = 4;
  s.source = "<flow source test>";
  return s;
}

TEST(FlowSource, DirectFlowsArriveAndCompleteExactlyAsThroughTheNetworkLp) {
  const m::Topology topo(leaf_spine16());
  const std::uint32_t G = topo.num_gpus();
  const std::uint32_t mtu = topo.spec().mtu_bytes;
  std::vector<TFlow> flows;
  std::vector<Batch> batches;
  e::CounterRng rng(42, 0);
  const std::uint64_t sizes[] = {1024, mtu, 0, 3 * std::uint64_t{mtu} + 100, 256u << 10};
  // Rounds of a ring-like exchange: every GPU posts 1-3 flows at the same instant to its
  // neighbour (same queue pair or two), sizes mixed; instants are 0.5-3 us apart, so a large flow
  // is often still in service (its queue pair busy) when the next batch is posted.
  for (std::uint32_t round = 0; round < 40; ++round) {
    for (std::uint32_t g = 0; g < G; ++g) {
      Batch b;
      b.src = g;
      b.at_ps = static_cast<SimTime>(round) * 2'000'000 + static_cast<SimTime>(rng.next_below(4)) * 500'000;
      const std::uint32_t n = 1 + static_cast<std::uint32_t>(rng.next_below(3));
      for (std::uint32_t k = 0; k < n; ++k) {
        const std::uint32_t dst = (g + 1 + static_cast<std::uint32_t>(rng.next_below(2)) * 4) % G;
        b.flows.push_back(static_cast<std::uint32_t>(flows.size()));
        flows.push_back({g, dst, sizes[rng.next_below(5)], static_cast<std::uint32_t>(rng.next_below(2))});
      }
      batches.push_back(b);
    }
  }
  // An incast of 256 KiB flows into GPU 0 from the other leaf (shared uplinks), during the rounds.
  for (std::uint32_t g = 8; g < G; ++g) {
    batches.push_back({g, 10'000'000, {static_cast<std::uint32_t>(flows.size())}});
    flows.push_back({g, 0, 256u << 10, 7});
  }
  std::uint64_t single = 0;
  for (const TFlow& f : flows) single += f.bytes <= mtu ? 1 : 0;

  const Outcome net = run(topo, flows, batches, false);
  const Outcome direct = run(topo, flows, batches, true);
  for (std::size_t i = 0; i < flows.size(); ++i) {
    ASSERT_GE(net.arrival[i], 0) << "flow " << i << " never arrived";
    EXPECT_EQ(direct.arrival[i], net.arrival[i]) << "flow " << i << " (" << flows[i].bytes << " B)";
    EXPECT_EQ(direct.sent[i], net.sent[i]) << "flow " << i << " (" << flows[i].bytes << " B)";
  }
  // Both paths were taken, and some single-packet flows had to go through the network LP
  // (their queue pair was busy), so the test exercises the decision, not only one branch.
  EXPECT_EQ(direct.direct + direct.net, flows.size());
  EXPECT_EQ(net.direct, 0u);
  // (measured: 135 of the 784 single-packet flows went direct; the others queued behind a
  // larger flow of their GPU)
  EXPECT_GT(direct.direct, single / 10);
  EXPECT_LT(direct.direct, single);
}

// A lone single-packet flow: arrival = t0 + sum over its hops of (ser(p, R_i) + L_i)
// (store-and-forward of its one packet), send completion = t0 + ser(p, R_1) + 2D (the packet
// left the port), D = min(NVLink, NIC latency) (flow_model.hpp coarse_offset_ps: the network
// LP's offset, reported back), whether posted directly or through the network LP; computed here
// from the topology's ports.
TEST(FlowSource, LoneSinglePacketFlowClosedForm) {
  const m::Topology topo(leaf_spine16());
  for (const std::uint64_t bytes : {std::uint64_t{1}, std::uint64_t{1000}, std::uint64_t{topo.spec().mtu_bytes}}) {
    for (const std::uint32_t dst : {1u, 9u}) {  // NVLink peer (same host), other leaf
      const std::vector<TFlow> flows{{0, dst, bytes, 0}};
      const SimTime t0 = 3'000'000;
      const std::vector<Batch> batches{{0, t0, {0}}};
      const std::uint64_t hash = e::mix64(0x5EED ^ (std::uint64_t{dst} << 8));
      SimTime want = t0;
      const SimTime ser1 = e::serialization_ps(bytes, topo.ports(0)[topo.route(0, dst, hash)].rate_bps);
      for (e::LpId at = 0; at != dst;) {
        const m::Port& p = topo.ports(at)[topo.route(at, dst, hash)];
        want += e::serialization_ps(bytes, p.rate_bps) + p.latency_ps;
        at = p.peer;
      }
      const SimTime d = std::min(topo.spec().nvlink_latency_ps, topo.spec().nic_latency_ps);
      for (const bool direct : {false, true}) {
        const Outcome o = run(topo, flows, batches, direct);
        EXPECT_EQ(o.arrival[0], want) << bytes << " B to " << dst << (direct ? " direct" : " via network LP");
        EXPECT_EQ(o.sent[0], t0 + ser1 + 2 * d);
        EXPECT_EQ(o.direct, direct ? 1u : 0u);
      }
    }
  }
}

// Port clock: k single-packet flows posted by one GPU at one instant to k different GPUs leave
// its NIC one after another (the packet rung's port sends them back to back), so flow i (0-based,
// in posting order) arrives at t0 + i*ser(p, R_1) + sum_hops (ser(p, R_h) + L_h) and its send
// completes at t0 + (i+1)*ser(p, R_1) + 2D; a 3-packet flow posted after them in the same batch
// joins its links once the port is through them: it arrives at t0 + k*ser(p, R_1) + its lone
// time (n*s_1 + sum_{h>=2} s_h + sum_h L_h). Before the port clock every single-packet flow
// arrived at t0 + sum_hops(...): a GPU's 31 one-packet AllToAll sends cost no port time.
// Directly (FlowSource) and through the network LP alike.
TEST(FlowSource, SinglePacketFlowsFromOnePortTakeOneSerializationEach) {
  const m::Topology topo(leaf_spine16());
  const std::uint32_t mtu = topo.spec().mtu_bytes;
  const SimTime d = std::min(topo.spec().nvlink_latency_ps, topo.spec().nic_latency_ps);
  for (const std::uint64_t bytes : {std::uint64_t{1000}, std::uint64_t{mtu}}) {
    std::vector<TFlow> flows;
    Batch batch{0, 2'000'000, {}};
    for (std::uint32_t dst = 4; dst < 16; ++dst) {  // the other hosts: all leave GPU 0's NIC
      batch.flows.push_back(static_cast<std::uint32_t>(flows.size()));
      flows.push_back({0, dst, bytes, 0});
    }
    const std::uint32_t k = static_cast<std::uint32_t>(flows.size());
    batch.flows.push_back(k);
    flows.push_back({0, 13, 3 * std::uint64_t{mtu}, 1});  // its own queue pair
    auto path_of = [&](const TFlow& f) {
      std::vector<const m::Port*> hops;
      const std::uint64_t hash = e::mix64(0x5EED ^ (std::uint64_t{f.src} << 40) ^ (std::uint64_t{f.dst} << 8) ^ f.channel);
      for (e::LpId at = f.src; at != f.dst;) {
        hops.push_back(&topo.ports(at)[topo.route(at, f.dst, hash)]);
        at = hops.back()->peer;
      }
      return hops;
    };
    const SimTime t0 = batch.at_ps;
    for (const bool direct : {false, true}) {
      const Outcome o = run(topo, flows, {batch}, direct);
      SimTime ser1 = 0;
      for (std::uint32_t i = 0; i < k; ++i) {
        const auto hops = path_of(flows[i]);
        ser1 = e::serialization_ps(bytes, hops[0]->rate_bps);
        SimTime want = t0 + static_cast<SimTime>(i) * ser1;
        for (const m::Port* h : hops) want += e::serialization_ps(bytes, h->rate_bps) + h->latency_ps;
        EXPECT_EQ(o.arrival[i], want) << bytes << " B, flow " << i << (direct ? " direct" : " via network LP");
        EXPECT_EQ(o.sent[i], t0 + static_cast<SimTime>(i + 1) * ser1 + 2 * d) << bytes << " B, flow " << i;
      }
      const auto hops = path_of(flows[k]);
      SimTime want = t0 + static_cast<SimTime>(k) * ser1 + 3 * e::serialization_ps(mtu, hops[0]->rate_bps);
      for (std::size_t h = 0; h < hops.size(); ++h) {
        want += hops[h]->latency_ps + (h > 0 ? e::serialization_ps(mtu, hops[h]->rate_bps) : 0);
      }
      EXPECT_EQ(o.arrival[k], want) << bytes << " B singles, then the 3-packet flow" << (direct ? " direct" : "");
      EXPECT_EQ(o.direct, direct ? k : 0u);
    }
  }
}

}  // namespace
