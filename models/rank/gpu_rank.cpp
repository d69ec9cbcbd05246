#include "models/rank/gpu_rank.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/errors.hpp"
#include "engine/rng.hpp"
#include "engine/state_io.hpp"
#include "engine/simulator.hpp"

namespace fabricsim::models {

using engine::Context;
using engine::SimTime;

namespace {
constexpr std::uint32_t kNoSlot = 0xFFFFFFFFu;
// CollState::state bits (below them: unmet dependencies of the op).
constexpr std::uint32_t kPosted = 1u << 28;
constexpr std::uint32_t kArrived = 1u << 29;
constexpr std::uint32_t kOpDone = 1u << 30;
constexpr std::uint32_t kDepMask = kPosted - 1;
// CollState::tree_state bits (below them: unmet dependencies, at most 4 for a Tree op).
constexpr std::uint8_t kTreePosted = 1u << 4;
constexpr std::uint8_t kTreeArrived = 1u << 5;
constexpr std::uint8_t kTreeDone = 1u << 6;
constexpr std::uint8_t kTreeDepMask = kTreePosted - 1;
constexpr std::uint32_t kPxnSendSlot = 0xFFFFFFFDu;  // a chunk of a relayed Send node (idx = node)
constexpr std::uint32_t kRelaySlot = 0xFFFFFFFCu;    // this GPU forwards another rank's chunk (PXN)
struct DoneRef {
  std::uint32_t slot;
  std::uint32_t idx;
};
// The lazy DAG of a plan (LazyTree or LazyNvls: the same op / ndeps / dependents / recv_op
// interface), passed to f.
template <class F>
decltype(auto) with_dag(const RankPlan& p, F&& f) {
  if (p.lazy_tree) return f(*p.lazy_tree);
  return f(*p.lazy_nvls);
}
}  // namespace

ProgramIndex ProgramIndex::build(const std::vector<WorkNode>& prog, std::size_t groups,
                                 const std::function<std::int32_t(const WorkNode&)>& group_key) {
  // Dependents in CSR form (two counting passes): 4 B per node + 4 B per edge, no allocation per
  // node (a vector per node cost ~56 B per node, the largest per-rank item at 9,216 GPUs).
  // Within a node's list, dependents stay in increasing node order.
  ProgramIndex x;
  const auto n = static_cast<std::uint32_t>(prog.size());
  x.instance.assign(n, 0);
  x.dep_begin.assign(n + std::size_t{1}, 0);
  std::vector<std::uint32_t> per_group(groups, 0);
  for (std::uint32_t i = 0; i < n; ++i) {
    const WorkNode& node = prog[i];
    for (std::uint32_t d : node.deps) ++x.dep_begin[d + 1];
    if (node.type == NodeType::kCollective) {
      const auto g = static_cast<std::size_t>(group_key(node));
      if (g >= groups) throw engine::InternalError("executor: collective node " + std::to_string(i) + " names group " + std::to_string(g));
      x.instance[i] = per_group[g]++;
    }
  }
  for (std::uint32_t i = 0; i < n; ++i) x.dep_begin[i + 1] += x.dep_begin[i];
  x.dep_index.resize(x.dep_begin[n]);
  std::vector<std::uint32_t> fill(x.dep_begin.begin(), x.dep_begin.end() - 1);
  for (std::uint32_t i = 0; i < n; ++i) {
    for (std::uint32_t d : prog[i].deps) x.dep_index[fill[d]++] = i;
  }
  return x;
}

std::shared_ptr<const ProgramIndex> ProgramIndex::of_shared(const Workload& w, std::uint32_t program) {
  return std::make_shared<const ProgramIndex>(
      build(w.programs.at(program), w.group_width, [](const WorkNode& n) { return n.group; }));
}

bool ProgramIndex::shareable(const Workload& w, std::uint32_t r) {
  if (!w.shared()) return false;
  const std::int32_t* s = w.group_slots.data() + std::size_t{r} * w.group_width;
  for (std::uint32_t i = 0; i < w.group_width; ++i) {
    for (std::uint32_t j = 0; j < i; ++j) {
      if (s[i] >= 0 && s[i] == s[j]) return false;
    }
  }
  return true;
}

GpuRankLp::GpuRankLp(const Topology& topo, engine::LpId id, const Workload* workload,
                     const CollectivePlanner& planner, const FabricParams& fabric,
                     std::shared_ptr<const ProgramIndex> index)
    : topo_(topo), id_(id), workload_(workload), planner_(planner), nic_(topo, id, fabric, *this) {
  if (workload_ != nullptr && id < workload_->ranks) program_ = &workload_->program(id);
  proxy_ps_ = planner_.proxy_op_ps();
  const std::uint32_t n = nodes_size();
  waiting_.assign(n, 0);
  done_flag_.assign(n, 0);
  for (std::uint32_t i = 0; i < n; ++i) waiting_[i] = static_cast<std::uint32_t>((*program_)[i].deps.size());
  if (index != nullptr) {
    if (index->instance.size() != n) throw engine::InternalError("executor: a program index of another program");
    index_ = std::move(index);
  } else if (n > 0) {
    index_ = std::make_shared<const ProgramIndex>(ProgramIndex::build(
        *program_, workload_->groups.size(), [this](const WorkNode& node) { return group_of(node); }));
  } else {
    index_ = std::make_shared<const ProgramIndex>(ProgramIndex{{0}, {}, {}});
  }
  dep_begin_ = index_->dep_begin.data();
  dep_index_ = index_->dep_index.data();
  instance_ = index_->instance.data();
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
    if (!compute_busy_ && dt > 0) {
      exposed_ps_ += dt;
      if (pp_recv_active_ == comm_active_) pp_wait_ps_ += dt;
      // Equal split over the kinds in flight; the dt mod m leftover picoseconds go one each to the
      // first kinds in CommKind order, so the per-kind sums add up to exposed_ps_ exactly.
      SimTime m = 0;
      for (std::uint32_t a : kind_active_) m += a > 0 ? 1 : 0;
      const SimTime share = dt / m;
      SimTime rem = dt % m;
      for (std::size_t k = 0; k < kCommKinds; ++k) {
        if (kind_active_[k] == 0) continue;
        exposed_kind_[k] += share + (rem > 0 ? 1 : 0);
        if (rem > 0) --rem;
      }
    }
  }
  last_change_ = now;
}

void GpuRankLp::node_ready(std::uint32_t n, Context& ctx) {
  const WorkNode& node = (*program_)[n];
  switch (node.type) {
    case NodeType::kCompute:
      if (node.host) {
        host_queue_.push_back(n);
        start_host(ctx);
        return;
      }
      compute_queue_.push_back(n);
      start_compute(ctx);
      return;
    case NodeType::kCollective:
      start_collective(n, ctx);
      return;
    case NodeType::kSend:
      if (trace_on_) node_start_[n] = ctx.now();
      account(ctx.now());
      comm_begin(node.kind);
      start_send(n, ctx);
      return;
    case NodeType::kRecv: {
      if (trace_on_) node_start_[n] = ctx.now();
      account(ctx.now());
      comm_begin(node.kind, is_pp_recv(node));
      const P2pKey key{static_cast<std::uint32_t>(peer_of(node)), node.tag};
      auto it = arrived_.find(key);
      if (it != arrived_.end()) {
        if (--it->second == 0) arrived_.erase(it);
        account(ctx.now());
        comm_end(node.kind, is_pp_recv(node));
        node_done(n, ctx);
      } else {
        waiting_rx_[key].push_back(n);
      }
      return;
    }
  }
}

void GpuRankLp::start_send(std::uint32_t n, Context& ctx) {
  const WorkNode& node = (*program_)[n];
  const std::int64_t latency = planner_.p2p_start_latency_ps(id_, static_cast<std::uint32_t>(peer_of(node)), node.bytes);
  if (latency > 0) {
    ctx.send(id_, ctx.now() + latency, kEvSendLaunch, n);
    return;
  }
  send_now(n, ctx);
}

void GpuRankLp::send_now(std::uint32_t n, Context& ctx) {
  const WorkNode& node = (*program_)[n];
  const auto dst = static_cast<std::uint32_t>(peer_of(node));
  const P2pRoute r = planner_.p2p_route(id_, dst, node.bytes);
  // A relay is used only where it is one: same scale-up domain as this GPU, the receiver outside
  // it (a peer reachable over NVLink goes there directly whatever the planner assumed).
  const bool relay = r.relay != P2pRoute::kDirect && r.relay != id_ && r.relay != dst &&
                     r.relay < topo_.num_gpus() && topo_.same_scaleup_domain(id_, r.relay) &&
                     !topo_.same_scaleup_domain(id_, dst);
  if (!relay) {
    start_flow(dst, node.bytes, kP2pGroup, 0, node.tag, kNoSlot, n, ctx);
    return;
  }
  if (r.chunk_bytes == 0) throw engine::InternalError("p2p_route: relayed send with a 0-byte chunk");
  // The analytical rung has no queues: chunks would all run at once, each alone on its route, and
  // the pipeline would cost nothing. There the relay forwards the whole message once it arrived
  // (store-and-forward per message: an upper bound of the pipelined time).
  const std::uint64_t chunk = fidelity_ == Fidelity::kAnalytical ? std::max<std::uint64_t>(1, node.bytes) : r.chunk_bytes;
  const std::uint64_t chunks = std::max<std::uint64_t>(1, (node.bytes + chunk - 1) / chunk);
  if (chunks > 0xFFFFFFFFull) {
    throw engine::InternalError("p2p_route: more than 2^32 PXN chunks in one send");
  }
  pxn_left_[n] = chunks;
  std::uint64_t left = node.bytes;
  for (std::uint64_t c = 0; c < chunks; ++c) {
    const std::uint64_t b = std::min(left, chunk);
    left -= b;
    start_flow(r.relay, b, kPxnRelayGroup, dst, node.tag, kPxnSendSlot, n, ctx, 0,
               static_cast<std::uint32_t>(chunks));
  }
}

void GpuRankLp::watch_nodes(const std::vector<std::uint32_t>& nodes) {
  watch_slot_.assign(nodes_size(), -1);
  watch_ps_.assign(nodes.size(), -1);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i] >= nodes_size()) throw engine::InternalError("watch_nodes: node index outside the program");
    watch_slot_[nodes[i]] = static_cast<std::int32_t>(i);
  }
}

void GpuRankLp::node_done(std::uint32_t n, Context& ctx) {
  ++done_nodes_;
  if (work_on_) done_work_ += node_work((*program_)[n], work_ps_per_byte_);
  done_flag_[n] = 1;
  if (!watch_slot_.empty() && watch_slot_[n] >= 0) watch_ps_[static_cast<std::size_t>(watch_slot_[n])] = ctx.now();
  for (std::uint32_t k = dep_begin_[n]; k < dep_begin_[n + 1]; ++k) {
    const std::uint32_t d = dep_index_[k];
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
  compute_node_ = n;
  compute_start_ = ctx.now();
  SimTime d = (*program_)[n].duration_ps;
  if (compute_factor_ != 1.0) d = static_cast<SimTime>(std::llround(static_cast<double>(d) * compute_factor_));
  SimTime end = ctx.now() + d;
  if (!throttle_.empty()) {
    end = throttled_end(ctx.now(), d);
    throttle_added_ps_ += end - (ctx.now() + d);
  }
  ctx.send(id_, end, kEvComputeDone, n);
}

SimTime GpuRankLp::throttled_end(SimTime start_ps, SimTime work_ps) const {
  SimTime t = start_ps;
  SimTime work = work_ps;  // full-speed work left (ps)
  for (const ThrottleWindow& w : throttle_) {
    if (work == 0) break;
    if (w.until_ps <= t) continue;
    if (t < w.at_ps) {  // full speed up to the window
      const SimTime gap = w.at_ps - t;
      if (work <= gap) return t + work;
      work -= gap;
      t = w.at_ps;
    }
    // In the window: work advances 1/factor per ps.
    const SimTime span = w.until_ps - t;
    const auto need = static_cast<SimTime>(std::llround(static_cast<double>(work) * w.factor));
    if (need <= span) return t + need;
    const auto done = static_cast<SimTime>(std::llround(static_cast<double>(span) / w.factor));
    work = std::max<SimTime>(0, work - done);
    t = w.until_ps;
  }
  return t + work;
}

void GpuRankLp::start_host(Context& ctx) {
  if (host_busy_ || host_queue_.empty()) return;
  const std::uint32_t n = host_queue_.front();
  host_queue_.pop_front();
  host_busy_ = true;
  host_start_ = ctx.now();
  ctx.send(id_, ctx.now() + (*program_)[n].duration_ps, kEvHostDone, n);
}

std::uint32_t GpuRankLp::slot_of(std::uint32_t group, std::uint32_t instance) {
  const std::uint64_t key = (static_cast<std::uint64_t>(group) << 32) | instance;
  if (key == last_slot_key_) return last_slot_;
  auto [it, inserted] = coll_slot_.try_emplace(key, 0);
  if (inserted) {
    if (!free_slots_.empty()) {
      it->second = free_slots_.back();
      free_slots_.pop_back();
    } else {
      it->second = static_cast<std::uint32_t>(coll_states_.size());
      coll_states_.emplace_back();
    }
  }
  last_slot_key_ = key;
  last_slot_ = it->second;
  hot_slot_ = it->second;
  hot_state_ = &coll_states_[it->second];  // deque: stays valid while slots are added
  return it->second;
}

CollRequest GpuRankLp::coll_request(std::uint32_t n) const {
  const WorkNode& node = (*program_)[n];
  const auto& members = workload_->groups[static_cast<std::size_t>(group_of(node))].ranks;
  const auto pos = std::find(members.begin(), members.end(), id_);
  CollRequest req;
  req.op = node.op;
  req.bytes = node.bytes;
  req.ranks = &members;
  req.my_index = static_cast<std::uint32_t>(pos - members.begin());
  req.root_index = static_cast<std::uint32_t>(std::max(0, node.root));
  return req;
}

void GpuRankLp::start_collective(std::uint32_t n, Context& ctx) {
  const WorkNode& node = (*program_)[n];
  const auto& members = workload_->groups[static_cast<std::size_t>(group_of(node))].ranks;
  const auto pos = std::find(members.begin(), members.end(), id_);
  if (pos == members.end()) {
    throw engine::InternalError("rank " + std::to_string(id_) + " runs a collective of group " +
                                std::to_string(group_of(node)) + " it is not a member of");
  }
  const CollRequest req = coll_request(n);
  const auto group = static_cast<std::uint32_t>(group_of(node));
  const std::uint32_t inst = instance_[n];
  CollectivePartial part{group, inst, node.op, node.bytes,
                         static_cast<std::uint32_t>(members.size()), ctx.now(), ctx.now()};
  RankPlan plan = planner_.plan(req);
  if (fold_ != nullptr) check_fold_plan(plan, members);
  if (plan.empty()) {
    partials_.push_back(part);
    node_done(n, ctx);
    return;
  }
  account(ctx.now());
  comm_begin(workload_->groups[group].kind);
  const std::uint32_t slot = slot_of(group, inst);
  CollState& st = state(slot);
  st.node = n;
  st.plan = std::move(plan);
  st.start = ctx.now();
  st.group = group;
  st.instance = inst;
  st.ring_index = req.my_index;
  if (st.plan.lazy_ring) {
    st.ring = true;
    st.ring_steps = st.plan.lazy_ring->steps;
    st.ring_next = st.plan.lazy_ring->next;
    st.ring_prev = st.plan.lazy_ring->prev;
  }
  const std::int64_t latency = planner_.start_latency_ps(req);
  if (latency > 0) {
    // Messages of this collective that arrive meanwhile wait in st.early (started is false).
    ctx.send(id_, ctx.now() + latency, kEvCollLaunch, slot);
    return;
  }
  begin_collective(slot, ctx);
}

void GpuRankLp::check_fold_plan(const RankPlan& plan, const std::vector<std::uint32_t>& members) const {
  bool crosses = false;
  for (std::uint32_t m : members) crosses = crosses || !fold_->simulated(m);
  if (!crosses) return;
  // A ring step to a rank of image j is delivered as its image under sigma^-j (FoldMap::mirror);
  // that is the receiver's ring message when the rings commute with the shift, which each
  // arrival checks (fold_ring_mismatch).
  if (plan.lazy_ring || plan.lazy_channels) return;
  const char* kind = "a materialized plan (Tree, chain or all-to-all)";
  if (plan.lazy_tree) {
    kind = "an NCCL Tree";
  } else if (plan.lazy_nvls) {
    kind = "NVLS";
  }
  throw engine::InputError("spec", "sim.fold",
                           "rank " + std::to_string(id_) + ": a collective on a communicator of " +
                               std::to_string(members.size()) + " ranks spanning the folded images is planned as " + kind +
                               ", which the DP shift does not map onto itself",
                           "set nccl.NCCL_ALGO: Ring (or simccl.planner: ring), or sim.fold: none");
}

void GpuRankLp::fold_ring_mismatch(std::uint64_t key, std::uint32_t node) const {
  throw engine::InputError("spec", "sim.fold",
                           "rank " + std::to_string(id_) + ": the ring of collective node " + std::to_string(node) +
                               " does not commute with the DP shift (a message from rank " + std::to_string(key >> 32) +
                               " tag " + std::to_string(key & 0xFFFFFFFFu) +
                               " is no ring step of this rank), so its images cannot stand for the other replicas",
                           "set simccl.planner: ring, or sim.fold: none");
}

void GpuRankLp::begin_collective(std::uint32_t slot, Context& ctx) {
  CollState& st = state(slot);
  st.started = true;
  if (st.plan.lazy_ring) {
    start_lazy_ring(slot, ctx);
    return;
  }
  if (st.plan.lazy_channels) {
    start_lazy_channels(slot, ctx);
    return;
  }
  if (st.plan.lazy_tree || st.plan.lazy_nvls) {
    start_lazy_tree(slot, ctx);
    return;
  }
  const std::uint32_t nops = st.plan.size();
  if (st.plan.dep_begin.size() != nops + std::size_t{1} || st.plan.dep_begin.back() != st.plan.dep_index.size()) {
    throw engine::InternalError("rank " + std::to_string(id_) + ": malformed plan (dep_begin must have ops + 1 "
                                "offsets; build plans with RankPlan::add)");
  }
  // Unmet-dependency counts and the dependents CSR (counting sort of the dependency edges).
  st.state.assign(nops, 0);
  st.out_begin.assign(nops + std::size_t{1}, 0);
  for (std::uint32_t o = 0; o < nops; ++o) {
    const auto deps = st.plan.deps(o);
    if (deps.size() > kDepMask) throw engine::InternalError("plan op with too many dependencies");
    st.state[o] = static_cast<std::uint32_t>(deps.size());
    for (std::uint32_t d : deps) {
      if (d >= o) throw engine::InternalError("rank " + std::to_string(id_) + ": plan dependency does not point backwards");
      ++st.out_begin[d + 1];
    }
  }
  for (std::uint32_t o = 0; o < nops; ++o) st.out_begin[o + 1] += st.out_begin[o];
  st.out_index.resize(st.plan.dep_index.size());
  {
    std::vector<std::uint32_t> fill(st.out_begin.begin(), st.out_begin.end() - 1);
    for (std::uint32_t o = 0; o < nops; ++o) {
      for (std::uint32_t d : st.plan.deps(o)) st.out_index[fill[d]++] = o;
    }
  }
  // Receive match index: (peer, tag) -> op, sorted for binary search.
  std::vector<std::pair<std::uint64_t, std::uint32_t>> rx;
  for (std::uint32_t o = 0; o < nops; ++o) {
    const P2pOp& op = st.plan.ops[o];
    if (!op.is_send) rx.emplace_back((static_cast<std::uint64_t>(op.peer) << 32) | op.tag, o);
  }
  if (!std::is_sorted(rx.begin(), rx.end())) std::sort(rx.begin(), rx.end());
  st.recv_key.resize(rx.size());
  st.recv_op.resize(rx.size());
  for (std::size_t i = 0; i < rx.size(); ++i) {
    st.recv_key[i] = rx[i].first;
    st.recv_op[i] = rx[i].second;
  }
  std::vector<std::pair<std::uint64_t, std::uint32_t>>().swap(rx);
  // Messages that arrived before this rank started the collective.
  for (std::uint64_t key : st.early) st.state[recv_of(st, key)] |= kArrived;
  std::vector<std::uint64_t>().swap(st.early);
  // Ready set taken first: ops readied by a completion during this loop must not start twice.
  std::vector<std::uint32_t> roots;
  for (std::uint32_t o = 0; o < nops; ++o) {
    if ((st.state[o] & kDepMask) == 0) roots.push_back(o);
  }
  for (std::uint32_t o : roots) {
    op_ready(slot, o, ctx);
    if (st.completed) break;
  }
}

void GpuRankLp::start_lazy_ring(std::uint32_t slot, Context& ctx) {
  CollState& st = state(slot);
  const LazyRing& r = *st.plan.lazy_ring;
  if (ring_flows_ == RingFlows::kStream && fidelity_ != Fidelity::kPacket && r.steps >= 2 && r.recv_bytes &&
      start_ring_stream(slot, ctx)) {
    return;
  }
  st.ring_got.assign((std::size_t{r.steps} + 63) / 64, 0);
  std::vector<std::uint64_t> early;
  early.swap(st.early);
  for (std::uint64_t key : early) {
    const std::uint64_t k = key & 0xFFFFFFFFu;
    if ((key >> 32) != r.prev || k >= r.steps || (st.ring_got[k / 64] >> (k % 64) & 1u)) {
      throw engine::InternalError("rank " + std::to_string(id_) + ": message from rank " + std::to_string(key >> 32) +
                                  " tag " + std::to_string(k) + " matches no receive of ring collective node " +
                                  std::to_string(st.node));
    }
    st.ring_got[k / 64] |= std::uint64_t{1} << (k % 64);
  }
  st.ring_word_idx = 0;
  st.ring_word = st.ring_got[0];  // steps > 0 (an empty plan never starts)
  // The materialized plan's roots in index order: send 0, then the receives (ops 2k+1); a
  // receive whose message already came completes at once and readies send k+1.
  ring_send(slot, 0, ctx);
  const std::uint32_t steps = r.steps;
  for (std::uint32_t k = 0; k < steps && !st.completed; ++k) {
    if (st.ring_has(k)) op_done(slot, 2 * k + 1, ctx);
  }
}

// Streamed ring (ring_stream.hpp): the rank's one flow to next carries every step's bytes (tag
// 0, op 0 for its send completion); the one flow from prev is the only receive.
bool GpuRankLp::start_ring_stream(std::uint32_t slot, Context& ctx) {
  CollState& st = state(slot);
  const LazyRing& r = *st.plan.lazy_ring;
  std::uint64_t out_bytes = 0, in_bytes = 0, min_step = ~std::uint64_t{0};
  for (std::uint32_t k = 0; k < r.steps; ++k) {
    const std::uint64_t o = r.step_bytes(k), i = r.recv_bytes(k);
    out_bytes += o;
    in_bytes += i;
    min_step = std::min({min_step, o, i});
  }
  const auto& members = workload_->groups[st.group].ranks;
  auto it = ring_links_.find(st.group);
  if (it == ring_links_.end()) it = ring_links_.emplace(st.group, RingLinkClasses(topo_, members)).first;
  if (!ring_streams(it->second, min_step)) return false;
  const RingStreamTiming t =
      ring_stream_timing(topo_, members, it->second, st.ring_index, r.steps, r.recv_bytes(r.steps - 1), in_bytes);
  st.stream = true;
  st.stream_in = -1;
  st.stream_out = -1;
  st.stream_wait = std::max<SimTime>(0, t.chain_ps - t.in_ps);
  st.token_rounds = static_cast<std::uint8_t>(ring_token_rounds(static_cast<std::uint32_t>(members.size())));
  std::vector<std::uint64_t> early;
  early.swap(st.early);
  for (std::uint64_t key : early) {
    if ((key >> 32) != r.prev || (key & 0xFFFFFFFFu) != 0 || st.stream_in >= 0) {
      throw engine::InternalError("rank " + std::to_string(id_) + ": message from rank " + std::to_string(key >> 32) +
                                  " tag " + std::to_string(key & 0xFFFFFFFFu) +
                                  " matches no receive of streamed ring collective node " + std::to_string(st.node));
    }
    st.stream_in = st.early_at;  // the only message that can have come early
  }
  start_flow(st.ring_next, out_bytes, st.group, st.instance, 0, slot, 0, ctx);
  return true;
}

void GpuRankLp::ring_stream_check(std::uint32_t slot, Context& ctx) {
  CollState& st = state(slot);
  if (st.completed || st.own_known || st.stream_in < 0 || st.stream_out < 0) return;
  st.own_known = true;
  st.stream_value = std::max({st.stream_value, st.stream_in + st.stream_wait, st.stream_out});
  ring_token_advance(slot, ctx);
}

// Round r (0 <= r < R = ceil(log2 n)): this rank sends the largest completion term it knows to
// ring position index + 2^r once it knows its own term and received round r - 1 (from position
// index - 2^(r-1)); after R rounds it knows the maximum over all n positions (those within
// 2^R - 1 >= n - 1 hops upstream).
void GpuRankLp::ring_token_advance(std::uint32_t slot, Context& ctx) {
  CollState& st = state(slot);
  if (!st.own_known || st.completed || st.token_round > st.token_rounds) return;  // not yet, or done
  const auto& members = workload_->groups[st.group].ranks;
  const auto n = static_cast<std::uint32_t>(members.size());
  while (true) {
    const std::uint32_t r = st.token_round;
    if (r > 0) {
      if (st.tokens.size() < r || st.tokens[r - 1] < 0) return;  // round r - 1 not in yet
      st.stream_value = std::max(st.stream_value, st.tokens[r - 1]);
    }
    if (r == st.token_rounds) break;
    const std::uint32_t to = members[(st.ring_index + (std::uint32_t{1} << r)) % n];
    ctx.send(to, ctx.now() + ring_token_delay_ps(topo_, fidelity_, id_, to), kEvRingToken,
             RingToken{st.group, st.instance, r, st.stream_value});
    ++st.token_round;
  }
  st.token_round = static_cast<std::uint8_t>(st.token_rounds + 1);  // done: no more rounds
  if (st.stream_value > ctx.now()) {
    ctx.send(id_, st.stream_value, kEvRingStreamDone, slot);
  } else {
    finish_collective(slot, ctx);
  }
}

void GpuRankLp::ring_token(const engine::Event& ev, Context& ctx) {
  const RingToken tok = ev.get<RingToken>();
  const std::uint32_t slot = slot_of(tok.group, tok.instance);
  CollState& st = state(slot);
  if (tok.round >= kMaxRingTokenRounds || st.completed) {
    throw engine::InternalError("rank " + std::to_string(id_) + ": ring token of round " + std::to_string(tok.round) +
                                " for a collective that cannot take it");
  }
  if (st.tokens.empty()) st.tokens.assign(kMaxRingTokenRounds, -1);
  if (st.tokens[tok.round] >= 0) {
    throw engine::InternalError("rank " + std::to_string(id_) + ": duplicate ring token of round " +
                                std::to_string(tok.round));
  }
  st.tokens[tok.round] = tok.value;
  if (st.started && st.stream) ring_token_advance(slot, ctx);
}

// Lazy NCCL ring family. Same order of sends as the materialized plan: at the start every
// channel's first send in channel order (the plan's roots in index order; no other send can be
// ready then, each waits for its channel's previous send); afterwards a completed send or an
// arrived receive can ready only the next send of its own channel.
void GpuRankLp::start_lazy_channels(std::uint32_t slot, Context& ctx) {
  CollState& st = state(slot);
  const LazyChannelRing& r = *st.plan.lazy_channels;
  st.cursor.assign(r.channels, RingCursor{});
  st.in_flight.assign(r.channels, 0);
  st.got_word.assign(r.channels + std::size_t{1}, 0);
  st.recvs_left = 0;
  for (std::uint32_t c = 0; c < r.channels; ++c) {
    st.got_word[c + 1] = st.got_word[c] + (r.recv_slots(c) + 63) / 64;
    st.recvs_left += r.recv_count(c);
    r.first(c, st.cursor[c]);
  }
  st.ring_got.assign(st.got_word.back(), 0);
  st.mirror_from.clear();
  if (fold_ != nullptr) {
    // sim.fold: dp: the member index of the rank whose sends arrive mirrored on each channel (the
    // representative of a predecessor in another image), where that is not this rank.
    const auto& members = workload_->groups[st.group].ranks;
    for (std::uint32_t c = 0; c < r.channels; ++c) {
      const std::uint32_t from = fold_->simulated(r.prev[c]) ? id_ : fold_->rep(r.prev[c]);
      if (from == id_) continue;
      if (st.mirror_from.empty()) st.mirror_from.assign(r.channels, kNoMember);
      const auto it = std::find(members.begin(), members.end(), from);
      if (it == members.end() || !r.member_piece) fold_ring_mismatch(std::uint64_t{r.prev[c]} << 32, st.node);
      st.mirror_from[c] = static_cast<std::uint32_t>(it - members.begin());
    }
  }
  std::vector<std::uint64_t> early;
  early.swap(st.early);
  st.started = false;  // channel_message only records these
  for (std::uint64_t key : early) channel_message(slot, key, ctx);
  st.started = true;
  for (std::uint32_t c = 0; c < r.channels && !st.completed; ++c) channel_send(slot, c, ctx);
}

// Lazy Tree / NVLS / NVLSTree: the materialized executor's steps (begin_collective, op_ready, op_done,
// coll_message) with ops, dependency counts and dependents computed by LazyTree / LazyNvls, so the sends
// start in the same order.
void GpuRankLp::start_lazy_tree(std::uint32_t slot, Context& ctx) {
  CollState& st = state(slot);
  const std::uint32_t total = with_dag(st.plan, [&](const auto& t) {
    st.tree_state.assign(t.total, 0);
    for (std::uint32_t o = 0; o < t.total; ++o) st.tree_state[o] = static_cast<std::uint8_t>(t.ndeps(o));
    for (std::uint64_t key : st.early) {
      std::uint32_t o = 0;
      if (!t.recv_op(static_cast<std::uint32_t>(key >> 32), static_cast<std::uint32_t>(key & 0xFFFFFFFFu), o)) {
        throw engine::InternalError("rank " + std::to_string(id_) + ": message from rank " + std::to_string(key >> 32) +
                                    " tag " + std::to_string(key & 0xFFFFFFFFu) +
                                    " matches no receive of collective node " + std::to_string(st.node));
      }
      st.tree_state[o] |= kTreeArrived;
    }
    return t.total;
  });
  std::vector<std::uint64_t>().swap(st.early);
  // The roots (no dependencies) in index order, as the materialized plan readies them. A
  // completion inside releases the plan: test `completed` before touching it again.
  for (std::uint32_t o = 0; o < total && !st.completed; ++o) {
    if (with_dag(st.plan, [o](const auto& t) { return t.ndeps(o); }) == 0) tree_ready(slot, o, ctx);
  }
}

void GpuRankLp::tree_ready(std::uint32_t slot, std::uint32_t op, Context& ctx) {
  CollState& st = state(slot);
  const P2pOp o = with_dag(st.plan, [op](const auto& t) { return t.op(op); });
  if (o.is_send) {
    if (o.delay_ps > 0) {
      ctx.send(id_, ctx.now() + o.delay_ps, kEvStepDelay, StepDelay{slot, op});
      return;
    }
    start_flow(o.peer, o.bytes, st.group, st.instance, o.tag, slot, op, ctx, o.channel, 0, o.nvls);
    return;
  }
  if (st.tree_state[op] & kTreeArrived) {
    tree_done(slot, op, ctx);
  } else {
    st.tree_state[op] |= kTreePosted;
  }
}

void GpuRankLp::tree_message(std::uint32_t slot, std::uint64_t key, Context& ctx) {
  CollState& st = state(slot);
  std::uint32_t op = 0;
  if (!with_dag(st.plan, [&](const auto& t) {
        return t.recv_op(static_cast<std::uint32_t>(key >> 32), static_cast<std::uint32_t>(key & 0xFFFFFFFFu), op);
      })) {
    throw engine::InternalError("rank " + std::to_string(id_) + ": message from rank " + std::to_string(key >> 32) +
                                " tag " + std::to_string(key & 0xFFFFFFFFu) +
                                " matches no receive of collective node " + std::to_string(st.node));
  }
  std::uint8_t& s = st.tree_state[op];
  if (s & (kTreeArrived | kTreeDone)) {
    throw engine::InternalError("rank " + std::to_string(id_) + ": duplicate message from rank " +
                                std::to_string(key >> 32) + " tag " + std::to_string(key & 0xFFFFFFFFu));
  }
  if (s & kTreePosted) {
    tree_done(slot, op, ctx);
  } else {
    s |= kTreeArrived;
  }
}

void GpuRankLp::tree_done(std::uint32_t slot, std::uint32_t op, Context& ctx) {
  CollState& st = state(slot);
  ++st.done_ops;
  std::uint32_t out[3] = {0, 0, 0};
  std::uint32_t total = 0;
  const std::uint32_t n = with_dag(st.plan, [&](const auto& t) {
    total = t.total;
    return t.dependents(op, out);
  });
  st.tree_state[op] = static_cast<std::uint8_t>((st.tree_state[op] & ~kTreePosted) | kTreeDone);
  for (std::uint32_t e = 0; e < n; ++e) {
    if ((--st.tree_state[out[e]] & kTreeDepMask) == 0) {
      tree_ready(slot, out[e], ctx);
      if (st.completed) return;  // a nested completion released the state
    }
  }
  if (!st.completed && st.done_ops == total) finish_collective(slot, ctx);
}

void GpuRankLp::channel_send(std::uint32_t slot, std::uint32_t c, Context& ctx) {
  CollState& st = state(slot);
  if (!st.started || st.completed || st.in_flight[c] || st.cursor[c].done) return;
  const LazyChannelRing& r = *st.plan.lazy_channels;
  const RingCursor cur = st.cursor[c];
  std::uint64_t need = 0;
  if (r.waits_for(c, cur, need) && !(st.ring_got[st.got_word[c] + need / 64] >> (need % 64) & 1u)) return;
  st.in_flight[c] = 1;  // before start_flow: a completion may come back synchronously
  channel_start(slot, c, ctx);
}

void GpuRankLp::channel_start(std::uint32_t slot, std::uint32_t c, Context& ctx) {
  const CollState& st = state(slot);
  const LazyChannelRing& r = *st.plan.lazy_channels;
  const RingCursor cur = st.cursor[c];
  start_flow(r.next[c], r.wire(r.send_data(c, cur)), static_cast<std::uint32_t>(group_of((*program_)[st.node])),
             instance_[st.node], r.tag(c, cur.l, cur.k, cur.j), slot, c, ctx, static_cast<std::uint16_t>(c));
}

void GpuRankLp::channel_message(std::uint32_t slot, std::uint64_t key, Context& ctx) {
  CollState& st = state(slot);
  const LazyChannelRing& r = *st.plan.lazy_channels;
  if (st.started && !r.recv_delay_ps.empty()) {
    // The receive completes the channel's hop latency after the arrival (tags are channel-major,
    // LazyChannelRing::tag; a tag beyond the channels is reported by channel_arrived).
    const std::uint64_t per_c = (r.max_loops + 1) * r.steps * r.max_slices;
    const auto c = static_cast<std::uint32_t>((key & 0xFFFFFFFFu) / per_c);
    if (const std::int64_t delay = r.recv_delay(c); delay > 0) {
      ctx.send(id_, ctx.now() + delay, kEvRecvDelay, RecvDelay{key, slot});
      return;
    }
  }
  channel_arrived(slot, key, ctx);
}

void GpuRankLp::channel_arrived(std::uint32_t slot, std::uint64_t key, Context& ctx) {
  CollState& st = state(slot);
  const LazyChannelRing& r = *st.plan.lazy_channels;
  std::uint32_t c = 0;
  std::uint64_t rs = 0;
  if (fold_ != nullptr && fold_->replica(static_cast<std::uint32_t>(key >> 32)) != 0 &&
      mirrored_channel_message(slot, key, ctx)) {
    return;
  }
  if (!r.decode(static_cast<std::uint32_t>(key & 0xFFFFFFFFu), c, rs) || (key >> 32) != r.prev[c] ||
      (st.ring_got[st.got_word[c] + rs / 64] >> (rs % 64) & 1u)) {
    if (fold_ != nullptr) fold_ring_mismatch(key, st.node);
    throw engine::InternalError("rank " + std::to_string(id_) + ": message from rank " + std::to_string(key >> 32) +
                                " tag " + std::to_string(key & 0xFFFFFFFFu) +
                                " matches no open receive of collective node " + std::to_string(st.node));
  }
  st.ring_got[st.got_word[c] + rs / 64] |= std::uint64_t{1} << (rs % 64);
  --st.recvs_left;
  if (!st.started) return;  // replayed at the start
  channel_send(slot, c, ctx);
  if (!st.completed && st.recvs_left == 0) {
    bool idle = true;
    for (std::uint32_t x = 0; x < r.channels && idle; ++x) idle = st.cursor[x].done && !st.in_flight[x];
    if (idle) finish_collective(slot, ctx);
  }
}

bool GpuRankLp::mirrored_channel_message(std::uint32_t slot, std::uint64_t key, Context& ctx) {
  CollState& st = state(slot);
  const LazyChannelRing& r = *st.plan.lazy_channels;
  // The tag is this rank's own send (c, l, k, j) as its image from the predecessor.
  const auto t = static_cast<std::uint32_t>(key & 0xFFFFFFFFu);
  const std::uint64_t per_c = (r.max_loops + 1) * r.steps * r.max_slices;
  const auto c = static_cast<std::uint32_t>(t / per_c);
  if (c >= r.channels || (key >> 32) != r.prev[c]) return false;
  const std::uint64_t rest = t % per_c;
  const auto j = static_cast<std::uint32_t>(rest % r.max_slices);
  const auto k = static_cast<std::uint32_t>((rest / r.max_slices) % r.steps);
  const std::uint64_t l = rest / (std::uint64_t{r.max_slices} * r.steps);
  if (l >= r.nloops[c]) return false;
  // The simulated sender: this rank when the communicator has one member per image, else the
  // representative of its predecessor (start_lazy_channels: st.mirror_from).
  const std::uint32_t from = st.mirror_from.empty() ? kNoMember : st.mirror_from[c];
  const std::uint32_t ns = r.nslices(from == kNoMember ? r.piece(c, l, k, false) : r.member_piece(c, l, k, from));
  const std::uint32_t nr = r.nslices(r.piece(c, l, k, true));
  if (ns == nr) return false;  // the ordinary receive
  // The predecessor's piece at (l, k) has another slice count than this rank's (a ring's pieces
  // differ where the buffer does not split evenly): its slices j < min(ns, nr) arrive with this
  // rank's slices j, and the rest with this rank's last slice.
  std::uint32_t lo = j, hi = j + 1;
  if (j >= nr) lo = hi = 0;
  if (j + 1 == ns && nr > ns) hi = nr;
  for (std::uint32_t x = lo; x < hi; ++x) {
    const std::uint64_t rs = r.recv_index(l, k, x);
    std::uint64_t& word = st.ring_got[st.got_word[c] + rs / 64];
    if (word >> (rs % 64) & 1u) {
      throw engine::InternalError("rank " + std::to_string(id_) + ": mirrored slice received twice");
    }
    word |= std::uint64_t{1} << (rs % 64);
    --st.recvs_left;
  }
  if (!st.started) return true;
  channel_send(slot, c, ctx);
  if (!st.completed && st.recvs_left == 0) {
    bool idle = true;
    for (std::uint32_t x = 0; x < r.channels && idle; ++x) idle = st.cursor[x].done && !st.in_flight[x];
    if (idle) finish_collective(slot, ctx);
  }
  return true;
}

void GpuRankLp::ring_send(std::uint32_t slot, std::uint32_t step, Context& ctx) {
  const CollState& st = state(slot);
  start_flow(st.ring_next, st.plan.lazy_ring->step_bytes(step), st.group, st.instance, step, slot, 2 * step, ctx);
}

void GpuRankLp::op_ready(std::uint32_t slot, std::uint32_t op, Context& ctx) {
  const std::uint32_t n = state(slot).node;
  const WorkNode& node = (*program_)[n];
  const P2pOp& o = state(slot).plan.ops[op];
  const auto group = static_cast<std::uint32_t>(group_of(node));
  if (o.is_send) {
    if (o.delay_ps > 0) {
      ctx.send(id_, ctx.now() + o.delay_ps, kEvStepDelay, StepDelay{slot, op});
      return;
    }
    start_flow(o.peer, o.bytes, group, instance_[n], o.tag, slot, op, ctx, o.channel, 0, o.nvls);
    return;
  }
  CollState& st = state(slot);
  if (st.state[op] & kArrived) {
    op_done(slot, op, ctx);
  } else {
    st.state[op] |= kPosted;
  }
}

void GpuRankLp::delayed_send(const StepDelay& d, Context& ctx) {
  CollState& st = state(d.slot);
  if (st.plan.lazy_channels) {
    channel_start(d.slot, d.idx, ctx);
    return;
  }
  if (st.plan.lazy_tree || st.plan.lazy_nvls) {
    const P2pOp o = with_dag(st.plan, [&d](const auto& t) { return t.op(d.idx); });
    start_flow(o.peer, o.bytes, st.group, st.instance, o.tag, d.slot, d.idx, ctx, o.channel, 0, o.nvls);
    return;
  }
  const WorkNode& node = (*program_)[st.node];
  const P2pOp& o = st.plan.ops[d.idx];
  if (!o.is_send) {  // a receive's delay after its message arrived
    recv_arrived(d.slot, d.idx, ctx);
    return;
  }
  start_flow(o.peer, o.bytes, static_cast<std::uint32_t>(group_of(node)), instance_[st.node], o.tag, d.slot, d.idx, ctx,
             o.channel, 0, o.nvls);
}

std::uint32_t GpuRankLp::recv_of(const CollState& st, std::uint64_t key) const {
  const auto it = std::lower_bound(st.recv_key.begin(), st.recv_key.end(), key);
  if (it == st.recv_key.end() || *it != key) {
    throw engine::InternalError("rank " + std::to_string(id_) + ": message from rank " + std::to_string(key >> 32) +
                                " tag " + std::to_string(key & 0xFFFFFFFFu) +
                                " matches no receive of collective node " + std::to_string(st.node));
  }
  return st.recv_op[static_cast<std::size_t>(it - st.recv_key.begin())];
}

void GpuRankLp::coll_message(std::uint32_t slot, std::uint64_t key, Context& ctx) {
  CollState& st = state(slot);
  if (!st.started) {
    st.early.push_back(key);
    st.early_at = ctx.now();
    return;
  }
  if (st.completed) {
    throw engine::InternalError("rank " + std::to_string(id_) + ": message from rank " + std::to_string(key >> 32) +
                                " for collective node " + std::to_string(st.node) + " after it completed");
  }
  if (st.stream) {
    if ((key >> 32) != st.ring_prev || (key & 0xFFFFFFFFu) != 0 || st.stream_in >= 0) {
      throw engine::InternalError("rank " + std::to_string(id_) + ": message from rank " + std::to_string(key >> 32) +
                                  " tag " + std::to_string(key & 0xFFFFFFFFu) +
                                  " matches no open receive of streamed ring collective node " + std::to_string(st.node));
    }
    st.stream_in = ctx.now();
    ring_stream_check(slot, ctx);
    return;
  }
  if (st.ring) {
    const std::uint64_t k = key & 0xFFFFFFFFu;
    if ((key >> 32) != st.ring_prev || k >= st.ring_steps ||
        st.ring_has(k)) {
      if (fold_ != nullptr) fold_ring_mismatch(key, st.node);
      throw engine::InternalError("rank " + std::to_string(id_) + ": message from rank " + std::to_string(key >> 32) +
                                  " tag " + std::to_string(k) + " matches no open receive of ring collective node " +
                                  std::to_string(st.node));
    }
    st.ring_set(k);
    op_done(slot, static_cast<std::uint32_t>(2 * k + 1), ctx);
    return;
  }
  if (st.plan.lazy_channels) {
    channel_message(slot, key, ctx);
    return;
  }
  if (st.plan.lazy_tree || st.plan.lazy_nvls) {
    tree_message(slot, key, ctx);
    return;
  }
  const std::uint32_t op = recv_of(st, key);
  if (const std::int64_t delay = st.plan.ops[op].delay_ps; delay > 0) {
    ctx.send(id_, ctx.now() + delay, kEvStepDelay, StepDelay{slot, op});
    return;
  }
  recv_arrived(slot, op, ctx);
}

void GpuRankLp::recv_arrived(std::uint32_t slot, std::uint32_t op, Context& ctx) {
  CollState& st = state(slot);
  std::uint32_t& s = st.state[op];
  if (s & (kArrived | kOpDone)) {
    throw engine::InternalError("rank " + std::to_string(id_) + ": duplicate message for receive " +
                                std::to_string(op) + " of collective node " + std::to_string(st.node));
  }
  if (s & kPosted) {
    op_done(slot, op, ctx);
  } else {
    s |= kArrived;
  }
}

void GpuRankLp::op_done(std::uint32_t slot, std::uint32_t op, Context& ctx) {
  CollState& st2 = state(slot);  // deque: stays valid while slots are added
  if (st2.stream) {  // the stream's send completed (its only op besides the receive)
    st2.stream_out = ctx.now();
    ring_stream_check(slot, ctx);
    return;
  }
  if (st2.ring) {
    // Lazy ring: op 2k+1 (receive of step k) readies op 2k+2 (send of step k+1).
    ++st2.done_ops;
    const std::uint32_t steps = st2.ring_steps;
    if ((op & 1u) != 0 && op / 2 + 1 < steps) ring_send(slot, op / 2 + 1, ctx);
    if (!st2.completed && st2.done_ops == 2 * steps) finish_collective(slot, ctx);
    return;
  }
  if (st2.plan.lazy_channels) {
    // Lazy channels: `op` is the channel whose send completed.
    const LazyChannelRing& r = *st2.plan.lazy_channels;
    st2.in_flight[op] = 0;
    r.advance(op, st2.cursor[op]);
    channel_send(slot, op, ctx);
    if (!st2.completed && st2.recvs_left == 0) {
      bool idle = true;
      for (std::uint32_t x = 0; x < r.channels && idle; ++x) idle = st2.cursor[x].done && !st2.in_flight[x];
      if (idle) finish_collective(slot, ctx);
    }
    return;
  }
  if (st2.plan.lazy_tree || st2.plan.lazy_nvls) {
    tree_done(slot, op, ctx);
    return;
  }
  ++st2.done_ops;
  const std::uint32_t total = st2.plan.size();
  {
    st2.state[op] = (st2.state[op] & ~kPosted) | kOpDone;
    for (std::uint32_t e = st2.out_begin[op]; e < st2.out_begin[op + 1]; ++e) {
      const std::uint32_t d = st2.out_index[e];
      if ((--st2.state[d] & kDepMask) == 0) {
        op_ready(slot, d, ctx);
        // A nested completion released the state: every op, so every dependent, is done.
        if (st2.completed) return;
      }
    }
  }
  if (!st2.completed && st2.done_ops == total) finish_collective(slot, ctx);
}

void GpuRankLp::finish_collective(std::uint32_t slot, Context& ctx) {
  CollState& st2 = state(slot);
  {
    st2.completed = true;
    const WorkNode& node = (*program_)[st2.node];
    account(ctx.now());
    comm_end(kind_of(node));
    trace_add(st2.node, TraceInterval::kCollective, instance_[st2.node], st2.start, ctx.now());
    partials_.push_back(CollectivePartial{static_cast<std::uint32_t>(group_of(node)), instance_[st2.node],
                                          node.op, node.bytes,
                                          static_cast<std::uint32_t>(
                                              workload_->groups[static_cast<std::size_t>(group_of(node))].ranks.size()),
                                          st2.start, ctx.now()});
    st2.plan.release();
    std::vector<std::uint32_t>().swap(st2.state);
    std::vector<std::uint32_t>().swap(st2.out_begin);
    std::vector<std::uint32_t>().swap(st2.out_index);
    std::vector<std::uint64_t>().swap(st2.recv_key);
    std::vector<std::uint32_t>().swap(st2.recv_op);
    std::vector<std::uint64_t>().swap(st2.ring_got);
    std::vector<RingCursor>().swap(st2.cursor);
    std::vector<std::uint64_t>().swap(st2.got_word);
    std::vector<std::uint8_t>().swap(st2.in_flight);
    std::vector<std::uint8_t>().swap(st2.tree_state);
    coll_slot_.erase((static_cast<std::uint64_t>(static_cast<std::uint32_t>(group_of(node))) << 32) | instance_[st2.node]);
    last_slot_key_ = ~std::uint64_t{0};
    retired_slots_.push_back(slot);
    has_retired_ = true;
    node_done(st2.node, ctx);
  }
}

engine::SimTime GpuRankLp::proxy_acquire(engine::SimTime now) {
  proxy_free_ = std::max(now, proxy_free_) + proxy_ps_;
  return proxy_free_;
}

void GpuRankLp::start_flow(std::uint32_t dst, std::uint64_t bytes, std::uint32_t group,
                           std::uint32_t instance, std::int64_t tag, std::uint32_t slot,
                           std::uint32_t op_or_node, Context& ctx, std::uint16_t channel,
                           std::uint32_t aux, std::uint8_t nvls) {
  if (nvls == kNvlsNone && dst != id_ && proxy_defers(dst)) {
    // The proxy posts the send (its events come back in posting order: each is later than the
    // previous one by proxy_ps_ > 0).
    ctx.send(id_, proxy_acquire(ctx.now()), kEvProxySend,
             ProxySend{bytes, tag, dst, group, instance, slot, op_or_node, aux, channel, nvls});
    return;
  }
  start_flow_now(dst, bytes, group, instance, tag, slot, op_or_node, ctx, channel, aux, nvls);
}

void GpuRankLp::start_flow_now(std::uint32_t dst, std::uint64_t bytes, std::uint32_t group,
                               std::uint32_t instance, std::int64_t tag, std::uint32_t slot,
                               std::uint32_t op_or_node, Context& ctx, std::uint16_t channel,
                               std::uint32_t aux, std::uint8_t nvls) {
  if (bytes > kMaxFlowBytes) {
    throw engine::InputError("workload", "rank " + std::to_string(id_),
                             "a message of " + std::to_string(bytes) + " bytes to rank " + std::to_string(dst) +
                                 " exceeds the 1 TiB per-message limit (models/core/packet.hpp kMaxFlowBytes)",
                             "split the transfer");
  }
  if (aux >= (1u << 24)) {
    throw engine::InputError("workload", "rank " + std::to_string(id_),
                             "a PXN message of more than 2^24 chunks", "raise NCCL_P2P_NET_CHUNKSIZE");
  }
  const std::uint64_t flow_id = (static_cast<std::uint64_t>(id_) << 32) | next_flow_++;
  // The coarse rungs' flow template (the fields every part shares).
  auto coarse_head = [&](std::uint32_t to) {
    Packet head;
    head.flow_id = flow_id;
    head.flow_bytes = bytes;
    head.flow_start = ctx.now();
    head.tag = tag;
    head.src_rank = id_;
    head.dst_rank = to;
    head.group = group;
    head.instance = instance;
    return head;
  };
  if (nvls != kNvlsNone && fidelity_ != Fidelity::kPacket) {
    // NVLS at the coarse rungs: one flow into the NVSwitch on the pseudo-channel of its mode
    // (flow_model.hpp coarse_nvls); the network LP (flow) or the owner (analytical) reduces,
    // multicasts go to every member. Multicast flows are addressed to the sender itself.
    Packet head = coarse_head(nvls == kNvlsMulticast ? id_ : dst);
    const std::uint32_t ch = (nvls == kNvlsMulticast ? 0xC000u : 0x8000u) | (channel & 0x3FFFu);
    head.conn = coarse_conn(ch, nvls == kNvlsMulticast ? (group & 0xFFu) : 0u, 1);
    if (coarse_sends_.empty()) coarse_base_ = next_flow_ - 1;
    if (next_flow_ - 1 != coarse_base_ + coarse_sends_.size()) {
      throw engine::InternalError("gpu " + std::to_string(id_) + ": coarse flow counter out of step");
    }
    coarse_sends_.push_back(CoarseSend{slot, op_or_node, 1});
    if (fidelity_ == Fidelity::kFlow) {
      flow_source_.post(topo_, net_lp_, head, ctx, fold_);
    } else {
      start_coarse_flow(topo_, fidelity_, net_lp_, head, ctx, &port_free_, &workload_->groups[group].ranks, fold_);
    }
    return;
  }
  if (fidelity_ != Fidelity::kPacket) {
    // The message rides the same queue pairs as at the packet level (same split over QPs, same
    // round robin, same UDP source port, so the same ECMP path); each part is one flow.
    Nic::Split split;
    if (dst == coarse_dst_ && coarse_split_.qps == 1) {
      split = coarse_split_;  // one QP: every message whole on QP 0, nothing to advance
    } else {
      split = nic_.split_message(dst, bytes, channel);
      coarse_dst_ = dst;
      coarse_split_ = split;
    }
    Packet head = coarse_head(dst);
    head.aux = aux;
    if (coarse_sends_.empty()) coarse_base_ = next_flow_ - 1;
    if (next_flow_ - 1 != coarse_base_ + coarse_sends_.size()) {
      throw engine::InternalError("gpu " + std::to_string(id_) + ": coarse flow counter out of step");
    }
    coarse_sends_.push_back(CoarseSend{slot, op_or_node, split.parts});
    for (std::uint32_t i = 0; i < split.parts; ++i) {
      const std::uint32_t k = (split.first_k + i) % split.qps;
      head.conn = coarse_conn(channel, k, split.parts);
      head.flow_hash = Nic::qp_flow_hash(id_, dst, static_cast<std::uint32_t>(channel) << 16 | k, topo_.spec().seed);
      if (fidelity_ == Fidelity::kFlow) {
        flow_source_.post(topo_, net_lp_, head, ctx, fold_);
      } else {
        start_coarse_flow(topo_, fidelity_, net_lp_, head, ctx, &port_free_, nullptr, fold_);
      }
    }
    return;
  }
  MsgMeta meta{flow_id, tag, group, instance, slot, op_or_node, channel, aux};
  if (nvls != kNvlsNone) {
    meta.nvls = nvls;
    meta.members = &workload_->groups[group].ranks;
  }
  nic_.send_message(dst, bytes, meta, ctx);
}

void GpuRankLp::on_send_complete(std::uint32_t slot, std::uint32_t idx, Context& ctx) {
  if (slot == kRelaySlot) return;  // a forwarded chunk left: nothing of this rank's waits on it
  if (slot == kPxnSendSlot) {
    // A relayed Send completes when its last chunk left this GPU (the rule of every send).
    auto it = pxn_left_.find(idx);
    if (it == pxn_left_.end()) throw engine::InternalError("gpu " + std::to_string(id_) + ": unknown PXN send");
    if (--it->second > 0) return;
    pxn_left_.erase(it);
    slot = kNoSlot;
  }
  if (slot == kNoSlot) {
    account(ctx.now());
    comm_end((*program_)[idx].kind);
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
  flow_digest_.add(rec);
  if (!keep_flows_) {
    on_message(p, ctx);
    return;
  }
  rec.first_byte_ps = first;
  const bool p2p = p.group == kP2pGroup || p.group == kPxnRelayGroup || p.group == kPxnDeliverGroup;
  rec.group = p2p ? kP2pGroup : p.group;  // PXN legs are point-to-point flows in the output
  rec.instance = p2p ? 0 : p.instance;
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
  if (p.src_rank == p.dst_rank) {
    // A flow from a GPU to itself crosses no link: it has no ideal path to compare with, so its
    // ideal FCT is 0 and its slowdown 1 by definition (docs/hdf5_schema.md, /flows).
    rec.ideal_ps = 0;
    rec.slowdown = 1.0;
  } else {
    rec.ideal_ps = engine::serialization_ps(p.flow_bytes, bottleneck) + latency;
    rec.slowdown = rec.ideal_ps > 0 ? static_cast<double>(rec.fct_ps) / static_cast<double>(rec.ideal_ps) : 1.0;
  }
  flows_.push_back(rec);
  on_message(p, ctx);
}

void GpuRankLp::on_message(const Packet& p, Context& ctx) {
  if (p.src_rank != id_ && proxy_defers(p.src_rank)) {
    ctx.send(id_, proxy_acquire(ctx.now()), kEvProxyRecv, p);
    return;
  }
  on_message_now(p, ctx);
}

void GpuRankLp::on_message_now(const Packet& p, Context& ctx) {
  if (p.group != kP2pGroup && p.group != kPxnRelayGroup && p.group != kPxnDeliverGroup) {
    if (p.tag < 0 || p.tag > 0xFFFFFFFFll) throw engine::InternalError("collective message with a tag beyond 32 bits");
    coll_message(slot_of(p.group, p.instance), (static_cast<std::uint64_t>(p.src_rank) << 32) | static_cast<std::uint64_t>(p.tag), ctx);
    return;
  }
  if (p.group == kPxnRelayGroup) {
    // PXN relay: forward the chunk over this GPU's own NIC to its receiver (p.instance).
    start_flow(p.instance, p.flow_bytes, kPxnDeliverGroup, p.src_rank, p.tag, kRelaySlot, 0, ctx, 0, p.aux);
    return;
  }
  if (p.group == kPxnDeliverGroup) {
    const P2pKey key{p.instance, p.tag};
    auto it = pxn_got_.try_emplace(key, 0).first;
    if (++it->second < p.aux) return;
    pxn_got_.erase(it);
    p2p_arrived(key, ctx);
    return;
  }
  p2p_arrived(P2pKey{p.src_rank, p.tag}, ctx);
}

void GpuRankLp::p2p_arrived(const P2pKey& key, Context& ctx) {
  auto it = waiting_rx_.find(key);
  if (it == waiting_rx_.end()) {
    ++arrived_[key];
    return;
  }
  const std::uint32_t idx = it->second.front();
  it->second.pop_front();
  if (it->second.empty()) waiting_rx_.erase(it);
  account(ctx.now());
  comm_end((*program_)[idx].kind, is_pp_recv((*program_)[idx]));
  if (trace_on_) trace_add(idx, TraceInterval::kRecv, 0, node_start_[idx], ctx.now());
  node_done(idx, ctx);
}

void GpuRankLp::handle(const engine::Event& ev, Context& ctx) {
  if (has_retired_) {
    has_retired_ = false;
    for (std::uint32_t s : retired_slots_) {
      coll_states_[s] = CollState{};
      free_slots_.push_back(s);
    }
    retired_slots_.clear();
  }
  switch (ev.kind) {
    case kEvSendDone: {
      const auto ref = ev.get<DoneRef>();
      on_send_complete(ref.slot, ref.idx, ctx);
      return;
    }
    case kEvFlowArrive: {
      // A whole part at once (coarse rungs), in <= 4 GiB pieces for the packet byte counter.
      Packet p = ev.get<Packet>();
      if (fidelity_ == Fidelity::kAnalytical && coarse_nvls(p) == kNvlsReduce) {
        // Analytical NVLS: this owner counts the members' contributions to one reduced chunk;
        // the chunk (its own flow) arrives with the last of them.
        const std::uint64_t key = (static_cast<std::uint64_t>(p.group) << 32 | p.instance) ^
                                  (static_cast<std::uint64_t>(static_cast<std::uint32_t>(p.tag)) * 0x9E3779B97F4A7C15ull);
        NvlsWait& e = nvls_wait_[key];
        ++e.count;
        if (p.src_rank == id_) {
          e.owner = p;
          e.has_owner = true;
        }
        if (e.count < nvls_local_members(topo_, workload_->groups[p.group].ranks, id_).size()) return;
        if (!e.has_owner || e.owner.tag != p.tag || e.owner.instance != p.instance) {
          throw engine::InternalError("gpu " + std::to_string(id_) + ": NVLS reduction key clash");
        }
        p = e.owner;
        nvls_wait_.erase(key);
      }
      std::uint64_t left = coarse_part_bytes(p, topo_);
      do {
        p.bytes = static_cast<std::uint32_t>(std::min<std::uint64_t>(left, 0xFFFFFFFFu));
        left -= p.bytes;
        on_packet(p, ctx);
      } while (left > 0);
      return;
    }
    case kEvFlowSent: {
      if (ev.src == net_lp_ && fidelity_ == Fidelity::kFlow) flow_source_.net_sent();
      const std::uint64_t counter = ev.get<std::uint64_t>() & 0xFFFFFFFFull;
      if (counter < coarse_base_ || counter - coarse_base_ >= coarse_sends_.size() ||
          coarse_sends_[counter - coarse_base_].parts_left == 0) {
        throw engine::InternalError("gpu " + std::to_string(id_) + ": unknown flow sent");
      }
      auto& entry = coarse_sends_[counter - coarse_base_];
      if (--entry.parts_left > 0) return;  // the message's other parts are still on their way
      const DoneRef ref{entry.slot, entry.idx};
      while (!coarse_sends_.empty() && coarse_sends_.front().parts_left == 0) {
        coarse_sends_.pop_front();
        ++coarse_base_;
      }
      on_send_complete(ref.slot, ref.idx, ctx);  // what a kEvSendDone event would do
      return;
    }
    case kEvCollLaunch:
      begin_collective(ev.get<std::uint32_t>(), ctx);
      return;
    case kEvSendLaunch:
      send_now(ev.get<std::uint32_t>(), ctx);
      return;
    case kEvStepDelay:
      delayed_send(ev.get<StepDelay>(), ctx);
      return;
    case kEvRecvDelay: {
      const RecvDelay d = ev.get<RecvDelay>();
      channel_arrived(d.slot, d.key, ctx);
      return;
    }
    case kEvProxySend: {
      const ProxySend s = ev.get<ProxySend>();
      start_flow_now(s.dst, s.bytes, s.group, s.instance, s.tag, s.slot, s.op_or_node, ctx, s.channel, s.aux, s.nvls);
      return;
    }
    case kEvProxyRecv:
      on_message_now(ev.get<Packet>(), ctx);
      return;
    case kEvRingStreamDone:
      finish_collective(ev.get<std::uint32_t>(), ctx);
      return;
    case kEvRingToken:
      ring_token(ev, ctx);
      return;
    case kEvComputeDone:
      account(ctx.now());
      compute_busy_ = false;
      trace_add(ev.get<std::uint32_t>(), TraceInterval::kCompute, 0, compute_start_, ctx.now());
      node_done(ev.get<std::uint32_t>(), ctx);
      start_compute(ctx);
      return;
    case kEvHostDone:
      host_busy_ = false;
      trace_add(ev.get<std::uint32_t>(), TraceInterval::kHost, 0, host_start_, ctx.now());
      node_done(ev.get<std::uint32_t>(), ctx);
      start_host(ctx);
      return;
    default:
      if (nic_.handle(ev, ctx)) return;
      throw engine::InternalError("gpu " + std::to_string(id_) + ": unexpected event kind " +
                                  std::to_string(ev.kind));
  }
}

double GpuRankLp::work_done(engine::SimTime now) const {
  if (!work_on_) return 0;
  double w = done_work_;
  if (compute_busy_) {
    const WorkNode& n = (*program_)[compute_node_];
    if (n.duration_ps > 0 && now > compute_start_) {
      const double share = std::min(1.0, static_cast<double>(now - compute_start_) / static_cast<double>(n.duration_ps));
      w += share * node_work(n, work_ps_per_byte_);
    }
  }
  for (const CollState& st : coll_states_) {
    if (!st.started || st.completed) continue;
    double done = 0, total = 0;
    if (st.stream) {
      done = (st.stream_in >= 0 ? 1 : 0) + (st.stream_out >= 0 ? 1 : 0) + std::min(st.token_round, st.token_rounds);
      total = 2.0 + st.token_rounds;
    } else if (st.ring) {
      done = st.done_ops;
      total = 2.0 * st.ring_steps;
    } else if (st.plan.lazy_channels) {
      std::uint64_t recvs = 0;
      for (std::uint32_t c = 0; c < st.plan.lazy_channels->channels; ++c) recvs += st.plan.lazy_channels->recv_count(c);
      total = static_cast<double>(recvs);
      done = total - static_cast<double>(st.recvs_left);
    } else if (st.plan.lazy_tree || st.plan.lazy_nvls) {
      done = st.done_ops;
      total = with_dag(st.plan, [](const auto& t) { return static_cast<double>(t.total); });
    } else {
      done = st.done_ops;
      total = st.plan.size();
    }
    // The + 1 is the completion itself: a running collective's share stays below 1 (its whole
    // node_work counts in done_work_ once it completed).
    w += std::min(done, total) / (total + 1.0) * node_work((*program_)[st.node], work_ps_per_byte_);
  }
  return w;
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
  io::RankRecord r{id_, finish_ps_, compute_ps_, comm_ps_, exposed_ps_};
  static_assert(std::tuple_size_v<decltype(r.exposed_kind_ps)> == kCommKinds);
  for (std::size_t k = 0; k < kCommKinds; ++k) r.exposed_kind_ps[k] = exposed_kind_[k];
  r.pp_wait_ps = pp_wait_ps_;
  return r;
}

namespace {

bool p2p_less(std::uint32_t as, std::int64_t at, std::uint32_t bs, std::int64_t bt) {
  return as != bs ? as < bs : at < bt;
}

}  // namespace

// Every mutable member of the packet rung, in declaration order. The unordered maps are only
// looked up (find / emplace / erase), never iterated, so their bucket order does not affect
// results; they are written sorted by key (P2pKey field by field: its padding is not written).
// Configuration set before init() (fidelity, fold, ring flows, keep_flows, trace_on_, watched
// nodes, sampling) comes from the spec by construction.
void GpuRankLp::save_state(engine::StateWriter& w) const {
  if (!coarse_sends_.empty() || !ring_links_.empty() || !port_free_.empty()) {
    throw engine::InternalError("gpu " + std::to_string(id_) + ": coarse-rung state in a packet-rung checkpoint");
  }
  w.put(next_flow_);
  w.put(last_slot_key_);
  w.put(last_slot_);
  w.put(hot_slot_);
  w.put(has_retired_);
  w.put(coarse_dst_);
  w.put(coarse_split_);
  w.put(coarse_base_);
  w.put(flow_digest_);
  w.put(throttle_added_ps_);
  w.put(proxy_free_);
  w.put<std::uint64_t>(coll_states_.size());
  for (const CollState& st : coll_states_) {
    w.put(st.node);
    w.put(st.done_ops);
    w.put(st.started);
    w.put(st.completed);
    w.put(st.ring);
    w.put(st.ring_steps);
    w.put(st.ring_next);
    w.put(st.ring_prev);
    w.put(st.group);
    w.put(st.instance);
    w.put(st.ring_index);
    w.put(st.stream);
    w.put(st.own_known);
    w.put(st.token_round);
    w.put(st.token_rounds);
    w.put(st.stream_in);
    w.put(st.stream_out);
    w.put(st.stream_wait);
    w.put(st.stream_value);
    w.put(st.early_at);
    w.put_vector(st.tokens);
    w.put(st.ring_word_idx);
    w.put(st.ring_word);
    const RankPlan& pl = st.plan;
    const bool has_plan = !pl.ops.empty() || pl.lazy_ring || pl.lazy_channels || pl.lazy_tree || pl.lazy_nvls;
    w.put(has_plan);
    w.put_vector(st.ring_got);
    w.put_vector(st.state);
    w.put_vector(st.out_begin);
    w.put_vector(st.out_index);
    w.put_vector(st.recv_key);
    w.put_vector(st.recv_op);
    w.put_vector(st.early);
    w.put_vector(st.cursor);
    w.put_vector(st.got_word);
    w.put_vector(st.in_flight);
    w.put_vector(st.tree_state);
    w.put(st.recvs_left);
    w.put(st.start);
  }
  w.put_vector(retired_slots_);
  w.put_vector(free_slots_);
  engine::put_map(w, coll_slot_);
  {
    std::vector<std::pair<P2pKey, std::uint32_t>> a(arrived_.begin(), arrived_.end());
    std::sort(a.begin(), a.end(), [](const auto& x, const auto& y) {
      return p2p_less(x.first.src, x.first.tag, y.first.src, y.first.tag);
    });
    w.put<std::uint64_t>(a.size());
    for (const auto& [k, v] : a) {
      w.put(k.src);
      w.put(k.tag);
      w.put(v);
    }
  }
  {
    std::vector<const std::pair<const P2pKey, std::deque<std::uint32_t>>*> a;
    for (const auto& kv : waiting_rx_) a.push_back(&kv);
    std::sort(a.begin(), a.end(), [](const auto* x, const auto* y) {
      return p2p_less(x->first.src, x->first.tag, y->first.src, y->first.tag);
    });
    w.put<std::uint64_t>(a.size());
    for (const auto* kv : a) {
      w.put(kv->first.src);
      w.put(kv->first.tag);
      w.put_vector(std::vector<std::uint32_t>(kv->second.begin(), kv->second.end()));
    }
  }
  {
    std::vector<std::uint64_t> keys;
    for (const auto& kv : rx_bytes_) keys.push_back(kv.first);
    std::sort(keys.begin(), keys.end());
    w.put<std::uint64_t>(keys.size());
    for (std::uint64_t k : keys) {
      const auto& v = rx_bytes_.at(k);
      w.put(k);
      w.put(v.first);
      w.put(v.second);
    }
  }
  w.put_vector(waiting_);
  w.put(done_nodes_);
  w.put_vector(done_flag_);
  w.put_vector(std::vector<std::uint32_t>(compute_queue_.begin(), compute_queue_.end()));
  w.put(compute_busy_);
  w.put(compute_node_);
  w.put(done_work_);
  w.put_vector(std::vector<std::uint32_t>(host_queue_.begin(), host_queue_.end()));
  w.put(host_busy_);
  w.put(host_start_);
  engine::put_map(w, pxn_left_);
  {
    std::vector<std::pair<P2pKey, std::uint64_t>> a(pxn_got_.begin(), pxn_got_.end());
    std::sort(a.begin(), a.end(), [](const auto& x, const auto& y) {
      return p2p_less(x.first.src, x.first.tag, y.first.src, y.first.tag);
    });
    w.put<std::uint64_t>(a.size());
    for (const auto& [k, v] : a) {
      w.put(k.src);
      w.put(k.tag);
      w.put(v);
    }
  }
  {
    std::vector<std::uint64_t> keys;
    for (const auto& kv : nvls_wait_) keys.push_back(kv.first);
    std::sort(keys.begin(), keys.end());
    w.put<std::uint64_t>(keys.size());
    for (std::uint64_t k : keys) {
      const NvlsWait& v = nvls_wait_.at(k);
      w.put(k);
      w.put(v.count);
      w.put(v.has_owner);
      w.put(v.owner);
    }
  }
  w.put(last_change_);
  w.put(comm_active_);
  w.put(compute_ps_);
  w.put(comm_ps_);
  w.put(exposed_ps_);
  w.put(finish_ps_);
  w.put(kind_active_);
  w.put(exposed_kind_);
  w.put(pp_recv_active_);
  w.put(pp_wait_ps_);
  w.put_vector(flows_);
  w.put_vector(partials_);
  w.put_vector(watch_ps_);
  w.put(compute_start_);
  w.put_vector(node_start_);
  w.put_vector(trace_);
  nic_.save(w);
}

void GpuRankLp::load_state(engine::StateReader& r) {
  next_flow_ = r.get<std::uint64_t>();
  last_slot_key_ = r.get<std::uint64_t>();
  last_slot_ = r.get<std::uint32_t>();
  hot_slot_ = r.get<std::uint32_t>();
  has_retired_ = r.get<bool>();
  coarse_dst_ = r.get<std::uint32_t>();
  coarse_split_ = r.get<Nic::Split>();
  coarse_base_ = r.get<std::uint64_t>();
  flow_digest_ = r.get<io::FlowDigest>();
  throttle_added_ps_ = r.get<SimTime>();
  proxy_free_ = r.get<SimTime>();
  const auto nslots = r.get<std::uint64_t>();
  if (nslots > r.remaining()) r.fail();
  coll_states_.clear();
  for (std::uint64_t i = 0; i < nslots; ++i) {
    CollState& st = coll_states_.emplace_back();
    st.node = r.get<std::uint32_t>();
    st.done_ops = r.get<std::uint32_t>();
    st.started = r.get<bool>();
    st.completed = r.get<bool>();
    st.ring = r.get<bool>();
    st.ring_steps = r.get<std::uint32_t>();
    st.ring_next = r.get<std::uint32_t>();
    st.ring_prev = r.get<std::uint32_t>();
    st.group = r.get<std::uint32_t>();
    st.instance = r.get<std::uint32_t>();
    st.ring_index = r.get<std::uint32_t>();
    st.stream = r.get<bool>();
    st.own_known = r.get<bool>();
    st.token_round = r.get<std::uint8_t>();
    st.token_rounds = r.get<std::uint8_t>();
    st.stream_in = r.get<SimTime>();
    st.stream_out = r.get<SimTime>();
    st.stream_wait = r.get<SimTime>();
    st.stream_value = r.get<SimTime>();
    st.early_at = r.get<SimTime>();
    st.tokens = r.get_vector<SimTime>();
    st.ring_word_idx = r.get<std::uint32_t>();
    st.ring_word = r.get<std::uint64_t>();
    if (r.get<bool>()) {
      // The running collective's plan, derived again exactly as start_collective did.
      if (st.node >= nodes_size() || (*program_)[st.node].type != NodeType::kCollective) r.fail();
      st.plan = planner_.plan(coll_request(st.node));
    }
    st.ring_got = r.get_vector<std::uint64_t>();
    st.state = r.get_vector<std::uint32_t>();
    st.out_begin = r.get_vector<std::uint32_t>();
    st.out_index = r.get_vector<std::uint32_t>();
    st.recv_key = r.get_vector<std::uint64_t>();
    st.recv_op = r.get_vector<std::uint32_t>();
    st.early = r.get_vector<std::uint64_t>();
    st.cursor = r.get_vector<RingCursor>();
    st.got_word = r.get_vector<std::uint64_t>();
    st.in_flight = r.get_vector<std::uint8_t>();
    st.tree_state = r.get_vector<std::uint8_t>();
    st.recvs_left = r.get<std::uint64_t>();
    st.start = r.get<SimTime>();
  }
  hot_state_ = hot_slot_ < coll_states_.size() ? &coll_states_[hot_slot_] : nullptr;
  if (hot_state_ == nullptr) hot_slot_ = 0xFFFFFFFFu;
  retired_slots_ = r.get_vector<std::uint32_t>();
  free_slots_ = r.get_vector<std::uint32_t>();
  engine::load_map(r, coll_slot_);
  arrived_.clear();
  for (std::uint64_t i = 0, n = r.get<std::uint64_t>(); i < n; ++i) {
    P2pKey k;
    k.src = r.get<std::uint32_t>();
    k.tag = r.get<std::int64_t>();
    arrived_.emplace(k, r.get<std::uint32_t>());
  }
  waiting_rx_.clear();
  for (std::uint64_t i = 0, n = r.get<std::uint64_t>(); i < n; ++i) {
    P2pKey k;
    k.src = r.get<std::uint32_t>();
    k.tag = r.get<std::int64_t>();
    const auto v = r.get_vector<std::uint32_t>();
    waiting_rx_.emplace(k, std::deque<std::uint32_t>(v.begin(), v.end()));
  }
  rx_bytes_.clear();
  for (std::uint64_t i = 0, n = r.get<std::uint64_t>(); i < n; ++i) {
    const auto k = r.get<std::uint64_t>();
    const auto bytes = r.get<std::uint64_t>();
    rx_bytes_.emplace(k, std::make_pair(bytes, r.get<SimTime>()));
  }
  auto waiting = r.get_vector<std::uint32_t>();
  if (waiting.size() != waiting_.size()) r.fail();
  waiting_ = std::move(waiting);
  done_nodes_ = r.get<std::uint32_t>();
  auto done = r.get_vector<char>();
  if (done.size() != done_flag_.size()) r.fail();
  done_flag_ = std::move(done);
  const auto cq = r.get_vector<std::uint32_t>();
  compute_queue_.assign(cq.begin(), cq.end());
  compute_busy_ = r.get<bool>();
  compute_node_ = r.get<std::uint32_t>();
  done_work_ = r.get<double>();
  const auto hq = r.get_vector<std::uint32_t>();
  host_queue_.assign(hq.begin(), hq.end());
  host_busy_ = r.get<bool>();
  host_start_ = r.get<SimTime>();
  engine::load_map(r, pxn_left_);
  pxn_got_.clear();
  for (std::uint64_t i = 0, n = r.get<std::uint64_t>(); i < n; ++i) {
    P2pKey k;
    k.src = r.get<std::uint32_t>();
    k.tag = r.get<std::int64_t>();
    pxn_got_.emplace(k, r.get<std::uint64_t>());
  }
  nvls_wait_.clear();
  for (std::uint64_t i = 0, n = r.get<std::uint64_t>(); i < n; ++i) {
    const auto k = r.get<std::uint64_t>();
    NvlsWait v;
    v.count = r.get<std::uint32_t>();
    v.has_owner = r.get<bool>();
    v.owner = r.get<Packet>();
    nvls_wait_.emplace(k, v);
  }
  last_change_ = r.get<SimTime>();
  comm_active_ = r.get<std::uint32_t>();
  compute_ps_ = r.get<SimTime>();
  comm_ps_ = r.get<SimTime>();
  exposed_ps_ = r.get<SimTime>();
  finish_ps_ = r.get<SimTime>();
  r.get_bytes(kind_active_, sizeof kind_active_);
  r.get_bytes(exposed_kind_, sizeof exposed_kind_);
  pp_recv_active_ = r.get<std::uint32_t>();
  pp_wait_ps_ = r.get<SimTime>();
  flows_ = r.get_vector<io::FlowRecord>();
  partials_ = r.get_vector<CollectivePartial>();
  auto watch = r.get_vector<SimTime>();
  if (watch.size() != watch_ps_.size()) r.fail();
  watch_ps_ = std::move(watch);
  compute_start_ = r.get<SimTime>();
  auto starts = r.get_vector<SimTime>();
  if (starts.size() != node_start_.size()) r.fail();
  node_start_ = std::move(starts);
  trace_ = r.get_vector<TraceInterval>();
  nic_.load(r);
}

}  // namespace fabricsim::models
