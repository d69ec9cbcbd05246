#pragma once
/// @file chain_model.hpp
/// Independent closed-form / FIFO-recurrence model of the ns-3 chain (tests/ns3/ns3_chain.cc),
/// used by ns3_chain_test to check ns-3's per-packet delays, and usable for fabricsim's side.
/// Nothing here calls ns-3: the model is derived from the link parameters alone.
///
/// Model (store-and-forward, FIFO, tail drop):
///  * wire bytes per packet on every link W = payload + kUdpIpv4PppOverheadBytes;
///  * service time on link l: S_l = W * 8 / rate_l (exact integer ps required);
///  * sender i sends packet k at start + k * interval; its link 0 (own copy) has delay
///    delay_0 + i * skew;
///  * on each link, packets are served in order of arrival at the link's transmitting node:
///    begin_k = max(arrival_k, end_{k-1}), end_k = begin_k + S_l, arrival downstream = end_k +
///    delay_l; a packet arriving while `queue_packets` accepted packets are still waiting
///    (begin_j > arrival_k) is dropped (the one in service is not in the queue, as in ns-3's
///    PointToPointNetDevice, which dequeues before transmitting).
#include <algorithm>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fabricsim::tests::ns3chain {

/// Per-packet overhead on an ns-3 point-to-point link for a UDP/IPv4 packet: UDP header 8 +
/// IPv4 header without options 20 + PPP header (16-bit protocol field) 2 = 30 bytes.
/// Sources (ns-3 3.37): UdpHeader::GetSerializedSize() = 8, Ipv4Header::GetSerializedSize() =
/// 20 (5 x 32-bit words, no options), PppHeader::GetSerializedSize() = 2 (ppp-header.h: "prepending
/// the sixteen bit PPP protocol number"); measured by ns3_chain's PhyTxBegin trace (wire_bytes).
inline constexpr std::uint64_t kUdpIpv4PppOverheadBytes = 8 + 20 + 2;

/// One point-to-point link of the chain.
struct Link {
  std::uint64_t rate_bps = 0;  ///< line rate, bit/s
  std::int64_t delay_ps = 0;   ///< propagation delay, ps
};

/// The traffic and topology that ns3_chain is run with.
struct Scenario {
  std::vector<Link> links;           ///< link 0 (one copy per sender) .. link L-1 (to the receiver)
  std::uint32_t senders = 1;         ///< senders, each with its own copy of link 0
  std::uint64_t payload_bytes = 0;   ///< UDP payload per packet, bytes
  std::int64_t interval_ps = 0;      ///< time between two packets of one sender, ps
  std::int64_t start_ps = 0;         ///< first send of every sender, ps
  std::int64_t skew_ps = 0;          ///< sender i's link 0 delay adds i * skew_ps
  std::uint32_t count = 0;           ///< packets per sender
  std::uint32_t queue_packets = 0;   ///< drop-tail queue capacity of every device, packets
};

/// Model result for one packet.
struct Expected {
  std::uint32_t sender = 0;
  std::uint32_t seq = 0;
  std::int64_t send_ps = 0;   ///< send instant, ps
  std::int64_t recv_ps = -1;  ///< receive instant, ps; -1 if dropped
  bool dropped = false;
};

/// Result of the model: one entry per packet (sender-major, then seq) and the number of
/// simultaneous events whose order would decide the outcome (must be 0 for a clean comparison).
struct ModelResult {
  std::vector<Expected> packets;
  /// Same-instant arrivals, or an arrival at a departure instant that decides a drop.
  std::uint64_t ties = 0;
};

/// Serialization time of `bytes` at `rate_bps`, in ps.
/// @throws std::invalid_argument if it is not a whole number of ps (the comparison is exact).
inline std::int64_t serialization_ps(std::uint64_t bytes, std::uint64_t rate_bps) {
  if (bytes > 1'000'000) {  // keeps bytes * 8e12 inside uint64
    throw std::invalid_argument("packet of " + std::to_string(bytes) + " B is implausibly large");
  }
  const std::uint64_t num = bytes * 8u * 1'000'000'000'000u;
  if (rate_bps == 0 || num % rate_bps != 0) {
    throw std::invalid_argument("serialization time of " + std::to_string(bytes) + " B at " +
                                std::to_string(rate_bps) + " bit/s is not a whole ps");
  }
  return static_cast<std::int64_t>(num / rate_bps);
}

/// Runs the model (see the file comment). O(packets x links x queue) time.
inline ModelResult run_model(const Scenario& sc) {
  const std::uint64_t wire = sc.payload_bytes + kUdpIpv4PppOverheadBytes;
  ModelResult res;
  const std::size_t n = std::size_t{sc.senders} * sc.count;
  res.packets.resize(n);
  // Arrival instant of each packet at the transmitting node of the current link; link 0 copies
  // are per sender, so they are served independently (one sender each).
  std::vector<std::int64_t> at(n);
  std::vector<bool> alive(n, true);
  for (std::uint32_t s = 0; s < sc.senders; ++s) {
    for (std::uint32_t k = 0; k < sc.count; ++k) {
      const std::size_t i = std::size_t{s} * sc.count + k;
      res.packets[i] = Expected{s, k, sc.start_ps + std::int64_t{k} * sc.interval_ps, -1, false};
      at[i] = res.packets[i].send_ps;
    }
  }
  auto serve = [&](const std::vector<std::size_t>& order, const Link& link, std::int64_t delay) {
    const std::int64_t svc = serialization_ps(wire, link.rate_bps);
    std::vector<std::int64_t> begins;  // begin instants of accepted packets, nondecreasing
    std::size_t first_waiting = 0;     // begins[first_waiting..] may still be > now
    std::int64_t busy_until = INT64_MIN;
    std::int64_t prev_arrival = INT64_MIN;
    for (std::size_t i : order) {
      const std::int64_t a = at[i];
      if (a == prev_arrival) ++res.ties;  // FIFO order between the two is event tie-breaking
      prev_arrival = a;
      while (first_waiting < begins.size() && begins[first_waiting] <= a) ++first_waiting;
      const std::size_t waiting = begins.size() - first_waiting;
      std::size_t leaving_now = 0;  // waiting packets that start service exactly at a
      for (std::size_t j = first_waiting; j-- > 0 && begins[j] == a;) ++leaving_now;
      if (waiting < sc.queue_packets && waiting + leaving_now >= sc.queue_packets) {
        ++res.ties;  // accept or drop depends on whether the departure is processed first
      }
      if (waiting >= sc.queue_packets) {
        alive[i] = false;  // tail drop
        continue;
      }
      const std::int64_t begin = std::max(a, busy_until);
      begins.push_back(begin);
      busy_until = begin + svc;
      at[i] = busy_until + delay;
    }
  };
  // Link 0: one copy per sender.
  for (std::uint32_t s = 0; s < sc.senders; ++s) {
    std::vector<std::size_t> order;
    for (std::uint32_t k = 0; k < sc.count; ++k) order.push_back(std::size_t{s} * sc.count + k);
    serve(order, sc.links.at(0), sc.links[0].delay_ps + std::int64_t{s} * sc.skew_ps);
  }
  // Shared links: FIFO in arrival order (stable sort keeps sender-major order on ties, which
  // are counted and must not occur in a clean comparison).
  for (std::size_t l = 1; l < sc.links.size(); ++l) {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < n; ++i) {
      if (alive[i]) order.push_back(i);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t x, std::size_t y) { return at[x] < at[y]; });
    serve(order, sc.links[l], sc.links[l].delay_ps);
  }
  for (std::size_t i = 0; i < n; ++i) {
    res.packets[i].dropped = !alive[i];
    res.packets[i].recv_ps = alive[i] ? at[i] : -1;
  }
  return res;
}

/// Units of the scenarios: 1 Gb/s in bit/s; 1 us and 1 ns in ps.
inline constexpr std::uint64_t kGbps = 1'000'000'000;
inline constexpr std::int64_t kUs = 1'000'000;
inline constexpr std::int64_t kNs = 1'000;

/// Case (a) of both ns-3 cross-checks: one sender, links 100 / 40 / 100 Gbps with delays 1 / 0.5 /
/// 2 us, 200 packets of 1000 B every 1 us from 1 us (8.24 Gbps on the wire, below the 40 Gbps
/// bottleneck: no queueing), 100-packet queues.
inline Scenario one_sender_three_links() {
  return {.links = {{100 * kGbps, 1 * kUs}, {40 * kGbps, 500 * kNs}, {100 * kGbps, 2 * kUs}},
          .senders = 1, .payload_bytes = 1000, .interval_ps = 1 * kUs, .start_ps = 1 * kUs, .skew_ps = 0,
          .count = 200, .queue_packets = 100};
}

/// Cases (b1) and (b2): two senders of 150 packets of 1001 B every 1 us each (1031 wire bytes,
/// 2 x 8.248 Gbps) into a 10 Gbps bottleneck (link 1; service 824.8 ns per packet, offered load
/// 1.65: the queue grows), `queue_packets` per drop-tail queue. Sender 1's first link is 250,001
/// ps longer (odd: its packets never arrive with sender 0's). Why 1001 B: with 1000 B (824 ns
/// service) sender 0's packet 103 arrives at the bottleneck in the same picosecond as a departure
/// (103 x 1 us = 125 x 824 ns) with the queue at its limit; the model flags that tie and ns-3
/// resolved it as arrival-first (drop). 824.8 ns and 1 us first coincide after 1250 services,
/// beyond this run.
inline Scenario converging(std::uint32_t queue_packets) {
  return {.links = {{100 * kGbps, 1 * kUs}, {10 * kGbps, 1 * kUs}, {100 * kGbps, 1 * kUs}},
          .senders = 2, .payload_bytes = 1001, .interval_ps = 1 * kUs, .start_ps = 1 * kUs, .skew_ps = 250'001,
          .count = 150, .queue_packets = queue_packets};
}

/// The ns3_chain command-line options for `sc` (each preceded by a space; rates in ns-3's "bps",
/// times in "ps"), without --out.
inline std::string ns3_chain_args(const Scenario& sc) {
  std::ostringstream s;
  s << " --rates=";
  for (std::size_t i = 0; i < sc.links.size(); ++i) s << (i ? "," : "") << sc.links[i].rate_bps << "bps";
  s << " --delays=";
  for (std::size_t i = 0; i < sc.links.size(); ++i) s << (i ? "," : "") << sc.links[i].delay_ps << "ps";
  s << " --payload=" << sc.payload_bytes << " --interval=" << sc.interval_ps << "ps"
    << " --start=" << sc.start_ps << "ps --senderSkew=" << sc.skew_ps << "ps"
    << " --count=" << sc.count << " --senders=" << sc.senders << " --queuePackets=" << sc.queue_packets;
  return s.str();
}

}  // namespace fabricsim::tests::ns3chain
