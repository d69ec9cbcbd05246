#pragma once
/// @file gpu_rank.hpp
/// The GPU-rank LP: walks its workload DAG (compute stream + communication), owns its NIC and
/// NVLink ports, and receives packets addressed to it.
#include <cstdint>
#include <functional>
#include <memory>
#include <deque>
#include <map>
#include <unordered_map>
#include <vector>

#include "engine/lp.hpp"
#include "io/flow_digest.hpp"
#include "io/results.hpp"
#include "models/topology/cluster.hpp"
#include "models/core/comm_plan.hpp"
#include "models/flow/flow_model.hpp"
#include "models/core/link_sampler.hpp"
#include "models/packet/nic.hpp"
#include "models/core/packet.hpp"
#include "models/flow/ring_stream.hpp"
#include "models/core/workload.hpp"

namespace fabricsim::models {

/// Per-rank partial of a collective; merged over ranks into io::CollectiveRecord.
struct CollectivePartial {
  std::uint32_t group = 0;
  std::uint32_t instance = 0;
  CollOp op = CollOp::kAllReduce;
  std::uint64_t bytes = 0;
  std::uint32_t ranks = 0;
  engine::SimTime start_ps = 0;
  engine::SimTime end_ps = 0;
};

/// One busy interval of a rank, kept only when tracing is on (trace-event JSON, jobs/trace).
struct TraceInterval {
  enum Kind : std::uint32_t { kCompute = 0, kCollective = 1, kSend = 2, kRecv = 3, kHost = 4 };
  std::uint32_t rank = 0;
  std::uint32_t node = 0;        ///< index in the rank's program
  std::uint32_t kind = kCompute;
  std::uint32_t instance = 0;    ///< collectives: instance on the communicator
  engine::SimTime start_ps = 0;
  engine::SimTime end_ps = 0;
};

/// The executor's read-only index of one program: node n's dependents are
/// dep_index[dep_begin[n] .. dep_begin[n+1]) (CSR, in increasing node order), and a collective
/// node's instance number on its communicator (the k-th collective node of a communicator is
/// instance k). Shared by the ranks that run one shared program (Workload::program_of) when
/// their group slots name distinct communicators, so that counting per slot is counting per
/// communicator: 4 B per node + 4 B per edge per program instead of per rank (~1.1 GB at 9,216
/// GPUs of the MoE iteration).
struct ProgramIndex {
  std::vector<std::uint32_t> dep_begin, dep_index, instance;
  /// Builds the index of `prog`; `group_key(node)` is the communicator a collective node counts
  /// on (a global group, or a slot), below `groups`. @throws engine::InternalError on a key >= groups.
  static ProgramIndex build(const std::vector<WorkNode>& prog, std::size_t groups,
                            const std::function<std::int32_t(const WorkNode&)>& group_key);
  /// The index shared by the ranks that run shared program `program` of `w` (instances counted
  /// per group slot).
  static std::shared_ptr<const ProgramIndex> of_shared(const Workload& w, std::uint32_t program);
  /// True if rank `r` of shared workload `w` may use of_shared(w, w.program_of[r]): its group
  /// slots name distinct communicators (or none).
  static bool shareable(const Workload& w, std::uint32_t r);
};

/// GPU rank executor.
///
/// Semantics: a node starts when all its deps finished. Compute nodes run one at a time on the
/// compute stream in the order they became ready (ties by node index). Collectives and send/recv
/// run concurrently with compute and with each other; the k-th collective node of a group (in
/// node order) is instance k of that communicator on every rank, which is how ranks match up.
/// A collective's sends start when their plan deps finished; a receive finishes when the last
/// byte of the matching flow (sender, tag) arrived. Flows share a port round-robin per packet.
class GpuRankLp final : public engine::Lp, private NicOwner {
 public:
  /// @param program this rank's DAG (outlives the LP); nullptr = idle GPU without a rank.
  /// @param index the program's shared index (ProgramIndex::of_shared, for a rank with
  ///   ProgramIndex::shareable); nullptr: the LP builds its own.
  GpuRankLp(const Topology& topo, engine::LpId id, const Workload* workload,
            const CollectivePlanner& planner, const FabricParams& fabric,
            std::shared_ptr<const ProgramIndex> index = nullptr);
  void init(engine::Context& ctx) override;
  void handle(const engine::Event& ev, engine::Context& ctx) override;
  /// Checkpoints (docs/checkpoint.md): at the packet rung save_state holds every mutable member
  /// (executor, collective states, point-to-point matching, accounting, records, trace, and the
  /// NIC). A running collective's plan is not written: load_state asks the planner for it again
  /// (CollectivePlanner::plan is a function of the request). The coarse rungs' flow state
  /// (flow source, send FIFO, streamed rings, analytical ports) is not written, so only the
  /// packet rung is checkpointable.
  bool checkpointable() const override { return fidelity_ == Fidelity::kPacket; }
  std::string_view type_name() const override { return "GpuRankLp"; }
  /// @throws engine::InternalError if coarse-rung state is not empty (never at the packet rung).
  void save_state(engine::StateWriter& out) const override;
  void load_state(engine::StateReader& in) override;

  bool finished() const { return done_nodes_ == nodes_size(); }
  /// DAG nodes completed so far / in total (progress reports; read only from this LP's thread).
  std::uint32_t done_nodes() const { return done_nodes_; }
  std::uint32_t total_nodes() const { return nodes_size(); }
  /// Progress work of one node (jobs/progress.hpp), in ps: 1 ps plus a compute node's duration,
  /// or plus a communication node's (collective, send, receive) bytes x `ps_per_byte`.
  static double node_work(const WorkNode& n, double ps_per_byte) {
    const double w = n.type == NodeType::kCompute ? static_cast<double>(n.duration_ps)
                                                  : static_cast<double>(n.bytes) * ps_per_byte;
    return 1.0 + w;
  }
  /// Turns on progress work accounting (off by default): nodes count node_work(n, ps_per_byte).
  /// `total` must be the sum of node_work over this rank's program (the caller computes it
  /// once per shared program). Call before init().
  void set_work_weights(double ps_per_byte, double total) {
    work_ps_per_byte_ = ps_per_byte;
    work_total_ = total;
    work_on_ = true;
  }
  /// Work of the whole program (ps of work; set_work_weights), 0 when off.
  double work_total() const { return work_total_; }
  /// Work done at simulated time `now` (ps of work): the completed nodes' work plus the
  /// completed share of the running ones: the compute node's elapsed share of its duration, and
  /// each started collective's share done / (total + 1) of its plan's operations (ops; a lazy
  /// channel ring's receives; a streamed ring's two stream halves and its token rounds; the + 1
  /// is the completion). Sends and receives in flight count 0 until done. Below work_total() until the
  /// last node completed. Call only where this LP does not run (between windows, or from its
  /// own thread between events); costs O(collectives in flight).
  double work_done(engine::SimTime now) const;
  /// First node that never completed (for deadlock reports), or -1.
  std::int64_t first_unfinished() const;
  io::RankRecord rank_record() const;
  /// Flow records received here, kept only after keep_flows(true) (HDF5 /flows, tests).
  const std::vector<io::FlowRecord>& flow_records() const { return flows_; }
  /// Multiplies this rank's GPU compute durations by `factor` (> 0; a straggler GPU: 1.2 = 20%
  /// slower), rounded to the picosecond; host (CPU-side) nodes keep their duration.
  void set_compute_factor(double factor) { compute_factor_ = factor; }
  /// A window of thermal throttling (spec compute.throttle): in [at_ps, until_ps) this GPU's
  /// compute runs `factor` (> 1) times slower.
  struct ThrottleWindow {
    engine::SimTime at_ps = 0, until_ps = 0;
    double factor = 1.0;
  };
  /// Sets the GPU's throttling windows (sorted by at_ps, disjoint). A compute node that starts at
  /// s with duration d (after set_compute_factor) ends where d of full-speed work is done: time
  /// in a window advances its work by 1/factor per ps. Host (CPU-side) nodes are not throttled.
  void set_throttle(std::vector<ThrottleWindow> windows) { throttle_ = std::move(windows); }
  /// End of `work_ps` of full-speed compute started at `start_ps` under the throttling windows
  /// (ps; equals start_ps + work_ps outside every window). Rounded to the picosecond per window.
  engine::SimTime throttled_end(engine::SimTime start_ps, engine::SimTime work_ps) const;
  /// Compute time the throttling windows added to this GPU so far (ps).
  engine::SimTime throttle_added_ps() const { return throttle_added_ps_; }
  /// Keep every received flow's record (default off: only the digest sum is kept, 16 B per LP).
  void keep_flows(bool on) { keep_flows_ = on; }
  /// Order-independent digest of every flow received here (kept or not; io/digest.hpp).
  const io::FlowDigest& flow_digest() const { return flow_digest_; }
  const std::vector<CollectivePartial>& collective_partials() const { return partials_; }
  /// Network rung: flow level hands flows to the network LP `net_lp`; analytical
  /// schedules each transfer alone on its route. Default: packet level. Call before init().
  void set_fidelity(Fidelity f, engine::LpId net_lp) {
    fidelity_ = f;
    net_lp_ = net_lp;
  }
  /// sim.ring_flows: how a LazyRing (the ring planner's AllReduce / AllGather / ReduceScatter)
  /// becomes flows. kStream applies at the flow and analytical rungs only (the packet rung
  /// always runs the ring step by step): one flow per rank with every step's bytes, and every
  /// rank completes at the ring-wide instant ring_stream.hpp derives (exact for an uncongested
  /// ring of equal links), learnt through ceil(log2 n) rounds of tokens (kEvRingToken). Rings
  /// of one step, and rings with single-packet steps (ring_streams), stay step-wise.
  /// Call before init().
  void set_ring_flows(RingFlows f) { ring_flows_ = f; }
  /// sim.fold: dp (docs/folding.md): this rank is a representative of the folded DP replicas.
  /// Its arrivals for ranks of other images are delivered as their images into image 0
  /// (FoldMap::mirror), and a collective on a communicator spanning images must be a ring that
  /// commutes with the shift (checked at each arrival); any other plan is refused when the
  /// collective starts (engine::InputError naming sim.fold). `fold` outlives the
  /// LP; null or inactive: no folding. Call before init().
  void set_fold(const FoldMap* fold) { fold_ = fold != nullptr && fold->active() ? fold : nullptr; }
  /// Starts sampling the NVLink (port 0) and NIC (port 1) egress bytes in bins of `bin_ps` (ps).
  void enable_sampling(engine::SimTime bin_ps) { nic_.enable_sampling(bin_ps); }
  const LinkSampler& sampler() const { return nic_.sampler(); }
  /// The GPU's NIC and NVLink endpoint (counters, QP state for tests).
  const Nic& nic() const { return nic_; }
  /// Flow rung: this GPU's flow source (flows it delivered itself and handed to the network LP).
  const FlowSource& flow_source() const { return flow_source_; }
  /// Starts keeping compute and communication intervals (off by default: no cost when off).
  void enable_trace() { trace_on_ = true; node_start_.assign(nodes_size(), 0); }
  /// Intervals with > 0 duration; their per-kind unions equal rank_record()'s compute_ps and
  /// comm_ps (compute intervals never overlap; communication intervals may).
  const std::vector<TraceInterval>& trace() const { return trace_; }
  /// Records when each of `nodes` (indices into this rank's program) completes: milestones such
  /// as the end of an inference phase (jobs::InferStats::phase_end_nodes). Call before init().
  /// @throws engine::InternalError for an index outside the program.
  void watch_nodes(const std::vector<std::uint32_t>& nodes);
  /// Completion time (ps) of each watched node, in watch_nodes() order; -1 if it never completed.
  const std::vector<engine::SimTime>& watched_done_ps() const { return watch_ps_; }

 private:
  /// Executor state of one collective instance on this rank. Memory while it runs: the plan
  /// (comm_plan.hpp: 36 B per op + 4 B per dependency) + 4 B per op (state) + 4 B per op and
  /// per dependency (dependents CSR) + 12 B per receive (match index); all freed at completion.
  struct CollState {
    // Fields read per message first (one cache line): a lazy ring's shape, copied from its
    // LazyRing at the start so that a step does not chase the plan's pointers.
    std::uint32_t node = 0;
    std::uint32_t done_ops = 0;
    bool started = false;
    bool completed = false;
    bool ring = false;             ///< plan.lazy_ring is set
    std::uint32_t ring_steps = 0;  ///< lazy ring: LazyRing::steps, next, prev
    std::uint32_t ring_next = 0;
    std::uint32_t ring_prev = 0;
    std::uint32_t group = 0;       ///< the collective node's group and instance
    std::uint32_t instance = 0;
    std::uint32_t ring_index = 0;  ///< this rank's position in the communicator (ring order)
    /// Streamed ring (RingFlows::kStream): one flow each way; the rank's own completion term
    /// is max(stream_in + stream_wait, stream_out), the ring completes at the maximum of its
    /// ranks' terms, learnt through ceil(log2 n) rounds of tokens (ring_stream.hpp).
    bool stream = false;
    bool own_known = false;            ///< stream_value holds the own term; tokens may go
    std::uint8_t token_round = 0;      ///< next token round to send
    std::uint8_t token_rounds = 0;     ///< ceil(log2 n)
    engine::SimTime stream_in = -1;    ///< the incoming stream arrived (ps), -1 before
    engine::SimTime stream_out = -1;   ///< the own stream's send completed (ps), -1 before
    engine::SimTime stream_wait = 0;   ///< max(0, P1 - T_in(B_in)) (ps)
    engine::SimTime stream_value = -1; ///< the largest completion term known here (ps)
    engine::SimTime early_at = -1;     ///< arrival of the last message that came before the start
    std::vector<engine::SimTime> tokens;  ///< value received in each token round, -1 before (may come before the start)
    /// Lazy ring: the word of ring_got that the last message touched, kept here (its copy in
    /// ring_got is stale) so that a ring's in-order steps touch ring_got once per 64 steps.
    std::uint32_t ring_word_idx = 0;
    std::uint64_t ring_word = 0;
    /// Lazy ring: whether step k's message arrived / mark it (ring_got + ring_word).
    bool ring_has(std::uint64_t k) const {
      const std::uint64_t w = k / 64 == ring_word_idx ? ring_word : ring_got[k / 64];
      return (w >> (k % 64) & 1u) != 0;
    }
    void ring_set(std::uint64_t k) {
      if (k / 64 != ring_word_idx) {
        ring_got[ring_word_idx] = ring_word;
        ring_word_idx = static_cast<std::uint32_t>(k / 64);
        ring_word = ring_got[ring_word_idx];
      }
      ring_word |= std::uint64_t{1} << (k % 64);
    }
    RankPlan plan;
    std::vector<std::uint64_t> ring_got;  ///< lazy ring: bit k = step k's message arrived (steps / 8 bytes);
                                          ///< lazy channels: every channel's receive slots, from got_word[c]
    /// Per op: bits 0-27 unmet deps; kPosted: a ready receive waits for its message; kArrived:
    /// its message came first; kDone.
    std::vector<std::uint32_t> state;
    std::vector<std::uint32_t> out_begin, out_index;  ///< dependents of op i: out_index[out_begin[i] .. out_begin[i+1])
    std::vector<std::uint64_t> recv_key;  ///< (peer << 32 | tag) of every receive, sorted
    std::vector<std::uint32_t> recv_op;   ///< op index of recv_key[i]
    std::vector<std::uint64_t> early;     ///< (src << 32 | tag) of messages that came before the plan started
    // Lazy NCCL ring family (RankPlan::lazy_channels): per channel the send cursor, whether its
    // send is in flight and the first bitmap word; receives still to come.
    std::vector<RingCursor> cursor;
    std::vector<std::uint64_t> got_word;
    std::vector<std::uint8_t> in_flight;
    /// sim.fold: dp: per channel the member index of the simulated rank whose sends arrive
    /// mirrored (kNoMember: this rank's own); empty: every channel's is this rank.
    std::vector<std::uint32_t> mirror_from;
    /// Lazy Tree / NVLS (RankPlan::lazy_tree, lazy_nvls): per op, bits 0-3 unmet deps, then kTreePosted /
    /// kTreeArrived / kTreeDone (1 B per op instead of the materialized plan's ~60 B).
    std::vector<std::uint8_t> tree_state;
    std::uint64_t recvs_left = 0;
    engine::SimTime start = 0;
  };
  /// Point-to-point (workload send/recv nodes) message key: source rank, tag.
  struct P2pKey {
    std::uint32_t src = 0;
    std::int64_t tag = 0;
    bool operator==(const P2pKey&) const = default;
  };
  struct P2pKeyHash {
    std::size_t operator()(const P2pKey& k) const noexcept {
      return static_cast<std::size_t>(engine::mix64((static_cast<std::uint64_t>(k.src) << 40) ^
                                                    static_cast<std::uint64_t>(k.tag)));
    }
  };

  std::uint32_t nodes_size() const {
    return program_ ? static_cast<std::uint32_t>(program_->size()) : 0;
  }
  /// Global communicator / peer rank of one of this rank's nodes (Workload::group_of/peer_of:
  /// a shared program names slots).
  std::int32_t group_of(const WorkNode& n) const { return workload_->group_of(id_, n); }
  std::int32_t peer_of(const WorkNode& n) const { return workload_->peer_of(id_, n); }
  /// Adds the time since the last change to the compute, communication and exposed sums; the
  /// exposed share is split equally over the kinds with communication in flight (exposed_kind_).
  void account(engine::SimTime now);
  /// What communication node `n` serves: its group's kind for a collective, its own for a
  /// send/receive.
  CommKind kind_of(const WorkNode& n) const {
    return n.type == NodeType::kCollective ? workload_->groups[static_cast<std::size_t>(group_of(n))].kind : n.kind;
  }
  /// A communication op of `kind` starts / ends now (call after account()); `pp_recv`: it is a
  /// receive from a neighbour pipeline stage (a PP-tagged Recv node: the pipeline wait).
  void comm_begin(CommKind kind, bool pp_recv = false) {
    ++comm_active_;
    ++kind_active_[static_cast<std::size_t>(kind)];
    pp_recv_active_ += pp_recv ? 1 : 0;
  }
  void comm_end(CommKind kind, bool pp_recv = false) {
    --comm_active_;
    --kind_active_[static_cast<std::size_t>(kind)];
    pp_recv_active_ -= pp_recv ? 1 : 0;
  }
  static bool is_pp_recv(const WorkNode& n) { return n.type == NodeType::kRecv && n.kind == CommKind::kPp; }
  void node_ready(std::uint32_t n, engine::Context& ctx);
  void node_done(std::uint32_t n, engine::Context& ctx);
  void start_compute(engine::Context& ctx);
  /// Starts the next ready host node if the host thread is idle (WorkNode::host).
  void start_host(engine::Context& ctx);
  void start_collective(std::uint32_t n, engine::Context& ctx);
  /// Starts the operations of the collective in `slot` (after its start-up latency).
  void begin_collective(std::uint32_t slot, engine::Context& ctx);
  void op_ready(std::uint32_t slot, std::uint32_t op, engine::Context& ctx);
  void op_done(std::uint32_t slot, std::uint32_t op, engine::Context& ctx);
  /// Sends a message: at once (start_flow_now), or, when it leaves this GPU's NVLink domain and
  /// the planner has a proxy (CollectivePlanner::proxy_op_ps), once this GPU's proxy posted it
  /// (proxy_acquire; a kEvProxySend event).
  void start_flow(std::uint32_t dst, std::uint64_t bytes, std::uint32_t group,
                  std::uint32_t instance, std::int64_t tag, std::uint32_t slot,
                  std::uint32_t op_or_node, engine::Context& ctx, std::uint16_t channel = 0,
                  std::uint32_t aux = 0, std::uint8_t nvls = 0);
  void start_flow_now(std::uint32_t dst, std::uint64_t bytes, std::uint32_t group,
                      std::uint32_t instance, std::int64_t tag, std::uint32_t slot,
                      std::uint32_t op_or_node, engine::Context& ctx, std::uint16_t channel = 0,
                      std::uint32_t aux = 0, std::uint8_t nvls = 0);
  /// Payload of kEvProxySend: start_flow's arguments.
  struct ProxySend {
    std::uint64_t bytes = 0;
    std::int64_t tag = 0;
    std::uint32_t dst = 0, group = 0, instance = 0, slot = 0, op_or_node = 0, aux = 0;
    std::uint16_t channel = 0;
    std::uint8_t nvls = 0;
  };
  /// The proxy thread as one FIFO server: the instant (ps) at which an operation that asks now
  /// is done, max(now, proxy_free_) + proxy_ps_; the server is busy until then.
  engine::SimTime proxy_acquire(engine::SimTime now);
  /// A message from another NVLink domain arrived and the planner has a proxy: on_message_now
  /// once the proxy noticed it (proxy_acquire; a kEvProxyRecv event), else at once.
  bool proxy_defers(std::uint32_t peer) const {
    return proxy_ps_ > 0 && topo_.domain_of(peer) != topo_.domain_of(id_);
  }
  /// A workload Send node `n` became ready: send_now after the planner's p2p_start_latency_ps
  /// (a kEvSendLaunch event), at once when it is 0.
  void start_send(std::uint32_t n, engine::Context& ctx);
  /// Puts Send node `n`'s data on its route: direct, or through a PXN relay when the planner says so.
  void send_now(std::uint32_t n, engine::Context& ctx);
  /// A whole point-to-point message (src, tag) arrived: completes the oldest waiting Recv.
  void p2p_arrived(const P2pKey& key, engine::Context& ctx);
  void on_part_received(const Packet& p, engine::Context& ctx) override { on_packet(p, ctx); }
  void on_send_complete(std::uint32_t slot, std::uint32_t idx, engine::Context& ctx) override;
  void on_packet(const Packet& p, engine::Context& ctx);
  void on_message(const Packet& p, engine::Context& ctx);
  void on_message_now(const Packet& p, engine::Context& ctx);
  void coll_message(std::uint32_t slot, std::uint64_t key, engine::Context& ctx);
  void start_lazy_ring(std::uint32_t slot, engine::Context& ctx);
  /// Streamed ring (RingFlows::kStream): posts the one flow to next; ring_stream_check
  /// completes the collective once both streams are through (at the instant ring_stream.hpp gives).
  /// @returns false (nothing done) for a ring that stays step-wise (ring_streams).
  bool start_ring_stream(std::uint32_t slot, engine::Context& ctx);
  void ring_stream_check(std::uint32_t slot, engine::Context& ctx);
  /// Streamed ring: sends the token rounds whose inputs are in; completes the collective after
  /// the last round.
  void ring_token_advance(std::uint32_t slot, engine::Context& ctx);
  /// A streamed ring's token (kEvRingToken) arrived.
  void ring_token(const engine::Event& ev, engine::Context& ctx);
  void start_lazy_channels(std::uint32_t slot, engine::Context& ctx);
  void start_lazy_tree(std::uint32_t slot, engine::Context& ctx);
  /// Lazy Tree / NVLS / NVLSTree (LazyTree, LazyNvls): op_ready / op_done / a message for its
  /// receive, as for a materialized plan.
  void tree_ready(std::uint32_t slot, std::uint32_t op, engine::Context& ctx);
  void tree_done(std::uint32_t slot, std::uint32_t op, engine::Context& ctx);
  void tree_message(std::uint32_t slot, std::uint64_t key, engine::Context& ctx);
  /// Lazy channel ring: starts channel c's next send if it is ready.
  void channel_send(std::uint32_t slot, std::uint32_t c, engine::Context& ctx);
  /// Puts channel c's next send on the wire.
  void channel_start(std::uint32_t slot, std::uint32_t c, engine::Context& ctx);
  /// Payload of kEvStepDelay: the collective's slot and the op (a send, or a materialized
  /// receive; op index) whose P2pOp::delay_ps elapsed.
  struct StepDelay {
    std::uint32_t slot = 0, idx = 0;
  };
  /// A send's delay elapsed (kEvStepDelay): puts it on the wire; a materialized receive's delay
  /// elapsed: recv_arrived.
  void delayed_send(const StepDelay& d, engine::Context& ctx);
  /// Payload of kEvRecvDelay: a lazy channel ring's message (key = src rank << 32 | tag) whose
  /// receive completes now (LazyChannelRing::recv_delay after its arrival).
  struct RecvDelay {
    std::uint64_t key = 0;
    std::uint32_t slot = 0;
  };
  /// A message of a lazy channel ring arrived: channel_arrived now, or after the channel's
  /// LazyChannelRing::recv_delay (a kEvRecvDelay event) once the collective started.
  void channel_message(std::uint32_t slot, std::uint64_t key, engine::Context& ctx);
  /// A lazy channel ring's receive completes: records it and readies the channel's next send.
  void channel_arrived(std::uint32_t slot, std::uint64_t key, engine::Context& ctx);
  /// A materialized plan's receive `op` completes (its message arrived, and its P2pOp::delay_ps
  /// elapsed): done if posted, else marked arrived. @throws engine::InternalError on a duplicate.
  void recv_arrived(std::uint32_t slot, std::uint32_t op, engine::Context& ctx);
  void finish_collective(std::uint32_t slot, engine::Context& ctx);
  void ring_send(std::uint32_t slot, std::uint32_t step, engine::Context& ctx);
  std::uint32_t recv_of(const CollState& st, std::uint64_t key) const;
  /// The planner's request of collective node `n` of this rank (start_collective).
  CollRequest coll_request(std::uint32_t n) const;
  std::uint32_t slot_of(std::uint32_t group, std::uint32_t instance);
  /// coll_states_[slot] (slot indices never move: the deque only grows, slots are reset in place).
  CollState& state(std::uint32_t slot) { return slot == hot_slot_ ? *hot_state_ : coll_states_[slot]; }

  const Topology& topo_;
  engine::LpId id_;
  const Workload* workload_;
  const std::vector<WorkNode>* program_ = nullptr;
  const CollectivePlanner& planner_;

  // Per-message fields first (the engine prefetches an LP's first cache lines).
  std::uint64_t next_flow_ = 0;
  // The last slot_of() answer: consecutive messages nearly always belong to the same collective,
  // and the map lookup is two cache misses per message on large runs.
  std::uint64_t last_slot_key_ = ~std::uint64_t{0};
  std::uint32_t last_slot_ = 0;
  // The state of the slot last looked up (slot_of), so state(slot) skips the deque's block map.
  std::uint32_t hot_slot_ = 0xFFFFFFFFu;
  CollState* hot_state_ = nullptr;
  bool has_retired_ = false;  ///< retired_slots_ is not empty
  // Coarse rungs: (collective slot, op or node) of the sends in flight, indexed by the flow's
  // per-source counter minus coarse_base_ (no allocation per flow; entries of completed sends
  // whose parts were all sent are dropped from the front). 12 B per message between the oldest
  // in flight and the newest.
  Fidelity fidelity_ = Fidelity::kPacket;
  const FoldMap* fold_ = nullptr;  ///< sim.fold: dp (null: none)
  /// Folded runs: throws engine::InputError unless the collective of `plan` on `members` is
  /// foldable (see set_fold).
  void check_fold_plan(const RankPlan& plan, const std::vector<std::uint32_t>& members) const;
  /// sim.fold: dp: a ring message `key` (src << 32 | tag) of collective node `node` that is no
  /// ring step of this rank: the ring does not commute with the shift. @throws engine::InputError
  /// naming sim.fold (always).
  [[noreturn]] void fold_ring_mismatch(std::uint64_t key, std::uint32_t node) const;
  static constexpr std::uint32_t kNoMember = 0xFFFFFFFFu;
  /// Folded runs: a ring-family message from this rank's mirrored predecessor (key = sender << 32
  /// | tag, the tag of this rank's own send) whose piece has another slice count than the
  /// predecessor's: marks the predecessor's slices it stands for. @returns false when the message
  /// is an ordinary receive (same slice counts), left to channel_message.
  bool mirrored_channel_message(std::uint32_t slot, std::uint64_t key, engine::Context& ctx);
  RingFlows ring_flows_ = RingFlows::kStep;
  /// Streamed rings: each communicator's ring links in timing classes, built at its first
  /// streamed collective on this rank (n route look-ups once per communicator).
  std::unordered_map<std::uint32_t, RingLinkClasses> ring_links_;
  engine::LpId net_lp_ = 0;
  struct CoarseSend {
    std::uint32_t slot = 0, idx = 0;
    std::uint32_t parts_left = 0;  ///< parts (flows) of the message not yet sent; 0 = completed
  };
  /// FIFO of CoarseSend, the first 4 entries inside the LP (a ring usually has one or two sends
  /// in flight per rank: no separate allocation to miss in the cache), more on the heap.
  class SendRing {
   public:
    bool empty() const { return size_ == 0; }
    std::size_t size() const { return size_; }
    CoarseSend& operator[](std::size_t i) { return data()[(head_ + i) & (cap_ - 1)]; }
    CoarseSend& front() { return (*this)[0]; }
    void pop_front() {
      head_ = (head_ + 1) & (cap_ - 1);
      --size_;
    }
    void push_back(const CoarseSend& e) {
      if (size_ == cap_) grow();
      (*this)[size_++] = e;
    }

   private:
    CoarseSend* data() { return big_.empty() ? small_ : big_.data(); }
    void grow() {
      std::vector<CoarseSend> bigger(2 * cap_);
      for (std::size_t i = 0; i < size_; ++i) bigger[i] = (*this)[i];
      big_.swap(bigger);
      cap_ *= 2;
      head_ = 0;
    }
    CoarseSend small_[4];
    std::vector<CoarseSend> big_;
    std::size_t head_ = 0, size_ = 0, cap_ = 4;  // cap_: a power of two
  };
  SendRing coarse_sends_;
  FlowSource flow_source_;  ///< flow rung: this GPU's flows, direct or through the network LP
  // The split toward the last peer a coarse flow went to (rings send to one peer), kept when
  // the connection has one QP (no round robin to advance): saves the topology look-ups per flow.
  std::vector<engine::SimTime> port_free_;  // analytical rung: per egress port, when it is free (ps)
  std::uint32_t coarse_dst_ = 0xFFFFFFFFu;
  Nic::Split coarse_split_;
  std::uint64_t coarse_base_ = 0;  ///< flow counter of coarse_sends_.front()
  bool keep_flows_ = false;
  io::FlowDigest flow_digest_;

  std::deque<CollState> coll_states_;  // deque: references stay valid while it grows
  // Slots of completed collectives: retired at completion, reset and reused from the next
  // handle() on (no stack frame refers to them then), so coll_states_ holds at most the
  // collectives running at once, not one entry per collective of the run.
  std::vector<std::uint32_t> retired_slots_, free_slots_;
  std::unordered_map<std::uint64_t, std::uint32_t> coll_slot_;  // (group << 32 | instance) -> slot
  // Point-to-point nodes only (collectives match through CollState::recv_key):
  std::unordered_map<P2pKey, std::uint32_t, P2pKeyHash> arrived_;   // messages before their receive
  std::unordered_map<P2pKey, std::deque<std::uint32_t>, P2pKeyHash> waiting_rx_;  // -> recv nodes, FIFO

  std::unordered_map<std::uint64_t, std::pair<std::uint64_t, engine::SimTime>> rx_bytes_;  // bytes, first arrival
  std::vector<std::uint32_t> waiting_;                   // unmet deps per node
  std::shared_ptr<const ProgramIndex> index_;  // dependents and instance numbers (own or shared)
  const std::uint32_t* dep_begin_ = nullptr;    // index_->dep_begin: dependents of n are
  const std::uint32_t* dep_index_ = nullptr;    //   dep_index_[dep_begin_[n] .. dep_begin_[n+1])
  const std::uint32_t* instance_ = nullptr;     // index_->instance: collective node -> instance number
  std::uint32_t done_nodes_ = 0;
  // Progress work (set_work_weights): done_work_ sums node_work of the completed nodes.
  bool work_on_ = false;
  double work_ps_per_byte_ = 0, work_total_ = 0, done_work_ = 0;
  std::uint32_t compute_node_ = 0;  ///< the node on the compute stream while compute_busy_
  std::vector<char> done_flag_;
  std::deque<std::uint32_t> compute_queue_;
  bool compute_busy_ = false;
  std::deque<std::uint32_t> host_queue_;  ///< ready host (CPU-side) nodes, FIFO (WorkNode::host)
  bool host_busy_ = false;
  double compute_factor_ = 1.0;  ///< set_compute_factor
  std::vector<ThrottleWindow> throttle_;  ///< set_throttle
  engine::SimTime throttle_added_ps_ = 0;  ///< throttle_added_ps (checkpointed)
  std::int64_t proxy_ps_ = 0;              ///< CollectivePlanner::proxy_op_ps (0: no proxy)
  engine::SimTime proxy_free_ = 0;         ///< the proxy is busy until then (checkpointed)
  engine::SimTime host_start_ = 0;

  // PXN (CollectivePlanner::p2p_route): chunks of a relayed Send still to leave this GPU, per
  // Send node; chunks of relayed messages received so far, per (original sender, tag). Chunks of
  // two messages with the same key count together (the k-th completion is the k-th message in
  // FIFO order, as for direct messages).
  std::unordered_map<std::uint32_t, std::uint64_t> pxn_left_;
  std::unordered_map<P2pKey, std::uint64_t, P2pKeyHash> pxn_got_;
  // Analytical NVLS: contributions counted per (group, instance, tag) of chunks this GPU owns,
  // with its own flow head (delivered when the count is complete). Only looked up.
  struct NvlsWait {
    std::uint32_t count = 0;
    bool has_owner = false;
    Packet owner;
  };
  std::unordered_map<std::uint64_t, NvlsWait> nvls_wait_;

  // accounting
  engine::SimTime last_change_ = 0;
  std::uint32_t comm_active_ = 0;
  engine::SimTime compute_ps_ = 0, comm_ps_ = 0, exposed_ps_ = 0, finish_ps_ = 0;
  std::uint32_t kind_active_[kCommKinds] = {};    // communication ops in flight per CommKind
  engine::SimTime exposed_kind_[kCommKinds] = {};  // exposed time per CommKind (sums to exposed_ps_)
  std::uint32_t pp_recv_active_ = 0;  // PP receives in flight
  engine::SimTime pp_wait_ps_ = 0;    // no compute, and only PP receives in flight

  std::vector<io::FlowRecord> flows_;
  std::vector<CollectivePartial> partials_;

  std::vector<std::int32_t> watch_slot_;   // per node: index into watch_ps_, -1 = not watched (empty: none)
  std::vector<engine::SimTime> watch_ps_;  // completion times of the watched nodes
  bool trace_on_ = false;
  engine::SimTime compute_start_ = 0;
  std::vector<engine::SimTime> node_start_;  // p2p node start times (tracing only)
  std::vector<TraceInterval> trace_;
  // Last: the NIC's state is large and cold on the coarse rungs, so it does not push the
  // executor's per-message fields out of the LP's first cache lines (which the engine prefetches).
  Nic nic_;
  void trace_add(std::uint32_t node, std::uint32_t kind, std::uint32_t inst, engine::SimTime start,
                 engine::SimTime end) {
    if (trace_on_ && end > start) trace_.push_back(TraceInterval{id_, node, kind, inst, start, end});
  }
};

}  // namespace fabricsim::models
