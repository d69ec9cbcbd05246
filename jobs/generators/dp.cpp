/// @file dp.cpp
/// DP / ZeRO gradient buckets (Megatron DDP overlap_grad_reduce), the end-of-iteration
/// gradient sync and the optimizer step.
#include "jobs/generators/builder.hpp"

namespace fabricsim::jobs::gen {

void Builder::flush(Rank& R, Bucket& b, bool expert, Buckets& bk, bool force) {
  const std::int32_t g = expert ? rg_[R.r].edp : rg_[R.r].dp;
  if (b.params <= 0 || (!force && b.params < double(bucket_))) return;
  if (!c_.overlap_grad_reduce && !final_flush_) {
    // Without overlap every bucket is reduced after the whole backward (finish_grad_sync).
    (expert ? pending_expert_ : pending_dense_).push_back(b.params);
    b = Bucket{};
    return;
  }
  const double bytes = b.params * c_.grad_bytes;
  const CollOp op = c_.zero == 0 ? CollOp::kAllReduce : CollOp::kReduceScatter;
  std::vector<std::uint32_t> deps = b.deps;
  if (!c_.overlap_grad_reduce) add_dep(deps, R.last);
  const std::int64_t n = coll(R, fmt::format("{}.{}{}", expert ? "edp" : "dp", c_.zero == 0 ? "ar" : "rs",
                                             (expert ? bk.expert_done : bk.dense_done).size()),
                              op, bytes, g, deps);
  (expert ? bk.expert_done : bk.dense_done).emplace_back(b.params, n);
  b = Bucket{};
}

void Builder::grads_ready(Rank& R, Buckets& bk, double dense, double expert, const std::vector<std::uint32_t>& wg) {
  bk.dense.params += dense;
  bk.expert.params += expert;
  if (!wg.empty()) {
    bk.dense.deps.push_back(wg.back());
    if (expert > 0) bk.expert.deps.push_back(wg.back());
  }
  flush(R, bk.dense, false, bk, false);
  flush(R, bk.expert, true, bk, false);
}

double Builder::rank_params(const Rank& R) const {
  double p = 0;
  for (std::uint32_t ch = 0; ch < c_.vp; ++ch) {
    const std::uint32_t v = ch * c_.pp + R.p;
    for (std::uint32_t l = chunk_layers(c_, v).first; l < chunk_layers(c_, v).second; ++l) {
      p += layer_dense_params(l) + layer_expert_params(l);
    }
    if (v == 0) p += emb_params();
    if (v + 1 == vstages_) p += double(m_.hidden) + (m_.tied_embeddings && c_.pp == 1 ? 0 : emb_params());
  }
  return p;
}

std::vector<std::uint32_t> Builder::dp_sync(Rank& R, Buckets& bk) {
  flush(R, bk.dense, false, bk, true);
  flush(R, bk.expert, true, bk, true);
  final_flush_ = true;
  for (double p : pending_dense_) {
    bk.dense.params = p;
    flush(R, bk.dense, false, bk, true);
  }
  for (double p : pending_expert_) {
    bk.expert.params = p;
    flush(R, bk.expert, true, bk, true);
  }
  flush(R, bk.dense, false, bk, true);
  flush(R, bk.expert, true, bk, true);
  final_flush_ = false;
  pending_dense_.clear();
  pending_expert_.clear();
  // Tied embedding: first and last stage sum their copies' gradients (Megatron
  // _allreduce_embedding_grads) after the DP reduction.
  std::vector<std::uint32_t> opt_deps;
  for (auto& [p, n] : bk.dense_done) add_dep(opt_deps, n);
  for (auto& [p, n] : bk.expert_done) add_dep(opt_deps, n);
  if (rg_[R.r].emb >= 0) {
    std::vector<std::uint32_t> d = opt_deps;
    add_dep(d, R.last);
    add_dep(opt_deps, coll(R, "emb.grad", CollOp::kAllReduce, emb_params() * c_.grad_bytes, rg_[R.r].emb, d));
  }
  return opt_deps;
}

std::vector<std::uint32_t> Builder::finish_iteration(Rank& R, Buckets& bk) {
  const std::vector<std::uint32_t> opt_deps = dp_sync(R, bk);
  // Optimizer step over the rank's (ZeRO: 1/DP of its) parameters.
  double held = 0, held_exp = 0;
  for (auto& [p, n] : bk.dense_done) held += p;
  for (auto& [p, n] : bk.expert_done) held_exp += p;
  if (c_.zero >= 2) {  // buckets repeat every micro-batch: count one micro-batch's worth
    held /= mbs_;
    held_exp /= mbs_;
  }
  if (bk.dense_done.empty()) held = rank_params(R);  // DP = 1: nothing reduced
  const std::int32_t dpg = rg_[R.r].dp, edpg = rg_[R.r].edp;
  const double dpn = dpg >= 0 ? dpx_ : 1, edpn = edpg >= 0 ? double(c_.tp * c_.dp / c_.ep) : 1;
  const double opt_params = c_.zero >= 1 ? held / dpn + held_exp / edpn : held + held_exp;
  comp(R, "optim", mem("adam", fmt::format("params={}", u64(opt_params)), 12 * opt_params, 28 * opt_params), opt_deps,
       false, Dtype::kFp32);
  std::vector<std::uint32_t> iter_gate;
  if (c_.zero == 1 || c_.zero == 2) {
    // Updated parameter shards gathered back, bucket by bucket (distributed optimizer).
    const std::size_t nd = c_.zero == 2 ? bk.dense_done.size() / mbs_ : bk.dense_done.size();
    const std::size_t ne = c_.zero == 2 ? bk.expert_done.size() / mbs_ : bk.expert_done.size();
    for (std::size_t i = 0; i < nd; ++i) {
      add_dep(iter_gate, coll(R, fmt::format("dp.ag{}", i), CollOp::kAllGather, bk.dense_done[i].first * B_, dpg,
                              deps_of({R.last})));
    }
    for (std::size_t i = 0; i < ne; ++i) {
      add_dep(iter_gate, coll(R, fmt::format("edp.ag{}", i), CollOp::kAllGather, bk.expert_done[i].first * B_, edpg,
                              deps_of({R.last})));
    }
  }
  if (fp8_) {
    // TE FP8 weight copies (cast + transpose, 4 bytes per weight) of the rank's layers,
    // once per iteration before the next forward (see fp8_ct above).
    double w = 0;
    for (std::uint32_t ch = 0; ch < c_.vp; ++ch) {
      const std::uint32_t v = ch * c_.pp + R.p;
      for (std::uint32_t l = chunk_layers(c_, v).first; l < chunk_layers(c_, v).second; ++l) {
        w += layer_dense_params(l) + layer_expert_params(l);
      }
    }
    comp(R, "fp8.wcast", mem("fp8_cast_transpose", fmt::format("weights={}", u64(w)), w, 4 * w), iter_gate);
    iter_gate = {static_cast<std::uint32_t>(R.last)};
  }
  return iter_gate;
}

}  // namespace fabricsim::jobs::gen
