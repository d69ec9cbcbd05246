// Stage: per-GPU compute slowdowns (compute.stragglers, compute.straggler_dist), and the summary
// line that names the slowest GPU.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/errors.hpp"
#include "engine/rng.hpp"
#include "jobs/run/context.hpp"

namespace fabricsim::jobs::run_stages {

namespace {

/// z of the standard normal's 99th percentile (Phi^-1(0.99); Abramowitz and Stegun, Table 26.1).
constexpr double kZ99 = 2.3263478740408408;
/// The RNG stream of rank r's draw (distinct from the LPs' own streams, which are LP ids).
constexpr std::uint64_t kStragglerStream = 0x5354524147474C52ull;  // "STRAGGLR"

/// A standard normal draw from two uniforms (Box and Muller, Ann. Math. Statist. 29, 1958).
double standard_normal(engine::CounterRng& rng) {
  const double u1 = 1.0 - rng.next_unit();  // (0, 1]
  const double u2 = rng.next_unit();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}

}  // namespace

double lognormal_straggler(std::uint64_t seed, std::uint32_t rank, double p99) {
  const double sigma = std::log(p99) / kZ99;
  engine::CounterRng rng(seed, kStragglerStream + rank);
  return std::exp(sigma * standard_normal(rng));
}

void draw_stragglers(RunContext& c) {
  const Spec& spec = c.spec;
  if (spec.stragglers.empty() && spec.straggler_dist == "none") return;
  const std::uint32_t n = c.w.ranks;
  std::vector<double> f(n, 1.0);
  if (spec.straggler_dist == "lognormal") {
    for (std::uint32_t r = 0; r < n; ++r) f[r] = lognormal_straggler(spec.seed, r, spec.straggler_p99);
  }
  for (const auto& [rank, factor] : spec.stragglers) {
    if (rank >= n) {
      throw engine::InputError(spec.file_of("compute.stragglers"), "compute.stragglers",
                               fmt::format("rank {} is not in the {}-rank workload", rank, n),
                               fmt::format("give ranks 0..{}", n - 1));
    }
    f[rank] *= factor;
  }
  if (std::all_of(f.begin(), f.end(), [](double x) { return x == 1.0; })) return;
  c.compute_factor = std::move(f);
}

std::string straggler_summary(const RunContext& c, const std::vector<io::RankRecord>& ranks) {
  if (c.compute_factor.empty() || ranks.empty()) return "";
  std::uint32_t slow = 0;
  for (std::uint32_t r = 1; r < c.compute_factor.size(); ++r) {
    if (c.compute_factor[r] > c.compute_factor[slow]) slow = r;
  }
  const auto counted = static_cast<std::size_t>(
      std::count_if(c.compute_factor.begin(), c.compute_factor.end(), [](double x) { return x != 1.0; }));
  double compute_ps = 0;
  engine::SimTime finish_ps = 0;
  for (const auto& rr : ranks) {
    if (rr.rank == slow) {
      compute_ps = static_cast<double>(rr.compute_ps);
      finish_ps = rr.finish_ps;
    }
  }
  const double f = c.compute_factor[slow];
  const double extra_ms = compute_ps * (1.0 - 1.0 / f) * 1e-9;
  return fmt::format("stragglers: {} of {} GPUs slowed; slowest rank {} (compute x{:.3f}): its compute {:.3f} ms, "
                     "{:+.3f} ms from the slowdown, finished at {:.3f} ms",
                     counted, c.compute_factor.size(), slow, f, compute_ps * 1e-9, extra_ms,
                     static_cast<double>(finish_ps) * 1e-9);
}

std::string throttle_summary(const RunContext& c) {
  if (c.spec.throttles.empty()) return "";
  engine::SimTime total = 0;
  const RunContext::ThrottleCost* worst = nullptr;
  for (const auto& t : c.throttle_added) {
    total += t.added_ps;
    if (worst == nullptr || t.added_ps > worst->added_ps) worst = &t;
  }
  std::string out = fmt::format("throttling: {} window(s) (compute.throttle); {} GPUs lost compute time, {:.3f} ms in all",
                                c.spec.throttles.size(), c.throttle_added.size(), static_cast<double>(total) * 1e-9);
  if (worst != nullptr) {
    out += fmt::format("; most on rank {} (+{:.3f} ms)", worst->rank, static_cast<double>(worst->added_ps) * 1e-9);
  }
  return out;
}

}  // namespace fabricsim::jobs::run_stages
