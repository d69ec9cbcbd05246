#include "models/flow/flow_maxmin.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

#include "engine/errors.hpp"

namespace fabricsim::models {

void MaxMinSolver::LinkState::push(std::uint32_t f) {
  if (n == (heap_cap ? heap_cap : kInlineFlows)) {
    const std::uint32_t grown = 2 * n;
    auto bigger = std::make_unique<std::uint32_t[]>(grown);
    std::copy(ids(), ids() + n, bigger.get());
    more = std::move(bigger);
    heap_cap = grown;
  }
  ids()[n++] = f;
}

MaxMinSolver::MaxMinSolver(std::vector<double> capacity_bps) : ls_(capacity_bps.size()) {
  for (std::size_t l = 0; l < ls_.size(); ++l) ls_[l].cap = capacity_bps[l];
}

std::uint32_t MaxMinSolver::add_flow(const std::uint32_t* links, std::uint32_t n) {
  if (n > kMaxHops) throw engine::InternalError("max-min solver: flow with more than 8 links");
  std::uint32_t f;
  if (!free_.empty()) {
    f = free_.back();
    free_.pop_back();
  } else {
    f = static_cast<std::uint32_t>(flows_.size());
    flows_.emplace_back();
    hot_.emplace_back();
  }
  Flow& fl = flows_[f];
  fl.n = n;
  hot_[f].rate = 0;
  fl.active = true;
  hot_[f].fresh = 1;
  for (std::uint32_t i = 0; i < n; ++i) {
    fl.links[i] = links[i];
    fl.pos[i] = ls_[links[i]].n;
    ls_[links[i]].push(f);
  }
  return f;
}

void MaxMinSolver::remove_flow(std::uint32_t f) {
  Flow& fl = flows_[f];
  for (std::uint32_t i = 0; i < fl.n; ++i) {
    LinkState& L = ls_[fl.links[i]];
    std::uint32_t* v = L.ids();
    const std::uint32_t p = fl.pos[i];
    const std::uint32_t moved = v[L.n - 1];
    v[p] = moved;
    --L.n;
    if (moved != f) {
      Flow& m = flows_[moved];
      for (std::uint32_t j = 0; j < m.n; ++j) {
        if (m.links[j] == fl.links[i]) m.pos[j] = p;
      }
    }
  }
  fl.active = false;
  hot_[f].fresh = 0;
  fl.n = 0;
  hot_[f].rate = 0;
  free_.push_back(f);
}

namespace {
// Relative slack of the saturation and bottleneck tests (see the class comment).
constexpr double kSlack = 1e-9;
}  // namespace

void MaxMinSolver::take(std::uint32_t f) {
  hot_[f].mark = epoch_;
  component_.push_back(f);
  const Flow& fl = flows_[f];
  for (std::uint32_t j = 0; j < fl.n; ++j) {
    const std::uint32_t k = fl.links[j];
    if (ls_[k].mark != epoch_) {
      ls_[k].mark = epoch_;
      links_.push_back(k);
    }
  }
}

bool MaxMinSolver::held_valid(std::uint32_t f) const {
  const Flow& fl = flows_[f];
  for (std::uint32_t j = 0; j < fl.n; ++j) {
    const std::uint32_t k = fl.links[j];
    if (ls_[k].saturated && hot_[f].rate >= ls_[k].max_rate * (1.0 - kSlack)) return true;
  }
  return false;
}

std::size_t MaxMinSolver::recompute(const std::vector<std::uint32_t>& seed_links,
                                    std::vector<std::uint32_t>* solved) {
  // Marks: hot_[f].mark == epoch_: in S, not frozen in this round's filling; == epoch_ + 1: in S,
  // frozen; older: held. ls_[l].mark == epoch_: in links_.
  epoch_ += 2;
  component_.clear();
  links_.clear();
  for (std::uint32_t l : seed_links) {
    LinkState& L = ls_[l];
    if (L.mark != epoch_) {
      L.mark = epoch_;
      links_.push_back(l);
    }
    // New flows, and (on a saturated link) the flows it is the bottleneck of: a flow added or
    // removed there changes their share (they would join S in the first check anyway).
    const bool sat = L.saturated;
    const double top = L.max_rate * (1.0 - kSlack);
    for (std::uint32_t f : L.flows()) {
      const FlowHot& h = hot_[f];
      if (h.mark != epoch_ && (h.fresh || (sat && h.rate >= top))) take(f);
    }
  }
  const std::uint32_t frozen_stamp = epoch_ + 1;
  for (;;) {
    for (std::uint32_t f : component_) hot_[f].mark = epoch_;
    // Progressive filling over S: repeatedly saturate the link with the smallest fair share
    // (capacity left to S / unfrozen flows of S); ties go to the lowest link id. Held flows keep
    // their rates: a link's capacity for S is its capacity minus theirs.
    // A binary min-heap in a reused vector (std::priority_queue's own algorithm, without an
    // allocation per round).
    std::vector<Entry>& heap = heap_;
    heap.clear();
    const EntryGreater cmp;
    for (std::uint32_t l : links_) {
      LinkState& L = ls_[l];
      L.popped = 0;
      double held = 0, held_max = 0;
      std::uint32_t n = 0;
      for (std::uint32_t f : L.flows()) {
        const FlowHot& h = hot_[f];
        if (h.mark == epoch_) {
          ++n;
        } else {
          held += h.rate;
          held_max = std::max(held_max, h.rate);
        }
      }
      L.rem_cap = n == L.n ? L.cap : std::max(0.0, L.cap - held);
      L.unfrozen = n;
      L.in_s = n;
      L.sum = held;  // S's rates are added below, after the filling
      L.held_max = held_max;
      if (n > 0) {
        heap.push_back(Entry{L.rem_cap / n, l});
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
    }
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), cmp);
      const auto [share, l] = heap.back();
      heap.pop_back();
      LinkState& L = ls_[l];
      if (L.unfrozen == 0 || share != L.rem_cap / L.unfrozen) continue;  // stale entry
      L.popped = 1;
      L.pop_share = share;
      for (std::uint32_t f : L.flows()) {
        FlowHot& h = hot_[f];
        if (h.mark != epoch_) continue;  // frozen already, or held
        h.mark = frozen_stamp;
        const Flow& fl = flows_[f];
        h.rate = share;
        for (std::uint32_t j = 0; j < fl.n; ++j) {
          const std::uint32_t k = fl.links[j];
          if (k == l) continue;
          LinkState& K = ls_[k];
          K.rem_cap = std::max(0.0, K.rem_cap - share);
          if (--K.unfrozen > 0) {
            heap.push_back(Entry{K.rem_cap / K.unfrozen, k});
            std::push_heap(heap.begin(), heap.end(), cmp);
          }
        }
      }
      L.unfrozen = 0;
    }
    // The links' state with the new rates, then the held flows on them: one joins S when a link
    // the filling stopped on carries it faster than the share there (S's flows would not be at
    // the highest rate of their bottleneck), or when it lost its own bottleneck.
    // Sums and maxima over S's flows, added to the held ones.
    for (std::uint32_t l : links_) ls_[l].new_max = ls_[l].held_max;
    for (std::uint32_t f : component_) {
      const Flow& fl = flows_[f];
      for (std::uint32_t j = 0; j < fl.n; ++j) {
        LinkState& K = ls_[fl.links[j]];
        K.sum += hot_[f].rate;
        K.new_max = std::max(K.new_max, hot_[f].rate);
      }
    }
    // A held flow can lose its bottleneck only on a link that is no longer saturated or whose
    // highest rate grew; it is too fast for S only on a link the filling stopped on below the
    // held flows' highest rate. Other links' held flows need no look.
    check_.clear();
    for (std::uint32_t l : links_) {
      LinkState& L = ls_[l];
      const bool sat = L.popped || L.sum >= L.cap * (1.0 - kSlack);
      const bool worse = (L.saturated && !sat) || L.new_max > L.max_rate * (1.0 + kSlack);
      const bool over = L.popped && L.held_max > L.pop_share * (1.0 + kSlack);
      L.saturated = sat ? 1 : 0;
      L.max_rate = L.new_max;
      if ((worse || over) && L.in_s < L.n) check_.push_back(l);
    }
    const std::size_t before = component_.size();
    for (std::uint32_t l : check_) {
      const LinkState& L = ls_[l];
      for (std::uint32_t f : L.flows()) {
        const FlowHot& h = hot_[f];
        if (h.mark == epoch_ || h.mark == frozen_stamp) continue;  // in S
        if ((L.popped && h.rate > L.pop_share * (1.0 + kSlack)) || !held_valid(f)) take(f);
      }
    }
    if (component_.size() == before) break;
  }
  for (std::uint32_t f : component_) hot_[f].fresh = 0;
  ++epoch_;  // the frozen stamp was epoch_+1; the next call starts above it
  solved->insert(solved->end(), component_.begin(), component_.end());
  return component_.size();
}

}  // namespace fabricsim::models
