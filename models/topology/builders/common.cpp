#include "models/topology/builders/common.hpp"

#include <algorithm>
#include <cmath>

#include "engine/errors.hpp"

namespace fabricsim::models::builders {

using engine::InputError;
using engine::LpId;

void check_general(const ClusterSpec &s) {
  const std::string &f = s.source;
  auto positive = [&](std::uint64_t v, const char *key, const char *fix) {
    if (v == 0)
      throw InputError(f, key, "must be > 0", fix);
  };
  positive(s.hosts, "cluster.hosts", "set cluster.hosts >= 1");
  positive(s.gpus_per_host, "cluster.gpus_per_host", "set cluster.gpus_per_host >= 1");
  positive(s.nics_per_leaf, "cluster.nics_per_leaf", "set cluster.nics_per_leaf >= 1");
  if (s.mtu_bytes == 0 || s.nvlink_mtu_bytes == 0)
    throw InputError(f, "cluster.mtu", "must be > 0 bytes", "use e.g. 4KiB");
  positive(s.nic_bps, "cluster.nic_bandwidth", "give a rate like 400Gbps");
  positive(s.fabric_bps, "cluster.fabric_bandwidth", "give a rate like 400Gbps");
  positive(s.nvlink_bps, "cluster.nvlink_bandwidth", "give a rate like 3600Gbps");
  positive(s.nic_latency_ps, "cluster.nic_latency",
           "give a latency like 500ns (it is the lookahead)");
  positive(s.fabric_latency_ps, "cluster.fabric_latency",
           "give a latency like 500ns (it is the lookahead)");
  positive(s.nvlink_latency_ps, "cluster.nvlink_latency",
           "give a latency like 100ns (it is the lookahead)");
  if (s.tiers != 2 && s.tiers != 3)
    throw InputError(f, "cluster.tiers", "must be 2 or 3", "use 2 (leaf-spine) or 3 (+ core)");
  if (s.pods == 0)
    throw InputError(f, "cluster.pods", "must be >= 1", "set cluster.pods >= 1");
  if (s.pods > 1 && s.tiers != 3) {
    throw InputError(f, "cluster.pods", "pods need a core layer",
                     "set cluster.tiers: 3 (or cluster.pods: 1)");
  }
  // A scale-up domain holds whole hosts (NVL72: 18 trays of 4 GPUs) or a host holds whole
  // domains; a domain taking part of a host would put that host's GPUs behind two NVSwitches.
  if (s.nvlink_domain != 0 && s.nvlink_domain % s.gpus_per_host != 0 &&
      s.gpus_per_host % s.nvlink_domain != 0) {
    throw InputError(f, "cluster.nvlink_domain",
                     std::to_string(s.nvlink_domain) + " GPUs per NVLink domain with " +
                         std::to_string(s.gpus_per_host) +
                         " GPUs per host: a domain would take part of a host",
                     "give a multiple of cluster.gpus_per_host (whole hosts per domain, e.g. 72 "
                     "with 4) or a divisor of it");
  }
  if (s.nics_per_leaf > ClusterSpec::kMaxSwitchPorts) {
    throw InputError(f, "cluster.nics_per_leaf",
                     std::to_string(s.nics_per_leaf) + " NIC ports on one switch is more than " +
                         std::to_string(ClusterSpec::kMaxSwitchPorts),
                     "give the leaf's real downlink count (e.g. 32 or 64); a larger fabric has "
                     "more leaves, not larger ones");
  }
  if (s.oversub_leaf < 0 || s.oversub_spine < 0) {
    throw InputError(f, "cluster.oversubscription", "ratios must be > 0",
                     "write e.g. \"3:1\" or \"1:1,4:1\"");
  }
}

void add_gpus_and_nvswitches(TopoGraph &g, const ClusterSpec &s) {
  const std::uint32_t G = s.hosts * s.gpus_per_host, D = s.domain_size();
  const auto nvl_bps = static_cast<std::uint64_t>(std::llround(static_cast<double>(s.nvlink_bps) * s.nvlink_efficiency));
  for (std::uint32_t i = 0; i < G; ++i)
    g.add(NodeKind::kGpu, 0);
  for (std::uint32_t d = 0; d * D < G; ++d) {
    const std::uint32_t lo = d * D, hi = std::min(G, lo + D);
    if (hi - lo < 2)
      continue; // a 1-GPU domain has no scale-up switch
    const LpId nvs = g.add(NodeKind::kNvSwitch, 0);
    for (std::uint32_t gpu = lo; gpu < hi; ++gpu) {
      g.links.push_back({gpu, nvs, nvl_bps, s.nvlink_latency_ps, s.nvlink_mtu_bytes});
    }
  }
}

bool param_given(const ClusterSpec &s, const std::string &key) {
  const auto it = s.topology_params.find(key);
  return it != s.topology_params.end() && it->second != "auto";
}

std::uint32_t param_uint(const ClusterSpec &s, const std::string &key, std::uint32_t fallback,
                         std::uint32_t min_value) {
  if (!param_given(s, key))
    return fallback;
  const std::string &text = s.topology_params.at(key);
  std::uint64_t v = 0;
  bool ok = !text.empty() && text.size() <= 10;
  for (char ch : text) {
    ok = ok && ch >= '0' && ch <= '9';
    if (ok)
      v = v * 10 + static_cast<std::uint64_t>(ch - '0');
  }
  if (!ok || v > 0xFFFFFFFFull)
    throw InputError(s.source, key, "'" + text + "' is not a whole number", "give e.g. 4 (or auto)");
  if (v < min_value) {
    throw InputError(s.source, key, "'" + text + "' must be >= " + std::to_string(min_value),
                     "give a value >= " + std::to_string(min_value) + " (or auto)");
  }
  return static_cast<std::uint32_t>(v);
}

} // namespace fabricsim::models::builders
