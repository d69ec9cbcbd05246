/// @file tp_overlap.cpp
/// TransformerEngine userbuffers TP communication overlap: ring-exchange all-gathers feeding
/// chunked GEMMs, pipelined GEMM + reduce-scatter.
#include "jobs/generators/builder.hpp"

namespace fabricsim::jobs::gen {

void Builder::ag_gemm(Rank& R, const std::string& name, const std::function<Kernel(double)>& chunk,
                    std::vector<std::uint32_t> step_deps, std::vector<std::uint32_t> first, bool recompute) {
  const std::uint32_t n = c_.tp;
  const double shard_bytes = T_ * double(m_.hidden) * B_ / double(n);  // T_ % TP == 0 (SP check)
  const std::uint32_t next = rank_of((R.t + 1) % n, R.d, R.p), prev = rank_of((R.t + n - 1) % n, R.d, R.p);
  if (R.last >= 0) step_deps.push_back(static_cast<std::uint32_t>(R.last));
  ring_steps(R, n, next, prev, shard_bytes, name + ".tx", name + ".rx", std::move(step_deps), std::move(first),
             [&](std::uint32_t j, std::vector<std::uint32_t> deps) {
               comp(R, fmt::format("{}.c{}", name, j), chunk(T_ / n), std::move(deps), recompute);
             },
             models::CommKind::kTp);
}

void Builder::ring_steps(Rank& R, std::uint32_t n, std::uint32_t next, std::uint32_t prev, double bytes, const std::string& tx,
                       const std::string& rx_name, std::vector<std::uint32_t> step_deps, std::vector<std::uint32_t> first,
                       const std::function<void(std::uint32_t, std::vector<std::uint32_t>)>& compute,
                       models::CommKind kind) {
  std::int64_t rx = -1;
  for (std::uint32_t j = 0; j < n; ++j) {
    std::int64_t next_rx = -1;
    if (j + 1 < n) {
      const std::vector<std::uint32_t> d = j == 0 ? step_deps : deps_of({rx});
      const std::int64_t tg = ring_tag_base_ + R.ring_steps++;
      ring_p2p(R, true, next, bytes, tg, tx + std::to_string(j + 1), d, kind);
      next_rx = ring_p2p(R, false, prev, bytes, tg, rx_name + std::to_string(j + 1), d, kind);
    }
    compute(j, j == 0 ? std::move(first) : deps_of({rx}));
    rx = next_rx;
  }
}

std::int64_t Builder::gemm_rs(Rank& R, const std::string& name, const std::function<Kernel(double)>& chunk,
                            std::vector<std::uint32_t> first, bool recompute) {
  const std::uint32_t n = kTpOverlapRsSplits;
  std::int64_t rs = -1;
  for (std::uint32_t j = 0; j < n; ++j) {
    Kernel k = chunk(T_ / n);
    k.time_scale = rs_margin_scale_;
    comp(R, fmt::format("{}.c{}", name, j), k, j == 0 ? std::move(first) : std::vector<std::uint32_t>{}, recompute);
    // Chunk j's rows of the output: whole bytes that add up to the unchunked reduce-scatter.
    const std::uint64_t total = u64(T_ * double(m_.hidden) * B_);
    const double bytes = double(total * (j + 1) / n - total * j / n);
    rs = coll(R, fmt::format("{}.rs{}", name, j), CollOp::kReduceScatter, bytes, rg_[R.r].tp, deps_of({R.last, rs}));
  }
  return rs;
}

}  // namespace fabricsim::jobs::gen
