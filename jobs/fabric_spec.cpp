#include "jobs/fabric_spec.hpp"

#include <cstdlib>
#include <deque>
#include <string>

#include "engine/errors.hpp"
#include "engine/units.hpp"
#include "models/core/nic_profile.hpp"

namespace fabricsim::jobs {

using engine::InputError;

const std::vector<SpecKey>& fabric_spec_keys() {
  static const std::vector<SpecKey> keys = [] {
  std::vector<SpecKey> k = {
      {"switch.buffer", "bytes", "auto", "packet buffer per Ethernet switch; auto = 64MiB (Tomahawk 3 class), more if PFC headroom needs it"},
      {"switch.pfc", "bool", "true", "PFC (802.1Qbb) on the RDMA data class: lossless; false = lossy with go-back-N"},
      {"switch.pfc_alpha", "double", "0.125", "dynamic XOFF threshold: pause when an ingress port's buffer use >= alpha x free buffer"},
      {"switch.pfc_xoff", "bytes", "0", "static XOFF threshold per ingress port (0 = dynamic, switch.pfc_alpha)"},
      {"switch.pfc_resume_offset", "bytes", "3KiB", "XON when use + offset <= XOFF threshold"},
      {"switch.pfc_headroom", "bytes", "0", "PFC headroom per ingress port (0 = auto: 2 x link BDP + 3 MTU + pause frame)"},
      {"switch.egress_alpha", "double", "1.0", "dynamic threshold of lossy queues: drop when queue > alpha x free buffer"},
      {"switch.ecn", "bool", "true", "RED ECN marking of the data class at egress"},
      {"switch.ecn_kmin", "bytes", "0", "ECN Kmin at 100 Gb/s, scaled with port rate (0 = 100KB)"},
      {"switch.ecn_kmax", "bytes", "0", "ECN Kmax at 100 Gb/s, scaled with port rate (0 = 400KB)"},
      {"switch.ecn_pmax", "double", "0.2", "ECN marking probability at Kmax"},
      {"switch.routing", "enum", "ecmp", "ecmp (5-tuple hash, per-switch seed), spray (per packet) or adaptive (least-loaded egress)"},
      {"switch.link_retry", "bool", "false", "link-level retry on switch-to-switch links: a unit hit by a bit error (faults: ber) is sent again on the link "
                                             "(go-back-N on the link, one NACK round trip per replay) instead of dropped"},
      {"switch.link_retry_cell", "bytes", "0", "unit of switch.link_retry: 0 = the whole frame; else cells of this size, each retried on its own (16B..64KiB)"},
      {"switch.link_retry_max", "int", "64", "replays of one unit before the link drops the frame (then the sender's go-back-N recovers it)"},
      {"nic.cc", "enum", models::cc_name(models::NicParams{}.cc), models::cc::kind_help().c_str()},
      {"nic.qps_per_connection", "int", "1", "queue pairs per connection; default: NCCL_IB_QPS_PER_CONNECTION of the nccl: section / environment (NCCL default 1)"},
      {"nic.split_data_on_qps", "bool", "false", "split each message of >= qps x MTU over the QPs (else whole messages round-robin); default: NCCL_IB_SPLIT_DATA_ON_QPS (0)"},
      {"nic.header_bytes", "bytes", "0", "wire bytes per data packet beyond the payload (RoCEv2 on Ethernet with preamble/IFG: 82)"},
      {"nic.control_bytes", "bytes", "84", "wire bytes of an ACK/NACK/CNP frame"},
      {"nic.ack_interval", "int", "0", "one ACK per N in-order packets (0 = auto: 1 with HPCC, else 4)"},
      {"nic.rto", "time", "4294967296ns", "go-back-N retransmission timeout (4.096us x 2^NCCL_IB_TIMEOUT, default 20)"},
      {"nic.retry_count", "int", "7", "timeouts in a row without progress before a QP gives up and the run ends with an "
                                      "error (NCCL_IB_RETRY_CNT, default 7); the error comes (retry_count + 1) x nic.rto "
                                      "after the QP's last progress"},
      {"nic.flow_start", "enum", "all", "all (QPs start at once) or staggered (per-QP offset in [0, nic.stagger_window))"},
      {"nic.stagger_window", "time", "10us", "window of nic.flow_start: staggered"},
      {"nic.qp_cache", "int", "unlimited", "QP contexts cached per NIC (LRU over RoCE send QPs; N >= 1 or unlimited); serving an uncached QP "
                                                "delays its next packet by nic.qp_miss_latency; default: cluster.nic_profile's"},
      {"nic.qp_miss_latency", "time", "0", "QP-context fetch on a cache miss (a PCIe read of host memory); default: cluster.nic_profile's"},
      {"nic.msg_rate", "double", "unlimited", "message starts per second per NIC (> 0, e.g. 215e6, or unlimited); default: cluster.nic_profile's"},
  };
  // cc.*: declared by each congestion control beside its parameters (models/cc/registry.hpp);
  // the help names where a default comes from.
  static std::deque<std::string> helps;
  for (const models::ParamDecl& d : models::cc::param_decls()) {
    const std::string& h =
        helps.emplace_back(*d.source ? std::string(d.help) + " (default: " + d.source + ")" : std::string(d.help));
    k.push_back({d.path, d.type, d.default_text, h.c_str()});
  }
  return k;
  }();
  return keys;
}

void parse_fabric_keys(const std::function<std::optional<std::string>(const std::string&)>& get_value,
                       const std::function<std::string(const std::string&)>& file_of,
                       models::FabricParams& p) {
  // Every key found is recorded with its origin, for cross-field errors raised later.
  const auto get = [&](const std::string& key) {
    auto v = get_value(key);
    if (v) p.key_source[key] = file_of(key);
    return v;
  };
  auto dbl = [&](const std::string& key, double& field, double lo, double hi) {
    if (auto v = get(key)) {
      char* end = nullptr;
      const double x = std::strtod(v->c_str(), &end);
      if (end == v->c_str() || *end != '\0' || !(x >= lo && x <= hi)) {
        throw InputError(file_of(key), key, "'" + *v + "' must be a number in [" + std::to_string(lo) + ", " +
                                               std::to_string(hi) + "]", "e.g. the default from `fabricsim describe`");
      }
      field = x;
    }
  };
  auto flag = [&](const std::string& key, bool& field) {
    if (auto v = get(key)) {
      field = engine::parse_bool(*v, file_of(key), key);
    }
  };
  auto bytes = [&](const std::string& key, std::uint64_t& field, std::uint64_t lo, std::uint64_t hi) {
    if (auto v = get(key)) {
      const std::uint64_t b = engine::parse_bytes(*v, file_of(key), key);
      if (b < lo || b > hi) {
        throw InputError(file_of(key), key, "'" + *v + "' is outside " + std::to_string(lo) + " .. " +
                                               std::to_string(hi) + " bytes", "e.g. 4KiB, 64MiB");
      }
      field = b;
    }
  };
  auto time = [&](const std::string& key, engine::SimTime& field, engine::SimTime lo) {
    if (auto v = get(key)) {
      field = engine::parse_time_ps(*v, file_of(key), key);
      if (field < lo || field > engine::kPsPerS) {
        throw InputError(file_of(key), key, "'" + *v + "' is outside " + (lo > 0 ? "1ps" : "0") + " .. 1s", "e.g. 55us");
      }
    }
  };
  auto count = [&](const std::string& key, std::uint32_t& field, std::uint32_t lo, std::uint32_t hi) {
    if (auto v = get(key)) {
      char* end = nullptr;
      const unsigned long long x = std::strtoull(v->c_str(), &end, 10);
      if (end == v->c_str() || *end != '\0' || v->front() == '-' || x < lo || x > hi) {
        throw InputError(file_of(key), key, "'" + *v + "' must be an integer in [" + std::to_string(lo) + ", " +
                                               std::to_string(hi) + "]", "e.g. the default from `fabricsim describe`");
      }
      field = static_cast<std::uint32_t>(x);
    }
  };
  models::SwitchParams& s = p.sw;
  if (auto v = get("switch.buffer"); v && *v != "auto") bytes("switch.buffer", s.buffer_bytes, 16 * 1024, 1ull << 40);
  flag("switch.pfc", s.pfc);
  dbl("switch.pfc_alpha", s.pfc_alpha, 1.0 / 1024, 64);
  bytes("switch.pfc_xoff", s.pfc_xoff_bytes, 0, 1ull << 40);
  bytes("switch.pfc_resume_offset", s.pfc_resume_offset_bytes, 0, 1ull << 30);
  bytes("switch.pfc_headroom", s.pfc_headroom_bytes, 0, 1ull << 40);
  dbl("switch.egress_alpha", s.egress_alpha, 1.0 / 1024, 64);
  flag("switch.ecn", s.ecn);
  bytes("switch.ecn_kmin", s.ecn_kmin_bytes, 0, 1ull << 40);
  bytes("switch.ecn_kmax", s.ecn_kmax_bytes, 0, 1ull << 40);
  dbl("switch.ecn_pmax", s.ecn_pmax, 0, 1);
  if (auto v = get("switch.routing")) s.routing = models::parse_routing(*v, file_of("switch.routing"), "switch.routing");
  flag("switch.link_retry", s.link_retry);
  {
    std::uint64_t cell = s.link_retry_cell_bytes;
    bytes("switch.link_retry_cell", cell, 0, 64 * 1024);
    if (cell > 0 && cell < 16) {
      throw InputError(file_of("switch.link_retry_cell"), "switch.link_retry_cell",
                       std::to_string(cell) + " bytes is below 16 bytes", "give 0 (whole frames) or 16B .. 64KiB, e.g. 64B");
    }
    s.link_retry_cell_bytes = static_cast<std::uint32_t>(cell);
  }
  count("switch.link_retry_max", s.link_retry_max, 1, 1u << 20);
  models::NicParams& n = p.nic;
  // The profile first: the nic.* keys below override its fields.
  if (auto v = get("cluster.nic_profile")) {
    models::apply_nic_profile(models::find_nic_profile(*v, file_of("cluster.nic_profile"), "cluster.nic_profile"), n);
  }
  if (auto v = get("nic.qp_cache"); v && *v != "unlimited") {
    if (*v == "0") {
      throw InputError(file_of("nic.qp_cache"), "nic.qp_cache", "0 QP contexts cannot hold the QP being served",
                       "give at least 1, or unlimited");
    }
    count("nic.qp_cache", n.qp_cache, 1, 1u << 24);
  } else if (v) {
    n.qp_cache = 0;
  }
  time("nic.qp_miss_latency", n.qp_miss_ps, 0);
  if (auto v = get("nic.msg_rate"); v && *v != "unlimited") {
    char* end = nullptr;
    const double x = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(x > 0) || x > 1e12) {
      throw InputError(file_of("nic.msg_rate"), "nic.msg_rate", "'" + *v + "' must be a number of messages/s in (0, 1e12]",
                       "e.g. 215e6, or unlimited");
    }
    n.msg_rate_per_s = x;
  } else if (v) {
    n.msg_rate_per_s = 0;
  }
  if (auto v = get("nic.cc")) n.cc = models::parse_cc(*v, file_of("nic.cc"), "nic.cc");
  count("nic.qps_per_connection", n.qps_per_connection, 1, 256);
  flag("nic.split_data_on_qps", n.split_data_on_qps);
  n.qps_given = get("nic.qps_per_connection").has_value() || get("nic.split_data_on_qps").has_value();
  std::uint64_t hb = n.header_bytes, cb = n.control_bytes;
  bytes("nic.header_bytes", hb, 0, 1024);
  bytes("nic.control_bytes", cb, 1, 1024);
  n.header_bytes = static_cast<std::uint32_t>(hb);
  n.control_bytes = static_cast<std::uint32_t>(cb);
  count("nic.ack_interval", n.ack_interval_packets, 0, 1u << 20);
  if (auto v = get("nic.rto")) {
    n.rto_ps = engine::parse_time_ps(*v, file_of("nic.rto"), "nic.rto");
    if (n.rto_ps < 1000 || n.rto_ps > 3600 * engine::kPsPerS) {
      throw InputError(file_of("nic.rto"), "nic.rto", "'" + *v + "' is outside 1ns .. 1h", "e.g. 4294967296ns (NCCL_IB_TIMEOUT=20)");
    }
  }
  count("nic.retry_count", n.retry_count, 0, 254);
  if (auto v = get("nic.flow_start")) {
    if (*v == "all") {
      n.flow_start = models::FlowStart::kAllAtOnce;
    } else if (*v == "staggered") {
      n.flow_start = models::FlowStart::kStaggered;
    } else {
      throw InputError(file_of("nic.flow_start"), "nic.flow_start", "'" + *v + "' is not a flow-start policy",
                       "use all or staggered");
    }
  }
  time("nic.stagger_window", n.stagger_window_ps, 0);
  const models::cc::SpecReader reader{get, file_of};
  models::cc::parse_params(reader, p.cc);
  models::cc::validate_params(p.cc, reader);
  models::validate(p);
}

}  // namespace fabricsim::jobs
