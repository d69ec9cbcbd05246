#pragma once
/// @file comm_plan.hpp
/// The contract between the rank executor (models) and the collective planner (simccl): a
/// collective becomes, on each rank, a small DAG of point-to-point sends and receives.
///
/// Layout (compact): a RankPlan holds its ops in one vector and their
/// dependencies in CSR form (dep_begin offsets into one dep_index vector) instead of a vector per
/// op. Planners build plans only through RankPlan::add(op, deps) and read them back through
/// size(), ops[i] and deps(i); for example
///   RankPlan p;
///   const std::uint32_t r = p.add(P2pOp{false, prev, 0, tag});
///   p.add(P2pOp{true, next, bytes, tag}, {r});      // send after the receive r
/// Rules (checked by tests/simccl): deps of op i are indices < i; (peer, tag) of a receive is
/// unique per receiver inside one collective instance.
///
/// Lazy form: a planner may instead set RankPlan::lazy_ring (a ring of identical steps, O(1)
/// memory however many steps); the executor then produces each step's ops as it reaches them.
/// RankPlan::expanded() gives the equivalent materialized plan (tests, tools).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <vector>

#include "models/core/packet.hpp"
#include "models/core/workload.hpp"

namespace fabricsim::models {

/// One point-to-point operation of a rank inside a collective (40 bytes). Its dependencies live
/// in the owning RankPlan (RankPlan::deps).
struct P2pOp {
  bool is_send = false;
  std::uint32_t peer = 0;       ///< global rank of the peer
  std::uint64_t bytes = 0;      ///< message size in bytes (sends only; receivers learn it from the flow)
  std::uint32_t tag = 0;        ///< (sender rank, tag) is unique per receiver inside one collective instance
  // Planner annotations (the executor does not need them; reports and tests do):
  std::uint16_t channel = 0;        ///< NCCL channel the op belongs to
  bool relay = false;               ///< forwards another rank's data (PXN relay), not this rank's own
  /// Sends: NVLink SHARP mode (packet.hpp NvlsMode). kNvlsReduce: this rank's copy of the shard
  /// owned by `peer` goes into the NVSwitch's reduction; only the owner receives (from itself,
  /// same tag) the reduced shard. kNvlsMulticast: the switch copies the message to every rank
  /// of the communicator, which receive it from this rank (peer = this rank, ignored).
  std::uint8_t nvls = 0;
  std::uint64_t payload_bytes = 0;  ///< sends: data bytes carried; bytes - payload = protocol overhead (LL/LL128)
  /// The per-step synchronization of a pipelined collective, executed by the rank executor on
  /// every rung. Sends: ps the rank waits, once the dependencies are met, before the send starts.
  /// Receives: ps from the message's arrival to the receive's completion (the hop latency as the
  /// data's, so that it overlaps the sender's next send). A message that arrived before the
  /// collective started at the receiver completes at the start without the wait. 0: no wait.
  std::int64_t delay_ps = 0;
};

/// A ring of `steps` steps, the shape of simccl's ring AllReduce/AllGather/ReduceScatter: at
/// step k the rank sends step_bytes(k) bytes to `next` with tag k once it received step k-1,
/// and receives tag k from `prev`. Equivalent to the materialized ops 2k = send (deps {2k-1}
/// for k > 0) and 2k+1 = receive; the executor numbers the ops the same way.
struct LazyRing {
  std::uint32_t steps = 0;
  std::uint32_t next = 0;  ///< global rank sent to
  std::uint32_t prev = 0;  ///< global rank received from
  std::function<std::uint64_t(std::uint32_t)> step_bytes;  ///< bytes sent at step k (deterministic, pure)
  /// Bytes `prev` sends at step k, i.e. received at step k (deterministic, pure). Needed only
  /// by streamed rings (sim.ring_flows: stream, models/flow/ring_stream.hpp); may be empty otherwise.
  std::function<std::uint64_t(std::uint32_t)> recv_bytes;
};

struct RankPlan;

/// Position of one channel's send cursor in a LazyChannelRing: loop l, step k, slice j (of ns
/// slices at (l, k)); done once every send of the channel was issued.
struct RingCursor {
  std::uint64_t l = 0;
  std::uint32_t k = 0;
  std::uint32_t j = 0;
  std::uint32_t ns = 0;
  bool done = false;
};

/// The NCCL ring family (simccl's NcclPlanner: ring AllReduce / AllGather / ReduceScatter over
/// several channels, loops of chunks, slices per step) in lazy form: O(channels) memory per rank
/// instead of channels x loops x steps x slices ops. Per channel c the rank sends, in order, for
/// every loop l < nloops[c], step k < steps and slice j < ns(l, k) one message to next[c]; each
/// send waits for the channel's previous send and, when k > 0 and j < nr(l, k-1), for the receive
/// of slice j of step k-1 from prev[c]; a receive completes recv_delay(c) after its message arrived. ns / nr = slices of the piece this rank / its predecessor
/// sends at (l, k). Tags: ((c (max_loops + 1) + l) steps + k) max_slices + j, unique per
/// receiver. Exactly the ops, dependencies, tags and message sizes of the materialized plan
/// (`materialize()`, which the planner also uses for tests and reports).
struct LazyChannelRing {
  std::uint32_t channels = 0;
  std::uint32_t steps = 0;
  std::uint32_t max_slices = 1;
  std::uint64_t max_loops = 1;        ///< tag stride: loops of the largest channel
  std::uint64_t slice_bytes = 1;      ///< data bytes per slice (protocol slice size)
  std::vector<std::uint32_t> next;    ///< per channel: global rank sent to
  std::vector<std::uint32_t> prev;    ///< per channel: global rank received from
  std::vector<std::uint64_t> nloops;  ///< per channel
  /// Data bytes this rank (theirs = false) or its predecessor (theirs = true) sends at loop l,
  /// step k of channel c (deterministic, pure).
  std::function<std::uint64_t(std::uint32_t c, std::uint64_t l, std::uint32_t k, bool theirs)> piece;
  /// Data bytes that member m of the communicator (index into its rank list) sends at loop l,
  /// step k of channel c (deterministic, pure): the slices of a mirrored sender under sim.fold: dp
  /// (GpuRankLp::mirrored_channel_message, docs/folding.md).
  std::function<std::uint64_t(std::uint32_t c, std::uint64_t l, std::uint32_t k, std::uint32_t m)> member_piece;
  /// Bytes on the wire for `data` payload bytes (the protocol's efficiency).
  std::function<std::uint64_t(std::uint64_t data)> wire;
  /// The equivalent materialized plan.
  std::function<RankPlan()> materialize;
  /// Per channel: ps every receive of the channel takes from its message's arrival to its
  /// completion (P2pOp::delay_ps of each of its receives: the hop latency of the step, paid by
  /// the data on its way to the receiver, so that the channel's sends go back to back); empty: none.
  std::vector<std::int64_t> recv_delay_ps;

  std::int64_t recv_delay(std::uint32_t c) const { return c < recv_delay_ps.size() ? recv_delay_ps[c] : 0; }
  std::uint32_t nslices(std::uint64_t bytes) const {
    const std::uint64_t n = bytes == 0 ? 1 : (bytes + slice_bytes - 1) / slice_bytes;
    return static_cast<std::uint32_t>(n < 1 ? 1 : (n > max_slices ? max_slices : n));
  }
  std::uint32_t tag(std::uint32_t c, std::uint64_t l, std::uint32_t k, std::uint32_t j) const {
    return static_cast<std::uint32_t>(((c * (max_loops + 1) + l) * steps + k) * max_slices + j);
  }
  /// Receive slot of (l, k, j) inside channel c's arrival bitmap.
  std::uint64_t recv_index(std::uint64_t l, std::uint32_t k, std::uint32_t j) const {
    return (l * steps + k) * max_slices + j;
  }
  std::uint64_t recv_slots(std::uint32_t c) const { return nloops[c] * steps * max_slices; }
  /// Decodes a tag into (channel, receive slot); false if no receive of this plan has it.
  bool decode(std::uint32_t t, std::uint32_t& c, std::uint64_t& slot) const {
    const std::uint64_t per_c = (max_loops + 1) * steps * max_slices;
    c = static_cast<std::uint32_t>(t / per_c);
    if (c >= channels) return false;
    const std::uint64_t rest = t % per_c;
    const std::uint32_t j = static_cast<std::uint32_t>(rest % max_slices);
    const std::uint32_t k = static_cast<std::uint32_t>((rest / max_slices) % steps);
    const std::uint64_t l = rest / (std::uint64_t{max_slices} * steps);
    if (l >= nloops[c] || j >= nslices(piece(c, l, k, true))) return false;
    slot = recv_index(l, k, j);
    return true;
  }
  /// Sets `cur` on channel c's first send.
  void first(std::uint32_t c, RingCursor& cur) const {
    cur = RingCursor{};
    cur.done = nloops[c] == 0 || steps == 0;
    if (!cur.done) cur.ns = nslices(piece(c, 0, 0, false));
  }
  /// Moves `cur` to channel c's next send.
  void advance(std::uint32_t c, RingCursor& cur) const {
    if (++cur.j < cur.ns) return;
    cur.j = 0;
    if (++cur.k == steps) {
      cur.k = 0;
      if (++cur.l == nloops[c]) {
        cur.done = true;
        return;
      }
    }
    cur.ns = nslices(piece(c, cur.l, cur.k, false));
  }
  /// Data bytes of the send at `cur` (slice j of the piece, split as simccl's chunk_bytes).
  std::uint64_t send_data(std::uint32_t c, const RingCursor& cur) const {
    const std::uint64_t mine = piece(c, cur.l, cur.k, false);
    return mine / cur.ns + (cur.j < mine % cur.ns ? 1 : 0);
  }
  /// True if the send at `cur` waits for a receive; its slot in `slot`.
  bool waits_for(std::uint32_t c, const RingCursor& cur, std::uint64_t& slot) const {
    if (cur.k == 0 || cur.j >= nslices(piece(c, cur.l, cur.k - 1, true))) return false;
    slot = recv_index(cur.l, cur.k - 1, cur.j);
    return true;
  }
  /// Receives of channel c (one per slice of every piece the predecessor sends).
  std::uint64_t recv_count(std::uint32_t c) const {
    std::uint64_t n = 0;
    for (std::uint64_t l = 0; l < nloops[c]; ++l) {
      for (std::uint32_t k = 0; k < steps; ++k) n += nslices(piece(c, l, k, true));
    }
    return n;
  }
};

/// NCCL's Tree AllReduce (simccl's NcclPlanner: a chain inside each node and a double binary
/// tree across nodes, per channel, pipelined in chunks) in lazy form: O(channels) memory per rank
/// instead of ~8 ops per chunk and channel (~3,800 ops and ~230 KB per rank for 16 MiB
/// on 1,024 GPUs with LL128). The executor still walks op indices, dependency counts and
/// dependents exactly as for the materialized plan; this struct computes each op, its number of
/// dependencies and its dependents from the channel's shape instead of storing them.
///
/// Op layout (the materialized plan's): channel c's ops start at ch[c].base; chunk i of it takes
/// per_chunk() ops from base + i * per_chunk(): the receives from each child (tag tu), then, with
/// a parent, the send up (tag tu; deps: those receives and the previous chunk's send up) and the
/// receive from the parent (tag tu + 1), then the sends down to each child (tag tu + 1; deps: the
/// receive from the parent, or without a parent the receives from the children, and the previous
/// chunk's send to the same child). tu = 2 (c * tag_stride + i).
struct LazyTree {
  static constexpr std::uint32_t kNoPeer = 0xFFFFFFFFu;
  struct Channel {
    std::uint32_t base = 0;          ///< index of the channel's first op
    std::uint64_t bytes = 0;         ///< data bytes of the channel (chunk i: min(chunk, bytes - i chunk))
    std::uint64_t chunk = 1;         ///< data bytes per chunk
    std::uint32_t nchunks = 0;
    std::uint32_t parent = kNoPeer;  ///< global rank, or kNoPeer (tree root)
    std::uint32_t child[3] = {kNoPeer, kNoPeer, kNoPeer};  ///< global ranks: chain child, tree children
    std::uint32_t nchild = 0;
    /// ps each send up (to the parent) waits once its dependencies are met (P2pOp::delay_ps).
    std::int64_t up_delay_ps = 0;
    /// ps each send down to child k waits once its dependencies are met (P2pOp::delay_ps).
    std::int64_t child_delay_ps[3] = {0, 0, 0};
    std::uint32_t per_chunk() const { return 2 * nchild + (parent != kNoPeer ? 2u : 0u); }
  };
  std::vector<Channel> ch;
  std::uint64_t tag_stride = 1;  ///< chunks' tag stride per channel (> any channel's nchunks)
  std::uint32_t total = 0;       ///< ops in all
  /// Bytes on the wire for `data` payload bytes (the protocol's efficiency).
  std::function<std::uint64_t(std::uint64_t data)> wire;
  /// The equivalent materialized plan.
  std::function<RankPlan()> materialize;

  /// Where op `o` sits: channel c, chunk i, position s inside the chunk.
  void locate(std::uint32_t o, std::uint32_t& c, std::uint32_t& i, std::uint32_t& s) const {
    c = 0;
    while (c + 1 < ch.size() && ch[c + 1].base <= o) ++c;
    const std::uint32_t pc = ch[c].per_chunk();
    i = (o - ch[c].base) / pc;
    s = (o - ch[c].base) % pc;
  }
  std::uint32_t up_tag(std::uint32_t c, std::uint32_t i) const {
    return static_cast<std::uint32_t>((c * tag_stride + i) * 2);
  }
  std::uint64_t chunk_data(const Channel& x, std::uint32_t i) const {
    const std::uint64_t done = std::min(x.bytes, std::uint64_t{i} * x.chunk);
    return std::min(x.chunk, x.bytes - done);
  }
  /// Op `o` as the materialized plan holds it.
  P2pOp op(std::uint32_t o) const {
    std::uint32_t c = 0, i = 0, s = 0;
    locate(o, c, i, s);
    const Channel& x = ch[c];
    const std::uint32_t tu = up_tag(c, i);
    P2pOp p;
    p.channel = static_cast<std::uint16_t>(c);
    if (s < x.nchild) {  // receive from child s
      p.peer = x.child[s];
      p.tag = tu;
      return p;
    }
    s -= x.nchild;
    if (x.parent != kNoPeer) {
      if (s == 1) {  // receive from the parent
        p.peer = x.parent;
        p.tag = tu + 1;
        return p;
      }
      if (s == 0) {  // send up
        p.is_send = true;
        p.peer = x.parent;
        p.payload_bytes = chunk_data(x, i);
        p.bytes = wire(p.payload_bytes);
        p.tag = tu;
        p.delay_ps = x.up_delay_ps;
        return p;
      }
      s -= 2;
    }
    p.is_send = true;  // send down to child s
    p.peer = x.child[s];
    p.delay_ps = x.child_delay_ps[s];
    p.payload_bytes = chunk_data(x, i);
    p.bytes = wire(p.payload_bytes);
    p.tag = tu + 1;
    return p;
  }
  /// Number of dependencies of op `o`.
  std::uint32_t ndeps(std::uint32_t o) const {
    std::uint32_t c = 0, i = 0, s = 0;
    locate(o, c, i, s);
    const Channel& x = ch[c];
    const std::uint32_t prev = i > 0 ? 1 : 0;
    if (s < x.nchild) return 0;
    s -= x.nchild;
    if (x.parent != kNoPeer) {
      if (s == 0) return x.nchild + prev;
      if (s == 1) return 0;
      return 1 + prev;
    }
    return x.nchild + prev;
  }
  /// Dependents of op `o` in increasing index order into `out` (at most 3). @returns their number.
  std::uint32_t dependents(std::uint32_t o, std::uint32_t out[3]) const {
    std::uint32_t c = 0, i = 0, s = 0;
    locate(o, c, i, s);
    const Channel& x = ch[c];
    const std::uint32_t pc = x.per_chunk();
    const std::uint32_t chunk0 = x.base + i * pc;
    const std::uint32_t down0 = chunk0 + x.nchild + (x.parent != kNoPeer ? 2 : 0);
    const bool has_next = i + 1 < x.nchunks;
    if (s < x.nchild) {  // a child's data: the send up, or at the root the sends down
      if (x.parent != kNoPeer) {
        out[0] = chunk0 + x.nchild;
        return 1;
      }
      for (std::uint32_t k = 0; k < x.nchild; ++k) out[k] = down0 + k;
      return x.nchild;
    }
    if (x.parent != kNoPeer && s == x.nchild) {  // send up: the next chunk's send up
      if (!has_next) return 0;
      out[0] = o + pc;
      return 1;
    }
    if (x.parent != kNoPeer && s == x.nchild + 1) {  // parent's data: the sends down
      for (std::uint32_t k = 0; k < x.nchild; ++k) out[k] = down0 + k;
      return x.nchild;
    }
    if (!has_next) return 0;  // send down: the next chunk's send to the same child
    out[0] = o + pc;
    return 1;
  }
  /// The receive op matching a message from global rank `peer` with `tag`; false if none.
  bool recv_op(std::uint32_t peer, std::uint32_t tag, std::uint32_t& o) const {
    const std::uint64_t q = tag / 2;
    const std::uint64_t c = q / tag_stride, i = q % tag_stride;
    if (c >= ch.size() || i >= ch[c].nchunks) return false;
    const Channel& x = ch[c];
    const std::uint32_t chunk0 = x.base + static_cast<std::uint32_t>(i) * x.per_chunk();
    if ((tag & 1u) != 0) {
      if (x.parent == kNoPeer || peer != x.parent) return false;
      o = chunk0 + x.nchild + 1;
      return true;
    }
    for (std::uint32_t k = 0; k < x.nchild; ++k) {
      if (x.child[k] == peer) {
        o = chunk0 + k;
        return true;
      }
    }
    return false;
  }
};

/// NCCL's NVLS and NVLSTree collectives (simccl's NcclPlanner; nccl.md §1.4/1.6) in lazy form:
/// O(channels) memory per rank instead of ~2 m + 7 ops per loop of m chunks (~2,900 ops
/// and ~400 KB per rank for a 64 MiB NVLSTree AllReduce on 1,024 GPUs). As for LazyTree, the
/// executor walks op indices, dependency counts and dependents exactly as for the materialized
/// plan; this struct computes each op, its dependency count and its dependents from the shape.
///
/// Shape: `m` heads (NVLS: every rank of the single-node communicator; NVLSTree: the ranks of
/// this rank's node, in node order), this rank is head `q`. Per channel, loops of m chunks (loop
/// l carries block = min(loop, bytes - l loop) data bytes; head h owns chunk_bytes(block, m, h) =
/// block / m + (h < block % m), so only the first lp = min(m, block) heads get data). Op layout
/// of a loop (the materialized plan's), tr = (c tag_loops + l) tags_per_loop:
///   [reduce] lp reduce sends, one to each head h's chunk (tag tr, kNvlsReduce, no deps in the loop);
///   when this rank owns data (q < lp):
///     [reduce] the receive of its reduced chunk from the switch (peer = itself, tag tr);
///     receives from each tree child (tag tr + 1);
///     with a tree parent: the send up (tag tr + 1; deps: the receives above), the receive from
///     the parent (tag tr + 2);
///     the sends down to each child (tag tr + 2) and [mcast] the multicast of the result (peer =
///     itself, tag tr + tags_per_loop - 1, kNvlsMulticast); deps: the receive from the parent,
///     or without a parent the receives above;
///   [mcast] lp receives of the multicast chunks, from each head h (tag tr + tags_per_loop - 1).
/// Step window (`window`, NCCL_STEPS = 8): every send above is one step of one connection (the
/// reduce send to head h, the send up, the send down to child k, the multicast; per channel), and
/// a connection has NCCL_STEPS buffer slots, so the send of loop l >= window also waits for the
/// same connection's send of loop l - window (NCCL 2.30: src/include/device.h NCCL_STEPS 8;
/// src/transport/nvls.cc: NVLS buffers of NCCL_STEPS steps of nvlsChunkSize, one chunk per step;
/// src/device/all_reduce.h NVLS_TREE: scatter, reduce + send up and receive + broadcast run as
/// Primitives over those connections, one chunk per connection and loop). The slot is freed when
/// the receiver consumed the step; here, when the send of loop l - window left this GPU (a lower
/// bound on NCCL's wait, the only event of that step this rank sees). Loop l - window is never a
/// channel's last loop, so it has every send. Loops depend on each other only through this
/// window. NVLS is the case without tree links (AllReduce: reduce and mcast; ReduceScatter: reduce
/// only; AllGather: mcast only, tags_per_loop 2); NVLSTree AllReduce has tags_per_loop 4 and the
/// node's double binary tree links of head q (tree c % 2).
struct LazyNvls {
  static constexpr std::uint32_t kNoPeer = 0xFFFFFFFFu;
  struct Channel {
    std::uint32_t base = 0;    ///< index of the channel's first op
    std::uint32_t nloops = 0;
    std::uint64_t bytes = 0;   ///< data bytes of the channel
  };
  /// Tree links of head q across nodes (global ranks of the peers' head q).
  struct Links {
    std::uint32_t parent = kNoPeer;
    std::uint32_t child[2] = {kNoPeer, kNoPeer};
    std::uint32_t nchild = 0;
  };
  std::vector<Channel> ch;
  Links links[2];                        ///< tree 0 and tree 1 (channel c uses c % 2)
  const std::uint32_t* heads = nullptr;  ///< m global ranks; owned by the planner's communicator cache
  std::uint32_t m = 1;
  std::uint32_t q = 0;                   ///< this rank's head index
  std::uint32_t me = 0;                  ///< this rank's global rank
  std::uint64_t loop = 1;                ///< data bytes per loop (m chunks)
  std::uint64_t tag_loops = 1;           ///< tag stride per channel, in loops (> any channel's nloops)
  std::uint32_t tags_per_loop = 2;       ///< 2 (NVLS) or 4 (NVLSTree)
  bool reduce = true;                    ///< reduce sends and the switch's reduced chunk
  bool mcast = true;                     ///< the multicast and its receives
  std::uint32_t window = 0;              ///< step window in loops (NCCL_STEPS); 0: none
  std::uint32_t total = 0;               ///< ops in all
  /// Bytes on the wire for `data` payload bytes (the protocol's efficiency).
  std::function<std::uint64_t(std::uint64_t data)> wire;
  /// The equivalent materialized plan.
  std::function<RankPlan()> materialize;

  /// One loop's shape.
  struct Loop {
    std::uint32_t first = 0;   ///< index of the loop's first op
    std::uint64_t block = 0;   ///< data bytes of the loop
    std::uint32_t lp = 0;      ///< heads with data
    std::uint32_t nred = 0;    ///< reduce sends (reduce ? lp : 0)
    std::uint32_t nmine = 0;   ///< ops of this rank's own chunk (0 when q >= lp)
    const Links* t = nullptr;
  };
  /// Ops of this rank's own chunk in a loop: [reduce] receive from the switch, receives from the
  /// children, send up + receive from the parent, sends down, [mcast] multicast.
  std::uint32_t own_ops(const Links& t) const {
    return (reduce ? 1u : 0u) + 2 * t.nchild + (t.parent != kNoPeer ? 2u : 0u) + (mcast ? 1u : 0u);
  }
  /// Ops of a loop whose every head has data.
  std::uint32_t full_loop_ops(const Links& t) const { return (reduce ? m : 0u) + own_ops(t) + (mcast ? m : 0u); }
  /// Ops of one loop of `block` data bytes.
  std::uint32_t loop_ops(const Links& t, std::uint64_t block) const {
    const std::uint32_t lp = block >= m ? m : static_cast<std::uint32_t>(block);
    return (reduce ? lp : 0u) + (q < lp ? own_ops(t) : 0u) + (mcast ? lp : 0u);
  }
  std::uint64_t block_of(const Channel& x, std::uint32_t l) const {
    return std::min(loop, x.bytes - std::uint64_t{l} * loop);
  }
  Loop loop_at(std::uint32_t c, std::uint32_t l) const {
    const Channel& x = ch[c];
    Loop L;
    L.t = &links[c % 2];
    L.first = x.base + l * full_loop_ops(*L.t);
    L.block = block_of(x, l);
    L.lp = L.block >= m ? m : static_cast<std::uint32_t>(L.block);
    L.nred = reduce ? L.lp : 0;
    L.nmine = q < L.lp ? own_ops(*L.t) : 0;
    return L;
  }
  /// Where op `o` sits: channel c, loop l, position s inside the loop (every loop but a channel's
  /// last has full_loop_ops ops, and the last at most as many).
  void locate(std::uint32_t o, std::uint32_t& c, std::uint32_t& l, std::uint32_t& s) const {
    const auto it = std::upper_bound(ch.begin(), ch.end(), o, [](std::uint32_t v, const Channel& x) { return v < x.base; });
    c = static_cast<std::uint32_t>(it - ch.begin()) - 1;
    const std::uint32_t pl = full_loop_ops(links[c % 2]);
    l = (o - ch[c].base) / pl;
    s = (o - ch[c].base) % pl;
  }
  std::uint32_t tag0(std::uint32_t c, std::uint32_t l) const {
    return static_cast<std::uint32_t>((c * tag_loops + l) * tags_per_loop);
  }
  static std::uint64_t share(std::uint64_t block, std::uint32_t n, std::uint32_t h) {
    return block / n + (h < block % n ? 1 : 0);
  }
  /// Op `o` as the materialized plan holds it.
  P2pOp op(std::uint32_t o) const {
    std::uint32_t c = 0, l = 0, s = 0;
    locate(o, c, l, s);
    const Loop L = loop_at(c, l);
    const std::uint32_t tr = tag0(c, l);
    P2pOp p;
    p.channel = static_cast<std::uint16_t>(c);
    auto send = [&](std::uint32_t peer, std::uint64_t data, std::uint32_t tag) {
      p.is_send = true;
      p.peer = peer;
      p.payload_bytes = data;
      p.bytes = wire(data);
      p.tag = tag;
    };
    if (s < L.nred) {
      send(heads[s], share(L.block, m, s), tr);
      p.nvls = kNvlsReduce;
      return p;
    }
    s -= L.nred;
    if (s >= L.nmine) {  // multicast receive from head s - nmine
      p.peer = heads[s - L.nmine];
      p.tag = tr + tags_per_loop - 1;
      return p;
    }
    const Links& t = *L.t;
    const std::uint64_t mine = share(L.block, m, q);
    if (reduce) {
      if (s == 0) {
        p.peer = me;
        p.tag = tr;
        return p;
      }
      --s;
    }
    if (s < t.nchild) {
      p.peer = t.child[s];
      p.tag = tr + 1;
      return p;
    }
    s -= t.nchild;
    if (t.parent != kNoPeer) {
      if (s == 0) {
        send(t.parent, mine, tr + 1);
        return p;
      }
      if (s == 1) {
        p.peer = t.parent;
        p.tag = tr + 2;
        return p;
      }
      s -= 2;
    }
    if (s < t.nchild) {
      send(t.child[s], mine, tr + 2);
      return p;
    }
    send(me, mine, tr + tags_per_loop - 1);
    p.nvls = kNvlsMulticast;
    return p;
  }
  /// True if position `s` of loop `L` is a send (a reduce send, or of the own chunk: the send up,
  /// a send down, the multicast).
  bool send_at(const Loop& L, std::uint32_t s) const {
    if (s < L.nred) return true;
    s -= L.nred;
    if (s >= L.nmine) return false;
    const Links& t = *L.t;
    const std::uint32_t first = (reduce ? 1u : 0u) + t.nchild;  // receives of the own chunk's inputs
    return s >= first && !(t.parent != kNoPeer && s == first + 1);
  }
  /// Dependencies of position `s` (own-chunk ops only) inside its loop.
  std::uint32_t loop_ndeps(const Loop& L, std::uint32_t s) const {
    if (s < L.nred) return 0;
    s -= L.nred;
    if (s >= L.nmine) return 0;
    const Links& t = *L.t;
    const std::uint32_t first = (reduce ? 1u : 0u) + t.nchild;  // receives of the own chunk's inputs
    if (s < first) return 0;
    s -= first;
    if (t.parent != kNoPeer) {
      if (s == 0) return first;  // send up
      if (s == 1) return 0;      // receive from the parent
      return 1;                  // sends down, multicast: after the parent's data
    }
    return first;
  }
  /// Number of dependencies of op `o`.
  std::uint32_t ndeps(std::uint32_t o) const {
    std::uint32_t c = 0, l = 0, s = 0;
    locate(o, c, l, s);
    const Loop L = loop_at(c, l);
    const std::uint32_t w = window > 0 && l >= window && send_at(L, s) ? 1u : 0u;
    return loop_ndeps(L, s) + w;
  }
  /// Dependents of op `o` in increasing index order into `out` (at most 3). @returns their number.
  std::uint32_t dependents(std::uint32_t o, std::uint32_t out[3]) const {
    std::uint32_t c = 0, l = 0, s = 0;
    locate(o, c, l, s);
    const Loop L = loop_at(c, l);
    if (send_at(L, s)) {  // a send: the same connection's send window loops later (if any)
      if (window == 0 || l + window >= ch[c].nloops) return 0;
      const Loop N = loop_at(c, l + window);
      if (s < L.nred) {
        if (s >= N.nred) return 0;
        out[0] = N.first + s;
        return 1;
      }
      if (N.nmine == 0) return 0;
      out[0] = N.first + N.nred + (s - L.nred);
      return 1;
    }
    if (s < L.nred) return 0;
    s -= L.nred;
    if (s >= L.nmine) return 0;  // a multicast receive
    const Links& t = *L.t;
    const std::uint32_t own0 = L.first + L.nred;
    const std::uint32_t first = (reduce ? 1u : 0u) + t.nchild;
    const std::uint32_t down0 = own0 + first + (t.parent != kNoPeer ? 2u : 0u);
    const std::uint32_t nout = t.nchild + (mcast ? 1u : 0u);  // sends down, multicast
    auto downs = [&]() {
      for (std::uint32_t k = 0; k < nout; ++k) out[k] = down0 + k;
      return nout;
    };
    if (s < first) {  // an input of the own chunk: the send up, or at the root the outputs
      if (t.parent != kNoPeer) {
        out[0] = own0 + first;
        return 1;
      }
      return downs();
    }
    if (t.parent != kNoPeer && s == first + 1) return downs();  // the parent's data
    return 0;
  }
  /// The receive op matching a message from global rank `peer` with `tag`; false if none.
  bool recv_op(std::uint32_t peer, std::uint32_t tag, std::uint32_t& o) const {
    const std::uint64_t qq = tag / tags_per_loop;
    const std::uint32_t kind = tag % tags_per_loop;
    const std::uint64_t c = qq / tag_loops, l = qq % tag_loops;
    if (c >= ch.size() || l >= ch[c].nloops) return false;
    const Loop L = loop_at(static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(l));
    const Links& t = *L.t;
    const std::uint32_t own0 = L.first + L.nred;
    if (kind == tags_per_loop - 1) {  // multicast from head h
      if (!mcast) return false;
      for (std::uint32_t h = 0; h < L.lp; ++h) {
        if (heads[h] == peer) {
          o = own0 + L.nmine + h;
          return true;
        }
      }
      return false;
    }
    if (L.nmine == 0) return false;
    const std::uint32_t r = reduce ? 1u : 0u;
    if (kind == 0) {
      if (!reduce || peer != me) return false;
      o = own0;
      return true;
    }
    if (kind == 1) {
      for (std::uint32_t k = 0; k < t.nchild; ++k) {
        if (t.child[k] == peer) {
          o = own0 + r + k;
          return true;
        }
      }
      return false;
    }
    if (t.parent == kNoPeer || peer != t.parent) return false;
    o = own0 + r + t.nchild + 1;
    return true;
  }
};

/// What one rank does for one collective: ops plus their dependencies in CSR form, or a lazy
/// ring (then ops is empty). Memory: 32 B per op + 4 B per op (offsets) + 4 B per dependency edge.
struct RankPlan {
  std::vector<P2pOp> ops;                 ///< in index order
  std::vector<std::uint32_t> dep_begin;   ///< deps of op i: dep_index[dep_begin[i] .. dep_begin[i+1]); size ops+1 (or empty when ops is)
  std::vector<std::uint32_t> dep_index;   ///< indices of ops of this rank that must complete first
  std::shared_ptr<const LazyRing> lazy_ring;  ///< set: the plan is this ring (ops empty)
  std::shared_ptr<const LazyChannelRing> lazy_channels;  ///< set: the plan is this NCCL ring family (ops empty)
  std::shared_ptr<const LazyTree> lazy_tree;  ///< set: the plan is this NCCL Tree AllReduce (ops empty)
  std::shared_ptr<const LazyNvls> lazy_nvls;  ///< set: the plan is this NCCL NVLS / NVLSTree collective (ops empty)

  /// Appends an op that starts once the ops `deps` (indices < its own) completed.
  /// @returns the new op's index.
  std::uint32_t add(const P2pOp& op, std::span<const std::uint32_t> deps = {}) {
    if (dep_begin.empty()) dep_begin.push_back(0);
    ops.push_back(op);
    dep_index.insert(dep_index.end(), deps.begin(), deps.end());
    dep_begin.push_back(static_cast<std::uint32_t>(dep_index.size()));
    return static_cast<std::uint32_t>(ops.size() - 1);
  }
  std::uint32_t add(const P2pOp& op, std::initializer_list<std::uint32_t> deps) {
    return add(op, std::span<const std::uint32_t>(deps.begin(), deps.size()));
  }
  std::uint32_t size() const { return static_cast<std::uint32_t>(ops.size()); }
  /// True if the collective has nothing to do on this rank (no ops, no lazy ring steps).
  bool empty() const {
    return ops.empty() && (!lazy_ring || lazy_ring->steps == 0) && (!lazy_channels || lazy_channels->channels == 0) &&
           (!lazy_tree || lazy_tree->total == 0) && (!lazy_nvls || lazy_nvls->total == 0);
  }
  /// Dependencies of op i (indices < i).
  std::span<const std::uint32_t> deps(std::uint32_t i) const {
    return {dep_index.data() + dep_begin[i], dep_begin[i + 1] - dep_begin[i]};
  }
  /// Pre-sizes for `n_ops` ops and `n_deps` dependency edges (optional).
  void reserve(std::size_t n_ops, std::size_t n_deps) {
    ops.reserve(n_ops);
    dep_begin.reserve(n_ops + 1);
    dep_index.reserve(n_deps);
  }
  /// Frees all memory (the executor calls it when the collective completes).
  void release() {
    std::vector<P2pOp>().swap(ops);
    std::vector<std::uint32_t>().swap(dep_begin);
    std::vector<std::uint32_t>().swap(dep_index);
    lazy_ring.reset();
    lazy_channels.reset();
    lazy_tree.reset();
    lazy_nvls.reset();
  }
  /// The materialized equivalent: a copy of this plan, or a lazy ring's 2 x steps ops.
  RankPlan expanded() const {
    if (lazy_channels) return lazy_channels->materialize();
    if (lazy_tree) return lazy_tree->materialize();
    if (lazy_nvls) return lazy_nvls->materialize();
    if (!lazy_ring) return *this;
    RankPlan p;
    const LazyRing& r = *lazy_ring;
    p.reserve(2 * std::size_t{r.steps}, r.steps);
    for (std::uint32_t k = 0; k < r.steps; ++k) {
      if (k > 0) {
        p.add(P2pOp{true, r.next, r.step_bytes(k), k}, {2 * k - 1});
      } else {
        p.add(P2pOp{true, r.next, r.step_bytes(k), k});
      }
      p.add(P2pOp{false, r.prev, 0, k});
    }
    return p;
  }
};

/// A collective as one rank sees it.
struct CollRequest {
  CollOp op = CollOp::kAllReduce;
  std::uint64_t bytes = 0;                         ///< nccl-tests size convention (workload.hpp)
  const std::vector<std::uint32_t>* ranks = nullptr;  ///< communicator, ring order
  std::uint32_t my_index = 0;                      ///< this rank's position in *ranks
  std::uint32_t root_index = 0;                    ///< broadcast/reduce root position
};

/// How a workload point-to-point Send travels (CollectivePlanner::p2p_route).
struct P2pRoute {
  static constexpr std::uint32_t kDirect = 0xFFFFFFFFu;
  /// kDirect: the sender's own NVLink/NIC straight to the receiver. Otherwise a GPU of the
  /// sender's scale-up domain that forwards the data over its own NIC (NCCL's PXN): the data goes
  /// sender -> relay over NVLink in chunks of `chunk_bytes`, each chunk forwarded relay ->
  /// receiver as soon as it fully arrived at the relay (NCCL's proxy posts a chunk once the
  /// GPU wrote it into the relay's buffer).
  std::uint32_t relay = kDirect;
  std::uint64_t chunk_bytes = 0;  ///< relayed sends: bytes per chunk (> 0)
};

/// Plans collectives; implemented by simccl. Must be deterministic and thread-safe (const).
class CollectivePlanner {
 public:
  virtual ~CollectivePlanner() = default;
  /// @returns the rank's plan; an empty plan completes immediately.
  virtual RankPlan plan(const CollRequest& req) const = 0;
  /// Route of a workload Send of `bytes` bytes from global rank `src` to global rank `dst`
  /// (a pure function of its arguments: every rank must get the same answer).
  /// Default: direct.
  virtual P2pRoute p2p_route(std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) const {
    (void)src;
    (void)dst;
    (void)bytes;
    return {};
  }
  /// Start-up latency of a collective in ps (kernel launch and protocol synchronisation): the
  /// rank starts the plan's operations this long after the collective became ready; the
  /// collective's recorded time includes it. The same on every rank of the call (a pure function
  /// of the request's op, size and communicator). Default 0.
  virtual std::int64_t start_latency_ps(const CollRequest& req) const {
    (void)req;
    return 0;
  }
  /// Start-up latency in ps of a workload Send of `bytes` bytes from global rank `src` to `dst`
  /// (the kernel launch of the send/recv pair): the send's data leaves this long after the node
  /// became ready. A pure function of its arguments. Default 0.
  virtual std::int64_t p2p_start_latency_ps(std::uint32_t src, std::uint32_t dst, std::uint64_t bytes) const {
    (void)src;
    (void)dst;
    (void)bytes;
    return 0;
  }
  /// Service time in ps of one network operation in a GPU's proxy thread: the executor passes
  /// every message that leaves the sender's NVLink domain, and every such message that arrives,
  /// through one FIFO server per GPU (posting the send; noticing the completion), so the
  /// channels of a GPU wait for each other there. A pure constant of the planner. Default 0
  /// (no proxy).
  virtual std::int64_t proxy_op_ps() const { return 0; }
};

}  // namespace fabricsim::models
