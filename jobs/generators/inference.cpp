/// @file inference.cpp
/// Inference workloads (prefill and decode steps, docs/generators.md "Inference"): the
/// builder's inference layers and ranks, the inference memory estimate and FLOPs.
#include "jobs/generators/builder.hpp"

namespace fabricsim::jobs::gen {

Kernel Builder::igemm(double m, double n, double k, double groups, const char* op, bool keep16) const {
  const double wb = fp8_ && !keep16 ? 1.0 : B_;
  Kernel kn = gemm(m, n, k, B_, groups, op);
  kn.bytes = m * k * wb + std::min(groups, std::max(1.0, m)) * k * n * wb + m * n * B_;
  kn.keep16 = keep16;
  return kn;
}

std::int64_t Builder::inf_moe(Rank& R, const std::string& L, double T) {
  const double h = double(m_.hidden), kk = m_.top_k, E = m_.experts, fe = double(m_.expert_ffn_hidden),
               t = c_.tp, mats_in = m_.ffn == FfnType::kSwiglu ? 2 : 1;
  const std::int32_t tpg = rg_[R.r].tp;
  const bool ep = c_.ep > 1;
  const double Tm = ep ? T / t : T;            // tokens this rank routes
  const double rows = Tm * kk;                 // expert rows this rank computes (balanced routing)
  const double groups = ep ? E / c_.ep : E;    // experts on this rank
  const double fl = ep ? fe : fe / t;          // expert FFN columns on this rank
  Kernel router = igemm(Tm, E, h, 1, "gemm", true);
  if (!ep) router.model_flops /= t;            // replicated on the TP ranks: counted once
  comp(R, L + ".router", router);
  comp(R, L + ".perm", mem("moe_permute", el(rows * h), 0, 2 * rows * h * B_));
  std::int64_t a2a = ep ? coll(R, L + ".disp", CollOp::kAllToAll, rows * h * B_, rg_[R.r].ep, deps_of({R.last})) : -1;
  comp(R, L + ".efc1", igemm(rows, mats_in * fl, h, groups, "grouped_gemm"), deps_of({a2a}));
  comp(R, L + ".eact", act_k(rows * fl, false));
  comp(R, L + ".efc2", igemm(rows, h, fl, groups, "grouped_gemm"));
  a2a = ep ? coll(R, L + ".comb", CollOp::kAllToAll, rows * h * B_, rg_[R.r].ep, deps_of({R.last})) : -1;
  if (m_.shared_experts > 0) {
    const double sf = fe * m_.shared_experts / (ep ? 1.0 : t);
    comp(R, L + ".sfc1", igemm(Tm, mats_in * sf, h));
    comp(R, L + ".sact", act_k(Tm * sf, false));
    comp(R, L + ".sfc2", igemm(Tm, h, sf));
  }
  comp(R, L + ".unperm", mem("moe_permute", el(rows * h), 0, 2 * rows * h * B_), deps_of({a2a}));
  if (c_.tp <= 1) return -1;
  return ep ? coll(R, L + ".moe.ag", CollOp::kAllGather, T * h * B_, tpg, deps_of({R.last}))
            : coll(R, L + ".ar2", CollOp::kAllReduce, T * h * B_, tpg, deps_of({R.last}));
}

void Builder::inf_layer(Rank& R, std::uint32_t l, std::uint32_t k, double T, std::vector<std::uint32_t> in) {
  const double h = double(m_.hidden), t = c_.tp, hl = double(m_.heads) / t, kvl = kv_local(), hd = m_.head_dim;
  const double b = c_.batch, P = c_.prompt_tokens;
  const std::string L = fmt::format("{}.L{}", k == 0 ? std::string("pre") : fmt::format("d{}", k), l);
  const std::int32_t tpg = rg_[R.r].tp;
  comp(R, L + ".ln1", norm_k(T, false), std::move(in));
  Kernel qkv = igemm(T, (hl + 2 * kvl) * hd, h);
  qkv.model_flops = 2 * T * h * (double(m_.heads) + 2.0 * m_.kv_heads) * hd / t;  // replicated KV heads counted once
  comp(R, L + ".qkv", qkv);
  if (m_.qk_norm) {
    const double n = T * (hl + kvl) * hd;  // q/k RMSNorm: read and write each element once
    comp(R, L + ".qk_norm", mem("qk_norm", el(n), 4 * n, 2 * n * B_));
  }
  if (m_.rope) {
    const double n = T * (hl + kvl) * hd;
    comp(R, L + ".rope", mem("rope", el(n), 3 * n, 2 * n * B_));
  }
  // The new keys and values into the paged KV cache (vLLM reshape_and_cache_flash: read, write).
  const double kv_new = T * 2 * kvl * hd;
  comp(R, L + ".kvw", mem("kv_cache_write", el(kv_new), 0, 2 * kv_new * B_));
  if (k == 0) {
    // Causal FlashAttention over each prompt: query q attends to q keys, Σ = P(P+1)/2.
    const double f = 2.0 * b * hl * (2 * hd) * P * (P + 1) / 2;
    Kernel a{"flash_attn_fwd",
             fmt::format("b={} heads={} kv_heads={} s={} d={} causal=1", u64(b), u64(hl), u64(kvl), u64(P), u64(hd)), f,
             b * P * (2 * hl * hd + 2 * kvl * hd) * B_, f};
    a.dims = kernels::KernelShape::attention(b * hl, P, hd, true, false, c_.flash2);
    a.dims.heads = hl;
    a.dims.kv_heads = kvl;
    comp(R, L + ".attn", a);
  } else {
    // Decode attention (FlashAttention/FlashInfer decode over the paged cache): every request's
    // one query reads its whole K and V, 2·kv_heads·head_dim·context·B bytes per layer.
    const double ctx = P + k, kv_read = b * 2 * kvl * hd * ctx * B_;
    const double f = 2.0 * b * hl * (2 * hd) * ctx;
    comp(R, L + ".attn",
         Kernel{"attn_decode",
                fmt::format("b={} heads={} kv_heads={} context={} d={}", u64(b), u64(hl), u64(kvl), u64(ctx), u64(hd)),
                f, kv_read + 2 * b * hl * hd * B_, f});
    if (R.r == 0 && !plan_only_) infer_.kv_read_bytes_rank0 += kv_read;
  }
  comp(R, L + ".proj", igemm(T, h, hl * hd));
  std::int64_t red = c_.tp > 1 ? coll(R, L + ".ar1", CollOp::kAllReduce, T * h * B_, tpg, deps_of({R.last})) : -1;
  comp(R, L + ".add1", residual_k(T * h), deps_of({red}));
  comp(R, L + ".ln2", norm_k(T, false));
  if (m_.moe_layer(l)) {
    red = inf_moe(R, L, T);
  } else {
    const double ffn = double(m_.ffn_hidden) / t, mats_in = m_.ffn == FfnType::kSwiglu ? 2 : 1;
    comp(R, L + ".fc1", igemm(T, mats_in * ffn, h));
    comp(R, L + ".act", act_k(T * ffn, false));
    comp(R, L + ".fc2", igemm(T, h, ffn));
    red = c_.tp > 1 ? coll(R, L + ".ar2", CollOp::kAllReduce, T * h * B_, tpg, deps_of({R.last})) : -1;
  }
  comp(R, L + ".add2", residual_k(T * h), deps_of({red}));
}

void Builder::build_inference_rank(Rank& R) {
  const double h = double(m_.hidden), b = c_.batch, P = c_.prompt_tokens, t = c_.tp;
  const double V = double(m_.vocab);
  const std::uint32_t steps = c_.output_tokens - 1, lps = m_.layers / c_.pp, l0 = R.p * lps;
  const bool first = R.p == 0, last = R.p + 1 == c_.pp;
  const std::int32_t tpg = rg_[R.r].tp;
  // Tags: activations of phase k from stage s -> k·(PP+1) + s; token ids of phase k -> k·(PP+1) + PP.
  auto tg = [&](std::uint32_t k, std::uint32_t slot) { return std::int64_t(k) * (c_.pp + 1) + slot; };
  for (std::uint32_t k = 0; k <= steps; ++k) {
    const double f0 = stats_.model_flops;
    const double T = k == 0 ? b * P : b;
    const std::string ph = k == 0 ? std::string("pre") : fmt::format("d{}", k);
    std::vector<std::uint32_t> in;
    if (first) {
      if (k > 0 && c_.pp > 1) {
        in.push_back(p2p(R, false, rank_of(R.t, R.d, c_.pp - 1), b * 4, tg(k - 1, c_.pp), ph + ".rx.tok"));
      }
      comp(R, ph + ".emb",
           mem("embedding", fmt::format("tokens={} hidden={} vocab={}", u64(T), u64(h), u64(V / t)), 0, 2 * T * h * B_),
           std::move(in));
      in.clear();
      if (c_.tp > 1) add_dep(in, coll(R, ph + ".emb.ar", CollOp::kAllReduce, T * h * B_, tpg, deps_of({R.last})));
    } else {
      in.push_back(p2p(R, false, rank_of(R.t, R.d, R.p - 1), T * h * B_, tg(k, R.p - 1), ph + ".rx"));
    }
    for (std::uint32_t l = l0; l < l0 + lps; ++l) {
      inf_layer(R, l, k, T, in);
      in.clear();
    }
    if (!last) {
      p2p(R, true, rank_of(R.t, R.d, R.p + 1), T * h * B_, tg(k, R.p), ph + ".tx");
    } else {
      comp(R, ph + ".lnf", norm_k(T, false));
      comp(R, ph + ".logits", igemm(b, V / t, h, 1, "gemm", true));
      const std::int64_t ag =
          c_.tp > 1 ? coll(R, ph + ".logits.ag", CollOp::kAllGather, b * V * B_, tpg, deps_of({R.last})) : -1;
      // Sampling over the gathered logits: fp32 softmax/top-p and the draw (read 16-bit, write
      // and read fp32 probabilities): ~5 FLOPs and B + 8 bytes per logit.
      comp(R, ph + ".sample", mem("sampling", el(b * V), 5 * b * V, b * V * (B_ + 8)), deps_of({ag}));
      if (!plan_only_) infer_.phase_end_nodes[R.r].push_back(static_cast<std::uint32_t>(R.last));
      if (c_.pp > 1 && k < steps) p2p(R, true, rank_of(R.t, R.d, 0), b * 4, tg(k, c_.pp), ph + ".tx.tok");
    }
    infer_.phase_flops[k] += stats_.model_flops - f0;
  }
}

}  // namespace fabricsim::jobs::gen

namespace fabricsim::jobs {

using namespace gen;

MemoryEstimate estimate_inference_memory(const TrainConfig& c) {
  const ModelConfig& m = c.model;
  const kernels::GpuSpec& gpu = kernels::find_gpu(c.gpu, c.file, "workload.generator.gpu");
  MemoryEstimate est;
  est.capacity_bytes = gpu.hbm_gb * 1e9;
  const double B = 2, wb = c.dtype == Dtype::kFp8 ? 1.0 : 2.0, t = c.tp, h = double(m.hidden), d = m.head_dim;
  const double kvl = std::max(1.0, double(m.kv_heads) / t);
  const double b = c.batch, ctx = double(c.prompt_tokens) + c.output_tokens - 1, T = b * c.prompt_tokens;
  const std::uint32_t lps = m.layers / c.pp;
  for (std::uint32_t p = 0; p < c.pp; ++p) {
    StageMemory st;
    st.pp_rank = p;
    double w16 = 0, wq = 0;  // 16-bit and GEMM-dtype parameters held
    double ffn_cols = 0;     // widest MLP/expert first-GEMM output columns on the rank
    for (std::uint32_t l = p * lps; l < (p + 1) * lps; ++l) {
      wq += h * (double(m.heads) / t + 2 * kvl) * d + double(m.heads) / t * d * h;
      w16 += 2 * h;  // norms
      const double mats_in = m.ffn == FfnType::kSwiglu ? 2 : 1;
      if (m.moe_layer(l)) {
        const double fl = c.ep > 1 ? double(m.expert_ffn_hidden) : double(m.expert_ffn_hidden) / t;
        const double experts = c.ep > 1 ? double(m.experts) / c.ep : double(m.experts);
        wq += (experts + m.shared_experts) * double(m.ffn_type_mats()) * h * fl;
        w16 += h * m.experts;  // router
        ffn_cols = std::max(ffn_cols, mats_in * fl * m.top_k);
      } else {
        wq += double(m.ffn_params(m.ffn_hidden)) / t;
        ffn_cols = std::max(ffn_cols, mats_in * double(m.ffn_hidden) / t);
      }
    }
    if (p == 0) w16 += double(m.vocab) * h / t;                                   // embedding
    if (p + 1 == c.pp && !(m.tied_embeddings && c.pp == 1)) w16 += double(m.vocab) * h / t;  // LM head
    if (p + 1 == c.pp) w16 += h;                                                  // final norm
    st.params = w16 + wq;
    st.weights_bytes = w16 * B + wq * wb;
    // KV cache at the full context, and the prefill's largest transient: the residual stream and
    // the layer's widest GEMM output (QKV or the first MLP/expert GEMM) of T tokens, 16-bit; the
    // last stage's fp32 logits of the last positions.
    const double kv = double(lps) * b * 2 * kvl * d * ctx * B;
    const double qkv_cols = (double(m.heads) / t + 2 * kvl) * d;
    double act = T * (2 * h + std::max(qkv_cols, ffn_cols)) * B;
    if (p + 1 == c.pp) act += b * double(m.vocab) * 4;
    st.activation_bytes = kv + act;
    st.inflight = 1;
    est.stages.push_back(st);
    if (st.total_bytes() > est.stages[est.peak_stage].total_bytes()) est.peak_stage = p;
  }
  return est;
}

std::string inference_memory_warning(const TrainConfig& c, const MemoryEstimate& m) {
  if (!m.exceeds()) return {};
  const StageMemory& s = m.peak();
  return fmt::format(
      "{}: workload.generator: the inference job needs at least {:.1f} GB per GPU on pipeline rank {} (weights "
      "{:.1f} GB, KV cache and activations {:.1f} GB) but the {} has {:.0f} GB: the real job would run out of "
      "memory; {} (docs/generators.md, \"Inference\")",
      c.file, s.total_bytes() / 1e9, s.pp_rank, s.weights_bytes / 1e9, s.activation_bytes / 1e9, c.gpu,
      m.capacity_bytes / 1e9,
      // FP8 only where it is not in effect yet (as memory_warning names only fixes not in effect).
      c.dtype == kernels::Dtype::kFp8 ? "raise tp/pp, or lower batch or the context"
                                      : "raise tp/pp, lower batch or the context, or use dtype: fp8");
}

double closed_form_inference_flops(const ModelConfig& m, std::uint32_t batch, std::uint32_t prompt,
                                   std::uint32_t step) {
  double matrix = 0;
  for (std::uint32_t l = 0; l < m.layers; ++l) {
    matrix += double(m.attention_params());
    matrix += m.moe_layer(l) ? double(m.top_k + m.shared_experts) * double(m.ffn_params(m.expert_ffn_hidden)) +
                                   double(m.hidden) * m.experts
                             : double(m.ffn_params(m.ffn_hidden));
  }
  const double b = batch, P = prompt;
  const double tokens = step == 0 ? b * P : b;
  const double ctx_sum = step == 0 ? P * (P + 1) / 2 : P + step;  // Σ over a request's queries
  const double attn = 2.0 * m.layers * m.heads * double(m.qk_head_dim() + m.head_dim) * b * ctx_sum;
  return 2.0 * matrix * tokens + 2.0 * double(m.vocab) * double(m.hidden) * b + attn;
}

}  // namespace fabricsim::jobs
