#pragma once
/// @file flow_maxmin.hpp
/// Max-min fair rate allocation (progressive filling) over directed links, with incremental
/// recomputation limited to the connected component of the links that changed.
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace fabricsim::models {

/// Max-min fair sharing of link capacities between flows (Bertsekas & Gallager, "Data Networks",
/// 2nd ed., §6.5.2: progressive filling). A flow crosses at most kMaxHops links. Rates are in
/// bits/s (double); every computation runs in a fixed order (link ids, then the order flows were
/// added to a link), so results are bit-identical from run to run.
///
/// Incremental use: add_flow/remove_flow mark nothing by themselves; recompute(seed_links), given
/// the links of the flows added or removed since the last call, re-solves the flows whose rates
/// can change and keeps every other flow's rate. It rests on the bottleneck property (Bertsekas &
/// Gallager §6.5.2): an allocation is max-min fair iff every flow crosses a saturated link on which
/// no flow has a higher rate (its bottleneck), and that allocation is unique. recompute solves a
/// set S, starting with the new flows, by progressive filling with every other flow held at its
/// rate (a link's capacity for S is its capacity minus the held rates), then checks the held
/// flows on S's links (and the seed links): a held flow joins S when a link the filling stopped
/// on (so S's flows there have that link as bottleneck) carries it at a higher rate than the
/// filling's share there, or when none of its links is still its bottleneck (saturated, the flow
/// at the link's highest rate; e.g. a flow that finished freed the link). S is solved again
/// until no held flow joins. Then every flow has a bottleneck: the allocation is the max-min fair
/// one, the one a filling over the whole connected component gives. Comparisons allow a relative
/// 1e-9 (a held flow within 1e-9 of the share counts as tied): rates agree with the whole-
/// component filling to ~1e-9 relative (and bit for bit wherever S is a whole component). Flows
/// coupled only through links where they are not bottlenecked (an all-to-all's flows limited by
/// their NICs, crossing shared spine links) are therefore not re-solved together, which a filling
/// over the connected component did: one all-to-all's component was the whole cluster's active
/// flows.
class MaxMinSolver {
 public:
  static constexpr std::uint32_t kMaxHops = 8;
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;

  /// @param capacity_bps capacity of each directed link (bits/s), > 0.
  explicit MaxMinSolver(std::vector<double> capacity_bps);

  /// Adds an active flow over `links[0..n)` (n <= kMaxHops, distinct link ids). Its rate is 0
  /// until the next recompute() that reaches it. @returns the flow's id (slots are reused).
  std::uint32_t add_flow(const std::uint32_t* links, std::uint32_t n);
  /// Removes flow `f`; its id may be returned by a later add_flow.
  void remove_flow(std::uint32_t f);
  /// Re-solves the flows whose rates can change after flows were added on or removed from
  /// `seed_links` (see the class comment); appends the ids of the flows it re-solved to `solved`
  /// (in a deterministic order: discovery order from the seeds). Returns the number re-solved.
  /// Every flow added since the last call must have one of its links among the seeds.
  std::size_t recompute(const std::vector<std::uint32_t>& seed_links, std::vector<std::uint32_t>* solved);
  /// Rate of flow f (bits/s) from the last recompute that reached it.
  double rate(std::uint32_t f) const { return hot_[f].rate; }
  std::uint32_t num_links() const { return static_cast<std::uint32_t>(ls_.size()); }
  /// Flows currently on link l, in the order they joined it (a removed flow's place is taken by
  /// the link's last flow). Valid until the next add_flow/remove_flow.
  std::span<const std::uint32_t> flows_on(std::uint32_t l) const { return ls_[l].flows(); }
  std::uint32_t hops(std::uint32_t f) const { return flows_[f].n; }
  std::uint32_t link(std::uint32_t f, std::uint32_t i) const { return flows_[f].links[i]; }

 private:
  struct Flow {
    std::array<std::uint32_t, kMaxHops> links{};
    std::array<std::uint32_t, kMaxHops> pos{};  // index of this flow in its link's flows (LinkState::ids)
    std::uint32_t n = 0;
    bool active = false;
  };
  /// Adds flow f to S (component_) and its links to links_.
  void take(std::uint32_t f);
  /// Flow f (not in S) still has a bottleneck: a saturated link where no flow is faster.
  bool held_valid(std::uint32_t f) const;
  /// Per-link state, two 64-byte lines per link: the first holds what a re-solve computes (it
  /// touches every field of each link it visits, ~35-60 links per round in the MoE runs; as
  /// separate arrays that was a dozen cache lines per link), the second the link's flows: up to
  /// kInlineFlows ids in place, more in one heap array (as a separate std::vector per link, every
  /// visit also missed on the vector's own allocation: at 9,216 GPUs the solver ran 1.5-2x slower
  /// per flow than at 768, on cache misses).
  static constexpr std::uint32_t kInlineFlows = 10;
  struct alignas(64) LinkState {
    double cap = 0;        // capacity (bits/s)
    double rem_cap = 0;    // the filling's capacity left to S's unfrozen flows (round)
    double sum = 0;        // all flows' rates after the filling: held ones, then S's (round)
    double held_max = 0;   // highest held rate (round)
    double new_max = 0;    // highest rate after the filling (round)
    double max_rate = 0;   // highest rate, after the last solve that reached the link
    std::uint32_t unfrozen = 0;  // S's flows not frozen yet (round)
    std::uint32_t in_s = 0;      // S's flows on it (round)
    std::uint32_t mark = 0;      // == epoch_: in links_ (this call)
    std::uint8_t saturated = 0;  // after the last solve that reached it
    std::uint8_t popped = 0;     // the filling stopped on it (round)
    // Second line.
    double pop_share = 0;        // the share the filling stopped at (round)
    std::uint32_t n = 0;         // flows on the link
    std::uint32_t heap_cap = 0;  // capacity of `more` (0: the ids are in `inl`)
    std::unique_ptr<std::uint32_t[]> more;
    std::uint32_t inl[kInlineFlows] = {};
    std::span<const std::uint32_t> flows() const { return {heap_cap ? more.get() : inl, n}; }
    std::uint32_t* ids() { return heap_cap ? more.get() : inl; }
    void push(std::uint32_t f);
  };
  static_assert(sizeof(LinkState) == 128);
  std::vector<LinkState> ls_;
  std::vector<Flow> flows_;
  // By flow, apart from Flow: the scans over a link's flows read only these, so they touch 16
  // bytes per flow instead of Flow's two cache lines.
  // (One 16-byte record per flow: a scan reads a flow's rate and mark from one cache line.)
  struct FlowHot {
    double rate = 0;          // bits/s, from the last solve that reached the flow
    std::uint32_t mark = 0;   // scratch, stamped by epoch to avoid clearing
    std::uint32_t fresh = 0;  // added and not solved yet
  };
  std::vector<FlowHot> hot_;
  std::vector<std::uint32_t> free_;
  std::uint32_t epoch_ = 0;
  std::vector<std::uint32_t> component_, links_;  // S and its links, this call
  std::vector<std::uint32_t> check_;              // links whose held flows are checked (round)
  /// (fair share, link), ordered lexicographically; the heap pops the least.
  struct Entry {
    double share;
    std::uint32_t link;
  };
  /// Min-heap order on (share, link) (std::pair's order, written out: C++20's pair comparison
  /// goes through a synthesized three-way compare, ~9% of a 384-GPU MoE run).
  struct EntryGreater {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.share > b.share || (a.share == b.share && a.link > b.link);
    }
  };
  std::vector<Entry> heap_;                       // the filling's min-heap, reused
};

}  // namespace fabricsim::models
