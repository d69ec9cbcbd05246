// bench_maxmin: cost of one max-min solve of a whole AllToAll component, and whether a
// data-parallel (Kokkos-style) formulation of the solver would pay (DESIGN.md §2).
//
//   bench_maxmin [--gpus 128] [--oversubscription 4] [--reps 10] [--json FILE]
//
// The component: every GPU sends to every other GPU (G(G-1) flows) on a leaf-spine of G GPUs
// (8 per host, 16 NICs per leaf, leaves `--oversubscription`:1), routed with Topology::route and a
// per-flow hash, as the flow rung routes them. Two solvers on the same flows:
//  * heap: models::MaxMinSolver::recompute, progressive filling with a priority queue (production);
//  * rounds: the data-parallel formulation a Kokkos version would run: per round, a min-reduction
//    of the fair share over links, a parallel_for over flows freezing those on a link at that
//    share, and a parallel_for over links gathering (in on-link order, so deterministic without
//    atomics) the capacity the frozen flows take. Written as plain loops, which is what Debian's
//    serial-only Kokkos would execute.
// Prints the time per solve of each, the number of rounds, the largest relative rate difference
// and how many rates are bit-identical between the two.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_common.hpp"
#include "engine/rng.hpp"
#include "models/topology/cluster.hpp"
#include "models/flow/flow_maxmin.hpp"
#include "models/flow/flow_model.hpp"

namespace {

namespace m = fabricsim::models;

struct Rounds {
  std::vector<double> rate;
  std::size_t rounds = 0;
};

/// Round-based progressive filling over flows `links[f][0..hops[f])` (data-parallel formulation).
Rounds solve_rounds(const std::vector<double>& cap, const std::vector<std::vector<std::uint32_t>>& on_link,
                    const std::vector<m::FlowPath>& paths) {
  const std::size_t L = cap.size(), F = paths.size();
  std::vector<double> rem(cap);
  std::vector<std::uint32_t> cnt(L);
  for (std::size_t l = 0; l < L; ++l) cnt[l] = static_cast<std::uint32_t>(on_link[l].size());
  std::vector<std::uint8_t> frozen(F, 0), fresh(F, 0);
  Rounds r;
  r.rate.assign(F, 0);
  std::size_t left = F;
  while (left > 0) {
    ++r.rounds;
    double share = std::numeric_limits<double>::infinity();  // parallel_reduce(min) over links
    for (std::size_t l = 0; l < L; ++l) {
      if (cnt[l] > 0) share = std::min(share, rem[l] / cnt[l]);
    }
    for (std::size_t f = 0; f < F; ++f) {  // parallel_for over flows
      fresh[f] = 0;
      if (frozen[f]) continue;
      for (std::uint32_t i = 0; i < paths[f].hops; ++i) {
        const std::uint32_t l = paths[f].link[i];
        if (rem[l] / cnt[l] == share) {
          fresh[f] = 1;
          break;
        }
      }
    }
    for (std::size_t l = 0; l < L; ++l) {  // parallel_for over links, gather in on-link order
      for (std::uint32_t f : on_link[l]) {
        if (fresh[f]) {
          rem[l] = std::max(0.0, rem[l] - share);
          --cnt[l];
        }
      }
    }
    for (std::size_t f = 0; f < F; ++f) {  // parallel_for over flows
      if (fresh[f]) {
        frozen[f] = 1;
        r.rate[f] = share;
        --left;
      }
    }
  }
  return r;
}

int run(int argc, char** argv, int rank) {
  unsigned gpus = 128, reps = 10;
  double oversub = 4;
  std::string json_path;
  CLI::App app{"bench_maxmin: one max-min solve of an AllToAll component, heap vs data-parallel rounds"};
  app.add_option("--gpus", gpus, "GPUs (multiple of 16)")->check(CLI::Range(16u, 4096u));
  app.add_option("--oversubscription", oversub, "leaf down:up ratio (X for X:1)")->check(CLI::Range(1.0, 16.0));
  app.add_option("--reps", reps, "solves timed per solver")->check(CLI::Range(1u, 100000u));
  app.add_option("--json", json_path, "write a JSON record");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (rank == 0) app.exit(e);
    return e.get_exit_code() == 0 ? 0 : 2;
  }
  if (gpus % 16 != 0) throw fabricsim::engine::InputError("<cli>", "--gpus", "must be a multiple of 16", "use 16, 32, 64, 128...");
  m::ClusterSpec spec;
  spec.hosts = gpus / 8;
  spec.gpus_per_host = 8;
  spec.fabric = m::FabricKind::kLeafSpine;
  spec.nics_per_leaf = 16;
  spec.oversub_leaf = oversub;
  spec.source = "<bench_maxmin>";
  const m::Topology topo(spec);
  const m::LinkIndex index(topo);
  const std::vector<double> cap = index.capacities(topo);
  std::vector<m::FlowPath> paths;
  for (std::uint32_t s = 0; s < gpus; ++s) {
    for (std::uint32_t d = 0; d < gpus; ++d) {
      if (s != d) paths.push_back(m::route_path(topo, &index, s, d, fabricsim::engine::mix64(paths.size() + 1)));
    }
  }
  m::MaxMinSolver solver(cap);
  std::vector<std::uint32_t> ids, seeds, solved;
  std::vector<std::vector<std::uint32_t>> on_link(cap.size());
  for (std::size_t f = 0; f < paths.size(); ++f) {
    ids.push_back(solver.add_flow(paths[f].link, paths[f].hops));
    for (std::uint32_t i = 0; i < paths[f].hops; ++i) {
      on_link[paths[f].link[i]].push_back(static_cast<std::uint32_t>(f));
      seeds.push_back(paths[f].link[i]);
    }
  }
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  for (unsigned r = 0; r < reps; ++r) {
    solved.clear();
    solver.recompute(seeds, &solved);
  }
  const double heap_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / reps;
  t0 = Clock::now();
  Rounds rounds;
  for (unsigned r = 0; r < reps; ++r) rounds = solve_rounds(cap, on_link, paths);
  const double rounds_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / reps;
  double max_rel = 0;
  std::size_t identical = 0;
  for (std::size_t f = 0; f < paths.size(); ++f) {
    const double a = solver.rate(ids[f]), b = rounds.rate[f];
    identical += a == b ? 1 : 0;
    max_rel = std::max(max_rel, std::fabs(a - b) / a);
  }
  if (rank == 0) {
    std::printf("bench_maxmin: %u GPUs leaf-spine %g:1, %zu flows, %u links: heap %.1f us/solve, rounds %.1f us/solve "
                "(%zu rounds, %.2fx); rates: max relative difference %.3g, %zu of %zu bit-identical\n",
                gpus, oversub, paths.size(), index.size(), heap_us, rounds_us, rounds.rounds, rounds_us / heap_us, max_rel,
                identical, paths.size());
  }
  nlohmann::json j = {{"bench", "maxmin"}, {"gpus", gpus}, {"oversubscription", oversub}, {"flows", paths.size()},
                      {"links", index.size()}, {"reps", reps}, {"heap_us_per_solve", heap_us},
                      {"rounds_us_per_solve", rounds_us}, {"rounds", rounds.rounds},
                      {"max_relative_rate_difference", max_rel}, {"bit_identical_rates", identical}};
  return rank == 0 ? fabricsim::bench::write_json(json_path, j) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return fabricsim::bench::bench_main(argc, argv, [&](int rank, int) { return run(argc, argv, rank); });
}
