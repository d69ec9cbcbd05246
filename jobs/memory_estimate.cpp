#include "jobs/memory_estimate.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "jobs/generators.hpp"
#include "kernels/gpu_specs.hpp"

namespace fabricsim::jobs {

StateBytesPerParam state_bytes_per_param(double weight_bytes, double grad_bytes, std::uint32_t zero, double dp,
                                         bool fp8_weights) {
  const double d = std::max(1.0, dp);
  const double k = weight_bytes >= 4 ? 8.0 : 12.0;  // fp32 weights need no fp32 master copy
  StateBytesPerParam s;
  s.weights = weight_bytes;
  s.grads = grad_bytes;
  s.optimizer = k;
  if (zero >= 1) s.optimizer /= d;
  if (zero >= 2) s.grads /= d;
  if (zero >= 3) s.weights /= d;
  // FP8 primary weights (Megatron-Core fp8_param_gather + TE): 1 byte, the least an FP8 run can
  // hold; keeping a 16-bit copy beside TE's cached FP8 weight and transpose holds up to 3 more.
  if (fp8_weights) s.weights = 1.0 / (zero >= 3 ? d : 1.0);
  return s;
}

double activation_bytes_per_layer(const TrainConfig& c, bool moe) {
  const ModelConfig& m = c.model;
  const double s = double(c.seq_len) / c.cp, b = c.micro_batch, h = double(m.hidden), a = m.heads;  // CP: s/CP tokens
  const double kv = m.attn == AttnType::kMla ? m.heads : m.kv_heads;
  const double dqk = m.qk_head_dim(), dv = m.head_dim;
  const double t = c.tp;
  const bool sp = c.sequence_parallel && c.tp > 1;
  const double sbh = s * b * h;
  // TransformerEngine FP8 saves the GEMM inputs it needs for the backward as their FP8 casts
  // (1 byte): the QKV, projection, fc1 and fc2 inputs.
  const double gin = c.dtype == kernels::Dtype::kFp8 ? 1.0 : 2.0;
  // Hidden dropout after the attention projection and after the MLP (one 1-byte mask each):
  // GPT-3/Megatron default 0.1; the rotary-embedding families (LLaMA, Mixtral, DeepSeek) train
  // without dropout (their Megatron-Core/NeMo recipes set hidden_dropout = 0).
  const double masks = m.rope ? 0.0 : 2.0 * sbh;
  // Parts TP does not split without SP: LayerNorm inputs (2 x 2sbh), the QKV and fc1 inputs
  // (2 x 2sbh) and the two dropout masks (2 x sbh) = 10sbh (Korthikanti Sec. 4.1).
  const double replicated = 4.0 * sbh + 2.0 * gin * sbh + masks;
  // Attention, split by t: Q, K, V (16-bit), the projection input, and the s^2 terms.
  double attn = 2.0 * s * b * (a * dqk + kv * dqk + kv * dv) + gin * s * b * a * dv;
  const bool keep_scores = !c.flash_attention && c.recompute == Recompute::kNone;
  if (c.flash_attention) {
    attn += 4.0 * s * b * a;  // fp32 log-sum-exp per row
  } else if (keep_scores) {
    attn += (c.attention_dropout > 0 ? 5.0 : 2.0) * a * s * s * b;
  }
  // MLP, split by t (routed experts: EP splits the experts, each token's top_k copies stay):
  // fc1 output (16-bit; SwiGLU 2f wide) and the activation output (the fc2 input).
  const double mats = m.ffn == FfnType::kSwiglu ? 2.0 : 1.0;
  double mlp = 0;
  if (moe) {
    const double f = double(m.expert_ffn_hidden);
    const double per_copy = s * b * (gin * h + 2.0 * mats * f + gin * f);  // permuted input, fc1 out, activation
    mlp = double(m.top_k) * per_copy + double(m.shared_experts) * s * b * (2.0 * mats * f + gin * f) +
          4.0 * s * b * double(m.experts);  // router logits (fp32)
  } else {
    const double f = double(m.ffn_hidden);
    mlp = s * b * (2.0 * mats * f + gin * f);
  }
  const double split = attn + mlp;
  if (c.recompute == Recompute::kFull) return sp ? 2.0 * sbh / t : 2.0 * sbh;  // the layer's input only
  return (sp ? replicated / t : replicated) + split / t;
}


MemoryEstimate estimate_memory(const TrainConfig& c) {
  const ModelConfig& m = c.model;
  const kernels::GpuSpec& gpu = kernels::find_gpu(c.gpu, c.file, "workload.generator.gpu");
  MemoryEstimate est;
  est.capacity_bytes = gpu.hbm_gb * 1e9;
  const bool fp8 = c.dtype == kernels::Dtype::kFp8;
  const double wbytes = kernels::dtype_bytes(fp8 ? kernels::Dtype::kBf16 : c.dtype);
  const std::uint32_t vstages = c.pp * c.vp;
  const std::uint32_t gb = c.global_batch ? c.global_batch : c.micro_batch * c.dp;
  const double mbs = double(gb / (c.micro_batch * c.dp));
  const double dense_dp = double(c.dp) * c.cp, expert_dp = double(c.tp) * c.dp / c.ep;  // states shard over DP·CP
  const StateBytesPerParam dense_b = state_bytes_per_param(wbytes, c.grad_bytes, c.zero, dense_dp, fp8);
  const StateBytesPerParam exp_b = state_bytes_per_param(wbytes, c.grad_bytes, c.zero, expert_dp, fp8);
  const StateBytesPerParam emb_b = state_bytes_per_param(wbytes, c.grad_bytes, c.zero, dense_dp, false);
  const double emb = double(m.vocab) * double(m.hidden) / c.tp;
  const double act_dense = activation_bytes_per_layer(c, false);
  const double act_moe = m.is_moe() ? activation_bytes_per_layer(c, true) : 0.0;
  TrainConfig unrecomputed = c;
  unrecomputed.recompute = Recompute::kNone;
  const bool full = c.recompute == Recompute::kFull;
  for (std::uint32_t p = 0; p < c.pp; ++p) {
    StageMemory st;
    st.pp_rank = p;
    double dense = 0, expert = 0, embp = 0, act_layers = 0, act_max_layer = 0;
    std::uint32_t nlayers = 0;
    bool last = false;
    for (std::uint32_t ch = 0; ch < c.vp; ++ch) {
      const std::uint32_t v = ch * c.pp + p;
      const auto [l0, l1] = chunk_layers(c, v);
      for (std::uint32_t l = l0; l < l1; ++l) {
        const LayerParams lp = rank_layer_params(c, l);
        dense += lp.dense;
        expert += lp.expert;
        act_layers += m.moe_layer(l) ? act_moe : act_dense;
        act_max_layer = std::max(act_max_layer, activation_bytes_per_layer(unrecomputed, m.moe_layer(l)));
        ++nlayers;
      }
      if (v == 0) embp += emb;
      if (v + 1 == vstages) {
        last = true;
        dense += double(m.hidden);  // final norm
        if (!(m.tied_embeddings && c.pp == 1)) embp += emb;  // output layer (a tied copy when PP > 1)
      }
    }
    st.params = dense + expert + embp;
    st.weights_bytes = dense * dense_b.weights + expert * exp_b.weights + embp * emb_b.weights;
    st.grads_bytes = dense * dense_b.grads + expert * exp_b.grads + embp * emb_b.grads;
    st.optimizer_bytes = dense * dense_b.optimizer + expert * exp_b.optimizer + embp * emb_b.optimizer;
    // Model-chunk micro-batches in flight at the peak (Megatron's warm-up count + 1).
    double inflight;
    if (c.vp == 1) {
      inflight = std::min(double(c.pp - p), mbs);
    } else {
      inflight = std::min(2.0 * double(c.pp - p - 1) + double(c.vp - 1) * c.pp + 1.0, mbs * c.vp);
    }
    st.inflight = inflight;
    const double per_chunk_act = nlayers ? act_layers / double(c.vp) : 0.0;  // one chunk's layers
    st.activation_bytes = inflight * per_chunk_act;
    if (full) st.activation_bytes += act_max_layer;  // one layer recomputed at a time
    if (last) st.activation_bytes += 4.0 * c.seq_len / c.cp * c.micro_batch * double(m.vocab) / c.tp;  // fp32 logits
    est.stages.push_back(st);
  }
  for (std::uint32_t p = 1; p < c.pp; ++p) {
    if (est.stages[p].total_bytes() > est.stages[est.peak_stage].total_bytes()) est.peak_stage = p;
  }
  return est;
}

namespace {

/// The advice of memory_warning: the fixes that are not in effect yet and would lower the peak
/// (each checked by estimating the job again with it), e.g. "raise tp/pp, use recompute: full, or
/// zero: 2-3".
std::string memory_advice(const TrainConfig& c, const MemoryEstimate& m) {
  const double peak = m.peak().total_bytes();
  auto lowers = [&](const TrainConfig& alt) { return estimate_memory(alt).peak().total_bytes() < peak; };
  std::vector<std::string> fixes = {"raise tp/pp"};
  // Recomputation: selective drops the s^2 attention terms (nothing with fused attention), full
  // keeps only each layer's input; neither applies once full is on.
  std::vector<std::string> rc;
  for (Recompute r : {Recompute::kSelective, Recompute::kFull}) {
    if (static_cast<int>(r) <= static_cast<int>(c.recompute)) continue;
    TrainConfig alt = c;
    alt.recompute = r;
    if (lowers(alt)) rc.emplace_back(r == Recompute::kSelective ? "selective" : "full");
  }
  if (!rc.empty()) fixes.push_back("use recompute: " + (rc.size() == 2 ? rc[0] + " or " + rc[1] : rc[0]));
  // ZeRO: each stage above the configured one shards one more state over the DP group (nothing
  // with one DP rank); a stage that lowers the peak is followed by higher ones that lower it more.
  for (std::uint32_t z = c.zero + 1; z <= 3; ++z) {
    TrainConfig alt = c;
    alt.zero = z;
    if (lowers(alt)) {
      fixes.push_back(z == 3 ? std::string("zero: 3") : fmt::format("zero: {}-3", z));
      break;
    }
  }
  std::string out;
  for (std::size_t i = 0; i < fixes.size(); ++i) {
    out += i == 0 ? "" : i + 1 == fixes.size() ? ", or " : ", ";
    out += fixes[i];
  }
  return out;
}

}  // namespace

std::string memory_warning(const TrainConfig& c, const MemoryEstimate& m) {
  if (!m.exceeds()) return {};
  const StageMemory& s = m.peak();
  return fmt::format(
      "{}: workload.generator: the job needs at least {:.1f} GB per GPU on pipeline rank {} (weights {:.1f} GB, "
      "gradients {:.1f} GB, optimizer {:.1f} GB, activations {:.1f} GB of {:.3g} micro-batches in flight) but the "
      "{} has {:.0f} GB: the real job would run out of memory; {} (docs/generators.md, \"Memory per GPU\")",
      c.file, s.total_bytes() / 1e9, s.pp_rank, s.weights_bytes / 1e9, s.grads_bytes / 1e9, s.optimizer_bytes / 1e9,
      s.activation_bytes / 1e9, s.inflight, c.gpu, m.capacity_bytes / 1e9, memory_advice(c, m));
}

}  // namespace fabricsim::jobs
