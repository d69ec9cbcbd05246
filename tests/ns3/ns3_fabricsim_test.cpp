// Issue 3, must-show 6 (fabricsim side): the ns-3 chain of point-to-point links with drop-tail
// queues carrying constant-rate UDP (tests/ns3/ns3_chain.cc) and fabricsim's packet fabric on
// the same chain give the same per-packet delays, to the picosecond (docs/validation_ns3.md).
//
// Per case: ns3_chain_workload writes the Chakra ET traffic, the test writes the chain as a
// fabricsim topology file, `fabricsim run` simulates it with 30 B of UDP/IPv4/PPP headers per
// packet, line-rate NICs, no PFC, no ECN and a large switch buffer, ns3_chain runs the same
// parameters, and compare_delays.py compares every packet with tolerance 0 ps.
//   (a)  1 sender, links 100 / 40 / 100 Gbps: no queueing, closed form.
//   (b1) 2 senders converging on a 10 Gbps bottleneck, large queue: FIFO queueing, no drops.
//   (b2) as (b1) with a 10-packet drop-tail queue. fabricsim retransmits what a switch drops
//        where UDP loses it, so this case needs three settings (docs/validation_ns3.md): a
//        switch buffer whose lossy admission equals "drop when 10 packets wait", one QP per
//        message (a lost packet is a lost tail: no NACK, no go-back-N of later messages), and a
//        1 s retransmission timeout; a flow that took >= 1 s counts as dropped.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>

#include "tests/ns3/chain_model.hpp"
#include "tests/support/cli.hpp"

namespace {

using namespace fabricsim::tests::ns3chain;  // the chain model and its scenarios

/// fabricsim binary: $FABRICSIM_BINARY (tests/CMakeLists.txt sets it), else the build's target.
std::string fabricsim_bin() {
  const char* env = std::getenv("FABRICSIM_BINARY");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(FABRICSIM_BIN);
}

/// Exit status and output (stdout and stderr together) of a shell command.
struct Cmd {
  int rc = -1;
  std::string out;
};

/// Runs `cmd` through the shell, capturing stdout and stderr.
Cmd run(const std::string& cmd) {
  const fabricsim::testing::CliOutcome o = fabricsim::testing::run_shell(cmd + " 2>&1");
  return {o.code, o.out};
}

/// The chain as a fabricsim topology file (docs/topology.md): GPUs s0..s{S-1} (ranks 0..S-1)
/// then r (rank S), each alone (no NVSwitch, port 0 = its NIC); switches sw1..sw{L-1} in a line.
/// Sender i's link 0 has latency delay_0 + i * skew; link l joins sw_l and sw_{l+1}; link L-1
/// joins sw_{L-1} and r. Rates and latencies in exact bps / ps.
std::string chain_topology(const Scenario& sc) {
  const std::size_t links = sc.links.size();
  std::ostringstream f;
  f << "fabricsim-topology 1\n# ns-3 chain (tests/ns3/ns3_fabricsim_test.cpp)\n";
  for (std::uint32_t i = 0; i < sc.senders; ++i) f << "node s" << i << " gpu\n";
  f << "node r gpu\n";
  for (std::size_t l = 1; l < links; ++l) f << "node sw" << l << " switch 1\n";
  auto link = [&](const std::string& a, const std::string& b, std::size_t l, std::int64_t extra) {
    f << "link " << a << ' ' << b << ' ' << sc.links[l].rate_bps << "bps "
      << sc.links[l].delay_ps + extra << "ps\n";
  };
  // (Names built with a stream: GCC 12's -Wrestrict misfires on "sw" + std::to_string.)
  auto name = [](const char* kind, std::size_t i) {
    std::ostringstream n;
    n << kind << i;
    return n.str();
  };
  for (std::uint32_t i = 0; i < sc.senders; ++i) {
    link(name("s", i), "sw1", 0, static_cast<std::int64_t>(i) * sc.skew_ps);
  }
  for (std::size_t l = 1; l + 1 < links; ++l) link(name("sw", l), name("sw", l + 1), l, 0);
  link(name("sw", links - 1), "r", links - 1, 0);
  return f.str();
}

/// Runs one case end to end and returns compare_delays.py's report; expects a match, with
/// every packet the model delivers compared and every packet it drops dropped in both.
/// `fabricsim_sets` are extra `--set` options, `compare_args` extra compare_delays.py options.
std::string cross_check(const Scenario& sc, const std::string& name,
                        const std::string& fabricsim_sets = "",
                        const std::string& compare_args = "") {
  // Needs a switch between senders and receiver (the file format has no GPU-GPU links).
  EXPECT_GE(sc.links.size(), 2u);
  const ModelResult m = run_model(sc);
  EXPECT_EQ(m.ties, 0u) << "simultaneous events: the outcome would depend on tie-breaking";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("fabricsim_ns3_fabricsim_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "et");
  const std::string prefix = (dir / "et" / "chain").string();
  const std::string topo = (dir / "chain.topo").string();
  const std::string h5 = (dir / "r.h5").string();
  const std::string csv = (dir / "ns3.csv").string();

  std::ostringstream wl;
  wl << NS3_CHAIN_WORKLOAD_BIN << " --senders " << sc.senders << " --payload " << sc.payload_bytes
     << "B --interval " << sc.interval_ps << "ps --start " << sc.start_ps << "ps --count "
     << sc.count << " -o " << prefix;
  const Cmd w = run(wl.str());
  EXPECT_EQ(w.rc, 0) << wl.str() << "\n" << w.out;

  std::ofstream(topo) << chain_topology(sc);

  std::ostringstream fs;
  fs << fabricsim_bin() << " run --workload " << prefix << " -q -o " << h5
     << " --set cluster.topology=file --set cluster.topology_file=" << topo
     << " --set nic.header_bytes=" << kUdpIpv4PppOverheadBytes
     << " --set nic.cc=none --set switch.pfc=false --set switch.ecn=false"
     << " --set switch.buffer=1GiB --set cluster.mtu=4096B" << fabricsim_sets;
  const Cmd f = run(fs.str());
  EXPECT_EQ(f.rc, 0) << fs.str() << "\n" << f.out;

  const std::string ns = std::string(NS3_CHAIN_BIN) + ns3_chain_args(sc) + " --out=" + csv;
  const Cmd n = run(ns);
  EXPECT_EQ(n.rc, 0) << ns << "\n" << n.out;

  const std::string cmp = std::string("/usr/bin/python3 ") + COMPARE_DELAYS_PY + " " + csv + " " +
                          h5 + " --receiver " + std::to_string(sc.senders) + " --tolerance-ps 0" +
                          compare_args;
  const Cmd c = run(cmp);
  std::cout << "[" << name << "] " << c.out;
  EXPECT_EQ(c.rc, 0) << cmp << "\n" << c.out;
  // Every packet the model delivers was compared; every packet it drops was dropped in both.
  std::uint64_t drops = 0;
  for (const auto& e : m.packets) drops += e.dropped ? 1 : 0;
  std::ostringstream want;
  want << "delays compared: " << m.packets.size() - drops << "; dropped in both: " << drops << ";";
  EXPECT_NE(c.out.find(want.str()), std::string::npos) << want.str() << "\n" << c.out;
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir);
  return c.out;
}

// (a) One sender, links 100 / 40 / 100 Gbps with delays 1 / 0.5 / 2 us, 1000 B every 1 us:
// every delay is 3,870,800 ps in both simulators.
TEST(Ns3Fabricsim, OneSenderThreeLinksSameDelays) {
  cross_check(one_sender_three_links(), "a");
}

// (b1) Two senders of 1001 B every 1 us each into a 10 Gbps bottleneck (offered 16.5 Gb/s),
// sender 1's first link 250,001 ps longer (no same-instant arrivals), ns-3 queue 1000 packets:
// FIFO queueing up to ~100 us, no drops; every delay equal in both simulators.
// (converging(), chain_model.hpp)
TEST(Ns3Fabricsim, TwoSendersSharedBottleneckSameDelays) {
  const Scenario sc = converging(1000);
  const ModelResult m = run_model(sc);
  for (const auto& e : m.packets) ASSERT_FALSE(e.dropped);
  cross_check(sc, "b1");
}

// (b2) As (b1) with ns-3's queue at 10 packets: 109 of 300 dropped. fabricsim's lossy admission
// (models/packet/switch_lp.cpp) accepts a packet of W wire bytes while q + W <= egress_alpha x (B - used),
// q = bytes waiting at that egress (the packet in service is not counted, as in ns-3). With
// egress_alpha 1 and only this queue in the buffer (used = q, plus at most a few 84 B ACKs on
// their way back), that is 2q + W <= B: with B = 20 W it accepts at 9 waiting and drops at 10,
// ns-3's drop-tail of 10 packets, with a margin of W bytes for ACKs. 150 QPs per connection give
// each message its own QP, so a drop is a lost tail that only the retransmission timeout
// (1 s, far after the run's 151 us) recovers, and it delays no later message.
TEST(Ns3Fabricsim, TwoSendersDropTailSameDropsAndDelays) {
  const Scenario sc = converging(10);
  const std::uint64_t w = sc.payload_bytes + kUdpIpv4PppOverheadBytes;
  const ModelResult m = run_model(sc);
  std::uint64_t drops = 0;
  for (const auto& e : m.packets) drops += e.dropped ? 1 : 0;
  ASSERT_GT(drops, 0u);
  std::ostringstream sets;
  sets << " --set switch.buffer=" << 2 * sc.queue_packets * w << "B --set switch.egress_alpha=1"
       << " --set nic.qps_per_connection=" << sc.count << " --set nic.rto=1s";
  cross_check(sc, "b2", sets.str(), " --lost-if-fct-ps 1000000000000");
}

}  // namespace
