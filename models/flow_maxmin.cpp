#include "models/flow_maxmin.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "engine/errors.hpp"

namespace fabricsim::models {

MaxMinSolver::MaxMinSolver(std::vector<double> capacity_bps)
    : cap_(std::move(capacity_bps)),
      on_link_(cap_.size()),
      link_mark_(cap_.size(), 0),
      rem_cap_(cap_.size(), 0),
      unfrozen_(cap_.size(), 0) {}

std::uint32_t MaxMinSolver::add_flow(const std::uint32_t* links, std::uint32_t n) {
  if (n > kMaxHops) throw engine::InternalError("max-min solver: flow with more than 8 links");
  std::uint32_t f;
  if (!free_.empty()) {
    f = free_.back();
    free_.pop_back();
  } else {
    f = static_cast<std::uint32_t>(flows_.size());
    flows_.emplace_back();
    flow_mark_.push_back(0);
  }
  Flow& fl = flows_[f];
  fl.n = n;
  fl.rate = 0;
  fl.active = true;
  for (std::uint32_t i = 0; i < n; ++i) {
    fl.links[i] = links[i];
    fl.pos[i] = static_cast<std::uint32_t>(on_link_[links[i]].size());
    on_link_[links[i]].push_back(f);
  }
  return f;
}

void MaxMinSolver::remove_flow(std::uint32_t f) {
  Flow& fl = flows_[f];
  for (std::uint32_t i = 0; i < fl.n; ++i) {
    auto& v = on_link_[fl.links[i]];
    const std::uint32_t p = fl.pos[i];
    const std::uint32_t moved = v.back();
    v[p] = moved;
    v.pop_back();
    if (moved != f) {
      Flow& m = flows_[moved];
      for (std::uint32_t j = 0; j < m.n; ++j) {
        if (m.links[j] == fl.links[i]) m.pos[j] = p;
      }
    }
  }
  fl.active = false;
  fl.n = 0;
  fl.rate = 0;
  free_.push_back(f);
}

std::size_t MaxMinSolver::recompute(const std::vector<std::uint32_t>& seed_links,
                                    std::vector<std::uint32_t>* solved) {
  ++epoch_;
  // Component: breadth-first over links -> flows -> links.
  std::vector<std::uint32_t> links;
  for (std::uint32_t l : seed_links) {
    if (link_mark_[l] != epoch_) {
      link_mark_[l] = epoch_;
      links.push_back(l);
    }
  }
  const std::size_t first_solved = solved->size();
  for (std::size_t i = 0; i < links.size(); ++i) {
    for (std::uint32_t f : on_link_[links[i]]) {
      if (flow_mark_[f] == epoch_) continue;
      flow_mark_[f] = epoch_;
      solved->push_back(f);
      const Flow& fl = flows_[f];
      for (std::uint32_t j = 0; j < fl.n; ++j) {
        if (link_mark_[fl.links[j]] != epoch_) {
          link_mark_[fl.links[j]] = epoch_;
          links.push_back(fl.links[j]);
        }
      }
    }
  }
  // Progressive filling: repeatedly saturate the link with the smallest fair share
  // (remaining capacity / unfrozen flows); ties go to the lowest link id.
  using Entry = std::pair<double, std::uint32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (std::uint32_t l : links) {
    rem_cap_[l] = cap_[l];
    unfrozen_[l] = static_cast<std::uint32_t>(on_link_[l].size());
    if (unfrozen_[l] > 0) heap.emplace(rem_cap_[l] / unfrozen_[l], l);
  }
  const std::uint32_t frozen_stamp = epoch_ + 1;  // flow_mark_ == epoch_+1: frozen in this pass
  while (!heap.empty()) {
    const auto [share, l] = heap.top();
    heap.pop();
    if (unfrozen_[l] == 0 || share != rem_cap_[l] / unfrozen_[l]) continue;  // stale entry
    for (std::uint32_t f : on_link_[l]) {
      if (flow_mark_[f] == frozen_stamp) continue;
      flow_mark_[f] = frozen_stamp;
      Flow& fl = flows_[f];
      fl.rate = share;
      for (std::uint32_t j = 0; j < fl.n; ++j) {
        const std::uint32_t k = fl.links[j];
        if (k == l) continue;
        rem_cap_[k] = std::max(0.0, rem_cap_[k] - share);
        if (--unfrozen_[k] > 0) heap.emplace(rem_cap_[k] / unfrozen_[k], k);
      }
    }
    unfrozen_[l] = 0;
  }
  ++epoch_;  // the frozen stamp was epoch_+1; the next call starts above it
  return solved->size() - first_solved;
}

}  // namespace fabricsim::models
