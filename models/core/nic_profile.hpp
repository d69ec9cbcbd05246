#pragma once
/// @file nic_profile.hpp
/// Named NIC profiles (spec `cluster.nic_profile`, `fabricsim describe nic NAME`): the RoCE NIC
/// figures a chip team compares — line rate, message rate, QP-context cache and its miss
/// latency, TX scheduler, outstanding RDMA reads, flow-start policy and congestion control —
/// as one record, so a sweep axis can switch all of them at once. docs/fabric.md, "NIC profiles".
#include <cstdint>
#include <string>
#include <vector>

#include "engine/time.hpp"
#include "models/cc/registry.hpp"
#include "models/core/fabric_params.hpp"

namespace fabricsim::models {

/// One NIC profile. Every field has a unit in its name; 0 in a limit means "no limit".
struct NicProfile {
  const char* name = "";         ///< cluster.nic_profile value
  const char* summary = "";      ///< one line: what the profile stands for
  std::uint64_t line_bps = 0;    ///< port line rate (bits/s): cluster.nic_bandwidth unless the spec sets it
  /// Message starts per second per NIC (nic.msg_rate): 0 = unlimited.
  double msg_rate_per_s = 0;
  /// QP contexts the NIC holds on chip (nic.qp_cache): 0 = unlimited (every context cached).
  std::uint32_t qp_cache = 0;
  /// Time to fetch a QP context that is not cached, over PCIe from host memory (ps; nic.qp_miss_latency).
  engine::SimTime qp_miss_ps = 0;
  TxSched tx_sched = TxSched::kRoundRobin;  ///< TX scheduler across a port's active QPs
  /// Outstanding RDMA reads per QP (ibv_device_attr::max_qp_rd_atom). Recorded for the chip
  /// team's comparison only: the packet rung moves data with RDMA writes (NCCL's IB transport
  /// does), so no read is ever outstanding and this figure changes no result.
  std::uint32_t max_rd_atom = 0;
  FlowStart flow_start = FlowStart::kAllAtOnce;  ///< nic.flow_start
  CcKind cc = CcKind::kDcqcn;                    ///< nic.cc; its parameters are the cc.<name>.* keys
  /// Where the cc parameters come from (e.g. "cc.dcqcn.* defaults"): the profile takes the
  /// registered algorithm's defaults; it carries no parameter values of its own.
  const char* cc_params = "";
  /// Which figures are sourced and which are assumptions, with the sources (printed by describe).
  const char* sources = "";
};

/// The built-in profiles, the default ("ideal", today's NIC model) first.
const std::vector<NicProfile>& nic_profiles();
/// The profile named `name`. @throws engine::InputError naming `file` and `field` (the key)
/// with the known names as the fix.
const NicProfile& find_nic_profile(const std::string& name, const std::string& file, const std::string& field);
/// The names of the built-in profiles, comma-separated (help texts and errors).
std::string nic_profile_names();
/// Copies the profile's NIC fields (all but the line rate, which is a cluster key) into `n`.
void apply_nic_profile(const NicProfile& p, NicParams& n);

}  // namespace fabricsim::models
