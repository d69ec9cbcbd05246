/// @file moe.cpp
/// MoE FFN with expert parallelism (EP AllToAll dispatch and combine), forward and backward.
#include "jobs/generators/builder.hpp"

namespace fabricsim::jobs::gen {

void Builder::moe_fwd(Rank& R, std::uint32_t l, bool recompute) {
  const double h = double(m_.hidden), k = m_.top_k, E = m_.experts, el_ = double(m_.expert_ffn_hidden);
  const double mats_in = m_.ffn == FfnType::kSwiglu ? 2 : 1;
  const std::string L = fmt::format("L{}", l);
  const double rows = Tl_ * k;
  const double local_experts = E / c_.ep;
  comp(R, L + ".router", g16(gemm(Tl_, E, h, B_)), {}, recompute);
  comp(R, L + ".perm", mem("moe_permute", el(rows * h), 0, 2 * rows * h * B_), {}, recompute);
  std::int64_t a2a = coll(R, L + ".disp", CollOp::kAllToAll, rows * h * B_, rg_[R.r].ep, deps_of({R.last}));
  comp(R, L + ".efc1", gemm(rows, mats_in * el_, h, B_, local_experts, "grouped_gemm"), deps_of({a2a}), recompute);
  comp(R, L + ".eact", act_k(rows * el_, false), {}, recompute);
  comp(R, L + ".efc2", gemm(rows, h, el_, B_, local_experts, "grouped_gemm"), {}, recompute);
  a2a = coll(R, L + ".comb", CollOp::kAllToAll, rows * h * B_, rg_[R.r].ep, deps_of({R.last}));
  if (m_.shared_experts > 0) {
    const double sf = el_ * m_.shared_experts;
    comp(R, L + ".sfc1", gemm(Tl_, mats_in * sf, h, B_), {}, recompute);
    comp(R, L + ".sact", act_k(Tl_ * sf, false), {}, recompute);
    comp(R, L + ".sfc2", gemm(Tl_, h, sf, B_), {}, recompute);
  }
  comp(R, L + ".unperm", mem("moe_permute", el(rows * h), 0, 2 * rows * h * B_), deps_of({a2a}), recompute);
}

void Builder::moe_bwd(Rank& R, std::uint32_t l, const std::vector<std::uint32_t>& in, std::vector<std::uint32_t>* wg) {
  const double h = double(m_.hidden);
  const std::string L = fmt::format("L{}", l);
  const double k = m_.top_k, E = m_.experts, el_ = double(m_.expert_ffn_hidden);
  const double mats_in = m_.ffn == FfnType::kSwiglu ? 2 : 1, rows = Tl_ * k;
  comp(R, L + ".unperm.b", mem("moe_permute", el(rows * h), 0, 2 * rows * h * B_), in);
  if (m_.shared_experts > 0) {
    const double sf = el_ * m_.shared_experts;
    lin_bwd(R, L + ".sfc2", gemm(Tl_, h, sf, B_), false, false, {}, wg);
    comp(R, L + ".sact.b", act_k(Tl_ * sf, true));
    lin_bwd(R, L + ".sfc1", gemm(Tl_, mats_in * sf, h, B_), false, false, {}, wg);
  }
  std::int64_t a2a = coll(R, L + ".comb.b", CollOp::kAllToAll, rows * h * B_, rg_[R.r].ep, deps_of({R.last}));
  lin_bwd(R, L + ".efc2", gemm(rows, h, el_, B_, E / c_.ep, "grouped_gemm"), false, false, deps_of({a2a}), wg);
  comp(R, L + ".eact.b", act_k(rows * el_, true));
  lin_bwd(R, L + ".efc1", gemm(rows, mats_in * el_, h, B_, E / c_.ep, "grouped_gemm"), false, false, {}, wg);
  a2a = coll(R, L + ".disp.b", CollOp::kAllToAll, rows * h * B_, rg_[R.r].ep, deps_of({R.last}));
  comp(R, L + ".perm.b", mem("moe_permute", el(rows * h), 0, 2 * rows * h * B_), deps_of({a2a}));
  lin_bwd(R, L + ".router", g16(gemm(Tl_, E, h, B_)), false, false, {}, wg);
  comp(R, L + ".ln2.b", norm_k(Tl_, true));
}

}  // namespace fabricsim::jobs::gen
