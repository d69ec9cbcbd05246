/// @file layers.cpp
/// Forward and backward of one transformer layer (attention, dense FFN, TP/SP communication)
/// and of the output layer and loss.
#include "jobs/generators/builder.hpp"

namespace fabricsim::jobs::gen {

void Builder::attn_core_fwd(Rank& R, const std::string& L, bool recompute) {
  if (c_.cp > 1) {
    cp_attention(R, L, false, recompute);
    return;
  }
  if (c_.flash_attention) {
    comp(R, L + ".attn", flash_k(false), {}, recompute);
    return;
  }
  const double s = c_.seq_len, dqk = m_.qk_head_dim(), dv = m_.head_dim, n = score_elems();
  comp(R, L + ".qk", bmm_k("qk", s, s, dqk), {}, recompute);
  comp(R, L + ".softmax", mem("softmax", el(n), 5 * n, 2 * n * B_), {}, recompute);
  if (c_.attention_dropout > 0) comp(R, L + ".adrop", mem("dropout", el(n), n, (2 * B_ + 1) * n), {}, recompute);
  comp(R, L + ".pv", bmm_k("pv", s, dv, s), {}, recompute);
}

void Builder::attn_core_bwd(Rank& R, const std::string& L) {
  if (c_.cp > 1) {
    cp_attention(R, L, true, false);
    return;
  }
  if (c_.flash_attention) {
    comp(R, L + ".attn.b", flash_k(true));
    return;
  }
  const double s = c_.seq_len, dqk = m_.qk_head_dim(), dv = m_.head_dim, n = score_elems();
  comp(R, L + ".pv.dp", bmm_k("pv.dgrad", s, s, dv));   // dP = dO·V^T
  comp(R, L + ".pv.dv", bmm_k("pv.wgrad", s, dv, s));   // dV = P^T·dO
  if (c_.attention_dropout > 0) comp(R, L + ".adrop.b", mem("dropout_bwd", el(n), n, (2 * B_ + 1) * n));
  comp(R, L + ".softmax.b", mem("softmax_bwd", el(n), 4 * n, 3 * n * B_));
  comp(R, L + ".qk.dq", bmm_k("qk.dgrad", s, dqk, s));  // dQ = dS·K
  comp(R, L + ".qk.dk", bmm_k("qk.wgrad", s, dqk, s));  // dK = dS^T·Q
}

std::vector<Builder::Lin> Builder::attn_in() const {
  const double h = double(m_.hidden), t = c_.tp;
  if (m_.attn == AttnType::kMla) {
    return {{"q_down", h, double(m_.q_lora_rank), true},
            {"q_up", double(m_.q_lora_rank), double(m_.heads) * m_.qk_head_dim() / t, true},
            {"kv_down", h, double(m_.kv_lora_rank + m_.qk_rope_dim), true},
            {"kv_up", double(m_.kv_lora_rank), double(m_.heads) * (m_.qk_nope_dim + m_.head_dim) / t, true}};
  }
  return {{"qkv", h, (double(m_.heads) + 2.0 * m_.kv_heads) * m_.head_dim / t, true}};
}

void Builder::layer_fwd(Rank& R, std::uint32_t l, std::vector<std::uint32_t> in, bool recompute,
                      std::vector<std::int64_t>* zero3_wait) {
  const double h = double(m_.hidden), t = c_.tp;
  const std::string L = fmt::format("L{}", l);
  if (c_.zero == 3 && rg_[R.r].dp >= 0) {
    const double bytes = layer_dense_params(l) * B_;
    add_dep(in, coll(R, L + ".z3ag", CollOp::kAllGather, bytes, rg_[R.r].dp, deps_of({R.last})));
    if (zero3_wait) zero3_wait->push_back(static_cast<std::int64_t>(in.back()));
  }
  // Attention.
  comp(R, L + ".ln1", norm_k(Tl_, false), in, recompute);
  const auto ins = attn_in();
  if (tp_ovl_ && ins.size() == 1) {
    const Lin lin = ins[0];
    ag_gemm(R, L + "." + lin.name, [&](double rows) { return gemm(rows, lin.n, lin.k, B_); }, {}, {}, recompute);
  } else {
    std::int64_t ag = sp_ ? coll(R, L + ".ag1", CollOp::kAllGather, T_ * h * B_, rg_[R.r].tp, deps_of({R.last})) : -1;
    std::vector<std::uint32_t> pre = deps_of({ag});
    for (const Lin& lin : ins) {
      Kernel k = gemm(T_, lin.n, lin.k, B_);
      if (replicated(lin)) k.model_flops /= t;
      comp(R, L + "." + lin.name, k, pre, recompute);
      pre.clear();
    }
  }
  if (m_.qk_norm) comp(R, L + ".qk_norm", qk_norm_k(false), {}, recompute);
  if (m_.rope) comp(R, L + ".rope", rope_k(false), {}, recompute);
  attn_core_fwd(R, L, recompute);
  if (fp8_) comp(R, L + ".proj.fp8ct", fp8_ct(T_ * double(m_.heads) * m_.head_dim / t), {}, recompute);
  const double attn_out = double(m_.heads) * m_.head_dim / t;
  // A row-parallel GEMM (proj, fc2) and the TP reduction of its output: pipelined reduce-scatter
  // chunks with tp_comm_overlap, else the whole GEMM then a reduce-scatter (SP) or all-reduce.
  // @returns the node the residual add waits for (-1: none).
  auto row_parallel = [&](const std::string& name, const std::function<Kernel(double)>& gemm_rows,
                          const char* rs, const char* ar) -> std::int64_t {
    if (tp_ovl_) return gemm_rs(R, L + "." + name, gemm_rows, {}, recompute);
    comp(R, L + "." + name, gemm_rows(T_), {}, recompute);
    if (c_.tp <= 1) return -1;
    return sp_ ? coll(R, L + rs, CollOp::kReduceScatter, T_ * h * B_, rg_[R.r].tp, deps_of({R.last}))
               : coll(R, L + ar, CollOp::kAllReduce, T_ * h * B_, rg_[R.r].tp, deps_of({R.last}));
  };
  std::int64_t red = row_parallel("proj", [&](double rows) { return gemm(rows, h, attn_out, B_); }, ".rs1", ".ar1");
  comp(R, L + ".add1", mem("residual_add", el(Tl_ * h), Tl_ * h, 3 * Tl_ * h * B_), deps_of({red}), recompute);
  comp(R, L + ".ln2", norm_k(Tl_, false), {}, recompute);
  if (m_.moe_layer(l)) {
    moe_fwd(R, l, recompute);
  } else {
    const double ffn = double(m_.ffn_hidden) / t, mats_in = m_.ffn == FfnType::kSwiglu ? 2 : 1;
    if (tp_ovl_) {
      ag_gemm(R, L + ".fc1", [&](double rows) { return gemm(rows, mats_in * ffn, h, B_); }, {}, {}, recompute);
    } else {
      const std::int64_t ag =
          sp_ ? coll(R, L + ".ag2", CollOp::kAllGather, T_ * h * B_, rg_[R.r].tp, deps_of({R.last})) : -1;
      comp(R, L + ".fc1", gemm(T_, mats_in * ffn, h, B_), deps_of({ag}), recompute);
    }
    comp(R, L + ".act", act_k(T_ * ffn, false), {}, recompute);
    red = row_parallel("fc2", [&](double rows) { return gemm(rows, h, ffn, B_); }, ".rs2", ".ar2");
    comp(R, L + ".add2", mem("residual_add", el(Tl_ * h), Tl_ * h, 3 * Tl_ * h * B_), deps_of({red}), recompute);
    return;
  }
  comp(R, L + ".add2", mem("residual_add", el(Tl_ * h), Tl_ * h, 3 * Tl_ * h * B_), {}, recompute);
}

std::int64_t Builder::lin_bwd(Rank& R, const std::string& name, const Kernel& fwd, bool col, bool tp_comm,
                            std::vector<std::uint32_t> pre, std::vector<std::uint32_t>* wgrads,
                            const std::vector<Kernel>& prep, bool ag_steps) {
  const double h = double(m_.hidden);
  if (ag_steps) {
    // The steps wait for the gradient (pre, the stream's last compute); the FP8 cast/transpose
    // kernels of the local shard run first, then the chunked data-gradient GEMM.
    std::vector<std::uint32_t> step_deps = pre;
    if (R.last >= 0) step_deps.push_back(static_cast<std::uint32_t>(R.last));
    for (std::size_t i = 0; i < prep.size(); ++i) {
      comp(R, fmt::format("{}.{}{}", name, prep[i].op, i), prep[i], std::move(pre));
      pre.clear();
    }
    ag_gemm(R, name + ".dg", [&](double rows) {
              Kernel part = gemm(rows, fwd.dims.n, fwd.dims.k, B_);
              part.keep16 = fwd.keep16;
              return dgrad_of(part);
            }, std::move(step_deps), std::move(pre), false);
    comp(R, name + ".wg", wgrad_of(fwd));
    if (wgrads) wgrads->push_back(static_cast<std::uint32_t>(R.last));
    return -1;
  }
  std::int64_t ag_in = -1;
  if (col && tp_comm && sp_) {
    // Saved input is sequence-sharded: gather it again for the weight gradient, overlapped
    // with the data-gradient GEMM (Megatron async all-gather).
    ag_in = coll(R, name + ".agw", CollOp::kAllGather, T_ * h * B_, rg_[R.r].tp, deps_of({R.last}));
  }
  const Kernel dg = dgrad_of(fwd), wg = wgrad_of(fwd);
  for (std::size_t i = 0; i < prep.size(); ++i) {
    comp(R, fmt::format("{}.{}{}", name, prep[i].op, i), prep[i], std::move(pre));
    pre.clear();
  }
  comp(R, name + ".dg", dg, std::move(pre));
  const auto dgrad = static_cast<std::uint32_t>(R.last);
  std::int64_t red = -1;
  if (col && tp_comm && c_.tp > 1) {
    red = sp_ ? coll(R, name + ".rsg", CollOp::kReduceScatter, T_ * h * B_, rg_[R.r].tp, deps_of({dgrad}))
              : coll(R, name + ".arg", CollOp::kAllReduce, T_ * h * B_, rg_[R.r].tp, deps_of({dgrad}));
  }
  comp(R, name + ".wg", wg, deps_of({ag_in}));
  if (wgrads) wgrads->push_back(static_cast<std::uint32_t>(R.last));
  return red;
}

void Builder::layer_bwd(Rank& R, std::uint32_t l, std::vector<std::uint32_t> in) {
  const double h = double(m_.hidden), t = c_.tp;
  const std::string L = fmt::format("L{}", l);
  if (c_.recompute == Recompute::kFull) {
    layer_fwd(R, l, in, true, nullptr);
    in.clear();
  } else if (c_.zero == 3 && rg_[R.r].dp >= 0) {
    add_dep(in, coll(R, L + ".z3agb", CollOp::kAllGather, layer_dense_params(l) * B_, rg_[R.r].dp, deps_of({R.last})));
  }
  std::vector<std::uint32_t> wg;
  std::int64_t red = -1;
  // FFN.
  if (m_.moe_layer(l)) {
    moe_bwd(R, l, in, &wg);
  } else {
    const double ffn = double(m_.ffn_hidden) / t, mats_in = m_.ffn == FfnType::kSwiglu ? 2 : 1;
    std::int64_t ag = sp_ && !tp_ovl_ ? coll(R, L + ".fc2.agg", CollOp::kAllGather, T_ * h * B_, rg_[R.r].tp, deps_of({R.last})) : -1;
    add_dep(in, ag);
    lin_bwd(R, L + ".fc2", gemm(T_, h, ffn, B_), false, true, in, &wg, fp8_prep({fp8_ct(T_ * h), fp8_tr(T_ * ffn)}),
            tp_ovl_);
    comp(R, L + ".act.b", act_k(T_ * ffn, true));
    red = lin_bwd(R, L + ".fc1", gemm(T_, mats_in * ffn, h, B_), true, true, {}, &wg, fp8_prep({fp8_tr(T_ * h)}));
    comp(R, L + ".ln2.b", norm_k(Tl_, true), deps_of({red}));
  }
  // Attention.
  std::int64_t ag = sp_ && !tp_ovl_ ? coll(R, L + ".proj.agg", CollOp::kAllGather, T_ * h * B_, rg_[R.r].tp, deps_of({R.last})) : -1;
  lin_bwd(R, L + ".proj", gemm(T_, h, double(m_.heads) * m_.head_dim / t, B_), false, true, deps_of({ag}), &wg,
          fp8_prep({fp8_ct(T_ * h)}), tp_ovl_);
  if (c_.recompute == Recompute::kSelective) attn_core_fwd(R, L + ".rc", true);
  attn_core_bwd(R, L);
  if (m_.rope) comp(R, L + ".rope.b", rope_k(true));
  if (m_.qk_norm) comp(R, L + ".qk_norm.b", qk_norm_k(true));
  red = -1;
  const auto ins = attn_in();
  for (std::size_t i = ins.size(); i-- > 0;) {
    Kernel k = gemm(T_, ins[i].n, ins[i].k, B_);
    if (replicated(ins[i])) k.model_flops /= t;
    // One TP gather/reduction for the whole input-projection group (the first linear reads
    // the gathered input); MLA's inner projections need none.
    const bool first = i == 0;
    const std::int64_t r = lin_bwd(R, L + "." + ins[i].name, k, true, first, {}, &wg,
                                   fp8_prep({fp8_ct(T_ * ins[i].n), fp8_tr(T_ * ins[i].k)}));
    if (first) red = r;
  }
  comp(R, L + ".ln1.b", norm_k(Tl_, true), deps_of({red}));
  last_wgrads_ = wg;
}

void Builder::logits_fwd(Rank& R) {
  const double h = double(m_.hidden), V = double(m_.vocab) / c_.tp;
  comp(R, "lnf", norm_k(Tl_, false));
  std::int64_t ag = sp_ ? coll(R, "lnf.ag", CollOp::kAllGather, T_ * h * B_, rg_[R.r].tp, deps_of({R.last})) : -1;
  comp(R, "logits", g16(gemm(T_, V, h, B_)), deps_of({ag}));
  comp(R, "xent", xent_k(T_ * V, false));
  if (c_.tp > 1) {
    // Vocab-parallel cross entropy: max, predicted logit, sum of exp (fp32, one per token).
    std::int64_t prev = R.last;
    for (const char* s : {"xent.max", "xent.tgt", "xent.sum"}) {
      prev = coll(R, s, CollOp::kAllReduce, T_ * 4, rg_[R.r].tp, deps_of({prev}));
    }
    comp(R, "loss", mem("residual_add", el(T_), T_, 3 * T_ * 4), deps_of({prev}));
  }
}

std::vector<std::uint32_t> Builder::logits_bwd(Rank& R, std::vector<std::uint32_t> in) {
  const double h = double(m_.hidden), V = double(m_.vocab) / c_.tp;
  comp(R, "xent.b", xent_k(T_ * V, true), std::move(in));
  std::vector<std::uint32_t> wg;
  const Kernel k = g16(gemm(T_, V, h, B_));
  comp(R, "logits.dg", dgrad_of(k));
  const auto dg = static_cast<std::uint32_t>(R.last);
  std::int64_t red = -1;
  if (c_.tp > 1) {
    red = sp_ ? coll(R, "logits.rsg", CollOp::kReduceScatter, T_ * h * B_, rg_[R.r].tp, deps_of({dg}))
              : coll(R, "logits.arg", CollOp::kAllReduce, T_ * h * B_, rg_[R.r].tp, deps_of({dg}));
  }
  comp(R, "logits.wg", wgrad_of(k));
  wg.push_back(static_cast<std::uint32_t>(R.last));
  comp(R, "lnf.b", norm_k(Tl_, true), deps_of({red}));
  return wg;
}

}  // namespace fabricsim::jobs::gen
