// Link faults in simulated time (spec `faults:`, docs/jobs_and_faults.md): a link that goes down
// mid-AllReduce, a link with a bit-error rate, a degraded link; bad fault entries; determinism
// across process and thread counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "jobs/trace.hpp"
#include "tests/support/errors.hpp"
#include "tests/support/mpi.hpp"
#include "tests/support/run.hpp"
#include "tests/support/workloads.hpp"

namespace {

namespace m = fabricsim::models;
using fabricsim::testing::iteration;
using fabricsim::testing::run_quiet;
constexpr long long kUs = 1'000'000;  // ps per us

/// 16 GPUs, one per host, 8 per leaf: 2 leaves joined by `spines` spines of 100 Gb/s each, NICs
/// at 400 Gb/s, so the leaf uplinks are the bottleneck of cross-leaf traffic; 4 QPs per
/// connection spread it over the spines; go-back-N timeout 1 ms.
std::vector<std::string> fabric(int spines, bool pfc) {
  return {"sim.fidelity=packet",
          "cluster.gpus_per_host=1",
          "cluster.hosts=16",
          "cluster.nics_per_leaf=8",
          "cluster.spines=" + std::to_string(spines),
          "cluster.nic_bandwidth=400Gbps",
          "cluster.fabric_bandwidth=100Gbps",
          std::string("switch.pfc=") + (pfc ? "true" : "false"),
          "nic.qps_per_connection=4",
          "nic.rto=1ms",
          // The bounds below are of the fabric alone (link rates, fault, convergence, timeouts);
          // the proxy's per-message posting (simccl.proxy) is not in them.
          "simccl.proxy=none"};
}

m::Workload allreduce(std::uint64_t bytes) {
  return fabricsim::testing::collective_workload(16, m::CollOp::kAllReduce, bytes, "allreduce");
}

std::uint64_t flow_bytes(const fabricsim::jobs::RunResult& r) {
  std::uint64_t b = 0;
  for (const auto& f : r.flow_records) b += f.bytes;
  return b;
}

/// Payload bytes of the flows from leaf 0 (GPUs 0..7) to leaf 1 (GPUs 8..15).
std::uint64_t cross_bytes(const fabricsim::jobs::RunResult& r) {
  std::uint64_t b = 0;
  for (const auto& f : r.flow_records) {
    if (f.src < 8 && f.dst >= 8) b += f.bytes;
  }
  return b;
}

/// Every flow of `r` received its last byte, by the end of the run.
void expect_all_delivered(const fabricsim::jobs::RunResult& faulty, const fabricsim::jobs::RunResult& healthy) {
  EXPECT_EQ(faulty.flow_records.size(), healthy.flow_records.size());
  EXPECT_EQ(flow_bytes(faulty), flow_bytes(healthy));
  for (const auto& f : faulty.flow_records) {
    EXPECT_GT(f.end_ps, 0);
    EXPECT_LE(f.end_ps, iteration(faulty));
  }
}

std::string down(const std::string& target, long long at_us, long long until_us, long long converge_us) {
  return "faults=[{time: " + std::to_string(at_us) + "us, target: " + target + ", kind: link_down" +
         (until_us > 0 ? ", until: " + std::to_string(until_us) + "us" : std::string()) +
         ", detect: 0us, converge: " + std::to_string(converge_us) + "us}]";
}

// Must-show 2, four spines. Leaf 0's uplinks carry 4 x 100 Gb/s until the link to spine 1 dies
// at t_d, then 3 x 100 Gb/s. Lower bound: the cross-leaf payload B that did not fit through four
// links by t_d must pass three: T >= t_d + (B - 4 R t_d) / (3 R). Upper bound: the healthy run's
// time, plus the convergence delay (during which the dead link's share is lost), plus the
// retransmission timeouts taken, plus the time to redo the whole collective on the surviving
// fabric (the worst case of go-back-N resending what was in flight, and of the lost capacity for
// the rest of the collective). The last term is measured: the same AllReduce on a healthy fabric
// of three spines, whose ECMP hash leaves the three links unevenly loaded as the reconverged
// four-spine fabric does (on this lossy fabric three spines take longer than two), so no closed
// form of the three links' capacity bounds it.
TEST(Faults, LinkDownMidAllReduceWithFourSpinesCompletesBoundedly) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const m::Workload w = allreduce(16ull << 20);
  const auto healthy = run_quiet(&w, fabric(4, false), MPI_COMM_SELF, 1, true);
  const long long t_base = iteration(healthy);
  const long long t_d = t_base / 3;
  const long long converge = 20 * kUs;
  auto sets = fabric(4, false);
  sets.push_back(down("leaf0-spine1", t_d / kUs, 0, converge / kUs));
  const auto faulty = run_quiet(&w, sets, MPI_COMM_SELF, 1, true);
  expect_all_delivered(faulty, healthy);
  const double r_bps = 100e9;
  const auto b_bits = static_cast<double>(cross_bytes(healthy)) * 8;
  const double t_d_ps = static_cast<double>(t_d / kUs * kUs);
  const double lower = t_d_ps + std::max(0.0, b_bits - 4 * r_bps * t_d_ps * 1e-12) / (3 * r_bps) * 1e12;
  const auto surviving = run_quiet(&w, fabric(3, false), MPI_COMM_SELF, 1, true);
  const double upper = static_cast<double>(t_base + converge) +
                       static_cast<double>(faulty.fabric.timeouts) * 1000.0 * kUs +
                       static_cast<double>(iteration(surviving));
  std::printf("4 spines: healthy %.3f us, link down at %.3f us: %.3f us (bounds %.3f .. %.3f us), %llu down drops, "
              "%llu retransmits, %llu timeouts\n",
              static_cast<double>(t_base) / 1e6, t_d_ps / 1e6, static_cast<double>(iteration(faulty)) / 1e6, lower / 1e6,
              upper / 1e6, static_cast<unsigned long long>(faulty.fabric.down_drops),
              static_cast<unsigned long long>(faulty.fabric.retransmits),
              static_cast<unsigned long long>(faulty.fabric.timeouts));
  EXPECT_GE(static_cast<double>(iteration(faulty)), lower);
  EXPECT_LE(static_cast<double>(iteration(faulty)), upper);
  EXPECT_GT(iteration(faulty), t_base);
  EXPECT_GT(faulty.fabric.down_drops, 0u);
  EXPECT_GT(faulty.fabric.retransmits, 0u);
  EXPECT_EQ(healthy.fabric.retransmits, 0u);
}

// Must-show 2, one spine: no other path, so the collective stalls until the link is back and
// completes after that. Lossless (PFC): the packets wait at the dead port; lossy: they are
// dropped and go-back-N resends them after the link is back.
TEST(Faults, LinkDownWithOneSpineStallsUntilTheLinkReturns) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const m::Workload w = allreduce(4ull << 20);
  for (const bool pfc : {true, false}) {
    SCOPED_TRACE(pfc ? "pfc" : "lossy");
    const auto healthy = run_quiet(&w, fabric(1, pfc), MPI_COMM_SELF, 1, true);
    const long long t_d = iteration(healthy) / 4 / kUs * kUs;
    const long long t_u = t_d + 500 * kUs;
    auto sets = fabric(1, pfc);
    sets.push_back(down("leaf0-spine0", t_d / kUs, t_u / kUs, 10));
    const auto faulty = run_quiet(&w, sets, MPI_COMM_SELF, 1, true);
    expect_all_delivered(faulty, healthy);
    std::printf("1 spine, %s: healthy %.3f us, down %.3f .. %.3f us: %.3f us\n", pfc ? "pfc" : "lossy",
                static_cast<double>(iteration(healthy)) / 1e6, static_cast<double>(t_d) / 1e6,
                static_cast<double>(t_u) / 1e6, static_cast<double>(iteration(faulty)) / 1e6);
    EXPECT_GE(iteration(faulty), t_u);
    EXPECT_GT(iteration(faulty), iteration(healthy));
    // Lossless: data waits at the dead port (only ACK/CNP frames, a lossy class, are dropped
    // there), so nothing is resent; lossy: data is dropped and resent.
    if (pfc) {
      EXPECT_EQ(faulty.fabric.headroom_drops, 0u);
    } else {
      EXPECT_GT(faulty.fabric.down_drops, 0u);
      EXPECT_GT(faulty.fabric.retransmits, 0u);
    }
  }
}

std::string ber(const char* rate) {
  return std::string("faults=[{time: 0us, target: leaf0-spine0, kind: ber, ber: ") + rate + "}]";
}

/// Largest flow completion time of a run.
long long max_fct(const fabricsim::jobs::RunResult& r) {
  long long f = 0;
  for (const auto& x : r.flow_records) f = std::max<long long>(f, x.fct_ps);
  return f;
}

// Must-show 3: a link with a bit-error rate. A frame of b bits is lost with probability
// 1 - (1 - BER)^b: for a 4 KiB data frame (4096 + 82 bytes) 0.033% at 1e-8, 0.33% at 1e-7, 3.3%
// at 1e-6 and 28% at 1e-5. Every byte arrives, the losses are counted, retransmissions grow with
// the BER and so does the slowest flow's FCT. At 1e-5 a queue pair may lose its first packet
// after a timeout 8 times in a row (0.28^8 = 4e-5 per try, over thousands of tries), which ends
// the run at NCCL's default retry count of 7: the test allows 30 retries.
TEST(Faults, BitErrorsAreRecoveredAndCostMoreWithTheRate) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const m::Workload w = allreduce(4ull << 20);
  const auto healthy = run_quiet(&w, fabric(1, true), MPI_COMM_SELF, 1, true);
  std::uint64_t prev_retx = 0;
  long long prev_fct = max_fct(healthy);
  for (const char* rate : {"1e-7", "1e-6", "1e-5"}) {
    SCOPED_TRACE(rate);
    auto sets = fabric(1, true);
    sets.push_back("nic.retry_count=30");
    sets.push_back(ber(rate));
    const auto r = run_quiet(&w, sets, MPI_COMM_SELF, 1, true);
    expect_all_delivered(r, healthy);
    std::printf("BER %s: %.3f us, %llu frames lost, %llu retransmits (%llu B), max FCT %.3f us\n", rate,
                static_cast<double>(iteration(r)) / 1e6, static_cast<unsigned long long>(r.fabric.ber_drops),
                static_cast<unsigned long long>(r.fabric.retransmits),
                static_cast<unsigned long long>(r.fabric.retransmit_bytes), static_cast<double>(max_fct(r)) / 1e6);
    EXPECT_GT(r.fabric.ber_drops, 0u);
    EXPECT_GT(r.fabric.retransmits, prev_retx);
    EXPECT_GE(r.fabric.retransmit_bytes, r.fabric.retransmits);
    EXPECT_GT(max_fct(r), prev_fct);
    prev_retx = r.fabric.retransmits;
    prev_fct = max_fct(r);
  }
}

// Must-show 3, BER 1e-3: a 4 KiB frame survives with probability (1 - 1e-3)^33424 = 3e-15, so no
// data frame crosses the link. The run does not hang: each queue pair gives up after
// nic.retry_count timeouts in a row, and the run ends with one error line.
TEST(Faults, HopelessBitErrorRateEndsTheRunWithATimeout) {
  FABRICSIM_SEQUENTIAL_ONLY("input errors");
  const m::Workload w = allreduce(1ull << 20);
  auto sets = fabric(1, true);
  sets.push_back(ber("1e-3"));
  EXPECT_INPUT_ERROR(run_quiet(&w, sets), "faults", "transport retry counter exceeded");
}

// Must-show 3 with link-level retry (switch.link_retry): a corrupted unit is sent again on the
// link, so nothing is dropped and nothing is resent end to end, at BER 1e-5, 1e-4 and 1e-3. The
// unit is a 64-byte cell: at 1e-3 a cell of 512 bits is hit with probability
// 1 - (1 - 1e-3)^512 = 40% (a whole 4 KiB frame with 1 - 3e-15), so each cell needs
// 1 / 0.6 = 1.67 tries on average, each failed one costing a link round trip. Every byte
// arrives, the link retransmissions are counted and grow with the BER, and so does the slowest
// flow's FCT. The mean replays per cell, q / (1 - q), bounds the count from the cells sent: the
// link serialized at least its payload bytes / 64 cells.
TEST(Faults, LinkLevelRetryDeliversEveryByteUpToBer1e3) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const m::Workload w = allreduce(1ull << 20);
  auto base = fabric(1, true);
  base.push_back("switch.link_retry=true");
  base.push_back("switch.link_retry_cell=64B");
  // At 1e-3 a 4 KiB frame holds the link for ~44 us of replays, so a queue pair can wait more
  // than fabric()'s 1 ms for an ACK behind the queue: NCCL's default timeout (4.3 s) instead.
  base.push_back("nic.rto=4294967296ns");
  const auto healthy = run_quiet(&w, base, MPI_COMM_SELF, 1, true);
  EXPECT_EQ(healthy.fabric.link_retransmits, 0u);
  std::uint64_t prev_llr = 0;
  long long prev_fct = max_fct(healthy);
  for (const char* rate : {"1e-5", "1e-4", "1e-3"}) {
    SCOPED_TRACE(rate);
    auto sets = base;
    sets.push_back(ber(rate));
    const auto r = run_quiet(&w, sets, MPI_COMM_SELF, 1, true);
    expect_all_delivered(r, healthy);
    std::printf("LLR, BER %s: %.3f us, %llu link retransmits (%llu B), %llu drops, %llu end-to-end retransmits, "
                "max FCT %.3f us\n",
                rate, static_cast<double>(iteration(r)) / 1e6, static_cast<unsigned long long>(r.fabric.link_retransmits),
                static_cast<unsigned long long>(r.fabric.link_retransmit_bytes),
                static_cast<unsigned long long>(r.fabric.drops), static_cast<unsigned long long>(r.fabric.retransmits),
                static_cast<double>(max_fct(r)) / 1e6);
    EXPECT_EQ(r.fabric.drops, 0u);
    EXPECT_EQ(r.fabric.ber_drops, 0u);
    EXPECT_EQ(r.fabric.retransmits, 0u);
    EXPECT_GT(r.fabric.link_retransmits, prev_llr);
    EXPECT_GT(max_fct(r), prev_fct);
    // Per-link totals: the retransmissions sit on the two directions of leaf0-spine0 only.
    std::uint64_t on_links = 0, cells = 0;
    for (const auto& l : r.link_totals) {
      on_links += l.link_retransmits;
      if (l.link_retransmits > 0) cells += l.bytes / 64;
    }
    EXPECT_EQ(on_links, r.fabric.link_retransmits);
    if (std::string(rate) == "1e-3") {
      const double q = 1 - std::pow(1 - 1e-3, 512);
      // At least the payload's cells were each retried q / (1 - q) times on average (ACK frames
      // and headers add cells; 0.8 leaves room for the spread of the draws over > 30000 cells).
      EXPECT_GT(static_cast<double>(r.fabric.link_retransmits), 0.8 * q / (1 - q) * static_cast<double>(cells));
    }
    prev_llr = r.fabric.link_retransmits;
    prev_fct = max_fct(r);
  }
}

// Without cells, link-level retry replays whole frames: at BER 1e-3 a 4 KiB frame never arrives
// intact, the link gives up after switch.link_retry_max replays and drops it, and the run ends
// with NCCL's retry-count error as without the retry: it does not hang.
TEST(Faults, FrameLevelRetryGivesUpAtHopelessBer) {
  FABRICSIM_SEQUENTIAL_ONLY("input errors");
  const m::Workload w = allreduce(1ull << 20);
  auto sets = fabric(1, true);
  sets.push_back("switch.link_retry=true");
  sets.push_back("switch.link_retry_max=4");
  sets.push_back(ber("1e-3"));
  EXPECT_INPUT_ERROR(run_quiet(&w, sets), "faults", "transport retry counter exceeded");
}

// A link degraded to a lower rate: the collective cannot be faster than with the link healthy,
// and with the only spine link of leaf 0 at 50 of 100 Gb/s from time 0, the cross-leaf payload
// needs at least B / 50 Gb/s.
TEST(Faults, DegradedLinkSlowsTheCollective) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const m::Workload w = allreduce(4ull << 20);
  const auto healthy = run_quiet(&w, fabric(1, true), MPI_COMM_SELF, 1, true);
  auto sets = fabric(1, true);
  sets.push_back("faults=[{time: 0us, target: leaf0-spine0, kind: degrade, rate: 50Gbps}]");
  const auto slow = run_quiet(&w, sets, MPI_COMM_SELF, 1, true);
  expect_all_delivered(slow, healthy);
  EXPECT_GE(static_cast<double>(iteration(slow)), static_cast<double>(cross_bytes(healthy)) * 8 / 50e9 * 1e12);
  EXPECT_GT(iteration(slow), iteration(healthy));
}

// The same fault run on this process alone and on all the test's processes, 1 and 2 threads.
TEST(Faults, FaultRunIsIdenticalOnAnyProcessCount) {
  const m::Workload w = allreduce(2ull << 20);
  auto sets = fabric(4, false);
  sets.push_back("faults=[{time: 20us, target: leaf0-spine1, kind: link_down, until: 60us, detect: 1us, "
                 "converge: 5us}, {time: 0us, target: leaf1-spine2, kind: ber, ber: 1e-6}, "
                 "{time: 10us, target: leaf0-spine3, kind: degrade, rate: 40Gbps, until: 50us}, "
                 "{time: 30us, target: gpu9, kind: nic_down, until: 70us, detect: 0us, converge: 2us}, "
                 "{time: 40us, target: spine0, kind: switch_down, until: 80us, detect: 1us, converge: 3us}]");
  const auto alone = run_quiet(&w, sets, MPI_COMM_SELF);
  EXPECT_GT(alone.fabric.retransmits, 0u);
  for (unsigned threads : {1u, 2u}) {
    const auto all = run_quiet(&w, sets, MPI_COMM_WORLD, threads);
    EXPECT_EQ(all.digest, alone.digest) << threads << " threads";
    EXPECT_EQ(iteration(all), iteration(alone));
    EXPECT_EQ(all.fabric.ber_drops, alone.fabric.ber_drops);
    EXPECT_EQ(all.fabric.down_drops, alone.fabric.down_drops);
    EXPECT_EQ(all.fabric.retransmit_bytes, alone.fabric.retransmit_bytes);
  }
  // Link-level retry draws its replays from the same per-switch stream: equal on any process
  // and thread count too.
  sets.push_back("switch.link_retry=true");
  sets.push_back("switch.link_retry_cell=256B");
  sets.push_back("faults=[{time: 0us, target: leaf1-spine2, kind: ber, ber: 1e-4}]");
  const auto llr = run_quiet(&w, sets, MPI_COMM_SELF);
  EXPECT_GT(llr.fabric.link_retransmits, 0u);
  for (unsigned threads : {1u, 2u}) {
    const auto all = run_quiet(&w, sets, MPI_COMM_WORLD, threads);
    EXPECT_EQ(all.digest, llr.digest) << threads << " threads";
    EXPECT_EQ(iteration(all), iteration(llr));
    EXPECT_EQ(all.fabric.link_retransmits, llr.fabric.link_retransmits);
    EXPECT_EQ(all.fabric.link_retransmit_bytes, llr.fabric.link_retransmit_bytes);
  }
}

// A NIC that fails and comes back (kind nic_down with until): GPU 3's only NIC carries nothing
// from t_d to t_u. Lossless: what the leaf has for GPU 3 waits at the dead port; what GPU 3's NIC
// sends in the window never arrives (down drops) and go-back-N resends it. The collective cannot
// end before GPU 3's NIC is back (its ring neighbours need its data): T >= t_u. Upper bound: the
// queue pairs resume at t_u, at the latest after one retransmission timeout (nic.rto = 1 ms)
// per timeout counted, and then at worst redo the whole collective: T <= t_u + timeouts x rto +
// T_healthy. A nic_down on gpu3 is exactly a link_down of its one link gpu3-leaf0: same results.
TEST(Faults, NicDownFlapStallsTheCollectiveUntilTheNicReturns) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const m::Workload w = allreduce(4ull << 20);
  const auto healthy = run_quiet(&w, fabric(4, true), MPI_COMM_SELF, 1, true);
  const long long t_d = iteration(healthy) / 3 / kUs * kUs;
  const long long t_u = t_d + 300 * kUs;
  const auto entry = [&](const std::string& target, const char* kind) {
    return "faults=[{time: " + std::to_string(t_d / kUs) + "us, until: " + std::to_string(t_u / kUs) + "us, target: " +
           target + ", kind: " + kind + ", detect: 0us, converge: 10us}]";
  };
  auto sets = fabric(4, true);
  sets.push_back(entry("gpu3", "nic_down"));
  const auto faulty = run_quiet(&w, sets, MPI_COMM_SELF, 1, true);
  expect_all_delivered(faulty, healthy);
  const long long upper = t_u + static_cast<long long>(faulty.fabric.timeouts) * 1000 * kUs + iteration(healthy);
  std::printf("nic_down gpu3 %.3f .. %.3f us: healthy %.3f us, faulty %.3f us (bound %.3f us), %llu down drops, "
              "%llu retransmits, %llu timeouts\n",
              static_cast<double>(t_d) / 1e6, static_cast<double>(t_u) / 1e6, static_cast<double>(iteration(healthy)) / 1e6,
              static_cast<double>(iteration(faulty)) / 1e6, static_cast<double>(upper) / 1e6,
              static_cast<unsigned long long>(faulty.fabric.down_drops),
              static_cast<unsigned long long>(faulty.fabric.retransmits),
              static_cast<unsigned long long>(faulty.fabric.timeouts));
  EXPECT_GE(iteration(faulty), t_u);
  EXPECT_LE(iteration(faulty), upper);
  EXPECT_GT(faulty.fabric.down_drops, 0u);
  EXPECT_GT(faulty.fabric.retransmits, 0u);
  EXPECT_EQ(faulty.fabric.headroom_drops, 0u);
  auto link = fabric(4, true);
  link.push_back(entry("gpu3-leaf0", "link_down"));
  const auto same = run_quiet(&w, link, MPI_COMM_SELF, 1, true);
  EXPECT_EQ(iteration(same), iteration(faulty));
  EXPECT_EQ(same.fabric.down_drops, faulty.fabric.down_drops);
  EXPECT_EQ(same.fabric.retransmit_bytes, faulty.fabric.retransmit_bytes);
}

// A NIC that fails for good: its queue pairs and their peers' get no ACK, so each gives up after
// nic.retry_count + 1 timeouts in a row and the run ends with NCCL's error, not a hang. The same
// for a leaf switch that fails for good (its GPUs have no other NIC).
TEST(Faults, NicOrLeafDownForTheRestOfTheRunEndsWithNcclsTimeout) {
  FABRICSIM_SEQUENTIAL_ONLY("input errors");
  const m::Workload w = allreduce(1ull << 20);
  for (const char* e : {"faults=[{time: 20us, target: gpu5, kind: nic_down}]",
                        "faults=[{time: 20us, target: leaf1, kind: switch_down}]"}) {
    SCOPED_TRACE(e);
    auto sets = fabric(2, true);
    sets.push_back(e);
    EXPECT_INPUT_ERROR(run_quiet(&w, sets), "faults", "transport retry counter exceeded");
  }
}

// A spine that fails mid-AllReduce (kind switch_down) is every link of that spine going down at
// the same time: the run equals the one with link_down on leaf0-spine1 and leaf1-spine1, and the
// collective completes with every byte on the three other spines.
TEST(Faults, SpineDownIsEveryLinkOfTheSpineDown) {
  FABRICSIM_SEQUENTIAL_ONLY("compares sequential runs");
  const m::Workload w = allreduce(16ull << 20);
  const auto healthy = run_quiet(&w, fabric(4, false), MPI_COMM_SELF, 1, true);
  const long long t_d = iteration(healthy) / 3 / kUs;
  const std::string at = "time: " + std::to_string(t_d) + "us, detect: 0us, converge: 20us";
  auto sw = fabric(4, false);
  sw.push_back("faults=[{" + at + ", target: spine1, kind: switch_down}]");
  const auto spine = run_quiet(&w, sw, MPI_COMM_SELF, 1, true);
  auto ln = fabric(4, false);
  ln.push_back("faults=[{" + at + ", target: leaf0-spine1, kind: link_down}, {" + at +
               ", target: leaf1-spine1, kind: link_down}]");
  const auto links = run_quiet(&w, ln, MPI_COMM_SELF, 1, true);
  expect_all_delivered(spine, healthy);
  std::printf("switch_down spine1 at %lld us: healthy %.3f us, faulty %.3f us\n", t_d,
              static_cast<double>(iteration(healthy)) / 1e6, static_cast<double>(iteration(spine)) / 1e6);
  EXPECT_GT(iteration(spine), iteration(healthy));
  EXPECT_EQ(iteration(spine), iteration(links));
  EXPECT_EQ(spine.fabric.down_drops, links.fabric.down_drops);
  EXPECT_EQ(spine.fabric.retransmit_bytes, links.fabric.retransmit_bytes);
  EXPECT_GT(spine.fabric.down_drops, 0u);
}

// The trace's fault timeline: one complete event per entry over its window (to the run's end when
// it has no until), and the routing instants at time + detect + converge (and after until).
TEST(Faults, TraceShowsTheFaultTimeline) {
  const m::Workload w = allreduce(4096);
  const std::vector<fabricsim::jobs::TraceFault> faults = {
      {"nic_down", "gpu3", 10 * kUs, 40 * kUs, 5 * kUs}, {"ber", "leaf0-spine1", 0, -1, 0}};
  const auto j = nlohmann::json::parse(fabricsim::jobs::trace_json({}, w, {}, {}, 0, faults, 100 * kUs));
  int complete = 0, instants = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("cat", "") != "fault") continue;
    EXPECT_EQ(e["pid"], 16);
    if (e["ph"] == "X") {
      ++complete;
      if (e["name"] == "nic_down gpu3") {
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 10.0);
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 30.0);
      } else {
        EXPECT_EQ(e["name"], "ber leaf0-spine1");
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 100.0);
      }
    } else if (e["ph"] == "i") {
      ++instants;
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), e["name"] == "routing reconverged" ? 15.0 : 45.0);
    }
  }
  EXPECT_EQ(complete, 2);
  EXPECT_EQ(instants, 2);
}

TEST(Faults, BadEntriesAreRefusedInOneLine) {
  FABRICSIM_SEQUENTIAL_ONLY("input errors");
  const m::Workload w = allreduce(4096);
  const auto f = [](const std::string& entry) { return "faults=[{" + entry + "}]"; };
  const auto run = [&](const std::string& entry, const char* fid = "packet") {
    auto sets = fabric(4, false);
    sets.push_back(std::string("sim.fidelity=") + fid);
    sets.push_back(f(entry));
    return run_quiet(&w, sets);
  };
  EXPECT_INPUT_ERROR(run("time: 1us, target: leaf0-spine9, kind: link_down"), "faults[0].target", "no node 'spine9'");
  EXPECT_INPUT_ERROR(run("time: 1us, target: leaf0-leaf1, kind: link_down"), "faults[0].target", "no link between");
  EXPECT_INPUT_ERROR(run("time: 1us, target: gpu0-leaf0, kind: ber, ber: 1e-6"), "faults[0].target", "switch-to-switch links only");
  EXPECT_INPUT_ERROR(run("time: 1us, target: gpu0-leaf1, kind: link_down"), "faults[0].target", "no link between gpu0 and leaf1");
  EXPECT_INPUT_ERROR(run("time: 1us, target: gpu0-gpu1, kind: link_down"), "faults[0].target", "joins two GPUs");
  EXPECT_INPUT_ERROR(run("time: 1us, target: spine1, kind: nic_down"), "faults[0].target", "not a GPU");
  EXPECT_INPUT_ERROR(run("time: 1us, target: gpu99, kind: nic_down"), "faults[0].target", "no node 'gpu99'");
  EXPECT_INPUT_ERROR(run("time: 1us, target: gpu0-leaf0, kind: nic_down"), "faults[0].target", "not one node");
  EXPECT_INPUT_ERROR(run("time: 1us, target: gpu3, kind: switch_down"), "faults[0].target", "use kind nic_down");
  EXPECT_INPUT_ERROR(run("time: 1us, target: leaf0-spine0, kind: switch_down"), "faults[0].target", "not one node");
  EXPECT_INPUT_ERROR(run("time: 1us, target: spine1, kind: switch_down, rate: 1Gbps"), "faults[0].rate", "kind degrade only");
  EXPECT_INPUT_ERROR(run("time: 1us, target: leaf0spine1, kind: link_down"), "faults[0].target", "NODE-NODE");
  EXPECT_INPUT_ERROR(run("time: 1200000s, target: leaf0-spine1, kind: link_down"), "faults[0].time", "after the end");
  EXPECT_INPUT_ERROR(run("time: -1us, target: leaf0-spine1, kind: link_down"), "faults[0].time", "negative");
  EXPECT_INPUT_ERROR(run("time: soon, target: leaf0-spine1, kind: link_down"), "faults[0].time", "");
  EXPECT_INPUT_ERROR(run("time: 5us, until: 2us, target: leaf0-spine1, kind: link_down"), "faults[0].until", "not after");
  EXPECT_INPUT_ERROR(run("time: 1us, target: leaf0-spine1, kind: melt"), "faults[0].kind", "link_down, ber, degrade, nic_down or switch_down");
  EXPECT_INPUT_ERROR(run("time: 1us, target: leaf0-spine1, kind: ber"), "faults[0].ber", "missing");
  EXPECT_INPUT_ERROR(run("time: 1us, target: leaf0-spine1, kind: ber, ber: 2"), "faults[0].ber", "(0, 1)");
  EXPECT_INPUT_ERROR(run("time: 1us, target: leaf0-spine1, kind: degrade, rate: 400Gbps"), "faults[0].rate", "not below");
  EXPECT_INPUT_ERROR(run("time: 1us, target: leaf0-spine1, kind: link_down, ber: 1e-3"), "faults[0].ber", "kind ber only");
  EXPECT_INPUT_ERROR(run("time: 1us, target: leaf0-spine1, kind: link_down, colour: red"), "faults[0].colour", "unknown key");
  EXPECT_INPUT_ERROR(run("target: leaf0-spine1, kind: link_down"), "faults[0].time", "missing");
  EXPECT_INPUT_ERROR(run("time: 1us, target: leaf0-spine1, kind: link_down", "flow"), "faults", "packet rung only");
  EXPECT_INPUT_ERROR(run("time: 1us, target: leaf0-spine1, kind: link_down", "analytical"), "faults", "packet rung only");
}

}  // namespace
