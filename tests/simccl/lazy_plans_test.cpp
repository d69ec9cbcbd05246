// Lazy NCCL ring-family and Tree plans (models::LazyChannelRing, models::LazyTree, issue 7
// memory target): the executor's step-by-step walk must be exactly the materialized plan.
//  1. Structure: walking every channel's cursor gives the materialized plan's sends of that
//     channel in index order (peer, wire bytes, payload, tag, the receive each one waits for)
//     and the lazy receive set equals the materialized one, for AllReduce / AllGather /
//     ReduceScatter, Simple / LL / LL128, one and several loops, odd sizes, 1-4 nodes.
//  2. Tree: every op, dependency count, dependents and receive match equal the materialized plan's.
//  3. Execution: whole runs with simccl.lazy_plans=true and false give bit-identical results
//     (digest, simulated time) at packet and flow level, including ranks that start the
//     collective late (messages arriving before the plan exists).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "jobs/run.hpp"
#include "models/comm_plan.hpp"
#include "models/workload.hpp"
#include "simccl/nccl_planner.hpp"
#include "simccl/nccl_settings.hpp"
#include "tests/run/test_util.hpp"

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

// Lazy Tree AllReduce (models::LazyTree): every op, its dependency count, its dependents and the
// receive matching of the lazy form equal the materialized plan's, for Simple / LL / LL128, one to
// many chunks, 1-16 nodes (chain only, chain + double binary tree), every rank's position.
TEST(LazyPlans, TreeOpsEqualMaterializedPlan) {
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
      // Dependents of every op from the materialized dependency lists, in index order.
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

}  // namespace
