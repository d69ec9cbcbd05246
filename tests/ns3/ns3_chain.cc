/// @file ns3_chain.cc
/// ns-3 reference run for the fabricsim cross-check: S constant-rate UDP
/// senders feed a chain of point-to-point links with drop-tail device queues; every packet's
/// one-way delay (socket send -> socket receive) is written as CSV. Written against ns-3 3.37's
/// public API (Debian libns3-dev); no ns-3 example code.
///
/// Topology for L links (--rates/--delays have L entries) and S senders:
///
///   sender_0 --link0--\                                                    (link 0: one copy per
///   ...                 sw_1 --link1-- sw_2 -- ... -- sw_{L-1} --link L-1-- receiver   sender)
///   sender_{S-1} -link0/
///
/// With L = 1 every sender has its own link straight to the receiver. Sender i's copy of link 0
/// has delay delays[0] + i * senderSkew (to keep arrivals of different senders from coinciding
/// to the picosecond, which would make FIFO order depend on event tie-breaking).
///
/// Queueing model that results (what tests/ns3/ns3_chain_test.cpp derives independently):
///  * no traffic-control queue disc (the default one that Ipv4AddressHelper::Assign installs is
///    removed again), so each device's DropTailQueue<Packet> of --queuePackets packets is the
///    only buffer: the packet being serialized has left the queue (PointToPointNetDevice
///    dequeues before TransmitStart), and a packet arriving while N packets wait is dropped:
///    the device's NetDeviceQueue is stopped as soon as the queue holds N packets and the
///    traffic-control layer discards what arrives while it is stopped (flow control is kept:
///    TrafficControlHelper::Uninstall crashes in ns-3 3.37 on devices built after
///    PointToPointHelper::DisableFlowControl, which has no NetDeviceQueueInterface);
///  * serialization of a packet of W wire bytes on a link of R bit/s: W * 8 / R seconds
///    (PointToPointNetDevice::TransmitStart uses DataRate::CalculateBytesTxTime(p->GetSize())),
///    then the channel delay; the next node receives the whole packet (store-and-forward) and
///    forwards it at once (no processing delay);
///  * W = payload + 8 (UDP header) + 20 (IPv4 header, no options) + 2 (PPP header, the 16-bit
///    protocol number); see docs/validation_ns3.md for the sources. The program also measures
///    W on the wire (PhyTxBegin trace of sender's link 0) and writes it per packet.
///
/// Output CSV (one row per sent packet, sorted by sender then seq), all times integer ps:
///   sender,seq,send_time_ps,recv_time_ps,delay_ps,dropped,wire_bytes
/// recv_time_ps and delay_ps are -1 for a dropped packet (dropped = 1).
///
/// Usage: ns3_chain --rates=100Gbps,40Gbps,100Gbps --delays=1us,500ns,1us --payload=1000
///          --interval=1us --count=100 --senders=1 --queuePackets=100 --out=chain.csv
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

using namespace ns3;

namespace {

constexpr uint16_t kPort = 9;          // UDP destination port of every flow
constexpr uint32_t kStampBytes = 8;    // payload prefix: sender id (u32) + seq (u32), big endian

/// One sent packet: send instant, receive instant (-1 until received), wire size on link 0.
struct PacketRecord {
  int64_t send_ps = -1;   ///< socket Send() instant (ps)
  int64_t recv_ps = -1;   ///< receiver socket callback instant (ps); -1 = not received (dropped)
  int64_t wire_bytes = -1;  ///< bytes serialized on the sender's link 0 (PPP frame), -1 = unseen
};

/// Per-sender state of the constant-rate sender (a scheduled callback, not an Application).
struct SenderState {
  Ptr<Socket> socket;             ///< UDP socket connected to the receiver
  std::vector<PacketRecord> pkts; ///< indexed by seq
};

std::vector<SenderState> g_senders;  // program-wide; single-threaded ns-3 run
uint32_t g_payload_bytes = 0;
uint32_t g_count = 0;
Time g_interval;
bool g_header_sizes_printed = false;

/// Splits "a,b,c" into {"a","b","c"} (empty fields rejected).
std::vector<std::string> split_list(const std::string& s, const char* what) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) {
      NS_FATAL_ERROR("--" << what << ": empty entry in '" << s << "'");
    }
    out.push_back(item);
  }
  return out;
}

/// Writes the 8-byte (sender, seq) stamp at the start of a payload buffer.
void write_stamp(std::vector<uint8_t>& buf, uint32_t sender, uint32_t seq) {
  for (int i = 0; i < 4; ++i) {
    buf[i] = static_cast<uint8_t>(sender >> (24 - 8 * i));
    buf[4 + i] = static_cast<uint8_t>(seq >> (24 - 8 * i));
  }
}

/// Reads the stamp back; returns false if the packet is shorter than the stamp.
bool read_stamp(Ptr<const Packet> p, uint32_t* sender, uint32_t* seq) {
  if (p->GetSize() < kStampBytes) return false;
  uint8_t b[kStampBytes];
  p->CopyData(b, kStampBytes);
  *sender = (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
  *seq = (uint32_t(b[4]) << 24) | (uint32_t(b[5]) << 16) | (uint32_t(b[6]) << 8) | b[7];
  return true;
}

/// Sends packet `seq` of sender `s` now and schedules the next one `g_interval` later.
void send_one(uint32_t s, uint32_t seq) {
  std::vector<uint8_t> buf(g_payload_bytes, 0);
  write_stamp(buf, s, seq);
  Ptr<Packet> p = Create<Packet>(buf.data(), g_payload_bytes);
  g_senders[s].pkts[seq].send_ps = Simulator::Now().GetPicoSeconds();
  if (g_senders[s].socket->Send(p) < 0) {
    NS_FATAL_ERROR("sender " << s << " seq " << seq << ": socket Send failed");
  }
  if (seq + 1 < g_count) {
    Simulator::Schedule(g_interval, &send_one, s, seq + 1);
  }
}

/// Receiver socket callback: stamps the receive instant of every queued datagram.
void on_receive(Ptr<Socket> sock) {
  Ptr<Packet> p;
  while ((p = sock->Recv())) {
    uint32_t s = 0, seq = 0;
    if (!read_stamp(p, &s, &seq) || s >= g_senders.size() || seq >= g_count) {
      NS_FATAL_ERROR("receiver: packet without a valid (sender, seq) stamp");
    }
    g_senders[s].pkts[seq].recv_ps = Simulator::Now().GetPicoSeconds();
  }
}

/// PhyTxBegin trace of sender s's link-0 device: records the frame size and, once, the header
/// sizes found by peeling the frame (PPP, IPv4, UDP) as ns-3 serializes them.
void on_phy_tx_begin(uint32_t s, Ptr<const Packet> frame) {
  Ptr<Packet> c = frame->Copy();
  PppHeader ppp;
  Ipv4Header ip;
  UdpHeader udp;
  c->RemoveHeader(ppp);
  c->RemoveHeader(ip);
  c->RemoveHeader(udp);
  uint32_t sender = 0, seq = 0;
  if (!read_stamp(c, &sender, &seq) || sender != s || seq >= g_count) {
    NS_FATAL_ERROR("PhyTxBegin: unexpected frame on sender " << s << "'s link");
  }
  g_senders[s].pkts[seq].wire_bytes = frame->GetSize();
  if (!g_header_sizes_printed) {
    g_header_sizes_printed = true;
    std::cerr << "ns3_chain: header bytes ppp=" << ppp.GetSerializedSize()
              << " ipv4=" << ip.GetSerializedSize() << " udp=" << udp.GetSerializedSize()
              << " payload=" << c->GetSize() << " frame=" << frame->GetSize() << "\n";
  }
}

}  // namespace

/// Builds the chain, runs the traffic and writes the CSV (see the file comment). Exit 0 on
/// success; ns-3 aborts (NS_FATAL_ERROR) on bad parameters.
int main(int argc, char** argv) {
  Time::SetResolution(Time::PS);  // integer-ps timestamps, as fabricsim's SimTime

  std::string rates_arg = "100Gbps,40Gbps,100Gbps";
  std::string delays_arg = "1us,1us,1us";
  std::string interval_arg = "1us";
  std::string skew_arg = "0ps";
  std::string start_arg = "";
  std::string out_path = "ns3_chain.csv";
  uint32_t senders = 1;
  uint32_t queue_packets = 100;
  g_payload_bytes = 1000;
  g_count = 100;

  CommandLine cmd(__FILE__);
  cmd.AddValue("rates", "per-link rates, comma separated, ns-3 DataRate syntax (link 0 first)",
               rates_arg);
  cmd.AddValue("delays", "per-link propagation delays, comma separated, ns-3 Time syntax",
               delays_arg);
  cmd.AddValue("payload", "UDP payload bytes per packet (8..1472)", g_payload_bytes);
  cmd.AddValue("interval", "time between two packets of one sender (ns-3 Time)", interval_arg);
  cmd.AddValue("count", "packets per sender", g_count);
  cmd.AddValue("senders", "senders converging on the first switch (each with its own link 0)",
               senders);
  cmd.AddValue("queuePackets", "DropTailQueue MaxSize of every device, in packets",
               queue_packets);
  cmd.AddValue("senderSkew", "sender i's link 0 delay is delays[0] + i * senderSkew", skew_arg);
  cmd.AddValue("start", "first send instant of every sender (default: one interval)", start_arg);
  cmd.AddValue("out", "output CSV path", out_path);
  cmd.Parse(argc, argv);

  const std::vector<std::string> rates = split_list(rates_arg, "rates");
  const std::vector<std::string> delays = split_list(delays_arg, "delays");
  const size_t links = rates.size();
  if (links == 0 || delays.size() != links) {
    NS_FATAL_ERROR("--rates and --delays need the same, non-zero number of entries");
  }
  // 1500 = PointToPointNetDevice's default Mtu attribute; more would fragment at IPv4.
  if (g_payload_bytes < kStampBytes || g_payload_bytes > 1500 - 20 - 8) {
    NS_FATAL_ERROR("--payload must be in 8..1472 bytes");
  }
  if (senders == 0 || g_count == 0 || queue_packets == 0) {
    NS_FATAL_ERROR("--senders, --count and --queuePackets must be positive");
  }
  g_interval = Time(interval_arg);
  const Time skew(skew_arg);
  const Time start = start_arg.empty() ? g_interval : Time(start_arg);
  if (g_interval.IsStrictlyNegative() || g_interval.IsZero() || skew.IsStrictlyNegative() ||
      start.IsStrictlyNegative()) {
    NS_FATAL_ERROR("--interval must be positive, --senderSkew and --start non-negative");
  }

  NodeContainer sender_nodes;
  sender_nodes.Create(senders);
  NodeContainer path;  // sw_1 .. sw_{L-1}, receiver
  path.Create(links);
  InternetStackHelper stack;
  stack.Install(sender_nodes);
  stack.Install(path);

  PointToPointHelper p2p;
  p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize",
               QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, queue_packets)));
  Ipv4AddressHelper addr;
  addr.SetBase("10.0.0.0", "255.255.255.252");
  TrafficControlHelper tch;
  std::vector<Ptr<NetDevice>> sender_devs(senders);
  Ipv4Address rx_address;

  auto connect = [&](Ptr<Node> a, Ptr<Node> b, const std::string& rate, Time delay) {
    p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(rate)));
    p2p.SetChannelAttribute("Delay", TimeValue(delay));
    NetDeviceContainer devs = p2p.Install(a, b);
    Ipv4InterfaceContainer ifs = addr.Assign(devs);
    addr.NewNetwork();
    tch.Uninstall(devs);  // no queue disc: the device's drop-tail queue is the only buffer
    return std::make_pair(devs, ifs);
  };

  for (uint32_t i = 0; i < senders; ++i) {
    const Time d0 = Time(delays[0]) + skew * int64_t(i);
    auto [devs, ifs] = connect(sender_nodes.Get(i), path.Get(0), rates[0], d0);
    sender_devs[i] = devs.Get(0);
    if (links == 1) rx_address = ifs.GetAddress(1);
  }
  for (size_t l = 1; l < links; ++l) {
    auto [devs, ifs] = connect(path.Get(l - 1), path.Get(l), rates[l], Time(delays[l]));
    if (l + 1 == links) rx_address = ifs.GetAddress(1);
  }
  Ipv4GlobalRoutingHelper::PopulateRoutingTables();

  Ptr<Socket> rx = Socket::CreateSocket(path.Get(links - 1), UdpSocketFactory::GetTypeId());
  if (rx->Bind(InetSocketAddress(Ipv4Address::GetAny(), kPort)) != 0) {
    NS_FATAL_ERROR("receiver: bind failed");
  }
  rx->SetRecvCallback(MakeCallback(&on_receive));

  g_senders.resize(senders);
  for (uint32_t i = 0; i < senders; ++i) {
    g_senders[i].pkts.resize(g_count);
    g_senders[i].socket = Socket::CreateSocket(sender_nodes.Get(i), UdpSocketFactory::GetTypeId());
    g_senders[i].socket->Connect(InetSocketAddress(rx_address, kPort));
    sender_devs[i]->TraceConnectWithoutContext("PhyTxBegin",
                                               MakeBoundCallback(&on_phy_tx_begin, i));
    Simulator::Schedule(start, &send_one, i, 0u);
  }

  Simulator::Run();
  Simulator::Destroy();

  std::ofstream out(out_path);
  if (!out) {
    std::cerr << "ns3_chain: cannot write " << out_path << "\n";
    return 2;
  }
  out << "sender,seq,send_time_ps,recv_time_ps,delay_ps,dropped,wire_bytes\n";
  uint64_t dropped_total = 0;
  for (uint32_t s = 0; s < senders; ++s) {
    for (uint32_t k = 0; k < g_count; ++k) {
      const PacketRecord& r = g_senders[s].pkts[k];
      const bool dropped = r.recv_ps < 0;
      dropped_total += dropped;
      out << s << ',' << k << ',' << r.send_ps << ',' << r.recv_ps << ','
          << (dropped ? -1 : r.recv_ps - r.send_ps) << ',' << (dropped ? 1 : 0) << ','
          << r.wire_bytes << '\n';
    }
  }
  std::cerr << "ns3_chain: " << uint64_t(senders) * g_count << " packets, " << dropped_total
            << " dropped, written to " << out_path << "\n";
  return 0;
}
