#include "models/switch_lp.hpp"

#include <algorithm>

#include "engine/errors.hpp"
#include "engine/simulator.hpp"
#include "models/packet.hpp"

namespace fabricsim::models {

SwitchLp::SwitchLp(const Topology& topo, engine::LpId id)
    : topo_(topo), id_(id), free_at_(topo.ports(id).size(), 0), bytes_(topo.ports(id).size(), 0) {}

void SwitchLp::handle(const engine::Event& ev, engine::Context& ctx) {
  if (ev.kind != kEvPacketArrive) {
    throw engine::InternalError("switch " + topo_.describe(id_) + ": unexpected event kind " +
                                std::to_string(ev.kind));
  }
  const auto pkt = ev.get<Packet>();
  const std::uint32_t out = topo_.route(id_, pkt.dst_rank, pkt.flow_hash);
  const Port& port = topo_.ports(id_)[out];
  const engine::SimTime now = ctx.now();
  const engine::SimTime start = std::max(now, free_at_[out]);
  max_queue_ps_ = std::max(max_queue_ps_, start - now);
  free_at_[out] = start + engine::serialization_ps(pkt.bytes, port.rate_bps);
  if (sampler_.enabled()) {
    // Backlog ahead of this packet: the rest of the port's busy time, as bytes at the port rate.
    const auto backlog = static_cast<std::uint64_t>(static_cast<SamplerU128>(start - now) *
                                                    port.rate_bps / 8'000'000'000'000ull);
    sampler_.queue(out, now, backlog);
    sampler_.tx(out, start, free_at_[out], pkt.bytes);
  }
  bytes_[out] += pkt.bytes;
  engine::Event fwd = ev;
  fwd.dst = port.peer;
  fwd.time = free_at_[out] + port.latency_ps;
  ctx.send_event(fwd);
}

}  // namespace fabricsim::models
