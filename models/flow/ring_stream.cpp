#include "models/flow/ring_stream.hpp"

#include <algorithm>

#include "engine/errors.hpp"
#include "models/packet/nic.hpp"

namespace fabricsim::models {

using engine::SimTime;

RingFlows parse_ring_flows(const std::string& name, const std::string& file, const std::string& field) {
  if (name == "step") return RingFlows::kStep;
  if (name == "stream") return RingFlows::kStream;
  throw engine::InputError(file, field, "'" + name + "' is not a ring flow mode", "use step or stream");
}

SimTime lone_transfer_ps(const FlowPath& path, std::uint64_t bytes) {
  const TransferTiming t = transfer_timing(path, bytes);
  return t.head_ps + t.drain_ps + t.tail_ps;
}

FlowPath ring_link_path(const Topology& topo, std::uint32_t from, std::uint32_t to) {
  return route_path(topo, nullptr, from, to, Nic::qp_flow_hash(from, to, 0, topo.spec().seed));
}

SimTime ring_token_delay_ps(const Topology& topo, Fidelity fidelity, std::uint32_t from, std::uint32_t to) {
  if (fidelity == Fidelity::kFlow) return coarse_offset_ps(topo);
  const FlowPath p = ring_link_path(topo, from, to);
  SimTime l = 0;
  for (std::uint32_t h = 0; h < p.hops; ++h) l = std::max(l, p.latency_ps[h]);
  return l;
}

namespace {
bool same_timing(const FlowPath& a, const FlowPath& b) {
  if (a.hops != b.hops || a.mtu_bytes != b.mtu_bytes) return false;
  for (std::uint32_t h = 0; h < a.hops; ++h) {
    if (a.rate_bps[h] != b.rate_bps[h] || a.latency_ps[h] != b.latency_ps[h]) return false;
  }
  return true;
}
}  // namespace

RingLinkClasses::RingLinkClasses(const Topology& topo, const std::vector<std::uint32_t>& members) {
  const std::size_t n = members.size();
  for (std::size_t l = 0; l < n; ++l) {
    const FlowPath p = ring_link_path(topo, members[l], members[(l + 1) % n]);
    auto it = std::find_if(classes_.begin(), classes_.end(), [&](const Class& c) { return same_timing(c.path, p); });
    if (it == classes_.end()) {
      classes_.push_back(Class{p, 1});
    } else {
      ++it->count;
    }
  }
}

SimTime RingLinkClasses::sum_ps(std::uint64_t bytes) const {
  SimTime s = 0;
  for (const Class& c : classes_) s += static_cast<SimTime>(c.count) * lone_transfer_ps(c.path, bytes);
  return s;
}

std::uint32_t RingLinkClasses::max_mtu() const {
  std::uint32_t m = 0;
  for (const Class& c : classes_) m = std::max(m, c.path.mtu_bytes);
  return m;
}

RingStreamTiming ring_stream_timing(const Topology& topo, const std::vector<std::uint32_t>& members,
                                    const RingLinkClasses& links, std::uint32_t index, std::uint32_t steps,
                                    std::uint64_t chain_bytes, std::uint64_t in_bytes) {
  const auto n = static_cast<std::uint32_t>(members.size());
  if (n < 2 || index >= n) throw engine::InternalError("ring_stream_timing: index outside the ring");
  auto link_ps = [&](std::uint32_t l, std::uint64_t bytes) {
    return lone_transfer_ps(ring_link_path(topo, members[l % n], members[(l + 1) % n]), bytes);
  };
  RingStreamTiming t;
  // The chain: links index-1, index-2, ..., index-steps (mod n): q whole turns of the ring plus
  // the r links before index; r near n is cheaper as a whole turn minus the links index ..
  // index + (n - r - 1) (an AllGather: r = n - 1, one link; an AllReduce: r = n - 2, two).
  const std::uint32_t q = steps / n, r = steps % n;
  const SimTime all = links.sum_ps(chain_bytes);
  t.chain_ps = static_cast<SimTime>(q) * all;
  if (r > 0) {
    if (n - r <= r) {
      SimTime part = all;
      for (std::uint32_t m = 0; m < n - r; ++m) part -= link_ps(index + m, chain_bytes);
      t.chain_ps += part;
    } else {
      for (std::uint32_t j = 1; j <= r; ++j) t.chain_ps += link_ps(index + n - j, chain_bytes);
    }
  }
  t.in_ps = link_ps(index + n - 1, in_bytes);
  return t;
}

}  // namespace fabricsim::models
