// TIMELY (models/cc/timely.hpp) against the closed forms of its update rules (Mittal et al.,
// SIGCOMM 2015, Algorithm 1) on the algorithm directly, and on the packet fabric: an incast
// where it keeps the bottleneck queue well below what line-rate senders build, losing nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "models/cc/registry.hpp"
#include "models/cc/timely.hpp"
#include "tests/fabric/fabric_helpers.hpp"

namespace fabricsim::models::cc {
namespace {

constexpr std::uint64_t kLine = 100'000'000'000ull;  // 100 Gb/s
constexpr engine::SimTime kUs = 1'000'000;

struct Qp {
  TimelyParams p;
  QpLink link{kLine, 4096};
  Timely::State s;
  explicit Qp(double rate_fraction) {
    s = Timely::init(p, QpInit{link, 0});
    s.rate = rate_fraction * static_cast<double>(kLine);
  }
  void ack(engine::SimTime rtt) {
    AckInfo a;
    a.rtt_ps = rtt;
    Timely::on_ack(s, p, link, a, 0);
  }
};

TEST(Timely, RegisteredWithItsParameters) {
  EXPECT_EQ(parse_cc("timely", "<test>", "nic.cc"), CcKind::kTimely);
  EXPECT_STREQ(cc_name(CcKind::kTimely), "timely");
  EXPECT_TRUE(traits(CcKind::kTimely).echo_send_time);
  EXPECT_FALSE(traits(CcKind::kTimely).wants_int);  // the echo uses the INT slot
  EXPECT_EQ(Timely::decls().size(), 8u);
  // Per acknowledged QP: rate, EWMA, previous RTT, minRTT (8 B each) + the 4 B HAI counter.
  EXPECT_EQ(state_bytes(CcKind::kTimely), 40u);
  const TimelyParams d;
  EXPECT_EQ(d.t_low_ps, 50 * kUs);  // §6: T_low 50 us, T_high 500 us
  EXPECT_EQ(d.t_high_ps, 500 * kUs);
}

TEST(Timely, StartsAtLineRateAndTheFirstSampleOnlyInitialisesTheGradient) {
  const TimelyParams p;
  const Timely::State s0 = Timely::init(p, QpInit{QpLink{kLine, 4096}, 7 * kUs});
  EXPECT_EQ(s0.rate, static_cast<double>(kLine));
  EXPECT_EQ(s0.min_rtt, p.min_rtt_ps);  // the configured minRTT, not the path's
  TimelyParams auto_min = p;
  auto_min.min_rtt_ps = 0;
  EXPECT_EQ(Timely::init(auto_min, QpInit{QpLink{kLine, 4096}, 7 * kUs}).min_rtt, 7 * kUs);
  Qp q(0.5);
  q.ack(1000 * kUs);  // far above T_high, but there is no previous sample yet
  EXPECT_EQ(q.s.rate, 0.5 * static_cast<double>(kLine));
  q.ack(-1);  // an ACK without an RTT sample changes nothing
  EXPECT_EQ(q.s.rate, 0.5 * static_cast<double>(kLine));
}

TEST(Timely, BelowTLowAddsDeltaPerCompletion) {
  Qp q(0.5);
  q.ack(10 * kUs);
  const double r0 = q.s.rate;
  // Whatever the gradient: 10, 30, 20, 40 us are all below T_low = 50 us.
  const engine::SimTime rtts[] = {30 * kUs, 20 * kUs, 40 * kUs, 10 * kUs};
  for (engine::SimTime rtt : rtts) q.ack(rtt);
  EXPECT_EQ(q.s.rate, r0 + 4 * static_cast<double>(q.p.delta_bps));  // integers below 2^53: exact
}

TEST(Timely, AboveTHighCutsByTHighOverRtt) {
  Qp q(0.5);
  q.ack(100 * kUs);
  const double r0 = q.s.rate;
  q.ack(1000 * kUs);  // rate x (1 - beta (1 - T_high / rtt)) = r0 x (1 - 0.8 x 0.5) = 0.6 r0
  EXPECT_DOUBLE_EQ(q.s.rate, 0.6 * r0);
  q.ack(2000 * kUs);  // (1 - 0.8 x 0.75) = 0.4
  EXPECT_DOUBLE_EQ(q.s.rate, 0.4 * 0.6 * r0);
}

TEST(Timely, PositiveGradientCutsByBetaTimesNormalisedGradient) {
  Qp q(0.5);
  q.ack(100 * kUs);
  const double r0 = q.s.rate;
  // new_rtt_diff = 20 us, rtt_diff = alpha x 20 us = 17.5 us, gradient = 17.5 / minRTT 20 = 0.875:
  // rate x (1 - 0.8 x 0.875) = 0.3 r0.
  q.ack(120 * kUs);
  EXPECT_NEAR(q.s.rate, 0.3 * r0, 1e-12 * r0);
  // Next: new_rtt_diff = 10 us, rtt_diff = 0.125 x 17.5 + 0.875 x 10 = 10.9375 us,
  // gradient 0.546875: x (1 - 0.4375) = 0.5625.
  q.ack(130 * kUs);
  EXPECT_NEAR(q.s.rate, 0.5625 * 0.3 * r0, 1e-12 * r0);
}

TEST(Timely, NonPositiveGradientAddsDeltaThenHyperactiveFiveDelta) {
  Qp q(0.5);
  q.ack(100 * kUs);
  const double r0 = q.s.rate, delta = static_cast<double>(q.p.delta_bps);
  // Constant RTT in [T_low, T_high]: gradient 0 on every completion. Completions 1-4 add delta,
  // from the 5th (hai_threshold) on 5 x delta: after 7, r0 + 4 delta + 3 x 5 delta.
  for (int i = 0; i < 7; ++i) q.ack(100 * kUs);
  EXPECT_EQ(q.s.rate, r0 + 19 * delta);
  // A falling RTT is a negative gradient: still HAI.
  q.ack(90 * kUs);
  EXPECT_EQ(q.s.rate, r0 + 24 * delta);
  // A rise: new_rtt_diff 15 us, rtt_diff = 0.125 x (-8.75) + 0.875 x 15 = 12.03125 us, gradient
  // 0.6015625: x (1 - 0.48125). The same RTT again: rtt_diff = 0.125 x 12.03125 = 1.50390625 us,
  // gradient 0.0751953125 > 0: another cut, x (1 - 0.06015625).
  const double before = q.s.rate;
  q.ack(105 * kUs);
  EXPECT_NEAR(q.s.rate, before * 0.51875, 1e-12 * r0);
  q.ack(105 * kUs);
  EXPECT_NEAR(q.s.rate, before * 0.51875 * 0.93984375, 1e-12 * r0);
  // The cut reset the count: the next non-positive gradient adds one delta, not five.
  const double after_cut = q.s.rate;
  q.ack(100 * kUs);
  EXPECT_EQ(q.s.rate, after_cut + delta);
}

TEST(Timely, RateStaysBetweenTheFloorAndLineRate) {
  Qp hi(1.0);
  hi.ack(10 * kUs);
  hi.ack(10 * kUs);
  EXPECT_EQ(hi.s.rate, static_cast<double>(kLine));
  Qp lo(0.5);
  lo.ack(100 * kUs);
  lo.ack(480 * kUs);  // below T_high; rtt_diff 332.5 us, gradient 16.6: the cut would go negative
  EXPECT_EQ(lo.s.rate, lo.p.min_rate_fraction * static_cast<double>(kLine));
}

// Largest backlog (bytes) a packet found on the switch port feeding `to_node` (the link that
// mean_queue reads), over the whole run.
double max_queue(const jobs::RunResult& r, unsigned to_node) {
  std::uint32_t link = ~0u;
  for (const auto& l : r.link_records) {
    if (l.to_node == to_node && l.tier != 0 && l.from_node > to_node) link = l.link_id;
  }
  double m = -1;
  for (const auto& q : r.queue_records) {
    if (q.link_id == link) m = std::max(m, static_cast<double>(q.max_queue_bytes));
  }
  return m;
}

// 4 senders under one leaf into a 5th host at 100 Gb/s. Line-rate senders (nic.cc = none) fill
// the receiver's egress queue until PFC holds them (megabytes; the queue then drains with no
// arrivals to sample, so the peak is the comparable reading). TIMELY cuts the rates once the
// RTT passes T_low: its peak is the first RTTs' overshoot, and afterwards the queue stays
// below T_low x B. Both deliver every byte of every flow without a drop. T_low 20 us /
// T_high 200 us / minRTT 10 us / delta 100 Mb/s suit the simulated RTT of a few us at 100 Gb/s
// (the paper's settings are for its 10 Gb/s testbed, §6).
TEST(Timely, IncastKeepsTheQueueWellBelowLineRateSenders) {
  using fabric_test::Flow;
  const unsigned long long s = 8ull << 20;
  std::vector<Flow> flows;
  for (unsigned i = 0; i < 4; ++i) flows.push_back({i, 4, s});
  const auto w = fabric_test::chakra_p2p(5, flows);
  struct Reading {
    double peak, mean;
    long long t_end;
  };
  auto measure = [&](const std::string& cc, std::vector<std::string> extra) {
    std::vector<std::string> sets = {"cluster.hosts=5", "cluster.gpus_per_host=1", "cluster.topology=leaf_spine",
                                     "cluster.nics_per_leaf=5", "cluster.nic_bandwidth=100Gbps", "cluster.mtu=4KiB",
                                     "nic.cc=" + cc, "output.sample_interval=10us"};
    sets.insert(sets.end(), extra.begin(), extra.end());
    const jobs::RunResult r = fabric_test::run(w, sets);
    EXPECT_EQ(r.flow_records.size(), flows.size()) << cc;
    for (const auto& f : r.flow_records) EXPECT_EQ(f.bytes, s) << cc;
    EXPECT_EQ(r.fabric.drops, 0u) << cc;
    long long t_end = 0;
    for (const auto& f : r.flow_records) t_end = std::max<long long>(t_end, f.end_ps);
    // No faster than the bottleneck: the last byte no earlier than 4 S / B.
    EXPECT_GE(static_cast<double>(t_end), 4.0 * static_cast<double>(s) * 8 / 100e9 * 1e12) << cc;
    return Reading{max_queue(r, 4), fabric_test::mean_queue(r, 4, t_end / 4, t_end * 3 / 4), t_end};
  };
  const Reading none = measure("none", {});
  const Reading timely = measure("timely", {"cc.timely_t_low=20us", "cc.timely_t_high=200us",
                                            "cc.timely_min_rtt=10us", "cc.timely_delta=100Mbps"});
  std::printf("incast 4 -> 1 at 100G: egress queue peak none %.0f B, timely %.0f B; timely mean over the middle "
              "half %.0f B (T_low x B = 250000 B); last byte none %.3f ms, timely %.3f ms (4S/B %.3f ms)\n",
              none.peak, timely.peak, timely.mean, none.t_end * 1e-9, timely.t_end * 1e-9,
              4.0 * static_cast<double>(s) * 8 / 100e9 * 1e3);
  EXPECT_GT(none.peak, 4e6) << "line-rate senders should fill the queue up to PFC";
  EXPECT_GT(timely.peak, 0);
  EXPECT_LT(timely.peak, 0.1 * none.peak);
  EXPECT_GE(timely.mean, 0);
  EXPECT_LT(timely.mean, 250'000.0);
}

}  // namespace
}  // namespace fabricsim::models::cc
