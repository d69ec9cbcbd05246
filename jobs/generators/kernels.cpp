/// @file kernels.cpp
/// Kernel work descriptors of the layer pieces (FLOPs, bytes, shapes for the efficiency model;
/// formulas in docs/generators.md) and the cached kernel timer.
#include "jobs/generators/builder.hpp"

namespace fabricsim::jobs::gen {

Kernel gemm(double m, double n, double k, double B, double groups, const char* op) {
  Kernel kn{op, fmt::format("m={} n={} k={}", u64(m), u64(n), u64(k)), 2 * m * n * k,
            (m * k + groups * k * n + m * n) * B, 2 * m * n * k};
  if (groups > 1) kn.shape += fmt::format(" groups={}", u64(groups));
  kn.dims = kernels::KernelShape::gemm(m / groups, n, k, groups);
  return kn;
}

Kernel dgrad_of(const Kernel& fwd) {
  Kernel k = fwd;
  k.dims = kernels::KernelShape::gemm(fwd.dims.m, fwd.dims.k, fwd.dims.n, fwd.dims.batch);
  k.shape = fmt::format("dgrad m={} n={} k={}", u64(fwd.dims.m * fwd.dims.batch), u64(fwd.dims.k), u64(fwd.dims.n));
  if (fwd.dims.batch > 1) k.shape += fmt::format(" groups={}", u64(fwd.dims.batch));
  return k;
}

Kernel wgrad_of(const Kernel& fwd) {
  Kernel k = fwd;
  k.dims = kernels::KernelShape::gemm(fwd.dims.k, fwd.dims.n, fwd.dims.m, fwd.dims.batch);
  k.shape = fmt::format("wgrad m={} n={} k={}", u64(fwd.dims.k), u64(fwd.dims.n), u64(fwd.dims.m * fwd.dims.batch));
  if (fwd.dims.batch > 1) k.shape += fmt::format(" groups={}", u64(fwd.dims.batch));
  return k;
}

Kernel mem(const std::string& op, const std::string& shape, double flops, double bytes) {
  return Kernel{op, shape, flops, bytes, 0};
}

std::string el(double n) { return fmt::format("elements={}", u64(n)); }
std::string th(double t, double h) { return fmt::format("tokens={} hidden={}", u64(t), u64(h)); }

Timer::Result Timer::time(const Kernel& k, Dtype d) {
  const KernelKey key{k.op + "|" + kernels::dtype_name(d), k.flops, k.bytes, k.dims.m, k.dims.n,
                      k.dims.kind == kernels::KernelShape::Kind::kAttention ? k.dims.seq : k.dims.k, k.dims.batch};
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  Result r{0, 2};
  if (db_ != nullptr) {
    if (!checked_ && c_.measured_kernels && c_.fallback == kernels::Fallback::kNone && table_.empty()) {
      throw InputError(c_.file, "workload.generator.fallback",
                       fmt::format("is none but GPU {} has no measured kernel tables (kernels/data/measured has "
                                   "H100, H200, B200, GB200 and A100)",
                                   gpu_.name),
                       "set workload.generator.fallback: roofline to model its kernels, or choose a GPU with tables");
    }
    checked_ = true;
    const auto e = db_->estimate(gpu_, k.op, d, k.flops, k.bytes, c_.fallback, c_.efficiency, k.dims,
                                 c_.measured_kernels);
    r.ps = static_cast<engine::SimTime>(std::llround(e.time_us * double(engine::kPsPerUs)));
    r.source = e.source;
    r.how = (e.source == kernels::EstimateSource::kMeasured || e.source == kernels::EstimateSource::kInterpolated) ? 0
            : e.how.rfind("scaled", 0) == 0                                                                      ? 1
                                                                                                                 : 2;
  }
  cache_.emplace(key, r);
  return r;
}

Kernel Builder::norm_k(double tokens, bool bwd) const {
  const double h = double(m_.hidden);
  const std::string op = std::string(m_.layernorm ? "layernorm" : "rmsnorm") + (bwd ? "_bwd" : "");
  const double f = (m_.layernorm ? 8.0 : 4.0) * tokens * h * (bwd ? 2 : 1);
  return mem(op, th(tokens, h), f, ((bwd ? 3.0 : 2.0) * tokens * h + 2 * h) * B_);
}

double Builder::attn_core_flops() const {
  const double s = double(c_.seq_len) / c_.cp;
  return 2.0 * c_.micro_batch * s * s * (m_.heads / c_.tp) *
         double(m_.qk_head_dim() + m_.head_dim);
}

Kernel Builder::flash_k(bool bwd) const {
  const double hl = m_.heads / c_.tp;
  const double model = attn_core_flops() * (bwd ? 2.0 : 1.0);
  const double exec = attn_core_flops() * (c_.causal ? 0.5 : 1.0) * (bwd ? 2.5 : 1.0);
  const std::uint32_t s = c_.seq_len / c_.cp;
  const double bytes = double(c_.micro_batch) * s * hl * (2.0 * m_.qk_head_dim() + 2.0 * m_.head_dim) * B_ *
                       (bwd ? 2.0 : 1.0);
  Kernel k{bwd ? "flash_attn_bwd" : "flash_attn_fwd",
           fmt::format("b={} heads={} s={} d={} dv={} causal={}", c_.micro_batch, u64(hl), s,
                       m_.qk_head_dim(), m_.head_dim, c_.causal ? 1 : 0),
           exec, bytes, model};
  k.dims = kernels::KernelShape::attention(double(c_.micro_batch) * hl, s, m_.qk_head_dim(), c_.causal, bwd,
                                           c_.flash2);
  k.dims.heads = hl;
  // MLA attends with every head's own K and V after the up-projection (multi-head attention).
  k.dims.kv_heads = m_.attn == AttnType::kMla ? hl : kv_local();
  return k;
}

Kernel Builder::rope_k(bool bwd) const {
  const double t = c_.tp;
  const double per_token = m_.attn == AttnType::kMla
                               ? (double(m_.heads) / t + 1.0) * m_.qk_rope_dim
                               : (double(m_.heads) + double(m_.kv_heads)) / t * m_.head_dim;
  const double n = T_ * per_token * m_.rope_fraction;
  return mem(bwd ? "rope_bwd" : "rope", el(n), 3 * n, 2 * n * B_);
}

Kernel Builder::qk_norm_k(bool bwd) const {
  const double n = T_ * (double(m_.heads) + double(m_.kv_heads)) / c_.tp * m_.head_dim;
  return mem(bwd ? "qk_norm_bwd" : "qk_norm", el(n), (bwd ? 8.0 : 4.0) * n, (bwd ? 3.0 : 2.0) * n * B_);
}

Kernel Builder::bmm_k(const char* what, double m, double n, double k) const {
  const double batch = double(c_.micro_batch) * (m_.heads / c_.tp);
  const double f = 2.0 * batch * m * n * k;
  Kernel kn{"attn_bmm", fmt::format("{} batch={} m={} n={} k={}", what, u64(batch), u64(m), u64(n), u64(k)), f,
            batch * (m * k + k * n + m * n) * B_, f};
  kn.dims = kernels::KernelShape::gemm(m, n, k, batch);
  return kn;
}

Kernel Builder::emb_bwd_k() const {
  const double h = double(m_.hidden), rows = double(m_.vocab) / c_.tp;
  const double bytes = 3 * T_ * h * B_ + rows * h * (2.0 * B_ + 2.0 * double(c_.grad_bytes));
  return mem("embedding_bwd", fmt::format("tokens={} hidden={} vocab={}", u64(T_), u64(h), u64(rows)), 0, bytes);
}

Kernel Builder::act_k(double n, bool bwd) const {
  if (m_.ffn == FfnType::kSwiglu) {
    return mem(bwd ? "swiglu_bwd" : "swiglu", el(n), (bwd ? 12.0 : 6.0) * n, (bwd ? 5.0 : 3.0) * n * B_);
  }
  if (m_.ffn == FfnType::kSquaredRelu) {
    // relu(x)^2: forward reads x, writes y (2 FLOP each: max, square); backward reads the output
    // gradient and x, writes the input gradient (2·relu(x)·dy: 3 FLOP). Memory-bound like GELU.
    return mem(bwd ? "sq_relu_bwd" : "sq_relu", el(n), (bwd ? 3.0 : 2.0) * n, (bwd ? 3.0 : 2.0) * n * B_);
  }
  return mem(bwd ? "gelu_bwd" : "gelu", el(n), (bwd ? 16.0 : 8.0) * n, (bwd ? 3.0 : 2.0) * n * B_);
}

Kernel Builder::xent_k(double n, bool bwd) const {
  const double f32 = 4;
  if (bwd) return mem("cross_entropy_bwd", el(n), 3 * n, (2 * f32 + f32 + B_) * n);
  return mem("cross_entropy", el(n), 5 * n, (B_ + f32 + f32 + 2 * f32 + 2 * f32 + f32 + 2 * f32) * n);
}

}  // namespace fabricsim::jobs::gen
