// Plans of the NCCL planner, checked by conservation laws over every rank's plan:
//  * every send has exactly one receive with the same (sender, receiver, tag) and vice versa;
//  * the plans of all ranks together complete (no dependency cycle / deadlock);
//  * each rank ends with exactly the bytes the collective requires (AllGather: S minus its own
//    block; Broadcast: S; AllToAll: its block from each peer; AllReduce/ReduceScatter/Reduce: the
//    (n-1)-fold totals); relayed (PXN) data is counted once, at its final receiver;
//  * bytes on the wire are the protocol's inflation of the payload (LL 2x, LL128 128/120).
// And PXN.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "models/core/packet.hpp"
#include "simccl/nccl_planner.hpp"
#include "simccl/ring_planner.hpp"

namespace {

using namespace fabricsim::simccl;
using fabricsim::models::CollOp;
using fabricsim::models::CollRequest;
using fabricsim::models::RankPlan;

struct Totals {
  std::vector<std::uint64_t> received;  // final payload per member
  std::uint64_t wire = 0, payload = 0;
  std::size_t ops = 0;
};

Totals check(const NcclPlanner& planner, CollOp op, std::uint64_t bytes, const std::vector<std::uint32_t>& ranks,
             std::uint32_t root = 0) {
  const auto n = static_cast<std::uint32_t>(ranks.size());
  std::vector<RankPlan> plans(n);
  std::map<std::uint32_t, std::uint32_t> member;
  for (std::uint32_t i = 0; i < n; ++i) member[ranks[i]] = i;
  for (std::uint32_t i = 0; i < n; ++i) {
    CollRequest r;
    r.op = op;
    r.bytes = bytes;
    r.ranks = &ranks;
    r.my_index = i;
    r.root_index = root;
    plans[i] = planner.plan(r);
  }
  const Proto proto = planner.decision(CollRequest{op, bytes, &ranks, 0, root}).proto;
  using Key = std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>;  // sender, receiver, tag
  std::map<Key, std::pair<std::uint32_t, std::uint32_t>> sends, recvs;  // -> (member, op index)
  Totals t;
  t.received.assign(n, 0);
  for (std::uint32_t i = 0; i < n; ++i) {
    t.ops += plans[i].ops.size();
    if (!plans[i].ops.empty()) {  // CSR shape (models/core/comm_plan.hpp)
      EXPECT_EQ(plans[i].dep_begin.size(), plans[i].ops.size() + 1);
      EXPECT_EQ(plans[i].dep_begin.back(), plans[i].dep_index.size());
    }
    for (std::uint32_t o = 0; o < plans[i].ops.size(); ++o) {
      const auto& x = plans[i].ops[o];
      for (auto d : plans[i].deps(o)) EXPECT_LT(d, o) << "deps point backwards";
      if (x.is_send) {
        EXPECT_TRUE(sends.emplace(Key{ranks[i], x.peer, x.tag}, std::pair{i, o}).second) << "duplicate send tag";
        EXPECT_EQ(x.bytes, wire_bytes(proto, x.payload_bytes));
        t.wire += x.bytes;
        t.payload += x.payload_bytes;
      } else {
        EXPECT_TRUE(recvs.emplace(Key{x.peer, ranks[i], x.tag}, std::pair{i, o}).second) << "duplicate recv tag";
      }
    }
  }
  EXPECT_EQ(sends.size(), recvs.size());
  for (const auto& [k, so] : sends) {
    auto it = recvs.find(k);
    if (it == recvs.end()) {
      ADD_FAILURE() << "send without receive " << std::get<0>(k) << "->" << std::get<1>(k) << " tag " << std::get<2>(k);
      continue;
    }
    const auto& rop = plans[it->second.first].ops[it->second.second];
    if (!rop.relay) t.received[it->second.first] += plans[so.first].ops[so.second].payload_bytes;
  }
  // Execute all plans abstractly: a send completes once its deps are done; a receive once its
  // deps are done and the matching send completed.
  std::vector<std::vector<char>> done(n);
  for (std::uint32_t i = 0; i < n; ++i) done[i].assign(plans[i].ops.size(), 0);
  std::size_t left = t.ops;
  for (bool progress = true; progress && left > 0;) {
    progress = false;
    for (std::uint32_t i = 0; i < n; ++i) {
      for (std::uint32_t o = 0; o < plans[i].ops.size(); ++o) {
        if (done[i][o]) continue;
        const auto& x = plans[i].ops[o];
        bool ready = true;
        for (auto d : plans[i].deps(o)) ready = ready && done[i][d];
        if (ready && !x.is_send) {
          auto it = sends.find(Key{x.peer, ranks[i], x.tag});
          ready = it != sends.end() && done[it->second.first][it->second.second];
        }
        if (ready) {
          done[i][o] = 1;
          --left;
          progress = true;
        }
      }
    }
  }
  EXPECT_EQ(left, 0u) << "plans deadlock";
  return t;
}

std::vector<std::uint32_t> iota(std::uint32_t n, std::uint32_t first = 0, std::uint32_t stride = 1) {
  std::vector<std::uint32_t> v(n);
  for (std::uint32_t i = 0; i < n; ++i) v[i] = first + i * stride;
  return v;
}

NcclPlannerConfig cfg(const std::string& algo = "", const std::string& proto = "", std::uint32_t gph = 8) {
  NcclPlannerConfig c;
  c.gpus_per_host = gph;
  std::vector<std::pair<std::string, std::string>> kv;
  if (!algo.empty()) kv.emplace_back("NCCL_ALGO", algo);
  if (!proto.empty()) kv.emplace_back("NCCL_PROTO", proto);
  c.settings = load_nccl_settings(kv, "test", false);
  return c;
}

struct Comm {
  const char* name;
  std::vector<std::uint32_t> ranks;
};

std::vector<Comm> comms() {
  return {{"1x8", iota(8)},           {"2x8", iota(16)},           {"4x8", iota(32)},
          {"dp 3 nodes", iota(3, 1, 8)}, {"uneven 5+3", {0, 1, 2, 3, 4, 8, 9, 10}}, {"pair", {0, 1}}};
}

TEST(NcclPlanner, ConservationForEveryCollectiveAlgorithmAndProtocol) {
  const std::vector<std::uint64_t> sizes = {8, 1000, 65536 + 12, 3u << 20, 37u << 20};
  for (const char* proto : {"LL", "LL128", "Simple"}) {
    for (const char* algo : {"Ring", "Tree"}) {
      const NcclPlanner p(cfg(std::string("Ring;allreduce:") + algo, proto));
      for (const auto& c : comms()) {
        const auto n = static_cast<std::uint64_t>(c.ranks.size());
        for (std::uint64_t s : sizes) {
          SCOPED_TRACE(std::string(c.name) + " " + algo + "/" + proto + " " + std::to_string(s));
          auto t = check(p, CollOp::kAllReduce, s, c.ranks);
          std::uint64_t sum = 0;
          for (auto r : t.received) sum += r;
          EXPECT_EQ(sum, 2 * (n - 1) * s);
          t = check(p, CollOp::kAllGather, s, c.ranks);
          for (std::uint32_t i = 0; i < n; ++i) EXPECT_EQ(t.received[i], s - chunk_bytes(s, static_cast<std::uint32_t>(n), i));
          t = check(p, CollOp::kReduceScatter, s, c.ranks);
          sum = 0;
          for (auto r : t.received) sum += r;
          EXPECT_EQ(sum, (n - 1) * s);
          const std::uint32_t root = static_cast<std::uint32_t>(n - 1);
          t = check(p, CollOp::kBroadcast, s, c.ranks, root);
          for (std::uint32_t i = 0; i < n; ++i) EXPECT_EQ(t.received[i], i == root ? 0 : s);
          t = check(p, CollOp::kReduce, s, c.ranks, root);
          EXPECT_EQ(t.received[root], s);
          sum = 0;
          for (auto r : t.received) sum += r;
          EXPECT_EQ(sum, (n - 1) * s);
          t = check(p, CollOp::kAllToAll, s, c.ranks);
          for (std::uint32_t i = 0; i < n; ++i) {
            EXPECT_EQ(t.received[i], (n - 1) * chunk_bytes(s, static_cast<std::uint32_t>(n), i));
          }
        }
      }
    }
  }
}

TEST(NcclPlanner, ProtocolWireEfficiency) {
  const std::vector<std::uint32_t> ranks = iota(8);
  // LL: 8 data bytes per 16-byte line -> wire = 2 x payload (payload multiple of 8).
  auto t = check(NcclPlanner(cfg("Ring", "LL")), CollOp::kAllGather, 8 * 4096, ranks);
  EXPECT_EQ(t.wire, 2 * t.payload);
  // LL128: 120 data bytes per 128-byte line.
  // (each message is rounded up to whole lines, so the total is within a line per message).
  t = check(NcclPlanner(cfg("Ring", "LL128")), CollOp::kAllGather, 8u << 20, ranks);
  EXPECT_NEAR(static_cast<double>(t.wire) / static_cast<double>(t.payload), 128.0 / 120.0, 0.005);
  t = check(NcclPlanner(cfg("Ring", "Simple")), CollOp::kAllGather, 8 * 4096, ranks);
  EXPECT_EQ(t.wire, t.payload);
}

TEST(NcclPlanner, RingUsesChannelsAndSlices) {
  // 1 GiB AllReduce on 8 H100 with NCCL_ALGO=Ring (NVLS wins by default): Ring/Simple, 24
  // channels; per channel loops of 8 x 2 MiB chunks, each chunk sent as 2 slices of 1 MiB
  // (chunkSteps 4, sliceSteps 2 of 512 KiB steps).
  const NcclPlanner p(cfg("Ring"));
  const auto ranks = iota(8);
  const RankPlan plan = p.plan(CollRequest{CollOp::kAllReduce, 1ull << 30, &ranks, 0, 0});
  std::map<std::uint16_t, std::uint64_t> per_channel;
  std::uint64_t max_msg = 0;
  for (const auto& o : plan.ops) {
    if (!o.is_send) continue;
    per_channel[o.channel] += o.bytes;
    max_msg = std::max(max_msg, o.bytes);
  }
  EXPECT_EQ(per_channel.size(), 24u);
  EXPECT_EQ(max_msg, 1u << 20);
}

// NVLS AllReduce (nccl.md §1.4, §1.6): 16 NVLS channels on Hopper; chunk 128 KiB for a call of
// at least 64 x 16 channels x 8 heads x 128 KiB = 1 GiB; every rank sends every chunk once into
// the switch's reduction (n x chunk per loop) and multicasts the chunk it owns: (1 + 1/n) x S
// sent per rank, S/n received reduced plus S by multicast.
TEST(NcclPlanner, NvlsAllReduceSendsOnePlusOneOverN) {
  const NcclPlanner p(cfg());
  const auto ranks = iota(8);
  const std::uint64_t S = 1ull << 30;
  for (std::uint32_t me : {0u, 5u}) {
    const RankPlan plan = p.plan(CollRequest{CollOp::kAllReduce, S, &ranks, me, 0});
    std::uint64_t reduce = 0, mcast = 0, max_msg = 0, recvs = 0;
    std::set<std::uint16_t> channels;
    for (const auto& o : plan.ops) {
      if (!o.is_send) {
        ++recvs;
        continue;
      }
      channels.insert(o.channel);
      max_msg = std::max(max_msg, o.bytes);
      if (o.nvls == fabricsim::models::kNvlsReduce) reduce += o.bytes;
      if (o.nvls == fabricsim::models::kNvlsMulticast) {
        mcast += o.bytes;
        EXPECT_EQ(o.peer, me);
      }
      EXPECT_NE(o.nvls, 0u);
    }
    EXPECT_EQ(channels.size(), 16u);
    EXPECT_EQ(max_msg, 128u << 10);
    EXPECT_EQ(reduce, S);
    EXPECT_EQ(mcast, S / 8);
    // One reduced chunk (from itself) plus 8 multicast chunks per loop: S/128K/8 loops x 9.
    EXPECT_EQ(recvs, S / (128u << 10) / 8 * 9);
  }
  // A100 (sm80) has no NVLS: Ring/Simple, no NVLS op.
  NcclPlannerConfig a100 = cfg();
  a100.sm = 80;
  const RankPlan plan = NcclPlanner(a100).plan(CollRequest{CollOp::kAllReduce, S, &ranks, 0, 0});
  for (const auto& o : plan.ops) EXPECT_EQ(o.nvls, 0u);
}

TEST(NcclPlanner, PxnRelaysThroughThePeersRail) {
  // Must-show 3: GPU 1 of host A sends to GPU 0 of host B (NIC on rail 0): with PXN the data
  // goes over NVLink to GPU 0 of host A, whose NIC is on rail 0, and on to host B; with
  // NCCL_PXN_DISABLE=1 (or NCCL_P2P_PXN_LEVEL=0) GPU 1 sends directly from its own NIC.
  const auto ranks = iota(16);
  auto sends_of = [&](const NcclPlanner& p, std::uint32_t me) {
    std::map<std::uint32_t, std::uint64_t> to;
    const RankPlan plan = p.plan(CollRequest{CollOp::kAllToAll, 16u << 20, &ranks, me, 0});
    for (const auto& o : plan.ops) {
      if (o.is_send && !o.relay) to[o.peer] += o.payload_bytes;
    }
    return to;
  };
  auto relays_of = [&](const NcclPlanner& p, std::uint32_t me) {
    std::map<std::uint32_t, std::uint64_t> to;
    const RankPlan plan = p.plan(CollRequest{CollOp::kAllToAll, 16u << 20, &ranks, me, 0});
    for (const auto& o : plan.ops) {
      if (o.is_send && o.relay) to[o.peer] += o.payload_bytes;
    }
    return to;
  };
  const NcclPlanner pxn(cfg());
  const std::uint64_t block = (16u << 20) / 16;
  auto s1 = sends_of(pxn, 1);
  EXPECT_EQ(s1.count(8), 0u);             // not directly to host B's GPU 0
  EXPECT_EQ(s1[9], block);                // same rail (local 1): direct
  EXPECT_EQ(s1[0], block + block);        // its own block for rank 0, plus rank 8's via relay 0
  auto r0 = relays_of(pxn, 0);
  EXPECT_EQ(r0[8], 7 * block);            // GPU 0 forwards the blocks of GPUs 1..7 to rank 8
  EXPECT_EQ(r0.size(), 1u);

  for (const auto& off : {std::pair<std::string, std::string>{"NCCL_PXN_DISABLE", "1"}, {"NCCL_P2P_PXN_LEVEL", "0"}}) {
    NcclPlannerConfig c;
    c.settings = load_nccl_settings({off}, "test", false);
    const NcclPlanner direct(c);
    auto d1 = sends_of(direct, 1);
    EXPECT_EQ(d1[8], block) << off.first;
    EXPECT_EQ(d1[0], block) << off.first;
    EXPECT_TRUE(relays_of(direct, 0).empty()) << off.first;
  }
  check(pxn, CollOp::kAllToAll, 16u << 20, ranks);  // and it all matches up
}

TEST(NcclPlanner, DoubleBinaryTree) {
  // nccl.md §1.6 for n = 4: tree 0: 0 -> 2; 2 -> {1, 3}; tree 1 (mirror): 3 -> 1; 1 -> {2, 0}.
  EXPECT_EQ(dbtree_links(4, 0, 0).child0, 2);
  EXPECT_EQ(dbtree_links(4, 2, 0).parent, 0);
  EXPECT_EQ(dbtree_links(4, 2, 0).child0, 1);
  EXPECT_EQ(dbtree_links(4, 2, 0).child1, 3);
  EXPECT_EQ(dbtree_links(4, 3, 0).parent, 2);
  EXPECT_EQ(dbtree_links(4, 3, 1).child0, 1);
  EXPECT_EQ(dbtree_links(4, 1, 1).parent, 3);
  // Every tree is a spanning tree: n-1 parent links, children consistent with parents.
  for (int n : {2, 3, 5, 7, 8, 16, 33}) {
    for (int tree : {0, 1}) {
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        const auto l = dbtree_links(n, r, tree);
        if (l.parent < 0) {
          ++roots;
          continue;
        }
        const auto pl = dbtree_links(n, l.parent, tree);
        EXPECT_TRUE(pl.child0 == r || pl.child1 == r) << n << " " << tree << " " << r;
      }
      EXPECT_EQ(roots, 1);
    }
  }
}

}  // namespace

TEST(RingPlanner, LazyRingExpandsToTheStepChain) {
  // The ring planner's AllReduce/AllGather/ReduceScatter plans are lazy (models::LazyRing,
  // O(1) memory per rank); expanded() is the materialized chain: op 2k sends tag k after op 2k-1,
  // op 2k+1 receives tag k. Every rank's sends match the next rank's receives, and an AllGather
  // delivers every block but the receiver's own.
  const auto ranks = iota(5, 3, 2);
  const std::uint64_t S = 1000003;
  for (CollOp op : {CollOp::kAllReduce, CollOp::kAllGather, CollOp::kReduceScatter}) {
    const std::uint32_t n = 5, steps = op == CollOp::kAllReduce ? 2 * (n - 1) : n - 1;
    std::vector<std::uint64_t> got(n, 0);
    for (std::uint32_t i = 0; i < n; ++i) {
      const RankPlan lazy = RingPlanner().plan(CollRequest{op, S, &ranks, i, 0});
      ASSERT_TRUE(lazy.lazy_ring != nullptr);
      EXPECT_TRUE(lazy.ops.empty());
      EXPECT_FALSE(lazy.empty());
      const RankPlan p = lazy.expanded();
      ASSERT_EQ(p.size(), 2 * steps);
      ASSERT_EQ(p.dep_begin.size(), p.ops.size() + 1);
      for (std::uint32_t k = 0; k < steps; ++k) {
        const auto& s = p.ops[2 * k];
        const auto& r = p.ops[2 * k + 1];
        EXPECT_TRUE(s.is_send);
        EXPECT_FALSE(r.is_send);
        EXPECT_EQ(s.peer, ranks[(i + 1) % n]);
        EXPECT_EQ(r.peer, ranks[(i + n - 1) % n]);
        EXPECT_EQ(s.tag, k);
        EXPECT_EQ(r.tag, k);
        EXPECT_EQ(p.deps(2 * k + 1).size(), 0u);
        if (k == 0) {
          EXPECT_EQ(p.deps(0).size(), 0u);
        } else {
          ASSERT_EQ(p.deps(2 * k).size(), 1u);
          EXPECT_EQ(p.deps(2 * k)[0], 2 * k - 1);
        }
        got[(i + 1) % n] += s.bytes;
      }
    }
    if (op == CollOp::kAllGather) {
      for (std::uint32_t i = 0; i < n; ++i) EXPECT_EQ(got[i], S - chunk_bytes(S, n, i));
    }
  }
}
