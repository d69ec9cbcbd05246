#include "models/core/nic_profile.hpp"

#include "engine/errors.hpp"

namespace fabricsim::models {

namespace {

// Sources of the figures (docs/fabric.md, "NIC profiles", repeats them):
//  [CX6]  NVIDIA ConnectX-6 EN adapter card user manual, "Introduction"
//         (docs.nvidia.com/networking/display/ConnectX6EN/Introduction): up to two ports of
//         200 Gb/s and 215 million messages per second.
//  [CX7]  NVIDIA ConnectX-7 VPI adapter card user manual, "Introduction"
//         (docs.nvidia.com/networking/display/ConnectX7VPI/Introduction): single-port NDR
//         400 Gb/s / 400GbE cards.
//  [CX7B] NVIDIA ConnectX-7 product brief: 330-370 million messages per second. Quoted from the
//         brief as remembered, not re-checked for this table: an assumption until it is.
//  [RDA]  max_qp_rd_atom 16, what `ibv_devinfo -v` reports for mlx5 (ConnectX-4 and later)
//         devices; not re-read from a ConnectX-6/7 here.
//  Assumptions, no vendor figure exists: NVIDIA publishes no QP-context cache size. Kalia,
//  Kaminsky and Andersen, "Design Guidelines for High Performance RDMA Systems" (USENIX ATC
//  2016), show RC throughput falling once a few hundred QPs are active, from misses in the NIC's
//  SRAM context cache; 512 and 1024 are round numbers of that order, not measurements. The miss
//  latency is one PCIe read of host memory; Neugebauer et al., "Understanding PCIe performance
//  for end host networking" (SIGCOMM 2018), measure small DMA reads at several hundred ns to
//  about 1 us; 1 us is taken for both.
const std::vector<NicProfile> kProfiles = {
    {"ideal", "today's NIC model: every QP context cached, no message-rate limit (the default)", 400'000'000'000ull,
     0, 0, 0, TxSched::kRoundRobin, 16, FlowStart::kAllAtOnce, CcKind::kDcqcn, "cc.dcqcn.* defaults",
     "line rate = the cluster.nic_bandwidth default; no cache or message-rate limit by construction"},
    {"cx7_400g", "ConnectX-7 class 400G RoCE NIC", 400'000'000'000ull, 330e6, 1024, 1'000'000,
     TxSched::kRoundRobin, 16, FlowStart::kAllAtOnce, CcKind::kDcqcn, "cc.dcqcn.* defaults",
     "line rate: ConnectX-7 VPI user manual (400Gb/s single port); msg_rate: ConnectX-7 product brief low end "
     "(330-370 M msg/s, not re-checked: assumption); max_rd_atom: ibv_devinfo for mlx5; qp_cache 1024 and "
     "qp_miss_latency 1us: assumptions (no vendor figure; Kalia et al. ATC'16, Neugebauer et al. SIGCOMM'18)"},
    {"cx6_200g", "ConnectX-6 class 200G RoCE NIC", 200'000'000'000ull, 215e6, 512, 1'000'000,
     TxSched::kRoundRobin, 16, FlowStart::kAllAtOnce, CcKind::kDcqcn, "cc.dcqcn.* defaults",
     "line rate and msg_rate: ConnectX-6 EN user manual (200Gb/s, 215 million messages/s); max_rd_atom: "
     "ibv_devinfo for mlx5; qp_cache 512 and qp_miss_latency 1us: assumptions (no vendor figure; Kalia et al. "
     "ATC'16, Neugebauer et al. SIGCOMM'18)"},
};

}  // namespace

const std::vector<NicProfile>& nic_profiles() { return kProfiles; }

std::string nic_profile_names() {
  std::string out;
  for (const NicProfile& p : kProfiles) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

const NicProfile& find_nic_profile(const std::string& name, const std::string& file, const std::string& field) {
  for (const NicProfile& p : kProfiles) {
    if (name == p.name) return p;
  }
  throw engine::InputError(file, field, "'" + name + "' is not a NIC profile", "use one of " + nic_profile_names());
}

void apply_nic_profile(const NicProfile& p, NicParams& n) {
  n.profile = p.name;
  n.qp_cache = p.qp_cache;
  n.qp_miss_ps = p.qp_miss_ps;
  n.msg_rate_per_s = p.msg_rate_per_s;
  n.tx_sched = p.tx_sched;
  n.max_rd_atom = p.max_rd_atom;
  n.flow_start = p.flow_start;
  n.cc = p.cc;
}

}  // namespace fabricsim::models
