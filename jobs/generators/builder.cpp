/// @file builder.cpp
/// The workload builder's core: communicators, node emission (compute, collective, p2p),
/// shared programs and the whole-workload run; generate_training and kernel_plan.
#include "jobs/generators/builder.hpp"

namespace fabricsim::jobs::gen {

Builder::Builder(const TrainConfig& c, const kernels::KernelDb* db, bool plan_only)
           : c_(c), m_(c.model), timer_(c, db), plan_only_(plan_only) {
  B_ = kernels::dtype_bytes(c.dtype == Dtype::kFp8 ? Dtype::kBf16 : c.dtype);  // activations stay 16-bit
  fp8_ = c.dtype == Dtype::kFp8;
  gb_ = c.global_batch ? c.global_batch : c.micro_batch * c.dp;
  mbs_ = gb_ / (c.micro_batch * c.dp);
  T_ = double(c.seq_len) * c.micro_batch / c.cp;  // a CP rank's share of the micro-batch's tokens
  dpx_ = c.dp * c.cp;
  sp_ = c.sequence_parallel && c.tp > 1;
  tp_ovl_ = sp_ && c.tp_comm_overlap;
  if (tp_ovl_) {
    // validate_train: the margin is 0 or below a known SM count.
    const std::uint32_t sms = gpu_sms(c.gpu, c.file);
    if (c.tp_comm_overlap_rs_sms > 0) rs_margin_scale_ = double(sms) / double(sms - c.tp_comm_overlap_rs_sms);
  }
  Tl_ = sp_ ? T_ / c.tp : T_;
  vstages_ = c.pp * c.vp;
  ring_tag_base_ = std::int64_t(c.iterations) * mbs_ * vstages_ * 2;  // above every pipeline tag (tag())
  bucket_ = c.bucket_params ? c.bucket_params : std::max<std::uint64_t>(40'000'000ull, 1'000'000ull * dpx_);
}

void Builder::make_groups(models::Workload& w) {
  const std::uint32_t world = c_.tp * dpx_ * c_.pp;
  w.ranks = world;
  models::CommGroup all{"world", {}};
  for (std::uint32_t r = 0; r < world; ++r) all.ranks.push_back(r);
  w.groups.push_back(all);
  rg_.assign(world, {});
  auto add = [&](const std::string& name, std::vector<std::uint32_t> ranks, std::int32_t RankGroups::*field,
                 models::CommKind kind) {
    if (ranks.size() < 2) return;
    const auto idx = static_cast<std::int32_t>(w.groups.size());
    for (auto r : ranks) rg_[r].*field = idx;
    w.groups.push_back(models::CommGroup{name, std::move(ranks), kind});
  };
  for (std::uint32_t p = 0; p < c_.pp; ++p) {
    for (std::uint32_t d = 0; d < dpx_; ++d) {
      std::vector<std::uint32_t> g;
      for (std::uint32_t t = 0; t < c_.tp; ++t) g.push_back(rank_of(t, d, p));
      add(fmt::format("tp{}.{}", p, d), g, &RankGroups::tp, models::CommKind::kTp);
    }
    for (std::uint32_t t = 0; t < c_.tp; ++t) {
      std::vector<std::uint32_t> g;
      for (std::uint32_t d = 0; d < dpx_; ++d) g.push_back(rank_of(t, d, p));
      add(fmt::format("dp{}.{}", p, t), g, &RankGroups::dp, models::CommKind::kDp);
    }
    if (m_.is_moe()) {
      // EP folds into the stage's TP·DP ranks, linearised TP-fastest (Megatron-Core MoE folding).
      const std::uint32_t n = c_.tp * c_.dp, ep = c_.ep, edp = n / ep;
      auto stage_rank = [&](std::uint32_t i) { return rank_of(i % c_.tp, i / c_.tp, p); };
      for (std::uint32_t blk = 0; blk < edp; ++blk) {
        std::vector<std::uint32_t> g;
        for (std::uint32_t j = 0; j < ep; ++j) g.push_back(stage_rank(blk * ep + j));
        add(fmt::format("ep{}.{}", p, blk), g, &RankGroups::ep, models::CommKind::kEp);
      }
      for (std::uint32_t j = 0; j < ep; ++j) {
        std::vector<std::uint32_t> g;
        for (std::uint32_t blk = 0; blk < edp; ++blk) g.push_back(stage_rank(blk * ep + j));
        add(fmt::format("edp{}.{}", p, j), g, &RankGroups::edp, models::CommKind::kDp);
      }
    }
  }
  if (m_.tied_embeddings && c_.pp > 1) {
    for (std::uint32_t d = 0; d < dpx_; ++d) {
      for (std::uint32_t t = 0; t < c_.tp; ++t) {
        // The tied-embedding gradient all-reduce is part of the gradient sync: DP.
        add(fmt::format("emb{}.{}", d, t), {rank_of(t, d, 0), rank_of(t, d, c_.pp - 1)}, &RankGroups::emb,
            models::CommKind::kDp);
      }
    }
  }
}

std::vector<std::uint32_t> Builder::peer_table(std::uint32_t t, std::uint32_t d, std::uint32_t p) const {
  std::vector<std::uint32_t> v;
  for (std::uint32_t q = 0; q < c_.pp; ++q) v.push_back(rank_of(t, d, q));
  const std::uint32_t n = c_.cp, c = d % n, base = d - c;
  v.push_back(rank_of(t, base + (c + 1) % n, p));
  v.push_back(rank_of(t, base + (c + n - 1) % n, p));
  v.push_back(rank_of((t + 1) % c_.tp, d, p));
  v.push_back(rank_of((t + c_.tp - 1) % c_.tp, d, p));
  return v;
}

std::int32_t Builder::group_slot(const Rank& R, std::int32_t g) const {
  const auto t = group_table(rg_[R.r]);
  for (std::uint32_t i = 0; i < kGroupSlots; ++i) {
    if (t[i] == g) return static_cast<std::int32_t>(i);
  }
  throw engine::InternalError("generator: rank " + std::to_string(R.r) + " names communicator " + std::to_string(g) +
                              ", which is none of its group slots");
}

std::int32_t Builder::peer_slot(std::uint32_t peer) const {
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    if (peers_[i] == peer) return static_cast<std::int32_t>(i);
  }
  throw engine::InternalError("generator: a rank names peer " + std::to_string(peer) + ", which is none of its peer slots");
}

std::uint32_t Builder::push(Rank& R, WorkNode n) {
  const auto idx = static_cast<std::uint32_t>(R.prog->size());
  n.source_id = idx;
  std::sort(n.deps.begin(), n.deps.end());
  n.deps.erase(std::unique(n.deps.begin(), n.deps.end()), n.deps.end());
  R.prog->push_back(std::move(n));
  return idx;
}

std::uint32_t Builder::comp(Rank& R, const std::string& name, const Kernel& k, std::vector<std::uint32_t> extra,
                          bool recompute, Dtype d) {
  Dtype kd = (k.op == "gemm" || k.op == "grouped_gemm") ? c_.dtype : d;
  if (k.keep16 && kd == Dtype::kFp8) kd = Dtype::kBf16;
  if (R.r == 0) {
    auto& need = plan_[{k.op, kd, k.shape}];
    need.op = k.op;
    need.dtype = kd;
    need.shape = k.shape;
    need.flops = k.flops;
    need.bytes = k.bytes;
    ++need.calls;
  }
  stats_.hw_flops += k.model_flops;
  if (!recompute) stats_.model_flops += k.model_flops;
  if (plan_only_) return 0;
  WorkNode n;
  n.name = name;
  n.type = NodeType::kCompute;
  auto tr = timer_.time(k, kd);
  if (k.time_scale != 1.0) tr.ps = static_cast<decltype(tr.ps)>(std::llround(double(tr.ps) * k.time_scale));
  n.duration_ps = tr.ps;
  (tr.how == 0 ? stats_.kernels_measured : tr.how == 1 ? stats_.kernels_scaled : stats_.kernels_modelled)++;
  stats_.compute_ps_by_source[static_cast<std::size_t>(tr.source)] += double(tr.ps);
  if (R.r == 0) stats_.compute_ps_rank0 += double(tr.ps);
  n.deps = std::move(extra);
  if (R.last >= 0) n.deps.push_back(static_cast<std::uint32_t>(R.last));
  const auto idx = push(R, std::move(n));
  R.last = idx;
  return idx;
}

std::int64_t Builder::coll(Rank& R, const std::string& name, CollOp op, double bytes, std::int32_t g,
                         std::vector<std::uint32_t> deps) {
  if (g < 0 || plan_only_) return -1;
  WorkNode n;
  n.name = name;
  n.type = NodeType::kCollective;
  n.op = op;
  n.bytes = u64(bytes);
  n.group = share_ ? group_slot(R, g) : g;
  n.deps = std::move(deps);
  return push(R, std::move(n));
}

std::int64_t Builder::ring_p2p(Rank& R, bool send, std::uint32_t peer, double bytes, std::int64_t tg, const std::string& name,
                             std::vector<std::uint32_t> deps, models::CommKind kind) {
  if (plan_only_) return -1;
  WorkNode nd;
  nd.name = name;
  nd.type = send ? NodeType::kSend : NodeType::kRecv;
  nd.peer = share_ ? peer_slot(peer) : static_cast<std::int32_t>(peer);
  nd.bytes = u64(bytes);
  nd.tag = tg;
  nd.kind = kind;
  nd.deps = std::move(deps);
  return push(R, std::move(nd));
}

std::uint32_t Builder::p2p(Rank& R, bool send, std::uint32_t peer, double bytes, std::int64_t tg, const std::string& name) {
  if (plan_only_) return 0;
  // A send waits for the producing compute; a receive is posted when the stream reaches it.
  std::vector<std::uint32_t> deps;
  add_dep(deps, R.last);
  // p2p() carries the pipeline's activations and gradients between stages.
  return static_cast<std::uint32_t>(ring_p2p(R, send, peer, bytes, tg, name, std::move(deps), models::CommKind::kPp));
}

std::vector<KernelNeed> Builder::plan() {
  run();
  std::vector<KernelNeed> out;
  for (auto& [k, v] : plan_) out.push_back(v);
  for (auto& n : out) n.calls /= c_.iterations;
  return out;
}

std::string Builder::workload_source() const {
  if (c_.inference) {
    return fmt::format("generated:{} inference tp{} pp{} dp{} ep{} batch{} prompt{} output{} {} {} attn={}", m_.name,
                       c_.tp, c_.pp, c_.dp, c_.ep, c_.batch, c_.prompt_tokens, c_.output_tokens,
                       kernels::dtype_name(c_.dtype), c_.gpu, c_.flash2 ? "flash2" : "flash");
  }
  const char* rc = c_.recompute == Recompute::kFull ? "full" : c_.recompute == Recompute::kSelective ? "selective" : "none";
  const char* at = !c_.flash_attention ? "unfused" : c_.flash2 ? "flash2" : "flash";
  return fmt::format("generated:{} tp{} pp{} dp{} ep{} vp{} mbs{} gbs{} seq{} {} {} sp{} zero{} recompute={} attn={} "
                     "tp_comm_overlap={}",
                     m_.name, c_.tp, c_.pp, c_.dp, c_.ep, c_.vp, c_.micro_batch, gb_, c_.seq_len,
                     kernels::dtype_name(c_.dtype), c_.gpu, sp_ ? 1 : 0, c_.zero, rc, at,
                     c_.tp_comm_overlap ? fmt::format("on(rs_sms={})", c_.tp_comm_overlap_rs_sms) : "off") +
         (c_.cp > 1 ? fmt::format(" cp{}", c_.cp) : "");
}

Builder::Rank Builder::rank_at(std::uint32_t r) const {
  Rank R;
  R.r = r;
  R.t = r % c_.tp;
  R.d = (r / c_.tp) % dpx_;
  R.p = r / (c_.tp * dpx_);
  return R;
}

void Builder::build_any(Rank& R) {
  if (c_.inference) {
    build_inference_rank(R);
  } else {
    build_rank(R);
  }
}

void Builder::build_shared(models::Workload& w, Rank& R, std::map<std::vector<std::int64_t>, ProgramClass>& classes) {
  const std::uint32_t r = R.r;
  const auto groups = group_table(rg_[r]);
  peers_ = peer_table(R.t, R.d, R.p);
  std::vector<std::int64_t> key = {R.p, R.d % c_.cp};
  for (std::uint32_t i = 0; i < kGroupSlots; ++i) {
    w.group_slots[std::size_t{r} * kGroupSlots + i] = groups[i];
    key.push_back(groups[i] >= 0);
  }
  for (std::size_t i = 0; i < peers_.size(); ++i) {
    w.peer_slots[std::size_t{r} * w.peer_width + i] = static_cast<std::int32_t>(peers_[i]);
    key.push_back(std::find(peers_.begin(), peers_.end(), peers_[i]) - peers_.begin());
  }
  auto it = classes.find(key);
  if (it == classes.end()) {
    ProgramClass cl;
    cl.program = static_cast<std::uint32_t>(w.programs.size());
    w.programs.emplace_back();
    R.prog = &w.programs.back();
    const GenStats before = stats_;
    const std::vector<double> flops_before = infer_.phase_flops;
    build_any(R);
    cl.delta.model_flops = stats_.model_flops - before.model_flops;
    cl.delta.hw_flops = stats_.hw_flops - before.hw_flops;
    cl.delta.kernels_measured = stats_.kernels_measured - before.kernels_measured;
    cl.delta.kernels_scaled = stats_.kernels_scaled - before.kernels_scaled;
    cl.delta.kernels_modelled = stats_.kernels_modelled - before.kernels_modelled;
    for (std::size_t i = 0; i < 4; ++i) {
      cl.delta.compute_ps_by_source[i] = stats_.compute_ps_by_source[i] - before.compute_ps_by_source[i];
    }
    cl.phase_flops = infer_.phase_flops;
    for (std::size_t k = 0; k < cl.phase_flops.size(); ++k) cl.phase_flops[k] -= flops_before[k];
    if (c_.inference) cl.phase_end_nodes = infer_.phase_end_nodes[r];
    it = classes.emplace(std::move(key), std::move(cl)).first;
  } else {
    // Another rank of the class: the class's program and its contribution to the totals.
    ProgramClass& cl = it->second;
    cl.reused.push_back(r);
    stats_.model_flops += cl.delta.model_flops;
    stats_.hw_flops += cl.delta.hw_flops;
    stats_.kernels_measured += cl.delta.kernels_measured;
    stats_.kernels_scaled += cl.delta.kernels_scaled;
    stats_.kernels_modelled += cl.delta.kernels_modelled;
    for (std::size_t i = 0; i < 4; ++i) stats_.compute_ps_by_source[i] += cl.delta.compute_ps_by_source[i];
    for (std::size_t k = 0; k < cl.phase_flops.size(); ++k) infer_.phase_flops[k] += cl.phase_flops[k];
    if (c_.inference) infer_.phase_end_nodes[r] = cl.phase_end_nodes;
  }
  w.program_of[r] = it->second.program;
  stats_.nodes += w.programs[it->second.program].size();
}

void Builder::check_shared(const models::Workload& w, const std::map<std::vector<std::int64_t>, ProgramClass>& classes) {
  const GenStats stats_saved = stats_;
  const InferStats infer_saved = infer_;
  const auto plan_saved = plan_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> checks;  // (rank, program)
  for (const auto& [key, cl] : classes) {
    if (cl.reused.empty()) continue;
    checks.emplace_back(cl.reused[cl.reused.size() / 2], cl.program);
    if (cl.reused.size() > 1) checks.emplace_back(cl.reused.back(), cl.program);
  }
  for (const auto& [rank, program] : checks) {
    Rank R = rank_at(rank);
    peers_ = peer_table(R.t, R.d, R.p);
    std::vector<WorkNode> own;
    R.prog = &own;
    build_any(R);
    const auto& shared = w.programs[program];
    bool same = own.size() == shared.size();
    for (std::size_t i = 0; same && i < own.size(); ++i) {
      const WorkNode& a = own[i];
      const WorkNode& b = shared[i];
      same = a.name == b.name && a.type == b.type && a.op == b.op && a.bytes == b.bytes && a.tag == b.tag &&
             a.duration_ps == b.duration_ps && a.deps == b.deps && a.group == b.group && a.peer == b.peer &&
             a.root == b.root;
    }
    if (!same) {
      throw engine::InternalError("generator: rank " + std::to_string(R.r) + "'s DAG differs from the shared program of "
                                  "its class (pipeline stage " + std::to_string(R.p) + ")");
    }
  }
  stats_ = stats_saved;
  infer_ = infer_saved;
  plan_ = plan_saved;
}

Generated Builder::run() {
  Generated g;
  g.config = c_;
  models::Workload& w = g.workload;
  // Every setting that changes the workload, so runs are told apart in the summary and HDF5 meta.
  w.source = workload_source();
  w.format = "generated";
  make_groups(w);
  w.programs.resize(w.ranks);
  if (c_.inference) {
    infer_.used = true;
    infer_.phase_flops.assign(c_.output_tokens, 0.0);
    infer_.phase_end_nodes.assign(w.ranks, {});
  }
  share_ = c_.share_programs && !plan_only_;
  if (share_) {
    // One program per class of ranks whose DAGs differ only in the communicators and peers they
    // name: the same pipeline stage and CP position, the same communicators present and the
    // same coincidences among their peers (TP 2: next == previous). The builder emits nothing
    // else that depends on the rank's t or d (tested: Generators.SharedProgramsEqualPerRankOnes).
    w.programs.clear();
    w.program_of.assign(w.ranks, 0);
    w.group_width = kGroupSlots;
    w.peer_width = c_.pp + 4;
    w.group_slots.assign(std::size_t{w.ranks} * w.group_width, -1);
    w.peer_slots.assign(std::size_t{w.ranks} * w.peer_width, -1);
  }
  std::map<std::vector<std::int64_t>, ProgramClass> classes;
  for (std::uint32_t r = 0; r < w.ranks; ++r) {
    if (plan_only_ && r > 0) break;
    Rank R = rank_at(r);
    if (!share_) {
      R.prog = &w.programs[r];
      build_any(R);
      stats_.nodes += w.programs[r].size();
      continue;
    }
    build_shared(w, R, classes);
  }
  // Guard: two ranks of every class of several ranks (the middle and the last of those that
  // reuse its program) are built once more, on their own; their programs must equal the
  // class's, node for node (a builder change that made a rank's DAG depend on more than the
  // class key would otherwise give silently wrong DAGs). Costs two ranks' generation per class
  // (~0.1 s per class at 9,216 GPUs); the totals are left as they were.
  if (share_) check_shared(w, classes);
  stats_.microbatches = mbs_;
  stats_.params = m_.total_params();
  stats_.tokens = c_.inference ? double(c_.dp) * c_.batch * (double(c_.prompt_tokens) + c_.output_tokens - 1)
                               : double(gb_) * c_.seq_len;
  // model/hw FLOPs were summed over all ranks' nodes; the counts are per iteration.
  stats_.model_flops /= c_.iterations;
  stats_.hw_flops /= c_.iterations;
  stats_.kernel_table = timer_.table();
  g.stats = stats_;
  g.infer = infer_;
  return g;
}

}  // namespace fabricsim::jobs::gen

namespace fabricsim::jobs {

using namespace gen;

Generated generate_training(const TrainConfig& c, const kernels::KernelDb& db) {
  validate_train(c);
  Builder b(c, &db, false);
  Generated g = b.run();
  g.stats.memory = c.inference ? estimate_inference_memory(c) : estimate_memory(c);
  const std::string w = c.inference ? inference_memory_warning(c, g.stats.memory) : memory_warning(c, g.stats.memory);
  if (!w.empty()) g.workload.warnings.push_back(w);
  return g;
}

std::vector<KernelNeed> kernel_plan(const TrainConfig& c) {
  validate_train(c);
  Builder b(c, nullptr, true);
  return b.plan();
}

}  // namespace fabricsim::jobs
