/// @file cp.cpp
/// Context-parallel attention (ring of K/V exchanges, TransformerEngine p2p).
#include "jobs/generators/builder.hpp"

namespace fabricsim::jobs::gen {

void Builder::cp_attention(Rank& R, const std::string& L, bool bwd, bool recompute) {
  const std::uint32_t n = c_.cp, c = R.d % n, base = R.d - c;
  const std::uint32_t next = rank_of(R.t, base + (c + 1) % n, R.p), prev = rank_of(R.t, base + (c + n - 1) % n, R.p);
  const double kvh = m_.attn == AttnType::kMla ? double(m_.heads) : double(m_.kv_heads);
  const double bytes = T_ * kvh / c_.tp * double(m_.qk_head_dim() + m_.head_dim) * B_ * (bwd ? 2.0 : 1.0);
  std::vector<std::uint32_t> step_deps;
  add_dep(step_deps, R.last);
  const std::string base_name = L + (bwd ? ".attn.b" : ".attn");
  ring_steps(R, n, next, prev, bytes, base_name + ".cptx", base_name + ".cprx", std::move(step_deps), {},
             [&](std::uint32_t j, std::vector<std::uint32_t> deps) {
               comp(R, fmt::format("{}.cp{}", base_name, j), flash_k(bwd), std::move(deps), recompute);
             },
             models::CommKind::kCp);
}

}  // namespace fabricsim::jobs::gen
