// Lazy NCCL ring-family, Tree and NVLS plans (LazyChannelRing, LazyTree, LazyNvls; the
// memory target): the executor's step-by-step walk must be exactly the materialized plan.
//  1. Structure: walking every channel's cursor gives the materialized plan's sends of that
//     channel in index order (peer, wire bytes, payload, tag, the receive each one waits for)
//     and the lazy receive set equals the materialized one, for AllReduce / AllGather /
//     ReduceScatter, Simple / LL / LL128, one and several loops, odd sizes, 1-4 nodes.
//  2. Tree: every op, dependency count, dependents and receive match equal the materialized plan's.
//  3. NVLS / NVLSTree: as 2, for every rank, NVLSTree on 2-16 nodes and NVLS on one host.
//  4. Execution: whole runs with simccl.lazy_plans=true and false give bit-identical results
//     (digest, simulated time) at packet and flow level, including ranks that start the
//     collective late (messages arriving before the plan exists); NVLS / NVLSTree also on
//     2 MPI processes and 2 threads (ctest lazy_plans_test_mpi2).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "jobs/run.hpp"
#include "models/core/comm_plan.hpp"
#include "models/core/workload.hpp"
#include "simccl/nccl_planner.hpp"
#include "simccl/nccl_settings.hpp"
#include "tests/support/workloads.hpp"
#include "tests/support/mpi.hpp"

namespace {

namespace m = fabricsim::models;
using fabricsim::simccl::NcclPlanner;
using fabricsim::simccl::NcclPlannerConfig;

struct Case {
  m::CollOp op;
  std::uint64_t bytes;
  std::uint32_t ranks;
  const char* proto;  // NCCL_PROTO, "" = tuner's choice
};

NcclPlannerConfig config(const char* proto, bool lazy) {
  NcclPlannerConfig cfg;
  cfg.gpus_per_host = 8;
  cfg.sm = 90;
  cfg.nic_GBps = 50;
  cfg.lazy_rings = lazy;
  std::vector<std::pair<std::string, std::string>> pairs = {{"NCCL_ALGO", "Ring"}};
  if (*proto) pairs.emplace_back("NCCL_PROTO", proto);
  cfg.settings = fabricsim::simccl::load_nccl_settings(pairs, "<test>", false);
  return cfg;
}

TEST(LazyPlans, ChannelWalkEqualsMaterializedPlan) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential comparison (runs under 1 process)");
  const std::vector<Case> cases = {
      {m::CollOp::kAllReduce, 64ull << 20, 16, "Simple"},   // several loops per channel
      {m::CollOp::kAllReduce, (3ull << 20) + 7, 24, "Simple"},
      {m::CollOp::kAllReduce, 100'000, 8, "LL"},
      {m::CollOp::kAllReduce, 5ull << 20, 32, "LL128"},
      {m::CollOp::kAllReduce, 12'345, 16, ""},
      {m::CollOp::kAllGather, (16ull << 20) + 3, 16, "Simple"},
      {m::CollOp::kAllGather, 40'000, 8, "LL"},
      {m::CollOp::kReduceScatter, (8ull << 20) + 5, 24, "Simple"},
      {m::CollOp::kReduceScatter, 1ull << 20, 16, "LL128"},
  };
  for (const Case& cs : cases) {
    SCOPED_TRACE(std::to_string(static_cast<int>(cs.op)) + " " + std::to_string(cs.bytes) + " B on " +
                 std::to_string(cs.ranks) + " ranks, " + cs.proto);
    const NcclPlanner lazy(config(cs.proto, true));
    const NcclPlanner full(config(cs.proto, false));
    std::vector<std::uint32_t> ranks;
    for (std::uint32_t r = 0; r < cs.ranks; ++r) ranks.push_back(r);
    for (std::uint32_t me : {0u, 1u, cs.ranks / 2 + 1, cs.ranks - 1}) {
      m::CollRequest q;
      q.op = cs.op;
      q.bytes = cs.bytes;
      q.ranks = &ranks;
      q.my_index = me;
      const m::RankPlan lp = lazy.plan(q);
      const m::RankPlan fp = full.plan(q);
      ASSERT_TRUE(lp.lazy_channels) << "ring family must be lazy";
      ASSERT_FALSE(fp.lazy_channels);
      ASSERT_FALSE(fp.ops.empty());
      const m::LazyChannelRing& r = *lp.lazy_channels;
      // Materialized: per channel, sends in index order; the receive tag each waits for.
      std::map<std::uint32_t, std::vector<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t, std::uint32_t, std::int64_t>>> sends;
      std::set<std::pair<std::uint32_t, std::uint32_t>> recvs;  // (peer, tag)
      std::vector<std::int64_t> last_send(r.channels, -1);
      for (std::uint32_t i = 0; i < fp.size(); ++i) {
        const m::P2pOp& o = fp.ops[i];
        if (!o.is_send) {
          recvs.emplace(o.peer, o.tag);
          continue;
        }
        std::int64_t wait_tag = -1;
        bool saw_prev = last_send[o.channel] < 0;
        for (std::uint32_t d : fp.deps(i)) {
          if (fp.ops[d].is_send) {
            EXPECT_EQ(static_cast<std::int64_t>(d), last_send[o.channel]) << "a send waits for its channel's previous send";
            saw_prev = true;
          } else {
            wait_tag = fp.ops[d].tag;
          }
        }
        EXPECT_TRUE(saw_prev);
        last_send[o.channel] = i;
        sends[o.channel].emplace_back(o.peer, o.bytes, o.payload_bytes, o.tag, wait_tag);
      }
      // Lazy: walk every channel's cursor.
      std::set<std::pair<std::uint32_t, std::uint32_t>> lrecvs;
      for (std::uint32_t c = 0; c < r.channels; ++c) {
        std::vector<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t, std::uint32_t, std::int64_t>> got;
        m::RingCursor cur;
        for (r.first(c, cur); !cur.done; r.advance(c, cur)) {
          std::uint64_t slot = 0;
          std::int64_t wait_tag = -1;
          if (r.waits_for(c, cur, slot)) wait_tag = r.tag(c, cur.l, cur.k - 1, cur.j);
          const std::uint64_t data = r.send_data(c, cur);
          got.emplace_back(r.next[c], r.wire(data), data, r.tag(c, cur.l, cur.k, cur.j), wait_tag);
        }
        EXPECT_EQ(got, sends[c]) << "channel " << c;
        std::uint64_t n = 0;
        for (std::uint64_t l = 0; l < r.nloops[c]; ++l) {
          for (std::uint32_t k = 0; k < r.steps; ++k) {
            for (std::uint32_t j = 0; j < r.nslices(r.piece(c, l, k, true)); ++j) {
              const std::uint32_t t = r.tag(c, l, k, j);
              lrecvs.emplace(r.prev[c], t);
              std::uint32_t dc = 0;
              std::uint64_t ds = 0;
              ASSERT_TRUE(r.decode(t, dc, ds));
              EXPECT_EQ(dc, c);
              EXPECT_EQ(ds, r.recv_index(l, k, j));
              ++n;
            }
          }
        }
        EXPECT_EQ(n, r.recv_count(c));
      }
      EXPECT_EQ(lrecvs, recvs);
      // expanded() is the materialized plan.
      const m::RankPlan ex = lp.expanded();
      ASSERT_EQ(ex.size(), fp.size());
      for (std::uint32_t i = 0; i < fp.size(); ++i) {
        EXPECT_EQ(ex.ops[i].tag, fp.ops[i].tag);
        EXPECT_EQ(ex.ops[i].bytes, fp.ops[i].bytes);
      }
      EXPECT_EQ(ex.dep_index, fp.dep_index);
    }
  }
}

// Every op of a lazy DAG (LazyTree, LazyNvls) equals the materialized plan's: kind, peer, wire
// bytes, payload, tag, channel, NVLS mode, dependency count, dependents (in index order, derived
// from the materialized dependency lists) and the receive each (peer, tag) matches.
template <class Dag>
void expect_dag_equals(const Dag& t, const m::RankPlan& fp) {
  ASSERT_EQ(t.total, fp.size());
  std::vector<std::vector<std::uint32_t>> outs(fp.size());
  for (std::uint32_t i = 0; i < fp.size(); ++i) {
    for (std::uint32_t d : fp.deps(i)) outs[d].push_back(i);
  }
  for (std::uint32_t i = 0; i < fp.size(); ++i) {
    const m::P2pOp a = t.op(i);
    const m::P2pOp& b = fp.ops[i];
    ASSERT_EQ(a.is_send, b.is_send) << "op " << i;
    EXPECT_EQ(a.peer, b.peer) << "op " << i;
    EXPECT_EQ(a.bytes, b.bytes) << "op " << i;
    EXPECT_EQ(a.payload_bytes, b.payload_bytes) << "op " << i;
    EXPECT_EQ(a.tag, b.tag) << "op " << i;
    EXPECT_EQ(a.channel, b.channel) << "op " << i;
    EXPECT_EQ(a.nvls, b.nvls) << "op " << i;
    EXPECT_EQ(a.relay, b.relay) << "op " << i;
    EXPECT_EQ(t.ndeps(i), fp.deps(i).size()) << "op " << i;
    std::uint32_t out[3];
    const std::uint32_t n = t.dependents(i, out);
    EXPECT_EQ(std::vector<std::uint32_t>(out, out + n), outs[i]) << "op " << i;
    std::uint32_t o = 0;
    if (!b.is_send) {
      ASSERT_TRUE(t.recv_op(b.peer, b.tag, o)) << "op " << i;
      EXPECT_EQ(o, i);
    }
  }
}

// Lazy Tree AllReduce (models::LazyTree): every op, its dependency count, its dependents and the
// receive matching of the lazy form equal the materialized plan's, for Simple / LL / LL128, one to
// many chunks, 1-16 nodes (chain only, chain + double binary tree), every rank's position.
TEST(LazyPlans, TreeOpsEqualMaterializedPlan) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential comparison (runs under 1 process)");
  struct TreeCase {
    std::uint64_t bytes;
    std::uint32_t ranks;
    const char* proto;
  };
  const std::vector<TreeCase> cases = {
      {16ull << 20, 64, "LL128"}, {(5ull << 20) + 3, 24, "Simple"}, {100'000, 16, "LL"},
      {1ull << 20, 8, "Simple"},  {(2ull << 20) + 1, 128, "LL128"}, {12'345, 40, ""},
  };
  for (const TreeCase& cs : cases) {
    SCOPED_TRACE(std::to_string(cs.bytes) + " B on " + std::to_string(cs.ranks) + " ranks, " + cs.proto);
    auto cfg = [&](bool lazy) {
      NcclPlannerConfig c = config(cs.proto, lazy);
      std::vector<std::pair<std::string, std::string>> pairs = {{"NCCL_ALGO", "Tree"}};
      if (*cs.proto) pairs.emplace_back("NCCL_PROTO", cs.proto);
      c.settings = fabricsim::simccl::load_nccl_settings(pairs, "<test>", false);
      return c;
    };
    const NcclPlanner lazy(cfg(true));
    const NcclPlanner full(cfg(false));
    std::vector<std::uint32_t> ranks;
    for (std::uint32_t r = 0; r < cs.ranks; ++r) ranks.push_back(r);
    for (std::uint32_t me = 0; me < cs.ranks; ++me) {
      m::CollRequest q;
      q.op = m::CollOp::kAllReduce;
      q.bytes = cs.bytes;
      q.ranks = &ranks;
      q.my_index = me;
      const m::RankPlan lp = lazy.plan(q);
      const m::RankPlan fp = full.plan(q);
      ASSERT_FALSE(fp.lazy_tree);
      if (fp.ops.empty()) {
        EXPECT_TRUE(lp.empty());
        continue;
      }
      ASSERT_TRUE(lp.lazy_tree) << "Tree AllReduce must be lazy";
      EXPECT_TRUE(lp.ops.empty());
      const m::LazyTree& t = *lp.lazy_tree;
      ASSERT_EQ(t.total, fp.size());
      expect_dag_equals(t, fp);
      // A message no receive expects is refused (unknown peer; a tag past the last channel).
      std::uint32_t o = 0;
      EXPECT_FALSE(t.recv_op(cs.ranks + 5, 0, o));
      EXPECT_FALSE(t.recv_op(fp.ops[0].peer, static_cast<std::uint32_t>(t.ch.size() * t.tag_stride * 2), o));
      const m::RankPlan ex = lp.expanded();
      EXPECT_EQ(ex.dep_index, fp.dep_index);
      EXPECT_EQ(ex.dep_begin, fp.dep_begin);
    }
  }
}

// Lazy NVLS / NVLSTree (models::LazyNvls): every op, dependency count, dependents and receive
// match equal the materialized plan's for every rank: NVLSTree AllReduce on 2-16 nodes of 8
// GPUs (NCCL disables NVLSTree on one node), NVLS AllReduce / AllGather / ReduceScatter on one
// 8-GPU host, a strided communicator listed out of order (2 GPUs per node), sizes from one loop
// of a few bytes (heads without data: the last loop's block < heads) to many loops. NVLS runs
// only the Simple protocol in NCCL (tuning.cc); NCCL_PROTO=LL / LL128 leave no NVLS algorithm.
TEST(LazyPlans, NvlsOpsEqualMaterializedPlan) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential comparison (runs under 1 process)");
  struct NvlsCase {
    m::CollOp op;
    std::uint64_t bytes;
    std::vector<std::uint32_t> ranks;
    const char* algo;
  };
  auto iota = [](std::uint32_t n) {
    std::vector<std::uint32_t> r;
    for (std::uint32_t i = 0; i < n; ++i) r.push_back(i);
    return r;
  };
  std::vector<NvlsCase> cases;
  for (std::uint32_t nodes = 2; nodes <= 16; ++nodes) {
    for (std::uint64_t bytes : {(6ull << 20) + 12, 100'003ull, 13ull}) {
      cases.push_back({m::CollOp::kAllReduce, bytes, iota(8 * nodes), "NVLSTree"});
    }
  }
  cases.push_back({m::CollOp::kAllReduce, 64ull << 20, iota(128), "NVLSTree"});  // bench shape, 16 nodes
  // More loops per channel than NCCL_STEPS (8), so the step window links loops: 2 nodes (128 KiB
  // chunks, 1 MiB loops, 16 channels: 161 MiB + 12 B gives 11 loops, the last one partial) and
  // 4 nodes (64 KiB chunks: 97 MiB + 5 B gives 13 loops).
  cases.push_back({m::CollOp::kAllReduce, (161ull << 20) + 12, iota(16), "NVLSTree"});
  cases.push_back({m::CollOp::kAllReduce, (97ull << 20) + 5, iota(32), "NVLSTree"});
  std::vector<std::uint32_t> strided;  // GPUs 5 and 2 of nodes 5..0
  for (int k = 5; k >= 0; --k) {
    strided.push_back(static_cast<std::uint32_t>(8 * k + 5));
    strided.push_back(static_cast<std::uint32_t>(8 * k + 2));
  }
  cases.push_back({m::CollOp::kAllReduce, (3ull << 20) + 1, strided, "NVLSTree"});
  for (m::CollOp op : {m::CollOp::kAllReduce, m::CollOp::kAllGather, m::CollOp::kReduceScatter}) {
    for (std::uint64_t bytes : {(161ull << 20) + 3, 64ull << 20, (3ull << 20) + 5, 1000ull, 5ull}) {
      cases.push_back({op, bytes, iota(8), "NVLS"});
    }
  }
  std::uint32_t partial_loops = 0, idle_heads = 0, lazy_plans = 0, windowed = 0;
  for (const NvlsCase& cs : cases) {
    SCOPED_TRACE(std::string(cs.algo) + " op " + std::to_string(static_cast<int>(cs.op)) + " " +
                 std::to_string(cs.bytes) + " B on " + std::to_string(cs.ranks.size()) + " ranks");
    auto cfg = [&](bool lazy) {
      NcclPlannerConfig c = config("", lazy);
      c.settings = fabricsim::simccl::load_nccl_settings({{"NCCL_ALGO", cs.algo}}, "<test>", false);
      return c;
    };
    const NcclPlanner lazy(cfg(true));
    const NcclPlanner full(cfg(false));
    for (std::uint32_t me = 0; me < cs.ranks.size(); ++me) {
      m::CollRequest q;
      q.op = cs.op;
      q.bytes = cs.bytes;
      q.ranks = &cs.ranks;
      q.my_index = me;
      ASSERT_EQ(fabricsim::simccl::algo_name(full.decision(q).algo), std::string(cs.algo));
      const m::RankPlan lp = lazy.plan(q);
      const m::RankPlan fp = full.plan(q);
      ASSERT_FALSE(fp.lazy_nvls);
      if (fp.ops.empty()) {
        EXPECT_TRUE(lp.empty());
        continue;
      }
      ASSERT_TRUE(lp.lazy_nvls) << "NVLS / NVLSTree must be lazy";
      EXPECT_TRUE(lp.ops.empty());
      ++lazy_plans;
      const m::LazyNvls& t = *lp.lazy_nvls;
      expect_dag_equals(t, fp);
      for (std::uint32_t c = 0; c < t.ch.size(); ++c) {
        for (std::uint32_t l = 0; l < t.ch[c].nloops; ++l) {
          const auto L = t.loop_at(c, l);
          partial_loops += L.lp < t.m ? 1 : 0;
          idle_heads += L.nmine == 0 ? 1 : 0;
          windowed += l >= t.window && t.window > 0 ? 1 : 0;
        }
      }
      // A message no receive expects is refused: an unknown peer, a tag past the last channel,
      // the switch's reduced chunk from another rank.
      std::uint32_t o = 0;
      EXPECT_FALSE(t.recv_op(100'000, t.tags_per_loop - 1, o));
      EXPECT_FALSE(t.recv_op(t.me, static_cast<std::uint32_t>(t.ch.size() * t.tag_loops * t.tags_per_loop), o));
      EXPECT_FALSE(t.recv_op(t.me == t.heads[0] ? t.heads[1] : t.heads[0], 0, o));
      const m::RankPlan ex = lp.expanded();
      EXPECT_EQ(ex.dep_index, fp.dep_index);
      EXPECT_EQ(ex.dep_begin, fp.dep_begin);
    }
  }
  // The cases reach the loop shapes the lazy form treats apart.
  EXPECT_GT(lazy_plans, 1000u);
  EXPECT_GT(partial_loops, 0u) << "no loop whose block is smaller than its heads";
  EXPECT_GT(idle_heads, 0u) << "no rank without data in a loop";
  EXPECT_GT(windowed, 0u) << "no loop behind the NCCL_STEPS window";
}

// NCCL_STEPS (8, NCCL 2.30 src/include/device.h): a connection (channel, peer, NVLS mode) has
// 8 buffer slots, so no more than 8 of its sends are outstanding. Derived from the materialized
// NVLS / NVLSTree plans alone: the sends of each connection, in op order, are one per loop, and
// send j >= 8 depends on send j - 8 of the same connection; since a send starts only after its
// dependencies completed, at most 8 of a connection's sends are started and not completed at
// any time. Also checks that a connection carries more than 8 sends (the bound binds), and that
// no send depends on an earlier send of another connection (the window is per connection).
TEST(LazyPlans, NvlsSendsOfAConnectionStayWithinNcclSteps) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential comparison (runs under 1 process)");
  struct Case {
    m::CollOp op;
    std::uint64_t bytes;
    std::uint32_t ranks;
    const char* algo;
  };
  const Case cases[] = {{m::CollOp::kAllReduce, (161ull << 20) + 12, 16, "NVLSTree"},
                        {m::CollOp::kAllReduce, (97ull << 20) + 5, 32, "NVLSTree"},
                        {m::CollOp::kAllReduce, (161ull << 20) + 3, 8, "NVLS"},
                        {m::CollOp::kAllGather, (161ull << 20) + 3, 8, "NVLS"}};
  constexpr std::size_t kSteps = 8;
  std::size_t longest = 0;
  for (const Case& cs : cases) {
    SCOPED_TRACE(std::string(cs.algo) + " " + std::to_string(cs.bytes) + " B on " + std::to_string(cs.ranks));
    NcclPlannerConfig c = config("", false);
    c.settings = fabricsim::simccl::load_nccl_settings({{"NCCL_ALGO", cs.algo}}, "<test>", false);
    const NcclPlanner full(c);
    std::vector<std::uint32_t> ranks;
    for (std::uint32_t r = 0; r < cs.ranks; ++r) ranks.push_back(r);
    for (std::uint32_t me = 0; me < cs.ranks; ++me) {
      m::CollRequest q;
      q.op = cs.op;
      q.bytes = cs.bytes;
      q.ranks = &ranks;
      q.my_index = me;
      const m::RankPlan fp = full.plan(q);
      std::map<std::tuple<std::uint16_t, std::uint32_t, std::uint8_t>, std::vector<std::uint32_t>> conn;
      std::map<std::uint32_t, std::tuple<std::uint16_t, std::uint32_t, std::uint8_t>> conn_of;
      for (std::uint32_t i = 0; i < fp.size(); ++i) {
        const m::P2pOp& o = fp.ops[i];
        if (!o.is_send) continue;
        const auto key = std::make_tuple(o.channel, o.peer, o.nvls);
        auto& v = conn[key];
        conn_of[i] = key;
        std::size_t send_deps = 0;
        for (std::uint32_t d : fp.deps(i)) {
          if (!fp.ops[d].is_send) continue;
          ++send_deps;
          EXPECT_EQ(conn_of.at(d), key) << "send " << i << " waits for another connection's send " << d;
          ASSERT_GE(v.size(), kSteps) << "send " << i << " waits for a send inside the window";
          EXPECT_EQ(d, v[v.size() - kSteps]) << "send " << i;
        }
        EXPECT_EQ(send_deps, v.size() >= kSteps ? 1u : 0u) << "send " << i << " (number " << v.size() << ")";
        v.push_back(i);
      }
      for (const auto& [key, v] : conn) longest = std::max(longest, v.size());
    }
  }
  EXPECT_GT(longest, kSteps);
}

// `allreduce_only`: the AllGather / ReduceScatter nodes become AllReduces (NCCL_ALGO=Tree tunes
// AllReduce only).
m::Workload collectives(std::uint32_t n, bool allreduce_only = false) {
  m::Workload w = fabricsim::testing::world_workload(n);
  for (std::uint32_t r = 0; r < n; ++r) {
    auto& p = w.programs[r];
    // Ranks start late by different amounts: their predecessors' messages arrive first.
    m::WorkNode c;
    c.name = "compute";
    c.type = m::NodeType::kCompute;
    c.duration_ps = static_cast<std::int64_t>((r * 7919u) % 13u) * 3'000'000;  // 0..36 us
    p.push_back(c);
    const std::pair<m::CollOp, std::uint64_t> ops[] = {{m::CollOp::kAllReduce, (6ull << 20) + 12},
                                                        {m::CollOp::kAllGather, (2ull << 20) + 3},
                                                        {m::CollOp::kReduceScatter, 3ull << 20},
                                                        {m::CollOp::kAllReduce, 24'000}};
    for (const auto& [op, bytes] : ops) {
      m::WorkNode x;
      x.name = "coll";
      x.type = m::NodeType::kCollective;
      x.op = allreduce_only ? m::CollOp::kAllReduce : op;
      x.bytes = bytes;
      x.deps = {static_cast<std::uint32_t>(p.size() - 1)};
      p.push_back(x);
    }
  }
  return w;
}

TEST(LazyPlans, RunsAreBitIdenticalToMaterializedPlans) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential comparison (runs under 1 process)");
  const m::Workload rings = collectives(32);  // 4 hosts of 8 GPUs
  const m::Workload trees = collectives(32, true);
  for (const char* rung : {"packet", "flow"}) {
    for (const char* algo : {"Ring", "Tree"}) {
      for (const char* proto : {"", "LL128"}) {
        SCOPED_TRACE(std::string(rung) + " " + algo + " " + proto);
        fabricsim::jobs::RunResult res[2];
        for (int lazy = 0; lazy < 2; ++lazy) {
          fabricsim::jobs::RunOptions o;
          o.workload_data = *algo == 'T' ? &trees : &rings;
          o.write_h5 = false;
          o.quiet = true;
          o.sets = {"sim.fidelity=" + std::string(rung), std::string("nccl.NCCL_ALGO=") + algo,
                    std::string("simccl.lazy_plans=") + (lazy ? "true" : "false")};
          if (*proto) o.sets.push_back(std::string("nccl.NCCL_PROTO=") + proto);
          res[lazy] = fabricsim::jobs::run_simulation(o, MPI_COMM_SELF, "test", "test");
        }
        EXPECT_GT(res[0].meta.simulated_time_ps, 0);
        EXPECT_EQ(res[1].meta.simulated_time_ps, res[0].meta.simulated_time_ps);
        EXPECT_EQ(res[1].digest, res[0].digest);
        EXPECT_EQ(res[1].stats.events, res[0].stats.events);
      }
    }
  }
}

// NVLS (one 8-GPU host: AllReduce, AllGather, ReduceScatter) and NVLSTree (4 hosts of 8:
// AllReduce) run lazily give the materialized plans' results bit for bit at packet and flow level
// (ranks start late: messages arrive before their plan exists), on this process alone and, under
// mpiexec -n 2, split over both processes (and 2 threads). With 4 KiB NVLS chunks
// (NCCL_NVLS_CHUNKSIZE) the larger collectives have more loops per channel than NCCL_STEPS, so
// the step window between loops is exercised too.
TEST(LazyPlans, NvlsRunsAreBitIdenticalToMaterializedPlans) {
  const m::Workload node = collectives(8);
  const m::Workload trees = collectives(32, true);
  for (const char* rung : {"packet", "flow"}) {
    for (const char* algo : {"NVLS", "NVLSTree"}) {
      for (const char* chunk : {"", "4096"}) {
        SCOPED_TRACE(std::string(rung) + " " + algo + " chunk " + chunk);
        const bool tree = std::string(algo) == "NVLSTree";
        auto run = [&](bool lazy, MPI_Comm comm, unsigned threads) {
          fabricsim::jobs::RunOptions o;
          o.workload_data = tree ? &trees : &node;
          o.write_h5 = false;
          o.quiet = true;
          o.threads = threads;
          o.sets = {"sim.fidelity=" + std::string(rung), std::string("nccl.NCCL_ALGO=") + algo,
                    std::string("simccl.lazy_plans=") + (lazy ? "true" : "false")};
          if (*chunk) o.sets.push_back(std::string("nccl.NCCL_NVLS_CHUNKSIZE=") + chunk);
          return fabricsim::jobs::run_simulation(o, comm, "test", "test");
        };
        const fabricsim::jobs::RunResult full = run(false, MPI_COMM_SELF, 1);
        ASSERT_FALSE(full.collectives.empty());
        for (const auto& c : full.collectives) EXPECT_EQ(c.algorithm, algo);
        EXPECT_GT(full.meta.simulated_time_ps, 0);
        for (unsigned threads : {1u, 2u}) {
          const fabricsim::jobs::RunResult lazy = run(true, MPI_COMM_WORLD, threads);
          EXPECT_EQ(lazy.meta.simulated_time_ps, full.meta.simulated_time_ps);
          EXPECT_EQ(lazy.digest, full.digest);
          EXPECT_EQ(lazy.flows, full.flows);
          EXPECT_EQ(lazy.stats.events, full.stats.events);
        }
      }
    }
  }
}

}  // namespace
