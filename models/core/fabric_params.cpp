#include "models/core/fabric_params.hpp"

#include "engine/errors.hpp"

namespace fabricsim::models {

RoutingMode parse_routing(const std::string& v, const std::string& file, const std::string& field) {
  if (v == "ecmp") return RoutingMode::kEcmp;
  if (v == "spray") return RoutingMode::kSpray;
  if (v == "adaptive") return RoutingMode::kAdaptive;
  throw engine::InputError(file, field, "'" + v + "' is not a routing mode", "use ecmp, spray or adaptive");
}

const char* routing_name(RoutingMode m) {
  switch (m) {
    case RoutingMode::kEcmp: return "ecmp";
    case RoutingMode::kSpray: return "spray";
    case RoutingMode::kAdaptive: return "adaptive";
  }
  return "?";
}

const char* tx_sched_name(TxSched s) {
  switch (s) {
    case TxSched::kRoundRobin: return "round_robin";
  }
  return "?";
}

void validate(const FabricParams& p) {
  if (p.sw.routing != RoutingMode::kEcmp && !p.sw.pfc) {
    throw engine::InputError(p.origin("switch.routing"), "switch.routing",
                             std::string("'") + routing_name(p.sw.routing) +
                                 "' reorders packets, which go-back-N on a lossy fabric would treat as loss",
                             "set switch.pfc: true (lossless) or switch.routing: ecmp");
  }
  if (p.sw.buffer_bytes > 0 && p.sw.pfc_xoff_bytes >= p.sw.buffer_bytes) {
    throw engine::InputError(p.origin("switch.pfc_xoff"), "switch.pfc_xoff", "is not below switch.buffer, so PFC would never pause",
                             "give a static XOFF threshold below the buffer, or 0 (dynamic)");
  }
  if (p.sw.pfc_headroom_bytes > (1ull << 32)) {
    throw engine::InputError(p.origin("switch.pfc_headroom"), "switch.pfc_headroom", "is more than 4 GiB per port",
                             "give a few link BDPs (e.g. 200KB) or 0 (auto)");
  }
  if (p.nic.flow_start == FlowStart::kStaggered && p.nic.stagger_window_ps <= 0) {
    throw engine::InputError(p.origin("nic.stagger_window"), "nic.stagger_window", "is 0 with nic.flow_start: staggered",
                             "give a window like 10us, or nic.flow_start: all");
  }
  const std::uint64_t kmin = p.sw.ecn_kmin_bytes > 0 ? p.sw.ecn_kmin_bytes : 100'000;
  const std::uint64_t kmax = p.sw.ecn_kmax_bytes > 0 ? p.sw.ecn_kmax_bytes : 400'000;
  if (kmin >= kmax) {
    throw engine::InputError(p.origin("switch.ecn_kmin"), "switch.ecn_kmin", "must be below switch.ecn_kmax",
                             "e.g. ecn_kmin: 100KB, ecn_kmax: 400KB");
  }
}

}  // namespace fabricsim::models
