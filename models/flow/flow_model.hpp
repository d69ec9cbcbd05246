#pragma once
/// @file flow_model.hpp
/// The coarser fidelity rungs: flow level (max-min fair sharing in one network LP) and
/// analytical (alpha-beta per transfer on its route's bottleneck, no sharing). Both keep the
/// rank executor (GpuRankLp), the planners, routes/ECMP and the output tables of the packet level.
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "engine/lp.hpp"
#include "models/topology/cluster.hpp"
#include "models/flow/flow_maxmin.hpp"
#include "models/core/fold.hpp"
#include "models/core/packet.hpp"
#include "models/core/workload.hpp"

namespace fabricsim::engine {
class Context;
}

namespace fabricsim::models {

/// Which network model a run uses (spec key sim.fidelity, `run --fidelity`).
enum class Fidelity : std::uint8_t {
  kPacket,      ///< MTU packets, store-and-forward FIFO switches (the reference)
  kFlow,        ///< flows share links max-min fairly; rates change when flows start or finish
  kAnalytical,  ///< every transfer alone on its route: alpha-beta on the bottleneck link
};

/// "packet" | "flow" | "analytical". @throws engine::InputError(file, field) for other names.
Fidelity parse_fidelity(const std::string& name, const std::string& file, const std::string& field);
const char* fidelity_name(Fidelity f);


/// The GPUs of `members` on the same NVSwitch as GPU `gpu` (an NVLS group: NVLSTree has one
/// per node), in `members` order.
std::vector<std::uint32_t> nvls_local_members(const Topology& topo, const std::vector<std::uint32_t>& members,
                                              std::uint32_t gpu);

/// NVLS (packet.hpp NvlsMode) of a coarse flow: NVLS flows ride the pseudo-channels
/// 0x8000 | channel (reduce) and 0xC000 | channel (multicast) in Packet::conn.
inline std::uint8_t coarse_nvls(const Packet& head) {
  const std::uint32_t ch = head.conn >> 16;
  return (ch & 0xC000u) == 0xC000u ? 2 : (ch & 0x8000u) ? 1 : 0;
}

/// A flow's route through the topology, exactly as the packet level takes it
/// (Topology::route with the flow's hash at every hop).
struct FlowPath {
  std::uint32_t hops = 0;
  std::uint32_t link[MaxMinSolver::kMaxHops] = {};  ///< directed link id (see LinkIndex)
  std::uint64_t rate_bps[MaxMinSolver::kMaxHops] = {};
  engine::SimTime latency_ps[MaxMinSolver::kMaxHops] = {};
  std::uint32_t mtu_bytes = 0;  ///< payload per packet on the path (NVLink or network MTU)
  std::uint32_t first_port = 0;  ///< the source's egress port (index into its ports)
};

/// Dense ids for directed links: link(node, port) = offset[node] + port.
class LinkIndex {
 public:
  explicit LinkIndex(const Topology& topo);
  std::uint32_t link(engine::LpId node, std::uint32_t port) const { return offset_[node] + port; }
  std::uint32_t size() const { return offset_.back(); }
  /// Capacities (bits/s) of all directed links, by link id.
  std::vector<double> capacities(const Topology& topo) const;

 private:
  std::vector<std::uint32_t> offset_;
};

/// The route of a flow from GPU `src` to GPU `dst`; link ids are filled when `index` is given.
FlowPath route_path(const Topology& topo, const LinkIndex* index, std::uint32_t src,
                    std::uint32_t dst, std::uint64_t flow_hash);

/// Closed-form timing of one transfer alone on its path (store-and-forward):
///   last packet p = ((bytes-1) mod mtu) + 1 (0 for an empty transfer);
///   head    = L_1                                    (first-hop latency)
///   drain   = serialization of bytes - p at the path's bottleneck rate, counted per packet
///             exactly as the packet-level source port does when the bottleneck is the first hop
///   tail    = sum over hops i >= 2 of (ser(p, R_i) + L_i)  (the last packet's store-and-forward)
///             + train_ps (a short last packet queued behind the full one before it)
/// so a lone transfer arrives at start + head + drain + tail (exactly the packet level's last
/// packet when the first hop is the bottleneck) and leaves its NIC at start + drain + ser(p, R_1).
struct TransferTiming {
  engine::SimTime head_ps = 0;   ///< L_1
  engine::SimTime drain_ps = 0;  ///< bytes - p at the bottleneck (ps)
  engine::SimTime tail_ps = 0;   ///< ser(p, R_1) + sum_{i>=2} (ser(p, R_i) + L_i)
  std::uint64_t rest_bytes = 0;  ///< bytes - p
  std::uint64_t bottleneck_bps = 0;
  /// ser(p) at the bottleneck as the lone drain counts it: ser(p, R_1) when the first hop is the
  /// bottleneck, else ser(p, R_b). The flow level shares all `bytes` (the last packet occupies
  /// its links too) and forwards only the store-and-forward rest: a lone flow drains all bytes
  /// in drain_ps + last_share_ps and arrives tail_ps - last_share_ps later, the same instant.
  engine::SimTime last_share_ps = 0;
  /// Part of tail_ps by which a short last packet (p < MTU, at least two packets, two or more
  /// hops) waits behind the full packet before it at the hops after the first (the packet
  /// train's store-and-forward pipeline, see transfer_timing); 0 otherwise.
  engine::SimTime train_ps = 0;
  /// ser(p, R_1): the last packet's time on the first link (the sender's port).
  engine::SimTime last_first_ps = 0;
};
TransferTiming transfer_timing(const FlowPath& path, std::uint64_t bytes);

/// Packet::conn of a coarse flow: queue pair k (< 256) of NCCL channel `channel`'s connection,
/// the message split over `parts` (1..256) QPs.
constexpr std::uint32_t coarse_conn(std::uint32_t channel, std::uint32_t k, std::uint32_t parts) {
  return channel << 16 | (k & 0xFFu) << 8 | ((parts - 1) & 0xFFu);
}
/// The queue pair index (channel << 16 | k) of Packet::conn, as roce_sport takes it.
constexpr std::uint32_t coarse_conn_qp(std::uint32_t conn) { return (conn >> 16) << 16 | (conn >> 8 & 0xFFu); }
/// Bytes of the part (one flow) a coarse-rung packet head stands for: its message's
/// flow_bytes cut over Packet::conn's parts as Nic::send_message cuts it.
std::uint64_t coarse_part_bytes(const Packet& head, const Topology& topo);

/// The GPU side of the coarse rungs: hands a flow to the network LP (flow) or schedules its
/// arrival and send completion directly (analytical). `head` is the flow's packet template
/// (flow_id, message bytes, the QP's ECMP hash, conn, tag, ranks...); one call per part.
/// At the flow level the flow reaches the network LP coarse_offset_ps(topo) after it is posted.
/// Analytical: `port_free` (one entry per port of the source GPU, ps) is the sender's egress
/// clock: a transfer starts when its first link is free, so a GPU's own concurrent transfers
/// (NCCL channels, QPs) are serialized on its port and never exceed its line rate; nothing is
/// shared beyond the sender. Unused (may be null) at the flow level.
/// NVLS flows (coarse_nvls) at the analytical rung also need `nvls_members` (the communicator).
/// `fold` (sim.fold: dp; null or inactive: none): an arrival for a rank outside the
/// representative replica is delivered as its image into it (FoldMap::mirror).
void start_coarse_flow(const Topology& topo, Fidelity fidelity, engine::LpId net_lp, const Packet& head,
                       engine::Context& ctx, std::vector<engine::SimTime>* port_free,
                       const std::vector<std::uint32_t>* nvls_members = nullptr, const FoldMap* fold = nullptr);

/// D = min(NVLink, NIC latency): the GPU <-> network LP lookahead. The network LP's clock runs
/// D behind the GPUs' NIC/NVLink egress: a flow posted at t0 joins its links at t0 + D, so
/// every flow on a link sees the same offset, and the send completion (the last byte left the
/// GPU at t_d - D) is reported at t_d + D, 2D late (the least the lookahead allows).
engine::SimTime coarse_offset_ps(const Topology& topo);

/// The source GPU's side of the flow rung (one per GPU-rank LP): hands a flow to the network LP,
/// or - when the network LP's answer is already known at the source - schedules that answer
/// itself, without the network LP's three events (start, arrival, send completion become two).
///
/// When the answer is known: FlowNetLp serves a flow of at most one packet (part bytes <= the
/// first hop's MTU: TransferTiming::rest_bytes == 0) as store-and-forward latency after its turn
/// on its port's clock - it never joins a link's max-min share - as soon as its queue pair is
/// free, and a queue pair of this GPU is free (and its port clock there idle) at the network
/// LP's instant t0 + D when every flow this GPU handed to the network LP before has been
/// reported sent (each report, kEvFlowSent, comes D after the flow left its port; a flow of this
/// instant that went to the network LP before this one is still outstanding). Then, with start
/// s = max(t0, this GPU's port clock), the arrival is s + L_1 + tail (TransferTiming: head_ps +
/// tail_ps) and the send completion s + ser(p, R_1) + 2D, exactly the network LP's times
/// (FlowNetLp::tick, single-packet branch; its clock runs D later), so the simulated times of
/// every flow and collective are the same either way; only
/// the engine's tie order of equal-time events changes (src is the GPU, not the network LP).
/// Cost: route_path once per (peer, flow hash, bytes) in a 4-entry cache (a ring sends every step
/// to one peer over the same QPs).
class FlowSource {
 public:
  /// Sends flow `head` (one part: Packet::conn says which, coarse_part_bytes its size) of this
  /// GPU (ctx.self() == head.src_rank) at ctx.now(): directly when the network LP's answer is
  /// known, else as kEvFlowStart to `net_lp` D = coarse_offset_ps later. `fold` (null: none):
  /// a direct arrival for a rank outside the representative replica is delivered as its image
  /// (FoldMap::mirror); the network LP does the same for the flows it serves.
  ///
  /// Port clock: a single-packet flow occupies its egress port for ser(p, R_1) (the packet
  /// rung's port sends a GPU's concurrent one-packet messages one after another); it starts
  /// when the port's earlier single-packet flows are through (FlowNetLp keeps the same clock
  /// for those it serves), and a flow handed to the network LP is handed no sooner than that.
  void post(const Topology& topo, engine::LpId net_lp, const Packet& head, engine::Context& ctx,
            const FoldMap* fold = nullptr);
  /// The network LP reported one of this GPU's flows sent (kEvFlowSent whose source is net_lp).
  /// @throws engine::InternalError if no flow was outstanding.
  void net_sent();
  /// Flows handed to the network LP and not yet reported sent.
  std::uint32_t outstanding() const { return outstanding_; }
  /// Flows posted directly / through the network LP (statistics, tests).
  std::uint64_t direct_flows() const { return direct_; }
  std::uint64_t net_flows() const { return net_; }

 private:
  struct Entry {
    std::uint64_t hash = 0;
    std::uint64_t bytes = ~std::uint64_t{0};
    std::uint32_t dst = 0xFFFFFFFFu;
    std::uint32_t delay_ps = 0;    ///< direct: arrival - post, L_1 + tail (TransferTiming)
    std::uint32_t ser_ps = 0;      ///< direct: the packet's serialization on the port, ser(p, R_1)
    std::uint16_t port = 0;        ///< the GPU's egress port (FlowPath::first_port)
    bool direct = false;           ///< one packet at most, arrival no sooner than D, both times < 2^32 ps
  };  // 32 bytes: the cache stays in the LP's first cache lines
  /// Per egress port: when the single-packet flows sent directly are through it (the GPU's
  /// frame; the network LP's port clock runs D later, see FlowNetLp). Inline for the first
  /// kInlinePorts ports (NVLink and one NIC: no separate allocation to miss per flow).
  static constexpr std::uint32_t kInlinePorts = 2;
  engine::SimTime& port_free(std::uint32_t port) {
    if (port < kInlinePorts) return port_free_[port];
    if (!more_ports_) more_ports_ = std::make_unique<std::vector<engine::SimTime>>();
    if (port - kInlinePorts >= more_ports_->size()) more_ports_->resize(port - kInlinePorts + 1, 0);
    return (*more_ports_)[port - kInlinePorts];
  }
  std::uint32_t outstanding_ = 0;
  engine::SimTime port_free_[kInlinePorts] = {};  // next to outstanding_: one cache line per post
  Entry cache_[4];
  std::uint64_t direct_ = 0, net_ = 0;
  std::unique_ptr<std::vector<engine::SimTime>> more_ports_;  // ports kInlinePorts and up (rare)
};

/// The flow-level network: one LP owning every link's flows and the max-min solver. GPUs send it
/// kEvFlowStart delayed by D = coarse_offset_ps (the lookahead); it sends kEvFlowArrive to the
/// destination (L_1 - D + tail later) and kEvFlowSent to the source (D later).
///
/// Model: at time t1 (start + D, D = coarse_offset_ps) all the flow's bytes join the max-min share of every link of
/// its route; when they are drained (t_d) the last packet is forwarded store-and-forward:
/// arrival = t_d + L_1 - D + sum_{i>=2}(ser(p, R_i) + L_i) (first hop the bottleneck; TransferTiming for
/// the general case). A flow alone therefore arrives exactly when the packet level's last packet
/// does, and the last packet's first-hop serialization occupies the link (the next flow of its
/// queue pair starts after it, as at the packet level). Rates are recomputed once per simulated instant for the union of the
/// components touched by the flows that started or finished at that instant. Memory: one
/// ~150-byte record per active flow, none per packet.
class FlowNetLp final : public engine::Lp {
 public:
  FlowNetLp(const Topology& topo, engine::LpId id);
  /// Communicators (Workload::groups, outliving the LP), needed for NVLS flows' members.
  void set_groups(const std::vector<CommGroup>* groups) { groups_ = groups; }
  /// Folds the DP replicas (sim.fold: dp, docs/folding.md): arrivals for ranks outside the
  /// representative replica are delivered as their images into it (FoldMap::mirror), and every
  /// link a flow crosses is replaced by its representative under the shift: a GPU's own links by
  /// the representative GPU's, a switch's link into GPU g by its link into the representative of
  /// g (the switch reached from it over the same GPU port). Links between switches stay. `fold`
  /// outlives the LP; call before the run. @throws engine::InternalError if a GPU and its
  /// representative have different ports.
  void set_fold(const FoldMap* fold);
  /// Flows admitted whose route crosses a link between two switches (counted in folded runs only:
  /// their sharing with the mirrored replicas' flows there is not modelled, docs/folding.md).
  std::uint64_t fold_switch_flows() const { return fold_switch_flows_; }
  void init(engine::Context&) override {}
  void handle(const engine::Event& ev, engine::Context& ctx) override;
  /// Totals for reports: flows handled, max-min recomputations, flows re-solved.
  std::uint64_t flows() const { return flows_total_; }
  std::uint64_t solves() const { return solves_; }
  std::uint64_t resolved_flows() const { return resolved_; }
  /// Route cache statistics (route_of): look-ups and misses over the whole run, and its entries now.
  std::uint64_t route_lookups() const { return route_lookups_total_; }
  std::uint64_t route_misses() const { return route_misses_total_; }
  std::size_t route_entries() const { return routes_.size(); }
  /// Bytes carried per directed link (link utilization = bytes*8 / (rate * time)).
  const std::vector<std::uint64_t>& link_bytes() const { return link_bytes_; }

 private:
  struct NvlsRed;
  struct Active {
    Packet head;
    double rem_bits = 0;         // bits still to drain (beyond the last packet)
    double rate = 0;             // bits/s, from the solver
    engine::SimTime last = 0;    // when rem_bits was last brought up to date
    engine::SimTime drain = 0;   // scheduled drain time
    engine::SimTime tail_ps = 0;
    engine::SimTime head_ps = 0;
    std::uint64_t first_rate = 0;  // R_1: exact per-packet drain while never shared
    std::uint32_t mtu = 0;
    std::uint32_t version = 0;
    bool shared = false;         // rate ever differed from R_1
    std::uint8_t nvls = 0;       // NvlsMode of an NVLS uplink flow (GPU -> NVSwitch)
    bool down = false;           // NVLS: NVSwitch -> GPU flow (no queue pair)
    bool reported = false;       // its completion was reported (at report_at, before its drain)
    engine::SimTime phase_ps = 0;   // NVLS uplink: round-robin phase (nvls_phase); reported this much early
    engine::SimTime report_at = 0;  // scheduled report instant (drain - phase, not before it was set)
    NvlsRed* chunk = nullptr;    // NVLS: its chunk (stable: unordered_map nodes do not move)
  };
  struct Pending {
    Packet head;
    bool owns = false;           // already owns its queue pair
    std::uint8_t stage = 0;      // 0 ordinary, 1 NVLS uplink, 2 NVLS downlink
    bool clocked = false;        // waited for its port clock (deferred_): starts now
  };
  /// NVLS: the flow for `head` from its source GPU into the NVSwitch (stage 1) or from the
  /// NVSwitch to head.dst_rank (stage 2), with its path.
  FlowPath nvls_path(const Packet& head, std::uint8_t stage) const;
  /// NVLS, cut-through (the NVSwitch forwards each reduced or multicast packet as soon as it
  /// has it, as the packet rung does): an uplink flow `head` was admitted at this instant. A
  /// reduce contribution counts towards its chunk: once every member's contribution has started,
  /// the owner's downlink flow starts; a multicast's member downlink flows start with it.
  /// `up_latency_ps` is the uplink's NVLink latency.
  void nvls_up_started(const Packet& head, engine::SimTime up_latency_ps);
  /// NVLS: an uplink flow's last byte reached the NVSwitch at `at_ps` (the network LP's frame).
  /// When the chunk's last contribution (or the multicast) is in, downlink flows that already
  /// drained report their arrival.
  void nvls_up_drained(const Packet& head, engine::SimTime at_ps, engine::Context& ctx);
  /// NVLS: downlink flow `head` sent its last byte at `at_ps` as far as its own share of the
  /// downlink goes; it arrives when that and its supply allow (nvls_up_drained).
  void nvls_down_drained(const Packet& head, engine::SimTime at_ps, engine::SimTime down_latency_ps,
                         engine::Context& ctx);
  void tick(engine::Context& ctx);
  void release_connection(const Packet& head);
  /// Route and timing of a flow: route_path and transfer_timing are pure functions of
  /// (src, dst, flow hash) and (path, bytes), so a four-way set-associative cache of recent answers
  /// gives the same values without walking the routing tables again (a ring sends every step's flow
  /// over the same QP, hence the same route; the look-ups were ~10% of a 1,024-rank ring run).
  /// A set is chosen by (src, dst, flow hash, message bytes, QP); each entry has a 32-bit tag in
  /// route_tags_ (four per set, one cache line for four sets), so a look-up reads one tag line
  /// and then the one entry it names. (Two-way sets indexed without the size missed 21% of the
  /// look-ups of the 768-GPU MoE iteration: a rank's ~21 keys, its DP ring's stream sizes among
  /// them, fell into the same sets.)
  struct RouteEntry {
    std::uint64_t key_hash = 0;  ///< route_key_hash of the flow it was filled for (rehash on growth)
    std::uint64_t hash = 0;
    std::uint64_t bytes = ~std::uint64_t{0};
    std::uint32_t src = 0xFFFFFFFFu, dst = 0xFFFFFFFFu;
    std::uint32_t hops = 0;
    std::uint32_t mtu = 0;
    std::uint32_t link[MaxMinSolver::kMaxHops] = {};
    TransferTiming timing;
    bool crosses_switches = false;  ///< folded runs: the route has a switch-to-switch link
  };
  const RouteEntry& route_of(const Packet& head, std::uint64_t bytes);
  /// Fills e's route (hops, MTU, links) and its transfer timing for `bytes` from `path`.
  static void set_route(RouteEntry& e, const FlowPath& path, std::uint64_t bytes);
  static constexpr std::size_t kRouteWays = 4;
  /// Hash of head's cache key (src, dst, flow hash, message bytes, conn): the set is its low bits
  /// (index of the set's first entry: (h mod sets) * kRouteWays), the tag its high half | 1.
  std::uint64_t route_key_hash(const Packet& head) const;
  /// Starts loading head's route set into the cache (the flow is solved at the instant's tick,
  /// after every other flow of the instant arrived: the load overlaps with their handling).
  void prefetch_route(const Packet& head) const;
  /// Reports flow f complete: its arrival (ordinary flows), send completion, and for NVLS flows
  /// its chunk's progress. At its drain, or earlier by its round-robin phase (nvls_phase).
  void report(std::uint32_t f, engine::Context& ctx);
  /// Flow f's shared bytes drained: it leaves the solver and frees its queue pair.
  void drained(std::uint32_t f, engine::Context& ctx);
  void schedule(engine::SimTime t, engine::Context& ctx);

  const Topology& topo_;
  engine::LpId id_;
  // A queue pair: (src << 32 | dst, channel << 16 | k). Its flows are served one at a time.
  struct QpKey {
    std::uint64_t pair = 0;
    std::uint32_t qp = 0;
    bool operator==(const QpKey&) const = default;
  };
  struct QpKeyHash {
    std::size_t operator()(const QpKey& k) const noexcept;
  };
  static QpKey qp_key(const Packet& head);
  /// Open-addressing set of the QPs with a flow in service (linear probing, backward-shift
  /// deletion): one insert and one erase per flow without a heap allocation each.
  class QpSet {
   public:
    bool insert(const QpKey& k);  ///< false if already present
    void erase(const QpKey& k);

   private:
    std::size_t find_slot(const QpKey& k) const;
    std::vector<QpKey> keys_;
    std::vector<std::uint8_t> used_;
    std::size_t size_ = 0;
  };
  QpSet busy_;
  std::unordered_map<QpKey, std::deque<Packet>, QpKeyHash> waiting_;  // their queued flows, in order
  LinkIndex index_;
  MaxMinSolver solver_;
  std::vector<Active> act_;  // by solver flow id
  std::vector<Pending> pending_;
  /// Port clock of the GPUs' egress links (by link id, GPU links only): when the single-packet
  /// flows admitted so far are through their first link. A single-packet flow starts at
  /// max(now, clock) and occupies the port ser(p, R_1); any other ordinary flow whose port is
  /// busy waits (deferred_) until it is free, as a flow the GPU (FlowSource) holds back would.
  std::vector<engine::SimTime> port_free_;
  /// Ordinary flows waiting for their port clock: (start, sequence, flow; it owns its QP).
  std::map<std::pair<engine::SimTime, std::uint64_t>, Packet> deferred_;
  std::uint64_t deferred_seq_ = 0;
  const std::vector<CommGroup>* groups_ = nullptr;
  // NVLS chunks in progress, by (owner or multicast sender, group, instance, tag; the tag tells
  // a reduction from a multicast): the uplink flows started and drained into the switch, the
  // downlink flows still to report, and those whose own drain came before their supply's. Only
  // looked up, never iterated.
  struct NvlsRed {
    std::uint32_t need = 0;       // uplink flows feeding the chunk: members (reduce) or 1
    std::uint32_t started = 0, drained = 0;
    std::uint32_t down_left = 0;  // downlink flows whose arrival is not sent yet
    bool has_owner = false;
    engine::SimTime up_done_ps = 0;   // the switch has every contribution's last byte
    engine::SimTime up_latency_ps = 0;
    Packet owner;
    struct Down {
      Packet head;
      engine::SimTime at_ps, latency_ps;
    };
    std::vector<Down> early;      // downlink flows drained before their supply finished
    std::vector<std::uint32_t> up_flows, down_flows;  // solver ids of its flows still draining
    engine::SimTime touched_at = -1;  // the instant its downlink flows' caps were last refreshed
    engine::SimTime supply_at = -1;   // the instant supply_bps was computed for
    double supply_bps = 0;
    /// Round-robin phase of the supply (nvls_phase): the least of its uplink flows' phases (the
    /// last contribution to complete decides); its downlink flows report this much early too.
    engine::SimTime phase_ps = -1;
    bool downs_created = false;  // its downlink flows exist (down_left counts them)
    bool dead = false;           // queued in nvls_dead_
  };
  struct NvlsKey {
    std::uint32_t dst = 0, group = 0, instance = 0, tag = 0;
    bool operator==(const NvlsKey&) const = default;
  };
  struct NvlsKeyHash {
    std::size_t operator()(const NvlsKey& k) const noexcept;
  };
  /// The chunk `head` (an NVLS flow of either stage) belongs to.
  static NvlsKey nvls_key(const Packet& head);
  /// Sends the arrival of downlink flow `d` of chunk `e` (its supply is complete).
  void nvls_arrive(const NvlsRed& e, const NvlsRed::Down& d, engine::Context& ctx) const;
  std::unordered_map<NvlsKey, NvlsRed, NvlsKeyHash> nvls_red_;
  /// Sets flow f's rate to r at `now` (bits/s): brings its remaining bits up to date and
  /// schedules its drain (kept exact per packet while it runs alone at its bottleneck rate).
  void apply_rate(std::uint32_t f, double r, engine::SimTime now);
  /// NVLS: the rate (bits/s) at which chunk e's switch-side stream grows: the rate of its least
  /// advanced uplink flow still draining.
  double nvls_supply_bps(const NvlsRed& e, engine::SimTime now) const;
  /// NVLS: downlink flow f at min(its max-min share, its supply's rate). A downlink flow that
  /// falls behind its supply keeps this cap (an approximation: it could catch up faster), and
  /// the part of its share it cannot use is not given to other flows on its link.
  void nvls_cap(std::uint32_t f, engine::SimTime now);
  /// NVLS: drops solver flow f from its chunk's uplink (`up`) or downlink list.
  void nvls_forget(std::uint32_t f, bool up);
  /// NVLS: queues chunk e (of flow head `h`) for erasure at the instant's end once every
  /// downlink flow was reported and none of its flows is still draining.
  void nvls_maybe_dead(NvlsRed* e, const Packet& h);
  /// NVLS round-robin phase (the packet rung's per-unit round robin over a GPU's queue pairs,
  /// emulated as a reporting offset of the fluid): gives each NVLS uplink flow admitted at this
  /// instant (nvls_new_) its phase from its queue pair's position in its GPU's service order.
  void nvls_phase();
  /// A queue pair's position in its GPU's NVLS service order: (generation, position). A GPU's
  /// positions restart (new generation) once it has no NVLS uplink flow left.
  struct NvlsPos {
    std::uint32_t gen = 0, pos = 0;
  };
  std::unordered_map<QpKey, NvlsPos, QpKeyHash> nvls_pos_;
  std::vector<std::uint32_t> nvls_gen_, nvls_next_;  // per GPU: generation, next position
  std::vector<std::uint32_t> nvls_new_;      // NVLS uplink flows admitted at this instant
  std::vector<std::uint32_t> nvls_emptied_;  // GPUs an NVLS uplink flow drained from at this instant
  std::vector<NvlsRed*> nvls_touched_;  // chunks whose uplink flows' rates changed or drained now
  std::vector<NvlsKey> nvls_dead_;       // chunks done at this instant, erased at its end
  std::uint32_t nvls_link0_ = 0;  // solver link id of GPU 0's virtual NVLS issue link
  /// A scheduled drain or early report, ordered by (time, flow, version, kind).
  struct Drain {
    engine::SimTime t;
    std::uint32_t f;
    std::uint32_t version;
    std::uint8_t kind;  ///< 0: early report at report_at, 1: drain
  };
  /// The lexicographic order of (t, f, version, kind), written out (std::tuple's comparison goes
  /// through C++20's synthesized three-way compare, measurably slower in this heap).
  struct DrainGreater {
    bool operator()(const Drain& a, const Drain& b) const {
      if (a.t != b.t) return a.t > b.t;
      if (a.f != b.f) return a.f > b.f;
      if (a.version != b.version) return a.version > b.version;
      return a.kind > b.kind;
    }
  };
  /// Min-heap of Drain (std::push_heap/pop_heap with DrainGreater). A rescheduled flow leaves
  /// its old entries behind (skipped when popped); when the heap holds more than
  /// 4 x (flows in the solver) + kDrainSlack entries, compact_drains() drops every entry that is
  /// no longer current, so the heap stays proportional to the active flows (an NVLS AllReduce
  /// re-rates each flow many times: the stale entries made the heap's sift-down most of the run).
  std::vector<Drain> drains_;
  static constexpr std::size_t kDrainSlack = 4096;
  std::size_t solver_flows_ = 0;  ///< flows in the solver now (added, not yet drained)
  void push_drain(const Drain& d);
  void pop_drain();
  /// True when `d` is still the flow's scheduled report (kind 0) or drain (kind 1).
  bool drain_current(const Drain& d) const;
  /// Removes every entry that is not current and rebuilds the heap (the pop order of the
  /// current entries is unchanged: (t, f, version, kind) is a strict total order).
  void compact_drains();
  /// The instants with a kEvNetTick scheduled (open addressing, linear probing, backward-shift
  /// deletion; it was a std::set, one tree node per flow start).
  class TimeSet {
   public:
    bool insert(engine::SimTime t);  ///< false if already present
    void erase(engine::SimTime t);

   private:
    std::size_t home(engine::SimTime t) const;
    std::vector<engine::SimTime> keys_;  // kEmpty marks a free slot
    std::size_t size_ = 0;
    static constexpr engine::SimTime kEmpty = -1;  // ticks are never scheduled before time 0
  };
  TimeSet ticks_;
  std::vector<std::uint32_t> seeds_, solved_;
  std::vector<RouteEntry> routes_;  // power-of-two size, sets of kRouteWays entries (route_of)
  std::vector<std::uint32_t> route_tags_;  // by entry: its key's tag, 0 when empty
  std::uint64_t route_clock_ = 0;          // round-robin victim among a full set's ways
  std::size_t route_cap_ = 0;        // the most entries routes_ may grow to (route_of)
  std::uint64_t route_lookups_ = 0, route_misses_ = 0;  // since the last growth check
  std::uint64_t route_lookups_total_ = 0, route_misses_total_ = 0;  // over the run (statistics)
  std::vector<std::uint64_t> link_bytes_;
  const FoldMap* fold_ = nullptr;            // sim.fold: dp (null: none)
  std::vector<std::uint32_t> canon_;         // folded: link id -> its representative link
  std::vector<std::uint8_t> switch_link_;    // folded: 1 for a link between two switches
  std::uint64_t fold_switch_flows_ = 0;
  std::uint64_t flows_total_ = 0, solves_ = 0, resolved_ = 0;
  // D = coarse_offset_ps: delay of kEvFlowStart and of kEvFlowSent. The packet level's send
  // completes D before the drain instant seen here (the last packet left the first hop), which
  // this LP cannot reach back to; a send therefore completes 2D late.
  engine::SimTime sent_delay_ps_ = 0;
};

}  // namespace fabricsim::models
