// The dragonfly builder (models/topology/builders/dragonfly.cpp) against closed forms of Kim,
// Dally, Scott, Abts, "Technology-Driven, Highly-Scalable Dragonfly Topology", ISCA 2008: switch
// and link counts, minimal (local-global-local) routes, diameter, group bisection; a packet
// AllReduce across 2 groups that delivers every byte; bad parameters = one line, exit 2.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "jobs/run.hpp"
#include "jobs/spec.hpp"
#include "models/topology/cluster.hpp"
#include "models/topology/topology_stats.hpp"

namespace {

namespace fs = std::filesystem;
namespace m = fabricsim::models;

std::string source_dir() {
  if (const char *d = std::getenv("FABRICSIM_SOURCE_DIR"))
    return d;
  return fs::path(__FILE__).parent_path().parent_path().parent_path().string();
}

/// The topology `fabricsim topo --gpus gpus --set ...` builds.
m::Topology dragonfly(std::uint32_t gpus, std::vector<std::string> sets) {
  sets.insert(sets.begin(), "cluster.topology=dragonfly");
  const fabricsim::jobs::Spec spec = fabricsim::jobs::load_spec("", sets);
  return m::Topology(fabricsim::jobs::resolve_cluster(spec, gpus));
}

struct Sizes {
  std::uint64_t p, a, h, g;
};

// Closed forms of one dragonfly with `gpus` NICs at 400 Gb/s on every link: g*a routers, g*a
// (a-1)/2 local links, m = floor(a*h/(g-1)) global links per group pair, the group bisection
// m*floor(g/2)*ceil(g/2) global links (capped at half the NIC capacity, as `topo` reports).
void expect_closed_forms(const m::Topology &t, const Sizes &z, std::uint64_t gpus,
                         std::uint32_t router_diameter, std::uint32_t ecmp) {
  const m::TopologyStats s = m::topology_stats(t);
  const std::uint64_t routers = z.g * z.a, local = z.g * z.a * (z.a - 1) / 2;
  const std::uint64_t per_pair = z.g > 1 ? z.a * z.h / (z.g - 1) : 0;
  const std::uint64_t global = per_pair * z.g * (z.g - 1) / 2;
  EXPECT_EQ(t.num_leaves(), routers);
  EXPECT_EQ(t.num_spines() + t.num_cores(), 0u);
  EXPECT_EQ(t.num_groups(), z.g);
  EXPECT_EQ(s.nic_links, gpus);
  EXPECT_EQ(s.fabric_links, local + global);
  EXPECT_EQ(s.diameter_hops, router_diameter + 2); // + the two NIC links
  EXPECT_EQ(s.switch_ecmp, ecmp);
  const std::uint64_t cut = per_pair * (z.g / 2) * ((z.g + 1) / 2) * 400'000'000'000ull;
  EXPECT_EQ(s.bisection_bps, std::min<std::uint64_t>(cut, gpus * 400'000'000'000ull / 2));
}

// Every route a packet may take (all ECMP choices) from GPU a to GPU b: at most one global hop,
// never through a third group, and at most local + global + local between routers.
void expect_minimal_routes(const m::Topology &t, std::uint32_t a, std::uint32_t b) {
  const std::uint32_t ga = t.group(t.leaf_lp(t.leaf_of(a))), gb = t.group(t.leaf_lp(t.leaf_of(b)));
  std::function<void(fabricsim::engine::LpId, std::uint32_t, std::uint32_t)> walk =
      [&](fabricsim::engine::LpId at, std::uint32_t router_hops, std::uint32_t global_hops) {
        if (at == b)
          return;
        ASSERT_LE(router_hops, 3u);
        ASSERT_LE(global_hops, 1u);
        const auto c = t.candidates(at, b);
        ASSERT_FALSE(c.empty()) << t.describe(at) << " -> gpu " << b;
        for (std::uint32_t port : c) {
          const auto next = t.ports(at)[port].peer;
          if (next == b)
            continue;
          ASSERT_EQ(t.kind(next), m::NodeKind::kLeaf);
          const std::uint32_t gn = t.group(next);
          ASSERT_TRUE(gn == ga || gn == gb) << t.describe(next) << " is in a third group";
          const bool leaves_gpu = t.kind(at) == m::NodeKind::kGpu;
          walk(next, router_hops + (leaves_gpu ? 0 : 1),
               global_hops + (!leaves_gpu && t.group(at) != gn ? 1 : 0));
        }
      };
  walk(a, 0, 0);
}

TEST(Dragonfly, MaximalBalancedDragonflyMatchesClosedForms) {
  // p = 2: a = 4, h = 2, g = a*h + 1 = 9 groups, 9 * 4 * 2 = 72 NIC ports (9 hosts x 8 GPUs).
  // One global link per group pair: exactly one minimal route between two routers (ECMP 1),
  // 3 router hops (local, global, local) at most.
  const m::Topology t = dragonfly(72, {"cluster.dragonfly.p=2"});
  expect_closed_forms(t, {2, 4, 2, 9}, 72, 3, 1);
  for (std::uint32_t a = 0; a < 72; a += 5) {
    for (std::uint32_t b = 0; b < 72; b += 3) {
      if (!t.same_scaleup_domain(a, b))
        expect_minimal_routes(t, a, b);
    }
  }
  // The defaults are the smallest balanced dragonfly holding the NICs: 72 NICs give p = 2.
  const m::Topology d = dragonfly(72, {});
  EXPECT_EQ(m::topology_stats(d).fabric_links, m::topology_stats(t).fabric_links);
  // 73 NICs need p = 3: a = 6, h = 3, g = 19.
  expect_closed_forms(dragonfly(73, {"cluster.gpus_per_host=1"}), {3, 6, 3, 19}, 73, 3, 1);
}

TEST(Dragonfly, SmallerDragonfliesSpreadGlobalLinksOverGroupPairs) {
  // g = 2 of a = 4, h = 2: all a*h = 8 global channels join the two groups (router r to router
  // r, h parallel links). A router reaches a router of the other group in 2 hops, over its own
  // h global links or over the local link to the router holding the right global links: h + 1
  // equal-cost next hops.
  const m::Topology t = dragonfly(16, {"cluster.dragonfly.p=2", "cluster.dragonfly.g=2"});
  expect_closed_forms(t, {2, 4, 2, 2}, 16, 2, 3);
  // g = 5 of a = 4, h = 2: floor(8 / 4) = 2 links per pair; g = 7: floor(8/6) = 1, 2 channels idle.
  expect_closed_forms(dragonfly(40, {"cluster.dragonfly.p=2", "cluster.dragonfly.g=5"}),
                      {2, 4, 2, 5}, 40, 3, 2);
  const m::Topology t7 = dragonfly(56, {"cluster.dragonfly.p=2", "cluster.dragonfly.g=7"});
  expect_closed_forms(t7, {2, 4, 2, 7}, 56, 3, 1);
  for (std::uint32_t a = 0; a < 56; a += 7) {
    for (std::uint32_t b = 1; b < 56; b += 4) {
      if (!t7.same_scaleup_domain(a, b))
        expect_minimal_routes(t7, a, b);
    }
  }
}

TEST(Dragonfly, AllReduceOverTwoGroupsDeliversEveryByte) {
  // 16 GPUs of one GPU per host on 2 groups of 4 routers (p = 2): every ring step crosses the
  // fabric. Ring AllReduce: each rank sends 2 (n-1) chunks of S/n bytes.
  fabricsim::jobs::RunOptions opt;
  opt.workload = source_dir() + "/tests/data/chakra/astra-sim/examples/workload/microbenchmarks/"
                                "all_reduce/16npus_1MB/all_reduce";
  opt.sets = {"cluster.topology=dragonfly", "cluster.dragonfly.p=2", "cluster.dragonfly.g=2",
              "cluster.gpus_per_host=1", "simccl.planner=ring"};
  opt.write_h5 = false;
  opt.quiet = true;
  opt.keep_flows = true;
  const fabricsim::jobs::RunResult r =
      fabricsim::jobs::run_simulation(opt, MPI_COMM_SELF, "test", "test");
  ASSERT_EQ(r.collectives.size(), 1u);
  const auto &c = r.collectives[0];
  EXPECT_EQ(c.op, "all_reduce");
  ASSERT_EQ(c.ranks, 16u);
  EXPECT_GT(c.end_ps, c.start_ps);
  std::uint64_t bytes = 0;
  for (const auto &f : r.flow_records) {
    EXPECT_GT(f.end_ps, 0) << f.src << " -> " << f.dst;
    bytes += f.bytes;
  }
  EXPECT_EQ(bytes, 2ull * (c.ranks - 1) * c.bytes);
  EXPECT_EQ(r.fabric.drops, 0u);
}

struct Outcome {
  int code = -1;
  std::string err;
};

Outcome run_cli(const std::string &args) {
  const char *bin = std::getenv("FABRICSIM_BINARY");
  const std::string err_file =
      (fs::temp_directory_path() / ("fabricsim_dragonfly_" + std::to_string(::getpid()))).string();
  Outcome o;
  FILE *p = popen(((bin ? bin : "fabricsim") + (" " + args) + " >/dev/null 2>" + err_file).c_str(),
                  "r");
  if (!p)
    return o;
  const int st = pclose(p);
  o.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(err_file);
  std::stringstream ss;
  ss << e.rdbuf();
  o.err = ss.str();
  fs::remove(err_file);
  return o;
}

TEST(Dragonfly, BadParametersAreOneLineExit2NamingTheKey) {
  const std::string topo = "topo --set cluster.topology=dragonfly ";
  const struct {
    std::string sets, key, problem;
  } cases[] = {
      {"--set cluster.dragonfly.a=0", "cluster.dragonfly.a", "must be >= 1"},
      {"--set cluster.dragonfly.h=0", "cluster.dragonfly.h", "must be >= 1"},
      {"--set cluster.dragonfly.p=0", "cluster.dragonfly.p", "must be >= 1"},
      {"--set cluster.dragonfly.p=x", "cluster.dragonfly.p", "not an integer"},
      {"--set cluster.dragonfly.p=2 --set cluster.dragonfly.g=10", "cluster.dragonfly.g",
       "give g <= a*h+1 = 9"},
      {"--gpus 80 --set cluster.dragonfly.p=2", "cluster.hosts", "do not fit"},
      {"--set cluster.tiers=3", "cluster.tiers", "no Clos tiers"},
  };
  for (const auto &c : cases) {
    const Outcome o = run_cli(topo + c.sets);
    EXPECT_EQ(o.code, 2) << c.sets << "\n" << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_NE(o.err.find(c.key), std::string::npos) << c.sets << ": " << o.err;
    EXPECT_NE(o.err.find(c.problem), std::string::npos) << c.sets << ": " << o.err;
  }
}

} // namespace
