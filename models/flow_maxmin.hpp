#pragma once
/// @file flow_maxmin.hpp
/// Max-min fair rate allocation (progressive filling) over directed links, with incremental
/// recomputation limited to the connected component of the links that changed.
#include <array>
#include <cstdint>
#include <vector>

namespace fabricsim::models {

/// Max-min fair sharing of link capacities between flows (Bertsekas & Gallager, "Data Networks",
/// 2nd ed., §6.5.2: progressive filling). A flow crosses at most kMaxHops links. Rates are in
/// bits/s (double); every computation runs in a fixed order (link ids, then the order flows were
/// added to a link), so results are bit-identical from run to run.
///
/// Incremental use: add_flow/remove_flow mark nothing by themselves; recompute(seed_links) re-solves
/// exactly the flows connected to `seed_links` through shared links (other components' max-min
/// rates cannot change: max-min allocations decompose over connected components).
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
  /// Re-solves every flow connected to `seed_links`; appends the ids of the flows it re-solved to
  /// `solved` (in a deterministic order). Returns the number of flows re-solved.
  std::size_t recompute(const std::vector<std::uint32_t>& seed_links, std::vector<std::uint32_t>* solved);
  /// Rate of flow f (bits/s) from the last recompute that reached it.
  double rate(std::uint32_t f) const { return flows_[f].rate; }
  std::uint32_t num_links() const { return static_cast<std::uint32_t>(cap_.size()); }
  /// Flows currently on link l.
  const std::vector<std::uint32_t>& flows_on(std::uint32_t l) const { return on_link_[l]; }
  std::uint32_t hops(std::uint32_t f) const { return flows_[f].n; }
  std::uint32_t link(std::uint32_t f, std::uint32_t i) const { return flows_[f].links[i]; }

 private:
  struct Flow {
    std::array<std::uint32_t, kMaxHops> links{};
    std::array<std::uint32_t, kMaxHops> pos{};  // index of this flow in on_link_[links[i]]
    std::uint32_t n = 0;
    double rate = 0;
    bool active = false;
  };
  std::vector<double> cap_;
  std::vector<std::vector<std::uint32_t>> on_link_;
  std::vector<Flow> flows_;
  std::vector<std::uint32_t> free_;
  // Scratch, stamped by epoch to avoid clearing.
  std::vector<std::uint32_t> link_mark_, flow_mark_;
  std::uint32_t epoch_ = 0;
  std::vector<double> rem_cap_;
  std::vector<std::uint32_t> unfrozen_;
};

}  // namespace fabricsim::models
