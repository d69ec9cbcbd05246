#include "jobs/faults.hpp"

#include <set>

#include "engine/errors.hpp"
#include "engine/time.hpp"
#include "engine/units.hpp"

namespace fabricsim::jobs {

using engine::InputError;
using engine::SimTime;
using models::FaultKind;

namespace {

const char* const kFix = "each entry: {time: T, target: NODE-NODE, kind: link_down|ber|degrade, ...} or "
                         "{time: T, target: gpu3, kind: nic_down} or {time: T, target: spine1, kind: switch_down} "
                         "(docs/jobs_and_faults.md)";

SimTime parse_fault_time(const std::string& v, const std::string& file, const std::string& field) {
  if (!v.empty() && v[0] == '-') {
    throw InputError(file, field, "'" + v + "' is negative", "give a time >= 0 with a unit, e.g. 200us");
  }
  const SimTime t = engine::parse_time_ps(v, file, field);
  if (t < 0 || t >= engine::kMaxSimTime) {
    throw InputError(file, field, "'" + v + "' is after the end of simulated time (2^60 ps, 13.3 days)",
                     "give a time within the run, e.g. 200us");
  }
  return t;
}

}  // namespace

std::vector<FaultEntry> parse_faults(const YAML::Node& node, const std::string& file) {
  std::vector<FaultEntry> out;
  if (!node || node.IsNull()) return out;
  if (!node.IsSequence()) throw InputError(file, "faults", "must be a list of fault entries", kFix);
  for (std::size_t i = 0; i < node.size(); ++i) {
    const std::string at = "faults[" + std::to_string(i) + "]";
    const YAML::Node e = node[i];
    if (!e.IsMap()) throw InputError(file, at, "must be a mapping", kFix);
    std::set<std::string> keys;
    for (const auto& kv : e) {
      const std::string k = kv.first.as<std::string>();
      static const std::set<std::string> known = {"time", "target", "kind", "until", "detect", "converge", "ber", "rate"};
      if (!known.count(k)) {
        throw InputError(file, at + "." + k, "unknown key",
                         "use time, target, kind, until, detect, converge (link_down, nic_down, switch_down), ber (ber) "
                         "or rate (degrade)");
      }
      if (!kv.second.IsScalar()) throw InputError(file, at + "." + k, "must be a single value", kFix);
      keys.insert(k);
    }
    const auto str = [&](const char* k) { return e[k].as<std::string>(); };
    for (const char* k : {"time", "target", "kind"}) {
      if (!keys.count(k)) throw InputError(file, at + "." + k, "is missing", kFix);
    }
    FaultEntry f;
    f.file = file;
    const std::string kind = str("kind");
    f.kind = kind;
    if (kind == "link_down" || kind == "nic_down" || kind == "switch_down") {
      f.fault.kind = FaultKind::kLinkDown;
      f.scope = kind == "nic_down" ? FaultScope::kNic : kind == "switch_down" ? FaultScope::kSwitch : FaultScope::kLink;
    } else if (kind == "ber") {
      f.fault.kind = FaultKind::kBer;
    } else if (kind == "degrade") {
      f.fault.kind = FaultKind::kDegrade;
    } else {
      throw InputError(file, at + ".kind", "'" + engine::printable(kind) + "' is not a fault kind",
                       "use link_down, ber, degrade, nic_down or switch_down");
    }
    const auto only = [&](const char* k, FaultKind for_kind, const char* kname) {
      if (keys.count(k) && f.fault.kind != for_kind) {
        throw InputError(file, at + "." + k, "applies to kind " + std::string(kname) + " only",
                         "delete it, or use kind " + std::string(kname));
      }
    };
    only("detect", FaultKind::kLinkDown, "link_down, nic_down or switch_down");
    only("converge", FaultKind::kLinkDown, "link_down, nic_down or switch_down");
    only("ber", FaultKind::kBer, "ber");
    only("rate", FaultKind::kDegrade, "degrade");
    f.fault.at_ps = parse_fault_time(str("time"), file, at + ".time");
    if (keys.count("until")) {
      f.fault.until_ps = parse_fault_time(str("until"), file, at + ".until");
      if (f.fault.until_ps <= f.fault.at_ps) {
        throw InputError(file, at + ".until", "is not after time", "give an until later than time, or leave it out (for the rest of the run)");
      }
    }
    f.target = str("target");
    const auto dash = f.target.find('-');
    if (f.scope != FaultScope::kLink) {
      const bool nic = f.scope == FaultScope::kNic;
      if (f.target.empty() || dash != std::string::npos) {
        throw InputError(file, at + ".target", "'" + engine::printable(f.target) + "' is not one node",
                         nic ? "kind nic_down takes the GPU whose NIC fails, e.g. target: gpu3 (fabricsim topo lists them)"
                             : "kind switch_down takes one Ethernet switch, e.g. target: spine1 (fabricsim topo lists them)");
      }
      f.node_a = f.target;
    } else if (dash == std::string::npos || dash == 0 || dash + 1 == f.target.size() ||
        f.target.find('-', dash + 1) != std::string::npos) {
      throw InputError(file, at + ".target", "'" + engine::printable(f.target) + "' is not NODE-NODE",
                       "name a link by its two ends, e.g. leaf0-spine1 (fabricsim topo lists them)");
    } else {
      f.node_a = f.target.substr(0, dash);
      f.node_b = f.target.substr(dash + 1);
    }
    if (f.fault.kind == FaultKind::kLinkDown) {
      // Defaults: round placeholders, not measurements; set them from the fabric's BFD/BGP timers.
      const SimTime detect = keys.count("detect") ? parse_fault_time(str("detect"), file, at + ".detect") : 100'000'000;
      const SimTime converge = keys.count("converge") ? parse_fault_time(str("converge"), file, at + ".converge") : 1'000'000'000;
      f.fault.reconverge_ps = detect + converge;
    } else if (f.fault.kind == FaultKind::kBer) {
      if (!keys.count("ber")) throw InputError(file, at + ".ber", "is missing", "give the bit-error rate, e.g. ber: 1e-6");
      const std::string v = str("ber");
      char* end = nullptr;
      f.fault.ber = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(f.fault.ber > 0) || !(f.fault.ber < 1)) {
        throw InputError(file, at + ".ber", "'" + engine::printable(v) + "' is not a rate in (0, 1)", "e.g. ber: 1e-6");
      }
    } else {
      if (!keys.count("rate")) throw InputError(file, at + ".rate", "is missing", "give the lower rate, e.g. rate: 100Gbps");
      f.fault.rate_bps = engine::parse_rate_bps(str("rate"), file, at + ".rate");
    }
    out.push_back(f);
  }
  return out;
}

std::vector<models::LinkFault> resolve_faults(const std::vector<FaultEntry>& entries, const models::Topology& topo) {
  std::vector<models::LinkFault> out;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const FaultEntry& e = entries[i];
    const std::string field = "faults[" + std::to_string(i) + "].target";
    const auto find = [&](const std::string& name) {
      for (engine::LpId n = 0; n < topo.num_nodes(); ++n) {
        if (topo.node_name(n) == name) return n;
      }
      throw InputError(e.file, field, "there is no node '" + engine::printable(name) + "' in this cluster",
                       e.scope == FaultScope::kNic      ? "name a GPU, e.g. gpu3 (fabricsim topo lists them)"
                       : e.scope == FaultScope::kSwitch ? "name an Ethernet switch, e.g. spine1 (fabricsim topo lists them)"
                                                        : "name two nodes that share a link, e.g. leaf0-spine1 (fabricsim topo lists them)");
    };
    const auto eth = [&](engine::LpId n) {
      const models::NodeKind k = topo.kind(n);
      return k == models::NodeKind::kLeaf || k == models::NodeKind::kSpine || k == models::NodeKind::kCore;
    };
    const auto gpu = [&](engine::LpId n) { return topo.kind(n) == models::NodeKind::kGpu; };
    models::LinkFault f = e.fault;
    f.entry = static_cast<std::uint32_t>(i);
    if (e.scope != FaultScope::kLink) {
      const engine::LpId n = find(e.node_a);
      const bool nic = e.scope == FaultScope::kNic;
      if (nic && !gpu(n)) {
        throw InputError(e.file, field, "'" + engine::printable(e.target) + "' is not a GPU",
                         "kind nic_down takes the GPU whose NIC fails, e.g. gpu3; for a switch use kind switch_down");
      }
      if (!nic && !eth(n)) {
        throw InputError(e.file, field, "'" + engine::printable(e.target) + "' is not an Ethernet switch (leaf, spine or core)",
                         gpu(n) ? "for a GPU's NIC use kind nic_down" : "name a leaf, spine or core switch; NVLink faults are not simulated");
      }
      std::set<engine::LpId> peers;
      for (const models::Port& p : topo.ports(n)) {
        if (eth(p.peer) || (!nic && gpu(p.peer))) peers.insert(p.peer);
      }
      if (peers.empty()) {
        throw InputError(e.file, field, "'" + engine::printable(e.target) + "' has no " + (nic ? "NIC (no link to an Ethernet switch)" : "link"),
                         "name a GPU with a NIC (a cluster with an Ethernet fabric), or drop the entry");
      }
      for (const engine::LpId p : peers) {
        f.a = n;
        f.b = p;
        out.push_back(f);
      }
      continue;
    }
    const engine::LpId a = find(e.node_a), b = find(e.node_b);
    if (gpu(a) && gpu(b)) {
      throw InputError(e.file, field, "'" + engine::printable(e.target) + "' joins two GPUs", "name a link with an Ethernet switch end, e.g. leaf0-spine1 or gpu3-leaf0");
    }
    if (!(eth(a) || gpu(a)) || !(eth(b) || gpu(b))) {
      throw InputError(e.file, field, "'" + engine::printable(e.target) + "' is not a link of the Ethernet fabric",
                       "NVLink faults are not simulated; name a switch-to-switch link (leaf0-spine1) or a NIC link (gpu3-leaf0)");
    }
    if ((gpu(a) || gpu(b)) && e.fault.kind != FaultKind::kLinkDown) {
      throw InputError(e.file, field, "'" + engine::printable(e.target) + "' is a NIC link, and kind " + e.kind + " applies to switch-to-switch links only",
                       "use kind link_down or nic_down for a NIC, or name a switch-to-switch link such as leaf0-spine1");
    }
    std::uint64_t rate = 0;
    for (const models::Port& p : topo.ports(a)) {
      if (p.peer == b) rate = std::max(rate, p.rate_bps);
    }
    if (rate == 0) {
      throw InputError(e.file, field, "there is no link between " + e.node_a + " and " + e.node_b,
                       "name two nodes that share a link (fabricsim topo lists them)");
    }
    if (e.fault.kind == FaultKind::kDegrade && e.fault.rate_bps >= rate) {
      throw InputError(e.file, "faults[" + std::to_string(i) + "].rate",
                       "is not below the link's rate of " + std::to_string(rate) + " bps", "give a lower rate");
    }
    f.a = a;
    f.b = b;
    out.push_back(f);
  }
  return out;
}

}  // namespace fabricsim::jobs
