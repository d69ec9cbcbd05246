// NIC profiles (cluster.nic_profile) and the packet-rung NIC's QP-context cache and message-rate
// limit: closed forms of the miss cost, equality across profiles that differ only where the
// workload cannot tell, identical results on any process count, bad values refused in one line.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "models/core/nic_profile.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/mpi.hpp"
#include "tests/support/run.hpp"
#include "tests/support/workloads.hpp"

namespace {

namespace m = fabricsim::models;
using fabricsim::testing::iteration;
using fabricsim::testing::run_quiet;

constexpr unsigned kPeers = 8;         // rank 0 sends to ranks 1..8, one host (one NIC) each
constexpr unsigned kRounds = 5;        // messages per peer
constexpr long long kMissPs = 700'000; // nic.qp_miss_latency of the tests: 700 ns

/// Settings every test starts from: one GPU per host, so that every peer is behind the NIC (no
/// NVLink, no PXN relay), all hosts on one leaf; a 700 ns miss latency. The closed forms are of
/// the NIC alone, with every message handed to it the instant it is ready: the GPU's proxy thread
/// (simccl.proxy, 1 us per posted message) would space the posts wider than the NIC's message
/// gap and its misses, so it is off here (tests/simccl/proxy_test covers it).
std::vector<std::string> base_sets() {
  return {"sim.fidelity=packet", "cluster.gpus_per_host=1", "cluster.topology=leaf_spine",
          "nic.qp_miss_latency=700ns", "simccl.proxy=none"};
}

std::vector<std::string> with(std::vector<std::string> s, const std::vector<std::string>& more) {
  s.insert(s.end(), more.begin(), more.end());
  return s;
}

/// Rank 0 sends kRounds x kPeers one-packet messages (1 KiB < the 4 KiB MTU) to ranks 1..kPeers
/// in turn, each send after the previous one left the GPU: message i goes to peer 1 + i % kPeers,
/// so the NIC serves its QPs strictly round-robin, one at a time.
m::Workload chained_round_robin() {
  m::Workload w = fabricsim::testing::world_workload(kPeers + 1);
  for (unsigned i = 0; i < kRounds * kPeers; ++i) {
    std::vector<std::uint32_t> deps;
    if (i > 0) deps.push_back(i - 1);  // rank 0's program holds only these sends
    fabricsim::testing::add_p2p(w, 0, 1 + i % kPeers, 1024, i, deps);
  }
  return w;
}

// The access sequence of rank 0's QP-context cache is peers 1, 2, ..., N, 1, 2, ... (N = 8), one
// packet each, M = 5 N packets. An LRU of C < N contexts never holds the next peer (it was
// served N - 1 > C - 1 serves ago), so every serve misses: M misses. With C >= N only the first
// serve of each QP misses: N compulsory misses, M - N hits. Each miss holds the only active QP
// for the miss latency L while nothing else is sent, so the chain ends exactly misses x L later
// than with an unlimited cache.
TEST(NicQpCache, RoundRobinOverMorePeersThanContextsMissesEveryServe) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const m::Workload w = chained_round_robin();
  const unsigned msgs = kRounds * kPeers;
  const auto ideal = run_quiet(&w, base_sets());
  EXPECT_EQ(ideal.fabric.qp_ctx_hits + ideal.fabric.qp_ctx_misses, 0u);  // unlimited: not counted

  const auto thrash = run_quiet(&w, with(base_sets(), {"nic.qp_cache=" + std::to_string(kPeers - 1)}));
  EXPECT_EQ(thrash.fabric.qp_ctx_misses, msgs);
  EXPECT_EQ(thrash.fabric.qp_ctx_hits, 0u);
  EXPECT_EQ(iteration(thrash) - iteration(ideal), static_cast<long long>(msgs) * kMissPs);

  for (unsigned c : {kPeers, 4 * kPeers}) {
    SCOPED_TRACE(c);
    const auto fits = run_quiet(&w, with(base_sets(), {"nic.qp_cache=" + std::to_string(c)}));
    EXPECT_EQ(fits.fabric.qp_ctx_misses, kPeers);
    EXPECT_EQ(fits.fabric.qp_ctx_hits, msgs - kPeers);
    EXPECT_EQ(iteration(fits) - iteration(ideal), static_cast<long long>(kPeers) * kMissPs);
  }
  // Receivers never send data here (their ACKs are control frames), so only rank 0 counts.
}

// All-to-all of 16 ranks, one per host: every NIC has 15 peers, one QP each. Two profiles that
// differ only in the cache size give identical results (digest, time, counters) while both
// caches hold every peer (15 and 1024 contexts: only the 15 compulsory misses per NIC), and
// diverge once one cache is smaller than the peers (8 contexts: more misses, a later end).
TEST(NicQpCache, ProfilesDifferingInCacheSizeAgreeUntilPeersExceedTheCache) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const m::Workload w = fabricsim::testing::collective_workload(16, m::CollOp::kAllToAll, 1 << 20, "a2a");
  const auto sets = with(base_sets(), {"cluster.nic_profile=cx7_400g"});
  const auto big = run_quiet(&w, with(sets, {"nic.qp_cache=1024"}));
  const auto fits = run_quiet(&w, with(sets, {"nic.qp_cache=15"}));
  EXPECT_EQ(fits.digest, big.digest);
  EXPECT_EQ(iteration(fits), iteration(big));
  EXPECT_EQ(big.fabric.qp_ctx_misses, 16u * 15u);
  EXPECT_EQ(fits.fabric.qp_ctx_misses, big.fabric.qp_ctx_misses);
  EXPECT_EQ(fits.fabric.qp_ctx_hits, big.fabric.qp_ctx_hits);
  // Every data packet is served once (no losses under PFC): hits + misses = packets.
  EXPECT_EQ(big.fabric.qp_ctx_hits + big.fabric.qp_ctx_misses, big.fabric.nic_data_packets);

  const auto small = run_quiet(&w, with(sets, {"nic.qp_cache=8"}));
  EXPECT_NE(small.digest, big.digest);
  EXPECT_GT(small.fabric.qp_ctx_misses, big.fabric.qp_ctx_misses);
  EXPECT_GT(iteration(small), iteration(big));
  EXPECT_EQ(small.fabric.qp_ctx_hits + small.fabric.qp_ctx_misses, small.fabric.nic_data_packets);
}

// The default profile is today's NIC: naming it changes nothing, bit for bit.
TEST(NicProfile, IdealProfileIsTheDefaultModel) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const m::Workload w = fabricsim::testing::collective_workload(16, m::CollOp::kAllToAll, 1 << 20, "a2a");
  const auto plain = run_quiet(&w, {"sim.fidelity=packet"});
  const auto named = run_quiet(&w, {"sim.fidelity=packet", "cluster.nic_profile=ideal"});
  EXPECT_EQ(named.digest, plain.digest);
  EXPECT_EQ(iteration(named), iteration(plain));
  EXPECT_EQ(named.fabric.nic_data_packets, plain.fabric.nic_data_packets);
}

// Message-rate limit: rank 0 posts one 1 KiB message to each of 8 peers at time 0. Unlimited,
// the port sends them back to back, one per serialization time s = 1024 B x 8 / 400 Gb/s =
// 20.48 ns. With nic.msg_rate = 10 M/s the starts are g = 1e12 / 1e7 ps = 100 ns apart (g > s),
// so the last message starts (N - 1)(g - s) later: 7 x 79.52 ns.
TEST(NicMsgRate, MessageStartsAreSpacedByTheTokenBucket) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  std::vector<fabricsim::testing::P2pFlow> flows;
  for (unsigned p = 1; p <= kPeers; ++p) flows.push_back({0, p, 1024, 0});
  const m::Workload w = fabricsim::testing::p2p_workload(kPeers + 1, flows);
  const auto free_run = run_quiet(&w, base_sets());
  const auto limited = run_quiet(&w, with(base_sets(), {"nic.msg_rate=10e6"}));
  const long long s = 1024LL * 8 * 1'000'000'000'000LL / 400'000'000'000LL;  // 20480 ps
  const long long g = 100'000;
  EXPECT_EQ(iteration(limited) - iteration(free_run), (kPeers - 1) * (g - s));
}

// A limited cache and message rate give identical results on any process and thread count.
TEST(NicQpCache, IdenticalOnAnyProcessCount) {
  const m::Workload w = fabricsim::testing::collective_workload(16, m::CollOp::kAllToAll, 1 << 20, "a2a");
  const auto sets = with(base_sets(), {"cluster.nic_profile=cx6_200g", "nic.qp_cache=6"});
  const auto alone = run_quiet(&w, sets, MPI_COMM_SELF);
  for (unsigned threads : {1u, 2u}) {
    const auto all = run_quiet(&w, sets, MPI_COMM_WORLD, threads);
    EXPECT_EQ(all.digest, alone.digest) << threads << " threads";
    EXPECT_EQ(iteration(all), iteration(alone));
    EXPECT_EQ(all.fabric.qp_ctx_misses, alone.fabric.qp_ctx_misses);
  }
}

// The profile's line rate becomes cluster.nic_bandwidth unless the spec sets it: a 64 MiB send
// between two hosts takes 64 MiB x 8 / 200 Gb/s with cx6_200g, as with the ideal profile and
// cluster.nic_bandwidth = 200Gbps (the flow rung: the line rate alone).
TEST(NicProfile, LineRateFollowsTheProfileUnlessGiven) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const m::Workload w = fabricsim::testing::p2p_workload(16, {{3, 11, 64ull << 20, 0}});
  const auto cx6 = run_quiet(&w, {"sim.fidelity=flow", "cluster.nic_profile=cx6_200g"});
  const auto ideal200 = run_quiet(&w, {"sim.fidelity=flow", "cluster.nic_bandwidth=200Gbps"});
  const auto cx6_400 = run_quiet(&w, {"sim.fidelity=flow", "cluster.nic_profile=cx6_200g", "cluster.nic_bandwidth=400Gbps"});
  const auto ideal = run_quiet(&w, {"sim.fidelity=flow"});
  EXPECT_EQ(iteration(cx6), iteration(ideal200));
  EXPECT_EQ(iteration(cx6_400), iteration(ideal));
  const double extra_ps = static_cast<double>(64ull << 20) * 8 * (1 / 200e9 - 1 / 400e9) * 1e12;
  EXPECT_NEAR(static_cast<double>(iteration(cx6) - iteration(ideal)), extra_ps, 0.001 * extra_ps);
}

TEST(NicProfile, BadValuesAreRefusedInOneLine) {
  FABRICSIM_SEQUENTIAL_ONLY("input errors");
  const m::Workload w = fabricsim::testing::collective_workload(4, m::CollOp::kAllToAll, 4096, "a2a");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"cluster.nic_profile=cx9"}), "cluster.nic_profile", "not a NIC profile",
                     "ideal, cx7_400g, cx6_200g");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"nic.qp_cache=0"}), "nic.qp_cache", "at least 1, or unlimited");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"nic.qp_cache=many"}), "nic.qp_cache", "integer");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"nic.msg_rate=0"}), "nic.msg_rate", "(0, 1e12]", "unlimited");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"nic.msg_rate=-5"}), "nic.msg_rate", "(0, 1e12]");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"nic.qp_miss_latency=2s"}), "nic.qp_miss_latency", "1s");
  EXPECT_INPUT_ERROR(run_quiet(&w, {"cluster.nic_profile=cx7_400g", "cluster.nic_bandwidth=0Gbps"}),
                     "cluster.nic_bandwidth", "must be positive");
}

// Every built-in profile has a name, a positive line rate and its sources; names are unique.
TEST(NicProfile, RegistryEntriesAreComplete) {
  FABRICSIM_SEQUENTIAL_ONLY("no simulation");
  const auto& all = m::nic_profiles();
  ASSERT_GE(all.size(), 3u);
  EXPECT_STREQ(all.front().name, "ideal");
  EXPECT_EQ(all.front().qp_cache, 0u);
  EXPECT_EQ(all.front().msg_rate_per_s, 0.0);
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_GT(all[i].line_bps, 0u) << all[i].name;
    EXPECT_NE(std::string(all[i].sources), "") << all[i].name;
    for (std::size_t j = 0; j < i; ++j) EXPECT_STRNE(all[i].name, all[j].name);
    EXPECT_EQ(&m::find_nic_profile(all[i].name, "<test>", "cluster.nic_profile"), &all[i]);
  }
}

}  // namespace
