#include "models/gpu_rank.hpp"

#include <algorithm>
#include <cstring>

#include "engine/errors.hpp"
#include "engine/rng.hpp"
#include "engine/simulator.hpp"

namespace fabricsim::models {

using engine::Context;
using engine::SimTime;

namespace {
constexpr std::uint32_t kNoSlot = 0xFFFFFFFFu;
struct DoneRef {
  std::uint32_t slot;
  std::uint32_t idx;
};
}  // namespace

GpuRankLp::GpuRankLp(const Topology& topo, engine::LpId id, const Workload* workload,
                     const CollectivePlanner& planner, const FabricParams& fabric)
    : topo_(topo), id_(id), workload_(workload), planner_(planner), nic_(topo, id, fabric, *this) {
  if (workload_ != nullptr && id < workload_->ranks) program_ = &workload_->programs[id];
  const std::uint32_t n = nodes_size();
  waiting_.assign(n, 0);
  dependents_.assign(n, {});
  instance_.assign(n, 0);
  done_flag_.assign(n, 0);
  std::vector<std::uint32_t> per_group(workload_ ? workload_->groups.size() : 0, 0);
  for (std::uint32_t i = 0; i < n; ++i) {
    const WorkNode& node = (*program_)[i];
    waiting_[i] = static_cast<std::uint32_t>(node.deps.size());
    for (std::uint32_t d : node.deps) dependents_[d].push_back(i);
    if (node.type == NodeType::kCollective) instance_[i] = per_group[static_cast<std::size_t>(node.group)]++;
  }
}

void GpuRankLp::init(Context& ctx) {
  std::vector<std::uint32_t> roots;
  for (std::uint32_t i = 0; i < nodes_size(); ++i) {
    if (waiting_[i] == 0) roots.push_back(i);
  }
  for (std::uint32_t i : roots) node_ready(i, ctx);
}

void GpuRankLp::account(SimTime now) {
  const SimTime dt = now - last_change_;
  if (compute_busy_) compute_ps_ += dt;
  if (comm_active_ > 0) {
    comm_ps_ += dt;
    if (!compute_busy_) exposed_ps_ += dt;
  }
  last_change_ = now;
}

void GpuRankLp::node_ready(std::uint32_t n, Context& ctx) {
  const WorkNode& node = (*program_)[n];
  switch (node.type) {
    case NodeType::kCompute:
      compute_queue_.push_back(n);
      start_compute(ctx);
      return;
    case NodeType::kCollective:
      start_collective(n, ctx);
      return;
    case NodeType::kSend:
      if (trace_on_) node_start_[n] = ctx.now();
      account(ctx.now());
      ++comm_active_;
      start_flow(static_cast<std::uint32_t>(node.peer), node.bytes, kP2pGroup, 0, node.tag, kNoSlot,
                 n, ctx);
      return;
    case NodeType::kRecv: {
      if (trace_on_) node_start_[n] = ctx.now();
      account(ctx.now());
      ++comm_active_;
      const MsgKey key{kP2pGroup, 0, static_cast<std::uint32_t>(node.peer), node.tag};
      auto it = arrived_.find(key);
      if (it != arrived_.end()) {
        if (--it->second == 0) arrived_.erase(it);
        account(ctx.now());
        --comm_active_;
        node_done(n, ctx);
      } else {
        waiting_rx_[key].emplace_back(kNoSlot, n);
      }
      return;
    }
  }
}

void GpuRankLp::node_done(std::uint32_t n, Context& ctx) {
  ++done_nodes_;
  done_flag_[n] = 1;
  for (std::uint32_t d : dependents_[n]) {
    if (--waiting_[d] == 0) node_ready(d, ctx);
  }
  if (done_nodes_ == nodes_size()) {
    account(ctx.now());
    finish_ps_ = ctx.now();
  }
}

void GpuRankLp::start_compute(Context& ctx) {
  if (compute_busy_ || compute_queue_.empty()) return;
  const std::uint32_t n = compute_queue_.front();
  compute_queue_.pop_front();
  account(ctx.now());
  compute_busy_ = true;
  compute_start_ = ctx.now();
  ctx.send(id_, ctx.now() + (*program_)[n].duration_ps, kEvComputeDone, n);
}

std::uint32_t GpuRankLp::slot_of(std::uint32_t group, std::uint32_t instance) {
  auto [it, inserted] = coll_slot_.try_emplace({group, instance}, 0);
  if (inserted) {
    it->second = static_cast<std::uint32_t>(coll_states_.size());
    coll_states_.emplace_back();
  }
  return it->second;
}

void GpuRankLp::start_collective(std::uint32_t n, Context& ctx) {
  const WorkNode& node = (*program_)[n];
  const auto& members = workload_->groups[static_cast<std::size_t>(node.group)].ranks;
  const auto pos = std::find(members.begin(), members.end(), id_);
  if (pos == members.end()) {
    throw engine::InternalError("rank " + std::to_string(id_) + " runs a collective of group " +
                                std::to_string(node.group) + " it is not a member of");
  }
  CollRequest req;
  req.op = node.op;
  req.bytes = node.bytes;
  req.ranks = &members;
  req.my_index = static_cast<std::uint32_t>(pos - members.begin());
  req.root_index = static_cast<std::uint32_t>(std::max(0, node.root));
  const auto group = static_cast<std::uint32_t>(node.group);
  const std::uint32_t inst = instance_[n];
  CollectivePartial part{group, inst, node.op, node.bytes,
                         static_cast<std::uint32_t>(members.size()), ctx.now(), ctx.now()};
  RankPlan plan = planner_.plan(req);
  if (plan.ops.empty()) {
    partials_.push_back(part);
    node_done(n, ctx);
    return;
  }
  account(ctx.now());
  ++comm_active_;
  const std::uint32_t slot = slot_of(group, inst);
  CollState& st = coll_states_[slot];
  st.node = n;
  st.plan = std::move(plan);
  st.start = ctx.now();
  st.started = true;
  const auto nops = static_cast<std::uint32_t>(st.plan.ops.size());
  st.waiting.assign(nops, 0);
  st.dependents.assign(nops, {});
  for (std::uint32_t o = 0; o < nops; ++o) {
    st.waiting[o] = static_cast<std::uint32_t>(st.plan.ops[o].deps.size());
    for (std::uint32_t d : st.plan.ops[o].deps) st.dependents[d].push_back(o);
  }
  // Ready set taken first: ops readied by a completion during this loop must not start twice.
  std::vector<std::uint32_t> roots;
  for (std::uint32_t o = 0; o < nops; ++o) {
    if (st.waiting[o] == 0) roots.push_back(o);
  }
  for (std::uint32_t o : roots) op_ready(slot, o, ctx);
}

void GpuRankLp::op_ready(std::uint32_t slot, std::uint32_t op, Context& ctx) {
  const std::uint32_t n = coll_states_[slot].node;
  const WorkNode& node = (*program_)[n];
  const P2pOp& o = coll_states_[slot].plan.ops[op];
  const auto group = static_cast<std::uint32_t>(node.group);
  if (o.is_send) {
    start_flow(o.peer, o.bytes, group, instance_[n], o.tag, slot, op, ctx, o.channel);
    return;
  }
  const MsgKey key{group, instance_[n], o.peer, o.tag};
  auto it = arrived_.find(key);
  if (it != arrived_.end()) {
    if (--it->second == 0) arrived_.erase(it);
    op_done(slot, op, ctx);
  } else {
    waiting_rx_[key].emplace_back(slot, op);
  }
}

void GpuRankLp::op_done(std::uint32_t slot, std::uint32_t op, Context& ctx) {
  CollState& st2 = coll_states_[slot];
  ++st2.done_ops;
  // Copy: a nested op_done may complete the collective and release its plan.
  const std::vector<std::uint32_t> deps = st2.dependents[op];
  for (std::uint32_t d : deps) {
    if (--st2.waiting[d] == 0) op_ready(slot, d, ctx);
  }
  if (!st2.completed && st2.done_ops == st2.plan.ops.size()) {
    st2.completed = true;
    const WorkNode& node = (*program_)[st2.node];
    account(ctx.now());
    --comm_active_;
    trace_add(st2.node, TraceInterval::kCollective, instance_[st2.node], st2.start, ctx.now());
    partials_.push_back(CollectivePartial{static_cast<std::uint32_t>(node.group), instance_[st2.node],
                                          node.op, node.bytes,
                                          static_cast<std::uint32_t>(
                                              workload_->groups[static_cast<std::size_t>(node.group)].ranks.size()),
                                          st2.start, ctx.now()});
    st2.plan.ops.clear();
    st2.plan.ops.shrink_to_fit();
    st2.dependents.clear();
    st2.waiting.clear();
    node_done(st2.node, ctx);
  }
}

void GpuRankLp::start_flow(std::uint32_t dst, std::uint64_t bytes, std::uint32_t group,
                           std::uint32_t instance, std::int64_t tag, std::uint32_t slot,
                           std::uint32_t op_or_node, Context& ctx, std::uint16_t channel) {
  const std::uint64_t flow_id = (static_cast<std::uint64_t>(id_) << 32) | next_flow_++;
  if (fidelity_ != Fidelity::kPacket) {
    Packet head;
    head.flow_id = flow_id;
    head.flow_bytes = bytes;
    head.flow_start = ctx.now();
    head.flow_hash = engine::mix64(flow_id ^ (topo_.spec().seed * 0x9E3779B97F4A7C15ull));
    head.tag = tag;
    head.src_rank = id_;
    head.dst_rank = dst;
    head.group = group;
    head.instance = instance;
    coarse_sends_.emplace(flow_id, std::make_pair(slot, op_or_node));
    start_coarse_flow(topo_, fidelity_, net_lp_, head, ctx);
    return;
  }
  nic_.send_message(dst, bytes, MsgMeta{flow_id, tag, group, instance, slot, op_or_node, channel}, ctx);
}

void GpuRankLp::on_send_complete(std::uint32_t slot, std::uint32_t idx, Context& ctx) {
  if (slot == kNoSlot) {
    account(ctx.now());
    --comm_active_;
    if (trace_on_) trace_add(idx, TraceInterval::kSend, 0, node_start_[idx], ctx.now());
    node_done(idx, ctx);
  } else {
    op_done(slot, idx, ctx);
  }
}

void GpuRankLp::on_packet(const Packet& p, Context& ctx) {
  if (p.dst_rank != id_) {
    throw engine::InternalError("gpu " + std::to_string(id_) + " got a packet for rank " +
                                std::to_string(p.dst_rank));
  }
  std::uint64_t got = p.bytes;
  SimTime first = ctx.now();
  if (p.flow_bytes > p.bytes) {
    auto it = rx_bytes_.try_emplace(p.flow_id, std::uint64_t{0}, ctx.now()).first;
    it->second.first += p.bytes;
    got = it->second.first;
    first = it->second.second;
    if (got == p.flow_bytes) rx_bytes_.erase(it);
  }
  if (got < p.flow_bytes) return;
  io::FlowRecord rec{p.flow_id, p.src_rank, p.dst_rank, p.flow_bytes, p.flow_start,
                     ctx.now(), ctx.now() - p.flow_start};
  rec.first_byte_ps = first;
  rec.group = p.group;
  rec.instance = p.group == kP2pGroup ? 0 : p.instance;
  // Ideal FCT on the flow's own path (same ECMP hash): bytes at the bottleneck rate plus the
  // propagation latency of every hop; no queueing, no per-hop store-and-forward.
  std::uint64_t bottleneck = ~std::uint64_t{0};
  SimTime latency = 0;
  for (engine::LpId at = p.src_rank; at != p.dst_rank;) {
    const Port& hop = topo_.ports(at)[topo_.route(at, p.dst_rank, p.flow_hash)];
    bottleneck = std::min(bottleneck, hop.rate_bps);
    latency += hop.latency_ps;
    if (topo_.kind(hop.peer) == NodeKind::kSpine && rec.first_spine < 0) {
      rec.first_spine = static_cast<std::int32_t>(hop.peer - topo_.spine_lp(0));
    }
    at = hop.peer;
  }
  rec.ideal_ps = engine::serialization_ps(p.flow_bytes, bottleneck) + latency;
  rec.slowdown = rec.ideal_ps > 0 ? static_cast<double>(rec.fct_ps) / static_cast<double>(rec.ideal_ps) : 1.0;
  flows_.push_back(rec);
  on_message(p, ctx);
}

void GpuRankLp::on_message(const Packet& p, Context& ctx) {
  const MsgKey key{p.group, p.instance, p.src_rank, p.tag};
  auto it = waiting_rx_.find(key);
  if (it == waiting_rx_.end()) {
    ++arrived_[key];
    return;
  }
  const auto [slot, idx] = it->second.front();
  it->second.pop_front();
  if (it->second.empty()) waiting_rx_.erase(it);
  if (slot == kNoSlot) {
    account(ctx.now());
    --comm_active_;
    if (trace_on_) trace_add(idx, TraceInterval::kRecv, 0, node_start_[idx], ctx.now());
    node_done(idx, ctx);
  } else {
    op_done(slot, idx, ctx);
  }
}

void GpuRankLp::handle(const engine::Event& ev, Context& ctx) {
  switch (ev.kind) {
    case kEvSendDone: {
      const auto ref = ev.get<DoneRef>();
      on_send_complete(ref.slot, ref.idx, ctx);
      return;
    }
    case kEvFlowArrive: {
      // The whole flow at once (coarse rungs), in <= 4 GiB pieces for the packet byte counter.
      Packet p = ev.get<Packet>();
      std::uint64_t left = p.flow_bytes;
      do {
        p.bytes = static_cast<std::uint32_t>(std::min<std::uint64_t>(left, 0xFFFFFFFFu));
        left -= p.bytes;
        on_packet(p, ctx);
      } while (left > 0);
      return;
    }
    case kEvFlowSent: {
      const auto it = coarse_sends_.find(ev.get<std::uint64_t>());
      if (it == coarse_sends_.end()) throw engine::InternalError("gpu " + std::to_string(id_) + ": unknown flow sent");
      const DoneRef ref{it->second.first, it->second.second};
      coarse_sends_.erase(it);
      engine::Event done = ev;
      done.kind = kEvSendDone;
      std::memcpy(done.payload.data(), &ref, sizeof(ref));
      handle(done, ctx);
      return;
    }
    case kEvComputeDone:
      account(ctx.now());
      compute_busy_ = false;
      trace_add(ev.get<std::uint32_t>(), TraceInterval::kCompute, 0, compute_start_, ctx.now());
      node_done(ev.get<std::uint32_t>(), ctx);
      start_compute(ctx);
      return;
    default:
      if (nic_.handle(ev, ctx)) return;
      throw engine::InternalError("gpu " + std::to_string(id_) + ": unexpected event kind " +
                                  std::to_string(ev.kind));
  }
}

std::int64_t GpuRankLp::first_unfinished() const {
  for (std::uint32_t i = 0; i < nodes_size(); ++i) {
    if (!done_flag_[i] && waiting_[i] == 0) return i;  // started (or ready) but never finished
  }
  for (std::uint32_t i = 0; i < nodes_size(); ++i) {
    if (!done_flag_[i]) return i;
  }
  return -1;
}

io::RankRecord GpuRankLp::rank_record() const {
  return io::RankRecord{id_, finish_ps_, compute_ps_, comm_ps_, exposed_ps_};
}

}  // namespace fabricsim::models
