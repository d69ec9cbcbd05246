/// @file schedule.cpp
/// Pipeline schedules (1F1B, interleaved) and one rank's training iteration(s) along them.
#include "jobs/generators/builder.hpp"

namespace fabricsim::jobs::gen {

std::vector<Builder::Op> Builder::schedule(std::uint32_t p) const {
  const std::uint32_t pp = c_.pp, vp = c_.vp, m = mbs_, total = m * vp;
  std::uint32_t warm = vp == 1 ? std::min(pp - p - 1, m) : std::min((pp - p - 1) * 2 + (vp - 1) * pp, total);
  auto chunk_of = [&](std::uint32_t k, bool fwd) {
    const std::uint32_t c = (k % (pp * vp)) / pp;
    return fwd ? c : vp - 1 - c;
  };
  auto mb_of = [&](std::uint32_t k) { return (k / (pp * vp)) * pp + k % pp; };
  std::vector<Op> ops;
  std::uint32_t f = 0, b = 0;
  for (; f < warm; ++f) ops.push_back({true, chunk_of(f, true), mb_of(f)});
  while (f < total) {
    ops.push_back({true, chunk_of(f, true), mb_of(f)});
    ++f;
    ops.push_back({false, chunk_of(b, false), mb_of(b)});
    ++b;
  }
  for (; b < total; ++b) ops.push_back({false, chunk_of(b, false), mb_of(b)});
  return ops;
}

void Builder::fwd_op(Rank& R, std::uint32_t it, const Op& op, std::vector<std::uint32_t> in) {
  const double h = double(m_.hidden);
  const double act_bytes = act_bytes_pp();
  const std::uint32_t v = op.chunk * c_.pp + R.p;  // virtual stage
  const auto [l0, l1] = chunk_layers(c_, v);
  if (v > 0) {
    const std::uint32_t src = rank_of(R.t, R.d, (v - 1) % c_.pp);
    in.push_back(p2p(R, false, src, act_bytes, tag(it, op.mb, v - 1, false), fmt::format("rx.f{}.{}", op.mb, v)));
  } else {
    comp(R, "emb", mem("embedding", fmt::format("tokens={} hidden={} vocab={}", u64(T_), u64(h), m_.vocab / c_.tp),
                        0, 2 * T_ * h * B_), in);
    in.clear();
    if (c_.tp > 1) {
      add_dep(in, sp_ ? coll(R, "emb.rs", CollOp::kReduceScatter, T_ * h * B_, rg_[R.r].tp, deps_of({R.last}))
                      : coll(R, "emb.ar", CollOp::kAllReduce, T_ * h * B_, rg_[R.r].tp, deps_of({R.last})));
    }
  }
  for (std::uint32_t l = l0; l < l1; ++l) {
    layer_fwd(R, l, in, false, nullptr);
    in.clear();
  }
  if (v + 1 < vstages_) {
    const std::uint32_t dst = rank_of(R.t, R.d, (v + 1) % c_.pp);
    p2p(R, true, dst, act_bytes, tag(it, op.mb, v, false), fmt::format("tx.f{}.{}", op.mb, v));
  } else {
    logits_fwd(R);
  }
}

void Builder::bwd_op(Rank& R, std::uint32_t it, const Op& op, bool reduce_now, Buckets& bk,
                     std::vector<std::uint32_t> in) {
  const double h = double(m_.hidden);
  const double act_bytes = act_bytes_pp();
  const std::uint32_t v = op.chunk * c_.pp + R.p;  // virtual stage
  const auto [l0, l1] = chunk_layers(c_, v);
  std::vector<std::uint32_t> wg;
  if (v + 1 < vstages_) {
    const std::uint32_t src = rank_of(R.t, R.d, (v + 1) % c_.pp);
    in.push_back(p2p(R, false, src, act_bytes, tag(it, op.mb, v + 1, true), fmt::format("rx.b{}.{}", op.mb, v)));
  } else {
    wg = logits_bwd(R, in);
    in.clear();
  }
  // Output layer (its own matrix, or the last stage's copy of the tied embedding) + final norm.
  const bool out_copy = !m_.tied_embeddings || c_.pp > 1;
  if (reduce_now && v + 1 == vstages_) grads_ready(R, bk, (out_copy ? emb_params() : 0.0) + h, 0, wg);
  for (std::uint32_t l = l1; l-- > l0;) {
    layer_bwd(R, l, in);
    in.clear();
    if (reduce_now) grads_ready(R, bk, layer_dense_params(l), layer_expert_params(l), last_wgrads_);
  }
  if (v > 0) {
    const std::uint32_t dst = rank_of(R.t, R.d, (v - 1) % c_.pp);
    p2p(R, true, dst, act_bytes, tag(it, op.mb, v, true), fmt::format("tx.b{}.{}", op.mb, v));
  } else {
    std::int64_t ag = sp_ ? coll(R, "emb.agg", CollOp::kAllGather, T_ * h * B_, rg_[R.r].tp, deps_of({R.last})) : -1;
    comp(R, "emb.wg", emb_bwd_k(), deps_of({ag}));
    if (reduce_now) grads_ready(R, bk, emb_params(), 0, {static_cast<std::uint32_t>(R.last)});
  }
  if (reduce_now && (c_.zero >= 2 || c_.vp > 1)) {
    flush(R, bk.dense, false, bk, true);
    flush(R, bk.expert, true, bk, true);
  }
}

void Builder::build_rank(Rank& R) {
  std::vector<std::uint32_t> iter_gate;  // nodes the next iteration's first compute waits for
  for (std::uint32_t it = 0; it < c_.iterations; ++it) {
    const auto ops = schedule(R.p);
    // Last backward op index of each chunk (gradients final there unless ZeRO-2/3).
    std::vector<std::int64_t> last_bwd(c_.vp, -1);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (!ops[i].fwd) last_bwd[ops[i].chunk] = static_cast<std::int64_t>(i);
    }
    Buckets bk;
    bool first_op = true;
    for (std::size_t oi = 0; oi < ops.size(); ++oi) {
      const Op& op = ops[oi];
      std::vector<std::uint32_t> in;
      if (first_op) {
        in = iter_gate;
        first_op = false;
      }
      if (op.fwd) {
        fwd_op(R, it, op, std::move(in));
      } else {
        const bool reduce_now = c_.zero >= 2 || static_cast<std::int64_t>(oi) == last_bwd[op.chunk];
        bwd_op(R, it, op, reduce_now, bk, std::move(in));
      }
    }
    iter_gate = finish_iteration(R, bk);
  }
}

}  // namespace fabricsim::jobs::gen
