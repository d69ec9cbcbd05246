#pragma once
/// @file fabric_params.hpp
/// Parameters of the packet-level RoCE fabric: switch buffers, PFC, ECN, routing,
/// NIC queue pairs, reliability and congestion control. Spec sections `switch:`, `nic:` and
/// `cc:` (jobs/spec.cpp); `fabricsim describe` and docs/config.md list them with units. The
/// congestion-control algorithms and their parameters are plug-ins in models/cc (registry.hpp);
/// this header embeds their parameter structs (header only: models/cc's code depends on core,
/// not the other way round).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/core/link_fault.hpp"

#include "engine/time.hpp"
#include "models/cc/registry.hpp"

namespace fabricsim::models {

/// How a switch picks the egress port among equal-cost next hops.
enum class RoutingMode : std::uint8_t {
  kEcmp,      ///< per-flow hash of the 5-tuple (RoCE UDP source port differs per QP), per-switch seed
  kSpray,     ///< per-packet hash (packet spraying); needs an out-of-order tolerant receiver (lossless only)
  kAdaptive,  ///< per packet, the candidate with the fewest queued bytes (ties: the flow hash)
};

/// When a NIC lets a newly active QP send its first packet.
enum class FlowStart : std::uint8_t {
  kAllAtOnce,  ///< immediately
  kStaggered,  ///< after a deterministic per-QP offset uniform in [0, stagger_window)
};

/// How a NIC port picks the next QP to send a data packet from (NicProfile::tx_sched).
enum class TxSched : std::uint8_t {
  kRoundRobin,  ///< one packet per eligible active QP in turn (the only scheduler modelled)
};

/// Traffic classes (one queue each per egress port; strict priority, lower index first).
inline constexpr std::uint32_t kClassControl = 0;  ///< ACK/NACK/CNP: lossy, highest priority
inline constexpr std::uint32_t kClassData = 1;     ///< RDMA data: lossless when PFC is on
inline constexpr std::uint32_t kNumClasses = 2;

/// Switch model parameters (Ethernet leaves/spines; NVSwitches use lossless, unbounded buffers).
struct SwitchParams {
  /// Packet buffer per switch (bytes), shared by all ports after their PFC headroom.
  /// 0 = auto: 64 MiB (Broadcom Tomahawk 3, 32x400G / 12.8 Tb/s, has a 64 MB on-chip buffer —
  /// BCM56980 product brief), raised to the ports' total headroom + 32 MiB when headroom alone
  /// would take more than half of it (long links or jumbo MTUs).
  std::uint64_t buffer_bytes = 0;
  bool pfc = true;  ///< PFC (IEEE 802.1Qbb) on the data class: lossless RDMA
  /// Dynamic-threshold factor for PFC XOFF: an ingress (port, class) pauses its upstream when its
  /// shared-buffer use reaches pfc_alpha x (free shared buffer). 1/8 as in the HPCC ns-3 setup
  /// (pfc_a_shift = 3; Li et al. SIGCOMM 2019 artifact).
  double pfc_alpha = 0.125;
  /// Static XOFF threshold per ingress (port, class) in bytes; 0 = dynamic (pfc_alpha).
  std::uint64_t pfc_xoff_bytes = 0;
  /// XON hysteresis: resume when use + this <= the XOFF threshold (bytes). 3 KiB (two MTU-less
  /// frames of slack) as in the HPCC ns-3 switch MMU's resume offset.
  std::uint64_t pfc_resume_offset_bytes = 3 * 1024;
  /// PFC headroom per ingress (port, lossless class) in bytes; 0 = auto: the bytes that can still
  /// arrive after XOFF is sent, 2 x link BDP (rate x latency, both ways) + 3 MTU-sized frames
  /// (one in flight each way plus the pause frame's wait), per IEEE 802.1Qbb Annex guidance.
  std::uint64_t pfc_headroom_bytes = 0;
  /// Dynamic threshold for lossy queues: drop when egress queue bytes > egress_alpha x free buffer
  /// (Choudhury & Hahne, "Dynamic queue length thresholds", IEEE/ACM ToN 1998; alpha = 1 is the
  /// common vendor default).
  double egress_alpha = 1.0;
  bool ecn = true;  ///< RED-style ECN marking of the data class at egress enqueue
  /// ECN thresholds (bytes) at 100 Gb/s; scaled linearly with the egress port rate (0 = auto:
  /// Kmin 100 KB, Kmax 400 KB per 100 Gb/s — the DCQCN 40G values Kmin 5 KB/Kmax 200 KB are too
  /// low for 400G bursts; HPCC's ns-3 artifact uses Kmin 100 KB x rate/25G).
  std::uint64_t ecn_kmin_bytes = 0;
  std::uint64_t ecn_kmax_bytes = 0;
  double ecn_pmax = 0.2;  ///< mark probability at Kmax (HPCC ns-3 artifact: 0.2)
  RoutingMode routing = RoutingMode::kEcmp;
  /// PFC pause frame size on the wire (IEEE 802.3 MAC control frame: 64 B + 20 B preamble/IFG).
  std::uint32_t pause_frame_bytes = 84;
  /// Link-level retry (LLR) on the links between Ethernet switches (docs/jobs_and_faults.md,
  /// "Link-level retry"): a unit the far end receives with a bit error is not dropped but sent
  /// again by the link's transmitter, which goes back to the corrupted unit once the far end's
  /// link NACK is back (go-back-N on the link, as PCIe's data-link replay and Ultra Ethernet's
  /// LLR do). false = a corrupted frame is dropped and the sender's go-back-N recovers it.
  bool link_retry = false;
  /// Unit of the link-level retry (bytes): 0 = the whole frame (frame replay, UE LLR style);
  /// > 0 = cells of this size, each checked and retried on its own (NVIDIA's InfiniBand LLR
  /// breaks the layer-2 stream into cells with a CRC each; MLNX-OS manual, "UNBREAKABLE-LINK").
  std::uint32_t link_retry_cell_bytes = 0;
  /// Replays of one unit before the link gives up on the frame and drops it (then the sender's
  /// go-back-N recovers it, as without LLR). A round number, not a measurement.
  std::uint32_t link_retry_max = 64;
};

/// NIC (RoCEv2 RNIC) parameters, per GPU.
struct NicParams {
  CcKind cc = CcKind::kDcqcn;  ///< nic.cc: the algorithm of every acknowledged QP
  /// Queue pairs per connection (NCCL_IB_QPS_PER_CONNECTION; NCCL default 1), each with its own
  /// UDP source port. Taken from the run's NCCL settings unless the spec's nic: section sets it.
  std::uint32_t qps_per_connection = 1;
  /// NCCL_IB_SPLIT_DATA_ON_QPS (NCCL default 0): false = each message goes whole to the
  /// connection's next QP in turn; true = a message of at least qps x MTU is split evenly.
  bool split_data_on_qps = false;
  /// The spec set nic.qps_per_connection or nic.split_data_on_qps (then NCCL_IB_* do not apply).
  bool qps_given = false;
  /// Per-packet bytes on the wire beyond the payload. 0 = payload only. RoCEv2 on Ethernet:
  /// Eth 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4 = 62, + 20 preamble/IFG = 82.
  std::uint32_t header_bytes = 0;
  /// Control frame (ACK/NACK/CNP) bytes on the wire: minimum Ethernet frame 64 + 20.
  std::uint32_t control_bytes = 84;
  /// ACK coalescing: one ACK per this many in-order data packets (and always for the last packet
  /// of a message). 0 = auto: 1 with HPCC (it needs per-packet INT), 4 otherwise.
  std::uint32_t ack_interval_packets = 0;
  /// Go-back-N retransmission timeout (ps): the RC local ACK timeout 4.096 us x 2^t with t =
  /// NCCL_IB_TIMEOUT, default 20 in NCCL 2.28 (docs: env vars) -> 4.295 s. Lost tails wait this
  /// long, as on real lossy RoCE; NACKs recover the other losses within an RTT.
  engine::SimTime rto_ps = 4'096'000LL << 20;
  /// RC retry count: a QP whose go-back-N timer expires this many times in a row without an ACK
  /// of new data gives up, and the run ends with an error, as NCCL does on "transport retry
  /// counter exceeded". 7 = NCCL_IB_RETRY_CNT's default (NCCL docs: env vars). A timeout thus
  /// ends the run (retry_count + 1) x rto_ps after the last progress.
  std::uint32_t retry_count = 7;
  FlowStart flow_start = FlowStart::kAllAtOnce;
  engine::SimTime stagger_window_ps = 10'000'000;  ///< 10 us
  /// NIC processing delay added to every packet it receives before the ACK/CNP leaves (ps).
  engine::SimTime nic_delay_ps = 0;
  /// The NIC profile these fields started from (cluster.nic_profile; models/core/nic_profile.hpp).
  std::string profile = "ideal";
  /// QP contexts cached on the NIC (nic.qp_cache), LRU over the acknowledged (RoCE) send QPs:
  /// the TX scheduler serving a QP whose context is not cached delays that QP's next packet by
  /// qp_miss_ps while the port serves other QPs. 0 = unlimited (no misses).
  std::uint32_t qp_cache = 0;
  /// QP-context fetch time on a miss (ps; nic.qp_miss_latency), a PCIe read of host memory.
  engine::SimTime qp_miss_ps = 0;
  /// Message starts per second per NIC (nic.msg_rate; a token bucket of one token, so starts
  /// are at least ceil(1e12 / rate) ps apart): 0 = unlimited.
  double msg_rate_per_s = 0;
  TxSched tx_sched = TxSched::kRoundRobin;  ///< TX scheduler across a port's active QPs
  /// Outstanding RDMA reads per QP (informational: the packet rung issues RDMA writes only).
  std::uint32_t max_rd_atom = 16;
};

/// Everything the packet fabric needs beyond the topology.
struct FabricParams {
  SwitchParams sw;
  NicParams nic;
  /// Every registered congestion control's parameters (models/cc/registry.hpp), e.g. cc.dcqcn.
  CcParams cc;
  /// Link faults on the packet rung (spec `faults:`, resolved to LPs by the run's topology
  /// stage; models/core/link_fault.hpp). Empty = a healthy fabric.
  std::vector<LinkFault> faults;
  /// `jobs:` specs: the job of each GPU (-1: none), and the number of jobs; switches count each
  /// job's payload bytes per egress port (the per-link table of the summary and HDF5
  /// /link_totals). Empty / 0 for a single-job spec. Filled by the run before the LPs are built.
  std::vector<std::int32_t> job_of_gpu;
  std::uint32_t jobs = 0;
  std::string source = "<spec>";  ///< spec file, for error messages
  /// Where each key that was given came from (the spec file, "<cli>" for --set, ...), filled by
  /// jobs::parse_fabric_keys. Keys not listed were defaults or derived: their origin is `source`.
  std::map<std::string, std::string> key_source;
  /// The file (or "<cli>") to name in an error about `key`.
  const std::string& origin(const std::string& key) const {
    const auto it = key_source.find(key);
    return it == key_source.end() ? source : it->second;
  }
};

/// Parses "ecmp" | "spray" | "adaptive". @throws engine::InputError.
RoutingMode parse_routing(const std::string& v, const std::string& file, const std::string& field);
const char* routing_name(RoutingMode m);
/// "round_robin" for TxSched::kRoundRobin.
const char* tx_sched_name(TxSched s);
/// Checks cross-field consistency (e.g. spraying needs PFC). @throws engine::InputError.
void validate(const FabricParams& p);

}  // namespace fabricsim::models
