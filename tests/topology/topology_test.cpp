// Topology builders, routing table, files and figures (docs/topology.md). Every expected value is
// derived here from a closed form (node/link counts, hop counts, bisection of a k-ary fat-tree or
// an oversubscribed Clos), from the file's own header (SimAI import), or from an invariant
// (peer_port symmetry, export -> import identity, routes unchanged from the original formula).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/errors.hpp"
#include "engine/rng.hpp"
#include "models/topology/cluster.hpp"
#include "models/topology/registry.hpp"
#include "models/topology/topology_file.hpp"
#include "models/topology/topology_stats.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/scratch.hpp"

namespace fabricsim::models {
namespace {

using fabricsim::testing::source_dir;

std::string simai_topo(const std::string &name) {
  return source_dir() + "/tests/data/simai/SimAI/astra-sim-alibabacloud/inputs/topo/" + name;
}

ClusterSpec spec(FabricKind k, std::uint32_t hosts, std::uint32_t gph, std::uint32_t npl,
                 std::uint32_t spines) {
  ClusterSpec c;
  c.fabric = k;
  c.hosts = hosts;
  c.gpus_per_host = gph;
  c.nics_per_leaf = npl;
  c.spines = spines;
  return c;
}

ClusterSpec from_file(const std::string &path) {
  ClusterSpec c;
  c.fabric = FabricKind::kFile;
  c.topology_file = path;
  return c;
}

/// ports(ports(a)[p].peer)[peer_port].peer == a and the reverse port points back at p.
void expect_peer_ports(const Topology &t) {
  for (engine::LpId a = 0; a < t.num_nodes(); ++a) {
    for (std::uint32_t p = 0; p < t.ports(a).size(); ++p) {
      const Port &f = t.ports(a)[p];
      ASSERT_LT(f.peer, t.num_nodes());
      ASSERT_LT(f.peer_port, t.ports(f.peer).size());
      const Port &b = t.ports(f.peer)[f.peer_port];
      ASSERT_EQ(b.peer, a) << t.describe(a) << " port " << p;
      ASSERT_EQ(b.peer_port, p) << t.describe(a) << " port " << p;
      ASSERT_EQ(b.rate_bps, f.rate_bps);
      ASSERT_EQ(b.latency_ps, f.latency_ps);
    }
  }
}

/// Follows route() from GPU a to GPU b; @returns the links crossed (fails on a loop).
std::uint32_t walk(const Topology &t, std::uint32_t a, std::uint32_t b, std::uint64_t hash) {
  engine::LpId at = a;
  std::uint32_t n = 0;
  while (at != b) {
    const Port &p = t.ports(at)[t.route(at, b, hash)];
    if (at != a) {
      EXPECT_NE(t.kind(at), NodeKind::kGpu) << "a GPU forwarded";
    }
    at = p.peer;
    if (++n > 64) {
      ADD_FAILURE() << "routing loop " << a << " -> " << b;
      return n;
    }
  }
  return n;
}

void expect_identical(const Topology &x, const Topology &y) {
  ASSERT_EQ(x.num_nodes(), y.num_nodes());
  ASSERT_EQ(x.num_gpus(), y.num_gpus());
  for (engine::LpId n = 0; n < x.num_nodes(); ++n) {
    ASSERT_EQ(x.kind(n), y.kind(n)) << n;
    ASSERT_EQ(x.tier(n), y.tier(n)) << n;
    ASSERT_EQ(x.ports(n).size(), y.ports(n).size()) << n;
    for (std::size_t p = 0; p < x.ports(n).size(); ++p) {
      const Port &a = x.ports(n)[p], &b = y.ports(n)[p];
      ASSERT_EQ(a.peer, b.peer);
      ASSERT_EQ(a.peer_port, b.peer_port);
      ASSERT_EQ(a.rate_bps, b.rate_bps);
      ASSERT_EQ(a.latency_ps, b.latency_ps);
      ASSERT_EQ(a.mtu_bytes, b.mtu_bytes);
    }
  }
}

Topology round_trip(const Topology &t) {
  const std::string text = topology_to_text(t, "test");
  return Topology(t.spec(), parse_fabricsim_topology(text, "<export>", t.spec()));
}

TEST(Topology, RailOptimizedRoutesEqualTheOriginalFormula) {
  // The pre-generalization router: leaf l = G + hosts + l; at a leaf, the NIC's slot if local,
  // else uplink nics_per_leaf + mix64(hash ^ seed(leaf)) % spines; spine: port = dst's leaf.
  const ClusterSpec c = spec(FabricKind::kRailOptimized, 8, 4, 2, 3);
  const Topology t(c);
  const std::uint32_t G = 32, leaves = (8 / 2) * 4;
  ASSERT_EQ(t.num_leaves(), leaves);
  ASSERT_EQ(t.num_spines(), 3u);
  for (std::uint32_t l = 0; l < leaves; ++l) {
    const engine::LpId leaf = G + 8 + l;
    ASSERT_EQ(t.kind(leaf), NodeKind::kLeaf);
    ASSERT_EQ(t.switch_seed(leaf), engine::mix64(c.seed * 0x100000001B3ull + leaf));
    for (std::uint32_t d = 0; d < G; ++d) {
      const std::uint32_t h = d / 4, j = d % 4, dleaf = (h / 2) * 4 + j;
      for (std::uint64_t hash : {1ull, 77ull, 0xDEADBEEFull}) {
        const std::uint32_t want =
            dleaf == l
                ? h % 2
                : 2 + static_cast<std::uint32_t>(engine::mix64(hash ^ t.switch_seed(leaf)) % 3);
        ASSERT_EQ(t.route(leaf, d, hash), want) << "leaf " << l << " dst " << d;
      }
    }
  }
  for (std::uint32_t s = 0; s < 3; ++s) {
    for (std::uint32_t d = 0; d < G; ++d)
      ASSERT_EQ(t.route(t.spine_lp(s), d, 5), ((d / 4) / 2) * 4 + d % 4);
  }
  for (std::uint32_t a = 0; a < G; ++a) {
    for (std::uint32_t b = 0; b < G; ++b) {
      if (a == b)
        continue;
      ASSERT_EQ(t.route(a, b, 9), a / 4 == b / 4 ? 0u : 1u); // port 0 NVLink, port 1 NIC
      const std::uint32_t want =
          a / 4 == b / 4 ? 2 : ((a / 4) / 2 == (b / 4) / 2 && a % 4 == b % 4 ? 2 : 4);
      ASSERT_EQ(t.hops(a, b), want);
      ASSERT_EQ(walk(t, a, b, a * 31 + b), want);
    }
  }
  expect_peer_ports(t);
  // ECMP width = number of spines.
  EXPECT_EQ(topology_stats(t).switch_ecmp, 3u);
}

TEST(Topology, LeafSpineCountsHopsAndEcmpWidth) {
  for (std::uint32_t spines : {1u, 4u, 7u}) {
    const Topology t(spec(FabricKind::kLeafSpine, 8, 4, 8, spines)); // 32 NICs, 4 leaves
    const auto s = topology_stats(t);
    EXPECT_EQ(s.nodes[0], 32u);
    EXPECT_EQ(s.nodes[1], 8u);
    EXPECT_EQ(s.nodes[2], 4u);
    EXPECT_EQ(s.nodes[3], spines);
    EXPECT_EQ(s.links, 32u + 32u + 4u * spines);
    EXPECT_EQ(s.switch_ecmp, spines);
    EXPECT_EQ(s.diameter_hops, 4u);
    for (std::uint32_t a = 0; a < 32; ++a) {
      for (std::uint32_t b = 0; b < 32; ++b) {
        const std::uint32_t want = a == b ? 0 : (a / 4 == b / 4 || a / 8 == b / 8 ? 2 : 4);
        ASSERT_EQ(t.hops(a, b), want);
      }
    }
    expect_peer_ports(t);
  }
}

TEST(Topology, KaryFatTreeFromClosedForms) {
  // k-ary fat-tree (Al-Fares et al., SIGCOMM 2008): k pods of k/2 edge + k/2 aggregation
  // switches, (k/2)^2 cores, k^3/4 hosts; full bisection = hosts/2 x link rate.
  for (std::uint32_t k : {4u, 6u, 8u}) {
    ClusterSpec c = spec(FabricKind::kLeafSpine, k * k * k / 4, 1, k / 2, k / 2);
    c.tiers = 3;
    c.pods = k;
    const Topology t(c);
    const auto s = topology_stats(t);
    const std::uint64_t hosts = k * k * k / 4;
    EXPECT_EQ(s.nodes[0], hosts);
    EXPECT_EQ(s.nodes[1], 0u); // 1-GPU hosts: no NVSwitch
    EXPECT_EQ(s.nodes[2], k * k / 2);
    EXPECT_EQ(s.nodes[3], k * k / 2);
    EXPECT_EQ(s.nodes[4], k * k / 4);
    EXPECT_EQ(s.links, 3 * hosts); // hosts + edge-agg k^3/4 + agg-core k^3/4
    EXPECT_TRUE(s.clos);
    EXPECT_EQ(s.bisection_bps, hosts / 2 * c.nic_bps);
    EXPECT_EQ(s.diameter_hops, 6u);
    EXPECT_EQ(s.switch_ecmp, k / 2);
    EXPECT_EQ(s.unreachable_pairs, 0u);
    for (const auto &tier : s.tiers) {
      if (tier.up_bps) {
        EXPECT_EQ(tier.down_bps, tier.up_bps) << "tier " << tier.tier; // 1:1
      }
    }
    // Hop count: same edge 2, same pod 4, else 6 (host h on edge h/(k/2), pod h/(k^2/4)).
    for (std::uint32_t a = 0; a < hosts; ++a) {
      for (std::uint32_t b = 0; b < hosts; ++b) {
        const std::uint32_t want = a == b                               ? 0
                                   : a / (k / 2) == b / (k / 2)         ? 2
                                   : a / (k * k / 4) == b / (k * k / 4) ? 4
                                                                        : 6;
        ASSERT_EQ(t.hops(a, b), want) << a << "->" << b;
      }
    }
    for (std::uint32_t a = 0; a < hosts; a += 3)
      ASSERT_EQ(walk(t, a, (a + hosts / 2) % hosts, a), 6u);
    expect_peer_ports(t);
    EXPECT_EQ(t.ports(0)[0].peer, t.leaf_lp(0)); // no NVLink port when the domain is 1 GPU
  }
}

TEST(Topology, OversubscribedClosBisectionFromTheFormula) {
  // 2-tier, 8 NICs per leaf at 400G, 4:1 -> ceil(8 x 400 / (4 x 400)) = 2 spines per leaf;
  // bisection = min(NICs, leaf uplinks) / 2 = (leaves x 2 x 400G) / 2 = G x 400G / 8.
  ClusterSpec c = spec(FabricKind::kLeafSpine, 32, 1, 8, 0);
  c.oversub_leaf = 4;
  const Topology t(c);
  const auto s = topology_stats(t);
  EXPECT_EQ(t.num_spines(), 2u);
  EXPECT_EQ(s.bisection_bps, 32ull * c.nic_bps / 8);
  ASSERT_GE(s.tiers.size(), 1u);
  EXPECT_EQ(s.tiers[0].down_bps, 4 * s.tiers[0].up_bps);
  // 3-tier with 1:1 at the leaf and 4:1 at the spine: the core layer is the bottleneck.
  ClusterSpec d = spec(FabricKind::kLeafSpine, 64, 1, 8, 0);
  d.tiers = 3;
  d.pods = 2;
  d.oversub_leaf = 1;
  d.oversub_spine = 4;
  const Topology u(d);
  const auto su = topology_stats(u);
  // 8 leaves, 4 per pod; 8 spines per pod; cores per spine group = ceil(4 / 4) = 1.
  EXPECT_EQ(u.num_leaves(), 8u);
  EXPECT_EQ(u.num_spines(), 16u);
  EXPECT_EQ(u.num_cores(), 8u);
  EXPECT_EQ(su.tiers[1].down_bps, 4 * su.tiers[1].up_bps);
  EXPECT_EQ(su.bisection_bps, 64ull * d.nic_bps / 4 / 2);
  expect_peer_ports(u);
}

TEST(Topology, DualPlaneHasTwoHalfRatePortsAndSeparatePlanes) {
  ClusterSpec c = spec(FabricKind::kRailOptimized, 4, 8, 2, 2);
  c.dual_plane = true;
  const Topology t(c);
  const std::uint32_t leaves_per_plane = (4 / 2) * 8;
  EXPECT_EQ(t.num_leaves(), 2 * leaves_per_plane);
  EXPECT_EQ(t.num_spines(), 2u * 2u);
  for (std::uint32_t g = 0; g < 32; ++g) {
    ASSERT_EQ(t.ports(g).size(), 3u); // NVLink + 2 NIC ports
    EXPECT_EQ(t.kind(t.ports(g)[0].peer), NodeKind::kNvSwitch);
    EXPECT_EQ(t.ports(g)[1].rate_bps, c.nic_bps / 2);
    EXPECT_EQ(t.ports(g)[2].rate_bps, c.nic_bps / 2);
    EXPECT_EQ(t.ports(g)[2].peer - t.ports(g)[1].peer, leaves_per_plane);
  }
  // A leaf of plane p links only to spines of plane p.
  for (std::uint32_t l = 0; l < t.num_leaves(); ++l) {
    for (const Port &p : t.ports(t.leaf_lp(l))) {
      if (t.kind(p.peer) == NodeKind::kSpine) {
        EXPECT_EQ((p.peer - t.spine_lp(0)) / 2, l / leaves_per_plane);
      }
    }
  }
  // Cross-host: both NIC ports are ECMP candidates at the GPU; same host: NVLink only.
  const auto c1 = t.candidates(0, 8);
  ASSERT_EQ(c1.size(), 2u);
  EXPECT_EQ(c1[0], 1u);
  EXPECT_EQ(c1[1], 2u);
  ASSERT_EQ(t.candidates(0, 3).size(), 1u);
  EXPECT_EQ(t.candidates(0, 3)[0], 0u);
  for (std::uint32_t b = 8; b < 32; ++b) {
    for (std::uint64_t h = 0; h < 8; ++h)
      ASSERT_EQ(walk(t, 0, b, h), t.hops(0, b));
  }
  const auto s = topology_stats(t);
  EXPECT_EQ(s.gpu_ecmp, 2u);
  EXPECT_EQ(s.nic_bps, 32 * c.nic_bps);
  EXPECT_EQ(s.bisection_bps, 32 * c.nic_bps / 2);
  expect_peer_ports(t);
}

TEST(Topology, TorusAndMeshHopsAreWrapAndManhattanDistances) {
  for (FabricKind k : {FabricKind::kTorus, FabricKind::kMesh}) {
    ClusterSpec c = spec(k, 16, 1, 1, 0);
    c.dims = {4, 4};
    const Topology t(c);
    const bool torus = k == FabricKind::kTorus;
    auto d1 = [&](int x, int y) {
      const int d = std::abs(x - y);
      return torus ? std::min(d, 4 - d) : d;
    };
    std::uint32_t diameter = 0;
    for (std::uint32_t a = 0; a < 16; ++a) {
      for (std::uint32_t b = 0; b < 16; ++b) {
        if (a == b)
          continue;
        const std::uint32_t want = 2 + d1(a / 4, b / 4) + d1(a % 4, b % 4);
        ASSERT_EQ(t.hops(a, b), want);
        ASSERT_EQ(walk(t, a, b, a ^ (b << 8)), want);
        diameter = std::max(diameter, want);
      }
    }
    const auto s = topology_stats(t);
    EXPECT_EQ(s.diameter_hops, diameter);
    EXPECT_EQ(s.links, 16u + (torus ? 32u : 24u)); // NICs + 2 k^2 (torus) or 2 k (k-1) (mesh)
    EXPECT_FALSE(s.clos);
    // Bisection of a k x k grid across the first dimension: 2k links (torus), k (mesh).
    EXPECT_EQ(s.bisection_bps,
              std::min<std::uint64_t>((torus ? 8 : 4) * c.fabric_bps, 16 * c.nic_bps / 2));
    // Max ECMP: torus offset 2 in both dimensions = 4 equal next hops; mesh 2.
    EXPECT_EQ(s.switch_ecmp, torus ? 4u : 2u);
    expect_peer_ports(t);
  }
  ClusterSpec c3 = spec(FabricKind::kTorus, 8, 8, 4, 0); // 64 NICs, 4 per switch, 2x2x4 torus
  c3.dims = {2, 2, 4};
  const Topology t3(c3);
  EXPECT_EQ(t3.num_leaves(), 16u);
  expect_peer_ports(t3);
}

TEST(Topology, NvlinkDomainsSpanHosts) {
  // GB200 NVL72-style: 4 GPUs per host (compute tray), 72 GPUs per NVLink domain.
  ClusterSpec c = spec(FabricKind::kRailOptimized, 36, 4, 18, 18);
  c.nvlink_domain = 72;
  const Topology t(c);
  EXPECT_EQ(t.num_gpus(), 144u);
  EXPECT_EQ(t.count(NodeKind::kNvSwitch), 2u);
  EXPECT_EQ(t.ports(t.domain_switch(0)).size(), 72u);
  EXPECT_TRUE(t.same_scaleup_domain(0, 71));
  EXPECT_FALSE(t.same_scaleup_domain(71, 72));
  EXPECT_EQ(t.hops(0, 71), 2u);
  EXPECT_EQ(t.route(0, 71, 3), 0u);
  EXPECT_EQ(t.route(0, 72, 3), 1u);
  EXPECT_EQ(t.ports(5)[0].rate_bps, c.nvlink_bps);
  expect_peer_ports(t);
}

TEST(Topology, RailOnlyHasNoCrossRailPath) {
  const Topology t(spec(FabricKind::kRailOnly, 4, 8, 4, 0)); // one leaf per rail, no spines
  EXPECT_EQ(t.num_leaves(), 8u);
  EXPECT_EQ(t.num_spines(), 0u);
  EXPECT_EQ(t.hops(0, 8), 2u);                     // same rail, other host
  EXPECT_EQ(t.hops(0, 1), 2u);                     // same host: NVLink
  EXPECT_EQ(t.hops(0, 9), Topology::kUnreachable); // other rail, other host
  EXPECT_TRUE(t.candidates(0, 9).empty());
  EXPECT_THROW(t.route(0, 9, 1), engine::InputError);
  // Unreachable ordered pairs: other host and other rail = 32 x (3 hosts x 7 rails).
  EXPECT_EQ(topology_stats(t).unreachable_pairs, 32u * 3u * 7u);
  EXPECT_EQ(topology_stats(t).bisection_bps, 0u);
  // With 2 leaves per rail, rail spines join them but still not across rails.
  const Topology u(spec(FabricKind::kRailOnly, 8, 8, 4, 2));
  EXPECT_EQ(u.num_spines(), 16u);
  EXPECT_EQ(u.hops(0, 32), 4u);
  EXPECT_EQ(u.hops(0, 33), Topology::kUnreachable);
  expect_peer_ports(u);
}

TEST(Topology, SimaiImportMatchesItsHeader) {
  struct Case {
    const char *file;
    std::uint32_t nodes, gpus, nvswitches, switches, links, spines;
  };
  // Header line 1 of each file: node_num gpus_per_server nvswitch_num switch_num link_num.
  for (const Case &k : {Case{"Rail_Opti_SingleToR_16g_8gps_200Gbps_H20", 34, 16, 2, 16, 96, 8},
                        Case{"Spectrum-X_16g_8gps_100Gbps_A100", 90, 16, 2, 72, 544, 64}}) {
    const std::string path = simai_topo(k.file);
    std::ifstream in(path);
    std::uint32_t h[5];
    for (auto &x : h)
      in >> x;
    ASSERT_EQ(h[0], k.nodes);
    const Topology t(from_file(path));
    const auto s = topology_stats(t);
    EXPECT_EQ(t.num_nodes(), h[0]);
    EXPECT_EQ(t.spec().gpus_per_host, h[1]);
    EXPECT_EQ(s.nodes[1], h[2]);
    EXPECT_EQ(s.nodes[2] + s.nodes[3] + s.nodes[4], h[3]);
    EXPECT_EQ(s.links, h[4]);
    EXPECT_EQ(t.num_gpus(), k.gpus);
    EXPECT_EQ(t.num_spines(), k.spines);
    EXPECT_EQ(s.switch_ecmp, k.spines); // ECMP width = number of spines
    EXPECT_EQ(s.unreachable_pairs, 0u);
    EXPECT_EQ(t.hops(0, 8), 2u); // rail 0 of both servers: same ToR
    EXPECT_EQ(t.hops(0, 9), 4u); // other rail: ToR - spine - ToR
    EXPECT_EQ(t.hops(0, 1), 2u); // NVLink
    expect_peer_ports(t);
    expect_identical(t, round_trip(t));
  }
}

TEST(Topology, ExportImportRoundTripIsIdentical) {
  std::vector<ClusterSpec> specs = {spec(FabricKind::kRailOptimized, 6, 8, 4, 2),
                                    spec(FabricKind::kLeafSpine, 5, 4, 8, 3),
                                    spec(FabricKind::kRailOnly, 8, 2, 4, 2)};
  ClusterSpec dp = spec(FabricKind::kLeafSpine, 8, 2, 4, 2);
  dp.dual_plane = true;
  dp.tiers = 3;
  dp.pods = 2;
  specs.push_back(dp);
  ClusterSpec tor = spec(FabricKind::kTorus, 12, 2, 2, 0);
  tor.dims = {3, 2, 2};
  specs.push_back(tor);
  ClusterSpec nvl = spec(FabricKind::kRailOptimized, 9, 4, 9, 9);
  nvl.nvlink_domain = 12;
  specs.push_back(nvl);
  const fabricsim::testing::ScratchDir dir("topo_rt");
  for (const auto &c : specs) {
    const Topology t(c);
    const std::string path = (dir / "t.topo").string();
    std::ofstream(path) << topology_to_text(t, "round trip");
    ClusterSpec f = from_file(path);
    f.seed = c.seed;
    const Topology u(f);
    expect_identical(t, u);
    for (std::uint32_t a = 0; a < t.num_gpus(); a += 5) {
      for (std::uint32_t b = 0; b < t.num_gpus(); b += 3)
        ASSERT_EQ(t.hops(a, b), u.hops(a, b));
    }
  }
}

std::string error_of(const std::string &text) {
  try {
    parse_fabricsim_topology(text, "t.topo", ClusterSpec{});
  } catch (const engine::InputError &e) {
    return e.what();
  }
  return "";
}

TEST(Topology, BadFilesNameTheLineAndProblem) {
  const std::string head = "fabricsim-topology 1\nnode g0 gpu\nnode s0 switch 1\n";
  EXPECT_NE(
      error_of(head + "link g0 s9 400Gbps 1us\n").find("t.topo: line 4: dangling link: node 's9'"),
      std::string::npos);
  EXPECT_NE(error_of(head + "link g0 s0 0Gbps 1us\n").find("line 4"), std::string::npos);
  EXPECT_NE(error_of(head + "link g0 s0 400Gbps 0ns\n").find("line 4: zero latency"),
            std::string::npos);
  EXPECT_NE(error_of(head + "node g0 gpu\n").find("line 4: duplicate node 'g0'"),
            std::string::npos);
  EXPECT_NE(error_of(head + "node r0 router\n").find("line 4: unknown node kind 'router'"),
            std::string::npos);
  EXPECT_NE(error_of("node g0 gpu\n").find("header"), std::string::npos);
  // A GPU with no NIC link is found when the topology is built.
  ClusterSpec c;
  try {
    Topology t(
        c, parse_fabricsim_topology(head + "node g1 gpu\nlink g0 s0 400Gbps 1us\n", "t.topo", c));
    ADD_FAILURE() << "no error";
  } catch (const engine::InputError &e) {
    EXPECT_NE(std::string(e.what()).find("gpu 1 has no NIC link"), std::string::npos) << e.what();
  }
}

// Case: a repeated link (either direction) in a topology file, an NVLink domain that takes part of
// a host, and a leaf of more ports than any switch were accepted. Each is refused naming the
// line or field; legitimate shapes (NVL72 over 4-GPU hosts, 2 domains per host, a 3-tier
// multi-pod fabric of 1,024-port counts) still build.
TEST(Topology, DuplicateLinksStraddlingDomainsAndAbsurdRadixAreRefused) {
  const std::string head = "fabricsim-topology 1\nnode g0 gpu\nnode s0 switch 1\nnode s1 switch 2\n"
                           "link g0 s0 400Gbps 1us\nlink s0 s1 400Gbps 1us\n";
  EXPECT_NE(error_of(head + "link s1 s0 400Gbps 1us\n")
                .find("t.topo: line 7: duplicate link between 's1' and 's0' (already linked on line 6)"),
            std::string::npos)
      << error_of(head + "link s1 s0 400Gbps 1us\n");
  EXPECT_NE(error_of(head + "link g0 s0 100Gbps 1us\n").find("line 7: duplicate link"), std::string::npos);
  EXPECT_EQ(error_of(head), "");
  // SimAI format: header "nodes gpus_per_server nvswitches switches links gpu_type".
  const std::string simai = "3 1 0 1 3 H100\n2\n0 2 400Gbps 0.0005ms 0\n1 2 400Gbps 0.0005ms 0\n"
                            "2 0 400Gbps 0.0005ms 0\n";
  try {
    parse_simai_topology(simai, "s.topo", ClusterSpec{});
    ADD_FAILURE() << "duplicate SimAI link accepted";
  } catch (const engine::InputError &e) {
    EXPECT_NE(std::string(e.what()).find("s.topo: line 5: duplicate link between nodes 2 and 0 (already linked on line 3)"),
              std::string::npos)
        << e.what();
  }

  auto error_field = [](const ClusterSpec &c) -> std::string {
    try {
      Topology t(c);
    } catch (const engine::InputError &e) {
      return e.field();
    }
    return "";
  };
  ClusterSpec c = spec(FabricKind::kRailOptimized, 4, 8, 4, 4);
  for (std::uint32_t d : {3u, 12u, 20u}) {  // neither a multiple nor a divisor of 8
    c.nvlink_domain = d;
    EXPECT_EQ(error_field(c), "cluster.nvlink_domain") << d;
  }
  for (std::uint32_t d : {1u, 2u, 4u, 8u, 16u, 32u}) {
    c.nvlink_domain = d;
    EXPECT_EQ(error_field(c), "") << d;
  }
  ClusterSpec nvl72 = spec(FabricKind::kRailOptimized, 36, 4, 18, 18);
  nvl72.nvlink_domain = 72;
  EXPECT_EQ(error_field(nvl72), "");
  // Radix: nics_per_leaf + spines ports per leaf, at most ClusterSpec::kMaxSwitchPorts (4,096).
  EXPECT_EQ(error_field(spec(FabricKind::kRailOptimized, 2, 8, 100000, 2)), "cluster.nics_per_leaf");
  EXPECT_EQ(error_field(spec(FabricKind::kRailOptimized, 2, 8, 2, 100000)), "cluster.spines");
  EXPECT_EQ(error_field(spec(FabricKind::kRailOptimized, 2, 8, 2, 4094)), "");  // 4,096 ports: the bound
  EXPECT_EQ(error_field(spec(FabricKind::kRailOptimized, 2, 8, 2, 4095)), "cluster.spines");
  ClusterSpec torus = spec(FabricKind::kTorus, 4, 8, 100000, 0);
  torus.dims = {2, 2};
  EXPECT_EQ(error_field(torus), "cluster.nics_per_leaf");
  // A large multi-pod fabric (16 pods, 3 tiers; 4,096 GPUs here, the same shape as the
  // 102,400-GPU benchmark) still builds.
  ClusterSpec big = spec(FabricKind::kRailOptimized, 512, 8, 32, 32);
  big.tiers = 3;
  big.pods = 16;
  EXPECT_EQ(error_field(big), "");
}

TEST(Topology, BadSpecsNameTheField) {
  auto field_of = [](const ClusterSpec &c) -> std::string {
    try {
      Topology t(c);
    } catch (const engine::InputError &e) {
      return e.field();
    }
    return "";
  };
  ClusterSpec c = spec(FabricKind::kRailOnly, 6, 8, 4, 2); // 6 hosts per rail, 4 per leaf
  EXPECT_EQ(field_of(c), "cluster.nics_per_leaf");
  c = spec(FabricKind::kLeafSpine, 4, 8, 8, 0);
  EXPECT_EQ(field_of(c), "cluster.spines");
  c = spec(FabricKind::kLeafSpine, 4, 8, 8, 2);
  c.tiers = 3;
  c.pods = 3;
  EXPECT_EQ(field_of(c), "cluster.pods");
  c = spec(FabricKind::kLeafSpine, 4, 8, 8, 2);
  c.nic_bps = 0;
  EXPECT_EQ(field_of(c), "cluster.nic_bandwidth");
  c = spec(FabricKind::kLeafSpine, 4, 8, 8, 2);
  c.fabric_latency_ps = 0;
  EXPECT_EQ(field_of(c), "cluster.fabric_latency");
  c = spec(FabricKind::kTorus, 16, 8, 2, 0);
  c.dims = {2, 2}; // 4 switches x 2 ports < 128 NICs
  EXPECT_EQ(field_of(c), "cluster.dims");
}

TEST(Topology, ThousandGpuFabricsBuildFast) {
  ClusterSpec clos = spec(FabricKind::kRailOptimized, 128, 8, 32, 32); // 1,024 GPUs
  clos.tiers = 3;
  clos.pods = 4;
  ClusterSpec dp = spec(FabricKind::kRailOptimized, 128, 8, 16, 16);
  dp.dual_plane = true;
  ClusterSpec tor = spec(FabricKind::kTorus, 128, 8, 8, 0);
  tor.dims = {8, 4, 4};
  for (const auto &c : {clos, dp, tor}) {
    const auto t0 = std::chrono::steady_clock::now();
    const Topology t(c);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s%s: %u nodes built in %.3f s, routing table %zu bytes (%.1f B/GPU)\n",
                fabric_kind_name(c.fabric), c.dual_plane ? " dual-plane" : "", t.num_nodes(), s,
                t.routing_bytes(), static_cast<double>(t.routing_bytes()) / t.num_gpus());
    EXPECT_LT(s, 2.0); // "well under a second" on an idle core; slack for a loaded CI machine
    EXPECT_LT(t.routing_bytes() / t.num_gpus(), 4096u);
  }
}

TEST(Topology, RegistryIndexesBuildersByKindAndName) {
  const auto all = topology_builders();
  ASSERT_FALSE(all.empty());
  for (std::size_t i = 0; i < all.size(); ++i) {
    const TopologyBuilder &b = *all[i];
    EXPECT_EQ(static_cast<std::size_t>(b.kind), i) << b.name;
    EXPECT_EQ(&topology_builder(b.kind), &b) << b.name;
    EXPECT_EQ(find_topology(b.name), &b) << b.name;
    EXPECT_STREQ(fabric_kind_name(b.kind), b.name);
    EXPECT_NE(topology_names().find(b.name), std::string::npos) << b.name;
    EXPECT_TRUE(b.build != nullptr) << b.name;
    EXPECT_TRUE(!b.fixes_gpus || b.resolve != nullptr) << b.name;
  }
  EXPECT_EQ(find_topology("hypercube"), nullptr);
}

// Group-minimal routing (TopoGraph::group): two groups of two switches in a line a0 - a1 - b0 -
// b1 plus a third group c0 joined to a0 and b1. Plain BFS would send a0 -> b1 via c0 (2 hops);
// group-minimal routes stay in the groups of a and b (a0 -> a1 -> b0 -> b1, 3 hops).
TEST(Topology, GroupMinimalRoutesNeverCrossAThirdGroup) {
  TopoGraph g;
  const engine::LpId g0 = g.add(NodeKind::kGpu, 0), g1 = g.add(NodeKind::kGpu, 0);
  const engine::LpId a0 = g.add(NodeKind::kLeaf, 1), a1 = g.add(NodeKind::kLeaf, 1);
  const engine::LpId b0 = g.add(NodeKind::kLeaf, 1), b1 = g.add(NodeKind::kLeaf, 1);
  const engine::LpId c0 = g.add(NodeKind::kLeaf, 1);
  g.group = {TopoGraph::kNoGroup, TopoGraph::kNoGroup, 0, 0, 1, 1, 2};
  for (auto [x, y] : {std::pair{g0, a0}, {g1, b1}, {a0, a1}, {a1, b0}, {b0, b1}, {a0, c0}, {c0, b1}})
    g.links.push_back({x, y, 400'000'000'000ull, 1'000'000, 4096});
  ClusterSpec spec;
  spec.gpus_per_host = 1;
  const Topology t(spec, g);
  EXPECT_EQ(t.num_groups(), 3u);
  EXPECT_EQ(t.fabric_hops(0, 1), 3u + 2u);
  EXPECT_EQ(t.fabric_hops(1, 0), 3u + 2u);
  g.group.clear();
  const Topology plain(spec, g);
  EXPECT_EQ(plain.fabric_hops(0, 1), 2u + 2u);
}

} // namespace
} // namespace fabricsim::models
