#include "jobs/generators.hpp"

#include <array>
#include <algorithm>
#include <functional>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "engine/errors.hpp"
#include "engine/time.hpp"
#include "engine/units.hpp"
#include "kernels/efficiency_model.hpp"

namespace fabricsim::jobs {

using engine::InputError;
using kernels::Dtype;
using models::CollOp;
using models::NodeType;
using models::WorkNode;

namespace {

/// Throws the one-line error for `field`. `related` are the other keys the check involves: the
/// error names "<cli>" when the field or any of them was given with --set.
[[noreturn]] void bad(const TrainConfig& c, const std::string& field, const std::string& problem,
                      const std::string& fix, std::initializer_list<const char*> related = {}) {
  auto from_cli = [&](const std::string& k) {
    return std::find(c.cli_fields.begin(), c.cli_fields.end(), k) != c.cli_fields.end();
  };
  bool cli = from_cli(field);
  for (const char* k : related) cli = cli || from_cli(k);
  throw InputError(cli ? std::string("<cli>") : c.file, "workload.generator." + field, problem, fix);
}

std::uint64_t u64(double v) { return static_cast<std::uint64_t>(std::llround(v)); }

/// Streaming multiprocessors of `gpu` (kernels::GpuEfficiency::sms), 0 when the tables have none.
std::uint32_t gpu_sms(const std::string& gpu, const std::string& file) {
  const kernels::GpuEfficiency* e = kernels::find_efficiency(kernels::find_gpu(gpu, file, "workload.generator.gpu"));
  return e != nullptr ? e->sms : 0;
}

/// The inference-only checks of validate_train (TrainConfig::inference).
void validate_inference(const TrainConfig& c) {
  const ModelConfig& m = c.model;
  for (auto [v, n] : {std::pair{c.prompt_tokens, "prompt_tokens"}, {c.output_tokens, "output_tokens"}, {c.batch, "batch"}}) {
    if (v == 0) bad(c, n, "must be >= 1 for mode: inference", "give a positive whole number");
  }
  // The DAG holds every decode step: keep it to a size a run can hold (~15 nodes per layer and step).
  if (c.output_tokens > 65536) {
    bad(c, "output_tokens", fmt::format("{} decode steps are more than the generator holds (65536)", c.output_tokens),
        "use output_tokens <= 65536");
  }
  if (double(c.prompt_tokens) + c.output_tokens > double(1u << 24)) {
    bad(c, "prompt_tokens", "prompt_tokens + output_tokens is above 2^24 tokens of context", "use a shorter context",
        {"output_tokens"});
  }
  if (c.cp > 1) bad(c, "cp", "context parallelism is not modelled for inference", "use cp: 1");
  if (m.attn == AttnType::kMla) {
    bad(c, "model",
        "inference of multi-head latent attention (" + m.name +
            ": latent KV cache, absorbed decode projections) is not modelled",
        "use a GQA/MHA model (e.g. llama3-70b, mixtral-8x7b) for mode: inference");
  }
  if (!c.flash_attention) {
    bad(c, "attention", "inference is modelled with FlashAttention kernels only (prefill and paged decode)",
        "use attention: flash or flash2 (or drop the key)");
  }
  if (m.is_moe() && c.ep > 1 && c.tp > 1 && c.batch % c.tp != 0) {
    bad(c, "batch",
        fmt::format("batch {} is not divisible by TP {}: with EP > 1 the MoE layers split each step's tokens over "
                    "the TP ranks (sequence-parallel MoE)", c.batch, c.tp),
        "choose a batch that is a multiple of tp (or ep: 1)", {"tp", "ep"});
  }
}

}  // namespace

void validate_train(const TrainConfig& c) {
  const ModelConfig& m = c.model;
  if (m.layers == 0 || m.hidden == 0 || m.heads == 0 || m.head_dim == 0 || m.ffn_hidden == 0 || m.vocab == 0) {
    bad(c, "model", "model '" + m.name + "' has a zero layers/hidden/heads/ffn_hidden/vocab",
        "give every shape key of a custom model");
  }
  for (auto [v, n] : {std::pair{c.tp, "tp"}, {c.pp, "pp"}, {c.dp, "dp"}, {c.ep, "ep"}, {c.cp, "cp"}, {c.vp, "vp"},
                      {c.micro_batch, "micro_batch"}, {c.seq_len, "seq_len"}, {c.iterations, "iterations"}}) {
    if (v == 0) bad(c, n, "must be >= 1", "give a positive whole number");
  }
  if (c.cp > 1) {
    // Context parallelism as Megatron-Core runs it with TransformerEngine (cp_comm_type p2p):
    // fused attention over a ring of KV chunks, the sequence cut into 2·CP load-balanced chunks.
    if (!c.flash_attention) {
      bad(c, "cp", "context parallelism runs TransformerEngine's fused attention", "set attention: flash (or cp: 1)",
          {"attention"});
    }
    if (m.is_moe()) bad(c, "cp", "context parallelism with MoE layers is not modelled yet", "use cp: 1", {"model"});
    if (c.seq_len % (2 * c.cp) != 0) {
      bad(c, "seq_len", fmt::format("sequence length {} is not divisible by 2·CP = {} (load-balanced chunks)", c.seq_len, 2 * c.cp),
          "choose a sequence length divisible by 2*cp", {"cp"});
    }
  }
  if (m.heads % c.tp != 0) {
    bad(c, "tp", fmt::format("{} attention heads are not divisible by TP {}", m.heads, c.tp),
        "choose a TP that divides the head count", {"model", "heads"});
  }
  if (m.attn == AttnType::kGqa && (m.kv_heads == 0 || m.heads % m.kv_heads != 0)) {
    bad(c, "kv_heads", fmt::format("{} KV heads do not divide the {} attention heads", m.kv_heads, m.heads),
        "choose a KV-head count that divides heads (heads for MHA, 1 for MQA)", {"model", "heads"});
  }
  if (m.attn == AttnType::kGqa && m.kv_heads % c.tp != 0 && c.tp % m.kv_heads != 0) {
    bad(c, "tp", fmt::format("{} KV heads and TP {} do not divide one another", m.kv_heads, c.tp),
        "choose a TP that divides or is a multiple of the KV-head count", {"model", "kv_heads"});
  }
  const std::uint32_t split_units = m.layers + (c.pp_split_embedding ? 1 : 0) + (c.pp_split_loss ? 1 : 0);
  if (split_units % (c.pp * c.vp) != 0) {
    const bool acc = c.pp_split_embedding || c.pp_split_loss;
    bad(c, c.vp > 1 ? "vp" : "pp",
        fmt::format("{} layers{} are not divisible by PP {} x VP {} = {} (virtual) stages", m.layers,
                    acc ? fmt::format(" (+{} for the embedding/loss = {})", split_units - m.layers, split_units) : "",
                    c.pp, c.vp, c.pp * c.vp),
        acc ? "choose pp (and vp) so that pp*vp divides layers plus the accounted embedding/loss"
            : "choose pp (and vp) so that pp*vp divides the layer count (or set account_for_embedding_in_pipeline_split / "
              "account_for_loss_in_pipeline_split, as Megatron-Bridge does for Llama 3.1 405B)",
        {"pp", "vp", "model", "layers", "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"});
  }
  const std::uint64_t world = std::uint64_t(c.tp) * c.pp * c.dp * c.cp;
  if (c.expected_gpus != 0 && world != c.expected_gpus) {
    bad(c, "gpus", fmt::format("world size {} is not TP·PP·DP·CP = {}·{}·{}·{} = {}", c.expected_gpus, c.tp, c.pp,
                               c.dp, c.cp, world),
        "make gpus equal to tp*pp*dp*cp (or drop gpus)", {"tp", "pp", "dp", "cp"});
  }
  if (world > 1u << 20) bad(c, "dp", "more than 2^20 GPUs", "use a smaller job", {"tp", "pp", "cp"});
  if (c.ep > 1 && !m.is_moe()) bad(c, "ep", "EP > 1 on a dense model", "use ep: 1 or an MoE model", {"model"});
  if (m.is_moe()) {
    if (m.expert_ffn_hidden == 0) {
      bad(c, "expert_ffn_hidden", fmt::format("an MoE model ({} experts) needs a positive expert FFN size", m.experts),
          "give expert_ffn_hidden >= 1 (or experts: 0 for a dense model)", {"model", "experts"});
    }
    if (c.ep > m.experts) {
      bad(c, "ep", fmt::format("EP {} is above the model's {} experts", c.ep, m.experts), "use ep <= experts",
          {"model", "experts"});
    }
    if (m.experts % c.ep != 0) {
      bad(c, "ep", fmt::format("{} experts not divisible by EP {}", m.experts, c.ep),
          "choose an EP that divides the expert count", {"model", "experts"});
    }
    if ((c.tp * c.dp) % c.ep != 0) {
      bad(c, "ep", fmt::format("EP {} does not divide TP·DP = {}", c.ep, c.tp * c.dp),
          "EP folds into the TP·DP ranks of a stage; choose an EP that divides tp*dp", {"tp", "dp"});
    }
    if (c.tp > 1 && !c.sequence_parallel && !c.inference) {
      bad(c, "sequence_parallel", "MoE with TP > 1 is modelled with sequence parallelism only",
          "set sequence_parallel: true", {"tp", "model"});
    }
  }
  if (c.tp_comm_overlap) {
    // The SM margin needs the GPU's SM count (kernels::GpuEfficiency::sms); without one it
    // cannot be applied, and a margin that would be ignored is refused.
    const std::uint32_t sms = gpu_sms(c.gpu, c.file);
    if (sms == 0 && c.tp_comm_overlap_rs_sms > 0) {
      bad(c, "tp_comm_overlap_rs_sms",
          fmt::format("an SM margin of {} cannot be applied: the SM count of {} is not in the GPU tables",
                      c.tp_comm_overlap_rs_sms, c.gpu),
          "set tp_comm_overlap_rs_sms: 0 (no margin) or use a GPU with a known SM count", {"gpu", "tp_comm_overlap"});
    }
    if (sms > 0 && c.tp_comm_overlap_rs_sms >= sms) {
      bad(c, "tp_comm_overlap_rs_sms", fmt::format("{} SMs is not below the {} SMs of {}", c.tp_comm_overlap_rs_sms, sms, c.gpu),
          "use fewer SMs for the overlapped reduce-scatter (NeMo uses 8-24)", {"gpu", "tp_comm_overlap"});
    }
  }
  if (c.tp_comm_overlap && c.tp > 1 && !c.sequence_parallel) {
    bad(c, "tp_comm_overlap", "TP communication overlap (TransformerEngine userbuffers) needs sequence parallelism",
        "set sequence_parallel: true or tp_comm_overlap: false", {"sequence_parallel", "tp"});
  }
  if (c.sequence_parallel && c.tp > 1 && (c.seq_len / c.cp) % c.tp != 0) {
    bad(c, "seq_len",
        fmt::format("sequence length {} / CP {} not divisible by TP {} (sequence parallelism)", c.seq_len, c.cp, c.tp),
        "choose a sequence length divisible by tp*cp", {"tp", "cp", "sequence_parallel"});
  }
  const std::uint32_t gb = c.global_batch ? c.global_batch : c.micro_batch * c.dp;
  if (gb % (c.micro_batch * c.dp) != 0) {
    bad(c, "global_batch", fmt::format("global batch {} is not a multiple of micro_batch {} x DP {}", gb, c.micro_batch, c.dp),
        "make global_batch a multiple of micro_batch*dp", {"micro_batch", "dp"});
  }
  const std::uint32_t mbs = gb / (c.micro_batch * c.dp);
  if (c.vp > 1 && c.pp == 1) {
    bad(c, "vp", fmt::format("interleaved schedule (vp {}) needs pipeline parallelism, but pp is 1", c.vp),
        "use vp: 1, or pp > 1", {"pp"});
  }
  if (c.vp > 1 && mbs % c.pp != 0) {
    bad(c, "vp",
        fmt::format("interleaved schedule needs micro-batches ({}{}) divisible by PP {}", mbs,
                    c.global_batch ? "" : fmt::format(": global_batch 0 means micro_batch x dp = {}", gb), c.pp),
        "use vp: 1 or a global batch giving a multiple of pp micro-batches",
        {"pp", "global_batch", "micro_batch", "dp"});
  }
  if (c.zero > 3) bad(c, "zero", "ZeRO stage above 3", "use 0, 1, 2 or 3");
  const kernels::GpuSpec& g = kernels::find_gpu(c.gpu, c.file, "workload.generator.gpu");
  if (c.dtype == Dtype::kFp8 && !(g.fp8_tflops > 0)) {
    bad(c, "dtype", g.name + " has no FP8 tensor cores", "use dtype: bf16", {"gpu"});
  }
  if (c.grad_bytes != 2 && c.grad_bytes != 4) bad(c, "grad_bytes", "must be 2 or 4", "2 (bf16 grads) or 4 (fp32)");
  if (c.inference) validate_inference(c);
}

double closed_form_model_flops(const ModelConfig& m, double tokens, std::uint32_t seq_len) {
  double matrix = double(m.vocab) * double(m.hidden);  // logits
  double attn = 0;
  for (std::uint32_t l = 0; l < m.layers; ++l) {
    matrix += double(m.attention_params());
    if (m.moe_layer(l)) {
      matrix += double(m.top_k + m.shared_experts) * double(m.ffn_params(m.expert_ffn_hidden)) +
                double(m.hidden) * m.experts;
    } else {
      matrix += double(m.ffn_params(m.ffn_hidden));
    }
    attn += 2.0 * seq_len * m.heads * double(m.qk_head_dim() + m.head_dim);
  }
  return 6.0 * matrix * tokens + 3.0 * attn * tokens;
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

namespace {

/// Kernel work descriptors (formulas in docs/generators.md and kernels/profile/profile.cu).
struct Kernel {
  std::string op;
  std::string shape;
  double flops = 0;      ///< executed FLOPs (timing)
  double bytes = 0;
  double model_flops = 0;  ///< FLOPs counted for MFU
  kernels::KernelShape dims{};  ///< GEMM/attention shape for the efficiency model
  /// A GEMM that stays in 16-bit in an FP8 job (Megatron-Core keeps the output layer and the
  /// MoE router outside TransformerEngine's fp8_autocast: plain ColumnParallelLinear / torch).
  bool keep16 = false;
  /// Duration multiplier: a GEMM launched on fewer SMs than the GPU has (TransformerEngine's SM
  /// margin for comm kernels running beside it) takes SMs / (SMs - margin) times as long.
  double time_scale = 1.0;
};

/// Chunks of a pipelined GEMM + reduce-scatter overlap: `num_splits=4` in every PipelineOverlapCfg
/// of NeMo's userbuffers presets (NVIDIA/NeMo @26005325
/// nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py: GPT-3 20B/175B, Llama 3 70B,
/// Llama 3.1 405B, BF16 and FP8).
constexpr std::uint32_t kTpOverlapRsSplits = 4;

/// A GEMM C[m×n] = A[m×k]·B[k×n]; `groups` > 1: a grouped GEMM of `groups` experts whose m
/// rows are split evenly between them (each expert has its own k×n weight).
Kernel gemm(double m, double n, double k, double B, double groups = 1, const char* op = "gemm") {
  Kernel kn{op, fmt::format("m={} n={} k={}", u64(m), u64(n), u64(k)), 2 * m * n * k,
            (m * k + groups * k * n + m * n) * B, 2 * m * n * k};
  if (groups > 1) kn.shape += fmt::format(" groups={}", u64(groups));
  kn.dims = kernels::KernelShape::gemm(m / groups, n, k, groups);
  return kn;
}
/// The data-gradient GEMM of a linear layer whose forward is `fwd` (dX[m×k] = dY[m×n]·W^T):
/// same FLOPs and bytes, shape (m, k, n).
Kernel dgrad_of(const Kernel& fwd) {
  Kernel k = fwd;
  k.dims = kernels::KernelShape::gemm(fwd.dims.m, fwd.dims.k, fwd.dims.n, fwd.dims.batch);
  k.shape = fmt::format("dgrad m={} n={} k={}", u64(fwd.dims.m * fwd.dims.batch), u64(fwd.dims.k), u64(fwd.dims.n));
  if (fwd.dims.batch > 1) k.shape += fmt::format(" groups={}", u64(fwd.dims.batch));
  return k;
}
/// The weight-gradient GEMM (dW[k×n] = X^T[k×m]·dY[m×n]): shape (k, n, m) per group.
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

struct KernelKey {
  std::string op;
  double flops, bytes;
  double m, n, k, batch;  ///< shape (the efficiency model depends on it)
  bool operator==(const KernelKey& o) const {
    return op == o.op && flops == o.flops && bytes == o.bytes && m == o.m && n == o.n && k == o.k && batch == o.batch;
  }
};
struct KernelKeyHash {
  std::size_t operator()(const KernelKey& k) const {
    return std::hash<std::string>()(k.op) ^ (std::hash<double>()(k.flops) * 31) ^ (std::hash<double>()(k.bytes) * 131);
  }
};

/// Times kernels with a cache (a generated job has few distinct shapes).
class Timer {
 public:
  Timer(const TrainConfig& c, const kernels::KernelDb* db)
      : c_(c), db_(db), gpu_(kernels::find_gpu(c.gpu, c.file, "workload.generator.gpu")) {}
  struct Result {
    engine::SimTime ps;
    int how;  // 0 measured/interpolated, 1 scaled, 2 modelled
  };
  Result time(const Kernel& k, Dtype d) {
    const KernelKey key{k.op + "|" + kernels::dtype_name(d), k.flops, k.bytes, k.dims.m, k.dims.n,
                        k.dims.kind == kernels::KernelShape::Kind::kAttention ? k.dims.seq : k.dims.k, k.dims.batch};
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    Result r{0, 2};
    if (db_ != nullptr) {
      const auto e = db_->estimate(gpu_, k.op, d, k.flops, k.bytes, c_.fallback, c_.efficiency, k.dims);
      r.ps = static_cast<engine::SimTime>(std::llround(e.time_us * double(engine::kPsPerUs)));
      r.how = (e.how == "measured" || e.how == "interpolated") ? 0 : e.how.rfind("scaled", 0) == 0 ? 1 : 2;
    }
    cache_.emplace(key, r);
    return r;
  }

 private:
  const TrainConfig& c_;
  const kernels::KernelDb* db_;
  const kernels::GpuSpec& gpu_;
  std::unordered_map<KernelKey, Result, KernelKeyHash> cache_;
};

/// Group indices a rank uses (-1 = no such communicator: size 1).
struct RankGroups {
  std::int32_t tp = -1, dp = -1, ep = -1, edp = -1, emb = -1;
};

/// Builds every rank's DAG.
class Builder {
 public:
  Builder(const TrainConfig& c, const kernels::KernelDb* db, bool plan_only)
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
    layers_per_chunk_ = m_.layers / vstages_;  // the even split (chunk_layers for the accounted one)
    ring_tag_base_ = std::int64_t(c.iterations) * mbs_ * vstages_ * 2;  // above every pipeline tag (tag())
    bucket_ = c.bucket_params ? c.bucket_params : std::max<std::uint64_t>(40'000'000ull, 1'000'000ull * dpx_);
  }

  /// Megatron's rank order tp-cp-dp-pp: rank = t + TP·(c + CP·(dp_rank + DP·p)). Inside the
  /// builder `d` is the combined index c + CP·dp_rank in [0, DP·CP): gradients are reduced and
  /// optimizer states sharded over the DP·CP ranks of a (t, p) (Megatron-Core's
  /// data-parallel-with-context-parallel group), so every DP group below spans them.
  std::uint32_t rank_of(std::uint32_t t, std::uint32_t d, std::uint32_t p) const { return t + c_.tp * (d + dpx_ * p); }

  void make_groups(models::Workload& w) {
    const std::uint32_t world = c_.tp * dpx_ * c_.pp;
    w.ranks = world;
    models::CommGroup all{"world", {}};
    for (std::uint32_t r = 0; r < world; ++r) all.ranks.push_back(r);
    w.groups.push_back(all);
    rg_.assign(world, {});
    auto add = [&](const std::string& name, std::vector<std::uint32_t> ranks, std::int32_t RankGroups::*field) {
      if (ranks.size() < 2) return;
      const auto idx = static_cast<std::int32_t>(w.groups.size());
      for (auto r : ranks) rg_[r].*field = idx;
      w.groups.push_back(models::CommGroup{name, std::move(ranks)});
    };
    for (std::uint32_t p = 0; p < c_.pp; ++p) {
      for (std::uint32_t d = 0; d < dpx_; ++d) {
        std::vector<std::uint32_t> g;
        for (std::uint32_t t = 0; t < c_.tp; ++t) g.push_back(rank_of(t, d, p));
        add(fmt::format("tp{}.{}", p, d), g, &RankGroups::tp);
      }
      for (std::uint32_t t = 0; t < c_.tp; ++t) {
        std::vector<std::uint32_t> g;
        for (std::uint32_t d = 0; d < dpx_; ++d) g.push_back(rank_of(t, d, p));
        add(fmt::format("dp{}.{}", p, t), g, &RankGroups::dp);
      }
      if (m_.is_moe()) {
        // EP folds into the stage's TP·DP ranks, linearised TP-fastest (Megatron-Core MoE folding).
        const std::uint32_t n = c_.tp * c_.dp, ep = c_.ep, edp = n / ep;
        auto stage_rank = [&](std::uint32_t i) { return rank_of(i % c_.tp, i / c_.tp, p); };
        for (std::uint32_t blk = 0; blk < edp; ++blk) {
          std::vector<std::uint32_t> g;
          for (std::uint32_t j = 0; j < ep; ++j) g.push_back(stage_rank(blk * ep + j));
          add(fmt::format("ep{}.{}", p, blk), g, &RankGroups::ep);
        }
        for (std::uint32_t j = 0; j < ep; ++j) {
          std::vector<std::uint32_t> g;
          for (std::uint32_t blk = 0; blk < edp; ++blk) g.push_back(stage_rank(blk * ep + j));
          add(fmt::format("edp{}.{}", p, j), g, &RankGroups::edp);
        }
      }
    }
    if (m_.tied_embeddings && c_.pp > 1) {
      for (std::uint32_t d = 0; d < dpx_; ++d) {
        for (std::uint32_t t = 0; t < c_.tp; ++t) {
          add(fmt::format("emb{}.{}", d, t), {rank_of(t, d, 0), rank_of(t, d, c_.pp - 1)}, &RankGroups::emb);
        }
      }
    }
  }

  // ---- per-rank emission -------------------------------------------------------------------
  struct Rank {
    std::uint32_t r = 0, t = 0, d = 0, p = 0;
    std::vector<WorkNode>* prog = nullptr;
    std::int64_t last = -1;  ///< last compute node (stream order)
    std::int64_t ring_steps = 0;  ///< ring-exchange steps emitted so far (their p2p tags)
  };

  // ---- shared programs (TrainConfig::share_programs) -----------------------------------------
  /// The communicators a rank can name, as group slots: tp, dp, ep, edp, emb (RankGroups order).
  static constexpr std::uint32_t kGroupSlots = 5;
  static std::array<std::int32_t, kGroupSlots> group_table(const RankGroups& g) { return {g.tp, g.dp, g.ep, g.edp, g.emb}; }
  /// The peers a rank can name, as peer slots: the rank of the same (t, d) in each pipeline stage
  /// q = 0..PP-1, then its CP ring's next and previous rank, then its TP ring's next and previous
  /// rank (cp_attention, ag_gemm).
  std::vector<std::uint32_t> peer_table(std::uint32_t t, std::uint32_t d, std::uint32_t p) const {
    std::vector<std::uint32_t> v;
    for (std::uint32_t q = 0; q < c_.pp; ++q) v.push_back(rank_of(t, d, q));
    const std::uint32_t n = c_.cp, c = d % n, base = d - c;
    v.push_back(rank_of(t, base + (c + 1) % n, p));
    v.push_back(rank_of(t, base + (c + n - 1) % n, p));
    v.push_back(rank_of((t + 1) % c_.tp, d, p));
    v.push_back(rank_of((t + c_.tp - 1) % c_.tp, d, p));
    return v;
  }
  std::int32_t group_slot(const Rank& R, std::int32_t g) const {
    const auto t = group_table(rg_[R.r]);
    for (std::uint32_t i = 0; i < kGroupSlots; ++i) {
      if (t[i] == g) return static_cast<std::int32_t>(i);
    }
    throw engine::InternalError("generator: rank " + std::to_string(R.r) + " names communicator " + std::to_string(g) +
                                ", which is none of its group slots");
  }
  std::int32_t peer_slot(std::uint32_t peer) const {
    for (std::size_t i = 0; i < peers_.size(); ++i) {
      if (peers_[i] == peer) return static_cast<std::int32_t>(i);
    }
    throw engine::InternalError("generator: a rank names peer " + std::to_string(peer) + ", which is none of its peer slots");
  }

  std::uint32_t push(Rank& R, WorkNode n) {
    const auto idx = static_cast<std::uint32_t>(R.prog->size());
    n.source_id = idx;
    std::sort(n.deps.begin(), n.deps.end());
    n.deps.erase(std::unique(n.deps.begin(), n.deps.end()), n.deps.end());
    R.prog->push_back(std::move(n));
    return idx;
  }

  /// A compute node after the stream's previous one (and `extra` deps). `recompute` kernels
  /// count as hardware FLOPs only.
  std::uint32_t comp(Rank& R, const std::string& name, const Kernel& k, std::vector<std::uint32_t> extra = {},
                     bool recompute = false, Dtype d = Dtype::kBf16) {
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
    if (R.r == 0) stats_.compute_ps_rank0 += double(tr.ps);
    n.deps = std::move(extra);
    if (R.last >= 0) n.deps.push_back(static_cast<std::uint32_t>(R.last));
    const auto idx = push(R, std::move(n));
    R.last = idx;
    return idx;
  }

  /// A collective on group `g` (skipped, returning `fallback_dep`, when g < 0).
  std::int64_t coll(Rank& R, const std::string& name, CollOp op, double bytes, std::int32_t g,
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

  static void add_dep(std::vector<std::uint32_t>& v, std::int64_t i) {
    if (i >= 0) v.push_back(static_cast<std::uint32_t>(i));
  }
  static std::vector<std::uint32_t> deps_of(std::initializer_list<std::int64_t> l) {
    std::vector<std::uint32_t> v;
    for (auto i : l) add_dep(v, i);
    return v;
  }

  // Layer pieces. `pre` = a node the first compute of the piece must wait for (comm); returns
  // the comm node (if any) that the next piece must wait for.
  Kernel norm_k(double tokens, bool bwd) const {
    const double h = double(m_.hidden);
    const std::string op = std::string(m_.layernorm ? "layernorm" : "rmsnorm") + (bwd ? "_bwd" : "");
    const double f = (m_.layernorm ? 8.0 : 4.0) * tokens * h * (bwd ? 2 : 1);
    return mem(op, th(tokens, h), f, ((bwd ? 3.0 : 2.0) * tokens * h + 2 * h) * B_);
  }

  /// Attention-core model FLOPs of one kernel call: the whole s x s score matrix with CP 1; with
  /// CP, one ring step's (s/CP) x (s/CP) block (CP steps per rank, CP ranks: the same total).
  double attn_core_flops() const {
    const double s = double(c_.seq_len) / c_.cp;
    return 2.0 * c_.micro_batch * s * s * (m_.heads / c_.tp) *
           double(m_.qk_head_dim() + m_.head_dim);
  }
  Kernel flash_k(bool bwd) const {
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
    return k;
  }

  /// Rotary position embedding of the rank's q and k (Megatron-Core `apply_rotary_pos_emb`, TE's
  /// fused RoPE kernel, one call for q and k each way): reads and writes every rotated element
  /// once in 16-bit, ~3 FLOPs per element (two multiplies, one add); the backward applies the
  /// inverse rotation to the gradients, same bytes. Rotated elements per token: GQA/MHA all q
  /// and k heads of the rank (heads/TP + kv_heads/TP, head_dim each); MLA only the decoupled
  /// rope dims (heads/TP query parts and the one shared key part, qk_rope_dim each).
  Kernel rope_k(bool bwd) const {
    const double t = c_.tp;
    const double per_token = m_.attn == AttnType::kMla
                                 ? (double(m_.heads) / t + 1.0) * m_.qk_rope_dim
                                 : (double(m_.heads) + double(m_.kv_heads)) / t * m_.head_dim;
    const double n = T_ * per_token;
    return mem(bwd ? "rope_bwd" : "rope", el(n), 3 * n, 2 * n * B_);
  }

  /// Unfused attention core of Megatron-LM 2021-2022 (megatron/model/transformer.py
  /// CoreAttention): per local head (b·heads/TP batches) baddbmm S = QK^T (s×s×d_qk), fused
  /// scale-mask-softmax (FusedScaleMaskSoftmax: reads and writes s² elements), dropout on the
  /// probabilities (writes s² elements and a 1-byte mask), bmm O = PV (s×d_v×s). The mask does
  /// not skip work: both bmms compute the full s². FLOPs: 2·s²·d per bmm per head; bytes: the
  /// operands and results each read/written once.
  double score_elems() const { return double(c_.micro_batch) * (m_.heads / c_.tp) * double(c_.seq_len) * c_.seq_len; }
  Kernel bmm_k(const char* what, double m, double n, double k) const {
    const double batch = double(c_.micro_batch) * (m_.heads / c_.tp);
    const double f = 2.0 * batch * m * n * k;
    Kernel kn{"attn_bmm", fmt::format("{} batch={} m={} n={} k={}", what, u64(batch), u64(m), u64(n), u64(k)), f,
              batch * (m * k + k * n + m * n) * B_, f};
    kn.dims = kernels::KernelShape::gemm(m, n, k, batch);
    return kn;
  }
  /// Context-parallel attention (CP > 1; TransformerEngine `AttnFuncWithCPAndKVP2P`,
  /// cp_comm_type "p2p", as Megatron-Core uses it): the sequence is cut into 2·CP chunks and CP
  /// rank c holds chunks c and 2·CP-1-c (load balance under the causal mask). Step 0 attends the
  /// rank's queries to its own K/V (causal); in steps 1..CP-1 the K/V chunk pair received from the
  /// previous CP rank is attended to while the one held is passed to the next (a ring of P2P
  /// sends). Under the causal mask every off-diagonal step computes half of the
  /// (s/CP) x (s/CP) block, the same work as the causal diagonal step, so each step is timed as
  /// one fused-attention call on s/CP tokens (flash_k). K and V of s/CP tokens move per step:
  /// s/CP·b·kv_heads/TP·(d_qk + d_v)·B bytes (all heads for MLA); the backward's steps move the
  /// K/V and the accumulated dK/dV: twice that. Step j's kernel waits for receive j.
  void cp_attention(Rank& R, const std::string& L, bool bwd, bool recompute) {
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
               });
  }
  void attn_core_fwd(Rank& R, const std::string& L, bool recompute) {
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
  void attn_core_bwd(Rank& R, const std::string& L) {
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

  /// Attention-block linear layers: (name, k, n, column-parallel?) with n/k already TP-sharded.
  struct Lin {
    const char* name;
    double k, n;
    bool col;
  };
  std::vector<Lin> attn_in() const {
    const double h = double(m_.hidden), t = c_.tp;
    if (m_.attn == AttnType::kMla) {
      return {{"q_down", h, double(m_.q_lora_rank), true},
              {"q_up", double(m_.q_lora_rank), double(m_.heads) * m_.qk_head_dim() / t, true},
              {"kv_down", h, double(m_.kv_lora_rank + m_.qk_rope_dim), true},
              {"kv_up", double(m_.kv_lora_rank), double(m_.heads) * (m_.qk_nope_dim + m_.head_dim) / t, true}};
    }
    return {{"qkv", h, (double(m_.heads) + 2.0 * m_.kv_heads) * m_.head_dim / t, true}};
  }
  // The MLA down-projections are replicated across TP ranks in Megatron; their FLOPs then
  // repeat on every TP rank. Model FLOPs count them once: scale the replicated ones by 1/TP.
  bool replicated(const Lin& l) const { return std::string(l.name) == "q_down" || std::string(l.name) == "kv_down"; }

  /// Word-embedding backward of one micro-batch on the first stage. Megatron's
  /// VocabParallelEmbedding looks rows up with dense autograd (weight indexing / F.embedding,
  /// sparse=False), so PyTorch's embedding_dense_backward allocates a zero V/TP x h gradient and
  /// scatters the T x h output gradient into it (reads it, reads and writes the touched rows:
  /// 3·T·h·B); the parameter is not a TE/fused-accumulation linear, so the DDP hook then adds the
  /// dense gradient into the main-gradient buffer (Megatron-Core DistributedDataParallel param
  /// hook: param.main_grad.add_(param.grad)): the zero fill writes V/TP·h·B, the add reads
  /// V/TP·h·B and reads and writes V/TP·h·grad_bytes. Per micro-batch.
  Kernel emb_bwd_k() const {
    const double h = double(m_.hidden), rows = double(m_.vocab) / c_.tp;
    const double bytes = 3 * T_ * h * B_ + rows * h * (2.0 * B_ + 2.0 * double(c_.grad_bytes));
    return mem("embedding_bwd", fmt::format("tokens={} hidden={} vocab={}", u64(T_), u64(h), u64(rows)), 0, bytes);
  }

  // ---- TP communication overlap (TransformerEngine userbuffers, TrainConfig::tp_comm_overlap) ----
  /// All-gather overlapped with the GEMM that consumes it (TransformerEngine userbuffers ring
  /// exchange, CommOverlapP2PBase::split_overlap_ag in transformer_engine/common/comm_gemm_overlap/
  /// comm_gemm_overlap.cpp, TE 1.x-2.x): the GEMM runs as TP chunks of T_/TP rows (`chunk(rows)`
  /// builds one); chunk 0 uses the rank's own shard; in step j = 1..TP-1 every rank sends the shard
  /// it holds (its own, then the one it received in step j-1) to its ring neighbour t+1 of the TP
  /// group and receives one from t-1, and chunk j waits for that receive. Each step is one
  /// point-to-point send and one receive of the whole T_/TP·h·B_ shard (not a collective), so the
  /// TP-1 steps receive (TP-1)/TP·T_·h·B_ per rank: exactly what the unoverlapped all-gather
  /// delivers to each rank. `step_deps`: what the gathered tensor waits for besides the stream's
  /// last compute; `first`: extra deps of the first chunk. Node names: `<name>.tx<j>` / `.rx<j>`.
  void ag_gemm(Rank& R, const std::string& name, const std::function<Kernel(double)>& chunk,
               std::vector<std::uint32_t> step_deps, std::vector<std::uint32_t> first, bool recompute) {
    const std::uint32_t n = c_.tp;
    const double shard_bytes = T_ * double(m_.hidden) * B_ / double(n);  // T_ % TP == 0 (SP check)
    const std::uint32_t next = rank_of((R.t + 1) % n, R.d, R.p), prev = rank_of((R.t + n - 1) % n, R.d, R.p);
    if (R.last >= 0) step_deps.push_back(static_cast<std::uint32_t>(R.last));
    ring_steps(R, n, next, prev, shard_bytes, name + ".tx", name + ".rx", std::move(step_deps), std::move(first),
               [&](std::uint32_t j, std::vector<std::uint32_t> deps) {
                 comp(R, fmt::format("{}.c{}", name, j), chunk(T_ / n), std::move(deps), recompute);
               });
  }
  /// n ring steps (TP-overlap all-gathers, CP ring attention): step j's `compute(j, deps)` runs
  /// after receive j (deps = `first` for j = 0); before it, send/receive j+1 forwards what step j
  /// received (the own chunk first) to `next` and takes one from `prev`, posted after
  /// `step_deps` (j = 0) or receive j. Tags: one per step from the rank's ring counter, the same
  /// sequence on every rank of the ring. Node names `<tx><j+1>` / `<rx><j+1>`.
  void ring_steps(Rank& R, std::uint32_t n, std::uint32_t next, std::uint32_t prev, double bytes, const std::string& tx,
                  const std::string& rx_name, std::vector<std::uint32_t> step_deps, std::vector<std::uint32_t> first,
                  const std::function<void(std::uint32_t, std::vector<std::uint32_t>)>& compute) {
    std::int64_t rx = -1;
    for (std::uint32_t j = 0; j < n; ++j) {
      std::int64_t next_rx = -1;
      if (j + 1 < n) {
        const std::vector<std::uint32_t> d = j == 0 ? step_deps : deps_of({rx});
        const std::int64_t tg = ring_tag_base_ + R.ring_steps++;
        ring_p2p(R, true, next, bytes, tg, tx + std::to_string(j + 1), d);
        next_rx = ring_p2p(R, false, prev, bytes, tg, rx_name + std::to_string(j + 1), d);
      }
      compute(j, j == 0 ? std::move(first) : deps_of({rx}));
      rx = next_rx;
    }
  }
  /// A send or receive of a ring-exchange step with explicit deps (p2p() waits for the stream).
  std::int64_t ring_p2p(Rank& R, bool send, std::uint32_t peer, double bytes, std::int64_t tg, const std::string& name,
                        std::vector<std::uint32_t> deps) {
    if (plan_only_) return -1;
    WorkNode nd;
    nd.name = name;
    nd.type = send ? NodeType::kSend : NodeType::kRecv;
    nd.peer = share_ ? peer_slot(peer) : static_cast<std::int32_t>(peer);
    nd.bytes = u64(bytes);
    nd.tag = tg;
    nd.deps = std::move(deps);
    return push(R, std::move(nd));
  }
  /// GEMM followed by the reduce-scatter of its output, pipelined (TE userbuffers `pipeline`
  /// method): kTpOverlapRsSplits row chunks, each chunk's partial result reduce-scattered
  /// (T_·h·B_/splits bytes, so the chunks move what the whole reduce-scatter moves) while the next
  /// chunk computes; the chunks' reductions run in order. The GEMM chunks run beside the
  /// reduce-scatter kernels on SMs - tp_comm_overlap_rs_sms SMs (set_sm_margin). Returns the last
  /// reduction (what the consumer of the reduced output waits for): one chunk stays exposed.
  std::int64_t gemm_rs(Rank& R, const std::string& name, const std::function<Kernel(double)>& chunk,
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

  // ---- forward of one layer ------------------------------------------------------------------
  /// Emits layer `l`'s forward. `in` = node its input depends on (recv or previous). Returns the
  /// last node of the layer (compute).
  void layer_fwd(Rank& R, std::uint32_t l, std::vector<std::uint32_t> in, bool recompute,
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

  // ---- FP8 (TransformerEngine) extras ---------------------------------------------------------
  // TE (transformer_engine/pytorch/module/{linear,layernorm_linear,layernorm_mlp}.py, delayed
  // scaling on Hopper) feeds FP8 GEMMs with FP8 copies of their operands; the FP8 GEMM on Hopper
  // needs the wgrad/dgrad operands transposed in memory (TE docs, "Performance considerations:
  // handling transposes"). Per linear layer and micro-batch:
  //  * an input that is not produced by a TE-fused norm/activation (the attention output feeding
  //    the output projection) is cast to FP8 with its transpose: `fp8_cast_transpose`, read
  //    16-bit, write two 1-byte copies (4 bytes per element); the amax is reduced in the same kernel;
  //  * inputs produced by LayerNorm/RMSNorm or the activation are written in FP8 by that fused
  //    kernel (no extra bytes forward); the wgrad needs their transpose: `fp8_transpose`, read and
  //    write 1 byte (2 bytes per element);
  //  * every output gradient is cast and transposed before dgrad/wgrad (`fp8_cast_transpose`,
  //    4 bytes per element; the fc1 one is fused with the activation backward: counted in it);
  //  * weights: cast + transpose once per iteration (Megatron passes is_first_microbatch, so TE
  //    caches the FP8 weights across micro-batches): 4 bytes per parameter, emitted after the
  //    optimizer step.
  // Not modelled: the per-forward amax all-reduce over the amax group (a few KB) and the scale
  // update (one multi-tensor kernel per iteration).
  Kernel fp8_ct(double n) const { return mem("fp8_cast_transpose", el(n), n, 4 * n); }
  Kernel fp8_tr(double n) const { return mem("fp8_transpose", el(n), 0, 2 * n); }
  std::vector<Kernel> fp8_prep(std::vector<Kernel> ks) const { return fp8_ ? ks : std::vector<Kernel>{}; }

  Kernel act_k(double n, bool bwd) const {
    if (m_.ffn == FfnType::kSwiglu) {
      return mem(bwd ? "swiglu_bwd" : "swiglu", el(n), (bwd ? 12.0 : 6.0) * n, (bwd ? 5.0 : 3.0) * n * B_);
    }
    return mem(bwd ? "gelu_bwd" : "gelu", el(n), (bwd ? 16.0 : 8.0) * n, (bwd ? 3.0 : 2.0) * n * B_);
  }

  /// MoE FFN forward on the rank's Tl_ tokens (expert TP = 1).
  void moe_fwd(Rank& R, std::uint32_t l, bool recompute) {
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

  // ---- backward of one layer -----------------------------------------------------------------
  /// Backward of a (column-parallel when `col`) linear layer with SP/TP communication.
  /// Returns the comm node the next backward piece must wait for (input-gradient reduction).
  /// `ag_steps` (row-parallel layer with TrainConfig::tp_comm_overlap): the output gradient's SP
  /// all-gather is overlapped with the data-gradient GEMM as ring-exchange steps (ag_gemm); `pre`
  /// then holds what the gradient waits for (the caller emits no gather).
  std::int64_t lin_bwd(Rank& R, const std::string& name, const Kernel& fwd, bool col, bool tp_comm,
                       std::vector<std::uint32_t> pre, std::vector<std::uint32_t>* wgrads,
                       const std::vector<Kernel>& prep = {}, bool ag_steps = false) {
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

  void layer_bwd(Rank& R, std::uint32_t l, std::vector<std::uint32_t> in) {
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
      const double k = m_.top_k, E = m_.experts, el_ = double(m_.expert_ffn_hidden);
      const double mats_in = m_.ffn == FfnType::kSwiglu ? 2 : 1, rows = Tl_ * k;
      comp(R, L + ".unperm.b", mem("moe_permute", el(rows * h), 0, 2 * rows * h * B_), in);
      if (m_.shared_experts > 0) {
        const double sf = el_ * m_.shared_experts;
        lin_bwd(R, L + ".sfc2", gemm(Tl_, h, sf, B_), false, false, {}, &wg);
        comp(R, L + ".sact.b", act_k(Tl_ * sf, true));
        lin_bwd(R, L + ".sfc1", gemm(Tl_, mats_in * sf, h, B_), false, false, {}, &wg);
      }
      std::int64_t a2a = coll(R, L + ".comb.b", CollOp::kAllToAll, rows * h * B_, rg_[R.r].ep, deps_of({R.last}));
      lin_bwd(R, L + ".efc2", gemm(rows, h, el_, B_, E / c_.ep, "grouped_gemm"), false, false, deps_of({a2a}), &wg);
      comp(R, L + ".eact.b", act_k(rows * el_, true));
      lin_bwd(R, L + ".efc1", gemm(rows, mats_in * el_, h, B_, E / c_.ep, "grouped_gemm"), false, false, {}, &wg);
      a2a = coll(R, L + ".disp.b", CollOp::kAllToAll, rows * h * B_, rg_[R.r].ep, deps_of({R.last}));
      comp(R, L + ".perm.b", mem("moe_permute", el(rows * h), 0, 2 * rows * h * B_), deps_of({a2a}));
      lin_bwd(R, L + ".router", g16(gemm(Tl_, E, h, B_)), false, false, {}, &wg);
      comp(R, L + ".ln2.b", norm_k(Tl_, true));
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

  // ---- parameters held per rank --------------------------------------------------------------
  double layer_dense_params(std::uint32_t l) const { return rank_layer_params(c_, l).dense; }
  double layer_expert_params(std::uint32_t l) const { return rank_layer_params(c_, l).expert; }
  double emb_params() const { return double(m_.vocab) * double(m_.hidden) / c_.tp; }

  // ---- DP gradient buckets -------------------------------------------------------------------
  struct Bucket {
    double params = 0;
    std::vector<std::uint32_t> deps;
  };
  struct Buckets {
    Bucket dense, expert;
    std::vector<std::pair<double, std::int64_t>> dense_done, expert_done;  // (params, coll node)
  };

  void flush(Rank& R, Bucket& b, bool expert, Buckets& bk, bool force) {
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
  void grads_ready(Rank& R, Buckets& bk, double dense, double expert, const std::vector<std::uint32_t>& wg) {
    bk.dense.params += dense;
    bk.expert.params += expert;
    if (!wg.empty()) {
      bk.dense.deps.push_back(wg.back());
      if (expert > 0) bk.expert.deps.push_back(wg.back());
    }
    flush(R, bk.dense, false, bk, false);
    flush(R, bk.expert, true, bk, false);
  }

  // ---- schedule ------------------------------------------------------------------------------
  struct Op {
    bool fwd;
    std::uint32_t chunk, mb;
  };
  std::vector<Op> schedule(std::uint32_t p) const {
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

  std::int64_t tag(std::uint32_t it, std::uint32_t mb, std::uint32_t v, bool grad) const {
    return ((std::int64_t(it) * mbs_ + mb) * vstages_ + v) * 2 + (grad ? 1 : 0);
  }

  void build_rank(Rank& R) {
    const double h = double(m_.hidden), t = c_.tp;
    const double act_bytes = T_ * h * B_ / (sp_ ? t : 1.0);
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
        const std::uint32_t v = op.chunk * c_.pp + R.p;  // virtual stage
        const auto [l0, l1] = chunk_layers(c_, v);
        std::vector<std::uint32_t> in;
        if (first_op) {
          in = iter_gate;
          first_op = false;
        }
        if (op.fwd) {
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
        } else {
          std::vector<std::uint32_t> wg;
          if (v + 1 < vstages_) {
            const std::uint32_t src = rank_of(R.t, R.d, (v + 1) % c_.pp);
            in.push_back(p2p(R, false, src, act_bytes, tag(it, op.mb, v + 1, true), fmt::format("rx.b{}.{}", op.mb, v)));
          } else {
            wg = logits_bwd(R, in);
            in.clear();
          }
          const bool reduce_now = c_.zero >= 2 || static_cast<std::int64_t>(oi) == last_bwd[op.chunk];
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
      }
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
      iter_gate.clear();
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
    }
  }

  double rank_params(const Rank& R) const {
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

  std::uint32_t p2p(Rank& R, bool send, std::uint32_t peer, double bytes, std::int64_t tg, const std::string& name) {
    if (plan_only_) return 0;
    // A send waits for the producing compute; a receive is posted when the stream reaches it.
    std::vector<std::uint32_t> deps;
    add_dep(deps, R.last);
    return static_cast<std::uint32_t>(ring_p2p(R, send, peer, bytes, tg, name, std::move(deps)));
  }

  static Kernel g16(Kernel k) {
    k.keep16 = true;
    return k;
  }
  /// Megatron's unfused vocab-parallel cross entropy over n = tokens·V/TP logits
  /// (megatron/core/tensor_parallel/cross_entropy.py, VocabParallelCrossEntropy; used unless
  /// cross_entropy_loss_fusion is set): the logits are converted to fp32 (`.float()`: read 16-bit,
  /// write fp32), then max (read), in-place subtract of the max (read+write), in-place exp
  /// (read+write), sum (read) and the in-place softmax division (read+write): 38 bytes per logit
  /// forward with 16-bit logits. Backward: in-place multiply by the loss gradient (read+write
  /// fp32) and the `.float()` backward cast to 16-bit (read fp32, write 16-bit): 14 bytes.
  /// FLOPs: 5n forward, 3n backward.
  Kernel xent_k(double n, bool bwd) const {
    const double f32 = 4;
    if (bwd) return mem("cross_entropy_bwd", el(n), 3 * n, (2 * f32 + f32 + B_) * n);
    return mem("cross_entropy", el(n), 5 * n, (B_ + f32 + f32 + 2 * f32 + 2 * f32 + f32 + 2 * f32) * n);
  }

  void logits_fwd(Rank& R) {
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
  std::vector<std::uint32_t> logits_bwd(Rank& R, std::vector<std::uint32_t> in) {
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

  // ---- inference (TrainConfig::inference; docs/generators.md "Inference") ----------------------
  /// KV heads a rank holds: kv_heads/TP, or 1 when TP > kv_heads (vLLM's QKVParallelLinear then
  /// replicates each KV head on TP/kv_heads ranks, num_kv_head_replicas).
  double kv_local() const { return std::max(1.0, double(m_.kv_heads) / c_.tp); }

  /// An inference GEMM C[m×n] = A[m×k]·W[k×n] (`groups` experts: grouped, m rows spread evenly).
  /// Bytes: input and output once (16-bit; the input 1 byte with FP8 W8A8), the weights once,
  /// 1 byte each with FP8 (vLLM fp8 checkpoints: FP8 weights, per-token dynamic FP8
  /// activations), 2 otherwise; `keep16` GEMMs (logits, router) stay 16-bit. A grouped GEMM with
  /// fewer rows than experts touches at most `m` experts' weights (balanced routing). In decode
  /// (m = batch) the weights dominate: the kernel is memory-bound and timed so.
  Kernel igemm(double m, double n, double k, double groups = 1, const char* op = "gemm", bool keep16 = false) const {
    const double wb = fp8_ && !keep16 ? 1.0 : B_;
    Kernel kn = gemm(m, n, k, B_, groups, op);
    kn.bytes = m * k * wb + std::min(groups, std::max(1.0, m)) * k * n * wb + m * n * B_;
    kn.keep16 = keep16;
    return kn;
  }
  Kernel residual_k(double n) const { return mem("residual_add", el(n), n, 3 * n * B_); }

  /// MoE FFN of one inference layer on the replica's T tokens. EP = 1: experts TP-sharded (vLLM
  /// FusedMoE without expert parallelism): every rank routes all T tokens through its 1/TP slice
  /// of every expert, then the TP AllReduce(T·h·B) as after a dense MLP. EP > 1: experts whole
  /// on their EP rank (E/EP per rank), EP folded into the stage's TP·DP ranks as in training;
  /// each TP rank takes T/TP of the (replicated) tokens (vLLM's sequence-parallel MoE,
  /// vllm/model_executor/models/deepseek_v2.py DeepseekV2MoE with use_sequence_parallel_moe:
  /// sequence_parallel_chunk, then tensor_model_parallel_all_gather), dispatches them with
  /// AllToAll(T/TP·top_k·h·B) and combines with the same, then the TP ranks AllGather(T·h·B) the
  /// outputs. @returns the node the residual add waits for (-1: none).
  std::int64_t inf_moe(Rank& R, const std::string& L, double T) {
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

  /// Layer `l` of inference phase `k` (0 = prefill of batch·prompt tokens, k >= 1 = decode step
  /// k of batch tokens attending to prompt + k keys each). No sequence parallelism: the T tokens'
  /// activations are replicated over the TP ranks, so the attention output projection and the
  /// MLP end in AllReduce(T·h·B) (Shoeybi et al. 2019; vLLM RowParallelLinear).
  void inf_layer(Rank& R, std::uint32_t l, std::uint32_t k, double T, std::vector<std::uint32_t> in) {
    const double h = double(m_.hidden), t = c_.tp, hl = double(m_.heads) / t, kvl = kv_local(), hd = m_.head_dim;
    const double b = c_.batch, P = c_.prompt_tokens;
    const std::string L = fmt::format("{}.L{}", k == 0 ? std::string("pre") : fmt::format("d{}", k), l);
    const std::int32_t tpg = rg_[R.r].tp;
    comp(R, L + ".ln1", norm_k(T, false), std::move(in));
    Kernel qkv = igemm(T, (hl + 2 * kvl) * hd, h);
    qkv.model_flops = 2 * T * h * (double(m_.heads) + 2.0 * m_.kv_heads) * hd / t;  // replicated KV heads counted once
    comp(R, L + ".qkv", qkv);
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

  /// One rank of an inference replica: the prefill, then output_tokens - 1 decode steps, each
  /// through the rank's pipeline stage. Stage 0 embeds (vocab-parallel: AllReduce(T·h·B) over TP);
  /// a stage sends its T·h·B output activations to the next; the last stage runs the final norm,
  /// the LM head on the last position of each request (batch rows, V/TP columns), AllGathers the
  /// vocab-parallel logits (batch·V·B; vLLM LogitsProcessor) and samples. With PP > 1 the sampled
  /// token ids (4 bytes per request) go back to stage 0, which starts the next step on them
  /// (standing in for the scheduler's round trip); with PP = 1 the stream order does it.
  void build_inference_rank(Rank& R) {
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

  Generated run() {
    Generated g;
    g.config = c_;
    models::Workload& w = g.workload;
    // Every setting that changes the workload, so runs are told apart in the summary and HDF5 meta.
    const char* rc = c_.recompute == Recompute::kFull ? "full" : c_.recompute == Recompute::kSelective ? "selective" : "none";
    const char* at = !c_.flash_attention ? "unfused" : c_.flash2 ? "flash2" : "flash";
    w.source = fmt::format("generated:{} tp{} pp{} dp{} ep{} vp{} mbs{} gbs{} seq{} {} {} sp{} zero{} recompute={} attn={} "
                           "tp_comm_overlap={}",
                           m_.name, c_.tp, c_.pp, c_.dp, c_.ep, c_.vp, c_.micro_batch, gb_, c_.seq_len,
                           kernels::dtype_name(c_.dtype), c_.gpu, sp_ ? 1 : 0, c_.zero, rc, at,
                           c_.tp_comm_overlap ? fmt::format("on(rs_sms={})", c_.tp_comm_overlap_rs_sms) : "off") +
               (c_.cp > 1 ? fmt::format(" cp{}", c_.cp) : "");
    if (c_.inference) {
      w.source = fmt::format("generated:{} inference tp{} pp{} dp{} ep{} batch{} prompt{} output{} {} {} attn={}", m_.name,
                             c_.tp, c_.pp, c_.dp, c_.ep, c_.batch, c_.prompt_tokens, c_.output_tokens,
                             kernels::dtype_name(c_.dtype), c_.gpu, c_.flash2 ? "flash2" : "flash");
    }
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
    struct Class {
      std::uint32_t program = 0;
      std::vector<std::uint32_t> reused;  // the ranks that reuse the program (not its builder)
      GenStats delta;                    // what building one rank of the class added to stats_
      std::vector<double> phase_flops;   // ... and to infer_.phase_flops
      std::vector<std::uint32_t> phase_end_nodes;
    };
    std::map<std::vector<std::int64_t>, Class> classes;
    for (std::uint32_t r = 0; r < w.ranks; ++r) {
      if (plan_only_ && r > 0) break;
      Rank R;
      R.r = r;
      R.t = r % c_.tp;
      R.d = (r / c_.tp) % dpx_;
      R.p = r / (c_.tp * dpx_);
      if (!share_) {
        R.prog = &w.programs[r];
        if (c_.inference) {
          build_inference_rank(R);
        } else {
          build_rank(R);
        }
        stats_.nodes += w.programs[r].size();
        continue;
      }
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
        Class cl;
        cl.program = static_cast<std::uint32_t>(w.programs.size());
        w.programs.emplace_back();
        R.prog = &w.programs.back();
        const GenStats before = stats_;
        const std::vector<double> flops_before = infer_.phase_flops;
        if (c_.inference) {
          build_inference_rank(R);
        } else {
          build_rank(R);
        }
        cl.delta.model_flops = stats_.model_flops - before.model_flops;
        cl.delta.hw_flops = stats_.hw_flops - before.hw_flops;
        cl.delta.kernels_measured = stats_.kernels_measured - before.kernels_measured;
        cl.delta.kernels_scaled = stats_.kernels_scaled - before.kernels_scaled;
        cl.delta.kernels_modelled = stats_.kernels_modelled - before.kernels_modelled;
        cl.phase_flops = infer_.phase_flops;
        for (std::size_t k = 0; k < cl.phase_flops.size(); ++k) cl.phase_flops[k] -= flops_before[k];
        if (c_.inference) cl.phase_end_nodes = infer_.phase_end_nodes[r];
        it = classes.emplace(std::move(key), std::move(cl)).first;
      } else {
        // Another rank of the class: the class's program and its contribution to the totals.
        Class& cl = it->second;
        cl.reused.push_back(r);
        stats_.model_flops += cl.delta.model_flops;
        stats_.hw_flops += cl.delta.hw_flops;
        stats_.kernels_measured += cl.delta.kernels_measured;
        stats_.kernels_scaled += cl.delta.kernels_scaled;
        stats_.kernels_modelled += cl.delta.kernels_modelled;
        for (std::size_t k = 0; k < cl.phase_flops.size(); ++k) infer_.phase_flops[k] += cl.phase_flops[k];
        if (c_.inference) infer_.phase_end_nodes[r] = cl.phase_end_nodes;
      }
      w.program_of[r] = it->second.program;
      stats_.nodes += w.programs[it->second.program].size();
    }
    // Guard: two ranks of every class of several ranks (the middle and the last of those that
    // reuse its program) are built once more, on their own; their programs must equal the
    // class's, node for node (a builder change that made a rank's DAG depend on more than the
    // class key would otherwise give silently wrong DAGs). Costs two ranks' generation per class
    // (~0.1 s per class at 9,216 GPUs); the totals are left as they were.
    if (share_) {
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
        Rank R;
        R.r = rank;
        R.t = R.r % c_.tp;
        R.d = (R.r / c_.tp) % dpx_;
        R.p = R.r / (c_.tp * dpx_);
        peers_ = peer_table(R.t, R.d, R.p);
        std::vector<WorkNode> own;
        R.prog = &own;
        if (c_.inference) {
          build_inference_rank(R);
        } else {
          build_rank(R);
        }
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
    stats_.microbatches = mbs_;
    stats_.params = m_.total_params();
    stats_.tokens = c_.inference ? double(c_.dp) * c_.batch * (double(c_.prompt_tokens) + c_.output_tokens - 1)
                                 : double(gb_) * c_.seq_len;
    // model/hw FLOPs were summed over all ranks' nodes; the counts are per iteration.
    stats_.model_flops /= c_.iterations;
    stats_.hw_flops /= c_.iterations;
    g.stats = stats_;
    g.infer = infer_;
    return g;
  }

  std::vector<KernelNeed> plan() {
    run();
    std::vector<KernelNeed> out;
    for (auto& [k, v] : plan_) out.push_back(v);
    for (auto& n : out) n.calls /= c_.iterations;
    return out;
  }

 private:
  const TrainConfig& c_;
  const ModelConfig& m_;
  Timer timer_;
  bool plan_only_;
  double B_ = 2, T_ = 0, Tl_ = 0;
  bool sp_ = false;
  bool tp_ovl_ = false;  ///< TE userbuffers TP overlap (TrainConfig::tp_comm_overlap with SP)
  double rs_margin_scale_ = 1.0;  ///< SMs / (SMs - tp_comm_overlap_rs_sms) for the pipelined-RS GEMM chunks
  bool fp8_ = false;  ///< FP8 GEMMs (TransformerEngine): emit the cast/transpose kernels
  std::uint32_t gb_ = 0, mbs_ = 0, vstages_ = 1, layers_per_chunk_ = 0;
  std::uint32_t dpx_ = 1;  ///< DP·CP: the combined data index range (rank_of)
  std::int64_t ring_tag_base_ = 0;  ///< first p2p tag of the TP ring-exchange steps (ag_gemm)
  std::uint64_t bucket_ = 0;
  std::vector<RankGroups> rg_;
  bool share_ = false;               ///< emitting a shared program: groups and peers are slots
  std::vector<std::uint32_t> peers_;  ///< shared programs: the peer slots of the rank being built
  std::vector<std::uint32_t> last_wgrads_;
  bool final_flush_ = false;
  std::vector<double> pending_dense_, pending_expert_;
  GenStats stats_;
  InferStats infer_;  ///< inference workloads (build_inference_rank)
  std::map<std::tuple<std::string, Dtype, std::string>, KernelNeed> plan_;
};

}  // namespace

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

LayerParams rank_layer_params(const TrainConfig& c, std::uint32_t l) {
  const ModelConfig& m = c.model;
  LayerParams r;
  r.dense = double(m.attention_params()) / c.tp + 2.0 * double(m.hidden);
  if (m.moe_layer(l)) {
    r.dense += double(m.hidden) * m.experts + double(m.shared_experts) * double(m.ffn_params(m.expert_ffn_hidden));
    r.expert = double(m.experts / c.ep) * double(m.ffn_params(m.expert_ffn_hidden));
  } else {
    r.dense += double(m.ffn_params(m.ffn_hidden)) / c.tp;
  }
  return r;
}

std::pair<std::uint32_t, std::uint32_t> chunk_layers(const TrainConfig& c, std::uint32_t v) {
  const std::uint32_t e = c.pp_split_embedding ? 1 : 0, lo = c.pp_split_loss ? 1 : 0;
  const std::uint32_t per = (c.model.layers + e + lo) / (c.pp * c.vp);
  const std::uint32_t begin = v * per > e ? v * per - e : 0;
  const std::uint32_t end = std::min(c.model.layers, (v + 1) * per - e);
  return {begin, std::max(begin, end)};
}

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

// ---- spec -> TrainConfig ------------------------------------------------------------------------
#include "jobs/spec.hpp"

namespace fabricsim::jobs {

namespace {

/// Upper bound of the 64-bit size keys (hidden, ffn_hidden, vocab, expert_ffn_hidden,
/// bucket_params): 2^40, far above any model and exact in the double arithmetic of the generator.
constexpr std::uint64_t kMaxShape = 1ull << 40;

struct SpecReader {
  const Spec& spec;
  std::string where(const std::string& k) const {
    const auto it = spec.generator_file.find(k);
    return it == spec.generator_file.end() ? spec.file : it->second;
  }
  /// Where a check on `k` that also involves `related` keys comes from: "<cli>" when any of them
  /// was given with --set (the value that made the combination invalid may be that one).
  std::string where(const std::string& k, std::initializer_list<const char*> related) const {
    for (const char* o : related) {
      const auto it = spec.generator_file.find(o);
      if (it != spec.generator_file.end() && it->second == "<cli>") return it->second;
    }
    return where(k);
  }
  std::optional<std::string> get(const std::string& k) const {
    const auto it = spec.generator.find(k);
    if (it == spec.generator.end()) return std::nullopt;
    return it->second;
  }
  /// A whole number in [min_v, max_v]; max_v defaults to the largest value a 32-bit field holds.
  /// Throws InputError (naming the key) for anything else, so no value wraps.
  std::uint64_t uint(const std::string& k, std::uint64_t def, std::uint64_t min_v = 1,
                     std::uint64_t max_v = 0xFFFFFFFFull) const {
    const auto v = get(k);
    if (!v) return def;
    std::size_t pos = 0;
    long long x = -1;
    try {
      x = std::stoll(*v, &pos);
    } catch (...) {
      pos = 0;
    }
    if (pos != v->size() || v->empty() || x < static_cast<long long>(min_v)) {
      throw InputError(where(k), "workload.generator." + k, "'" + *v + "' is not a whole number >= " + std::to_string(min_v),
                       "give a whole number");
    }
    if (static_cast<std::uint64_t>(x) > max_v) {
      throw InputError(where(k), "workload.generator." + k, "'" + *v + "' is above " + std::to_string(max_v),
                       "give a whole number <= " + std::to_string(max_v));
    }
    return static_cast<std::uint64_t>(x);
  }
  bool boolean(const std::string& k, bool def) const {
    const auto v = get(k);
    if (!v) return def;
    return engine::parse_bool(*v, where(k), "workload.generator." + k);
  }
  double real(const std::string& k, double def) const {
    const auto v = get(k);
    if (!v) return def;
    char* end = nullptr;
    const double x = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(x > 0) || x > 1) {
      throw InputError(where(k), "workload.generator." + k, "'" + *v + "' must be a number in (0, 1]", "e.g. 0.7");
    }
    return x;
  }
};

}  // namespace

TrainConfig train_config_from_spec(const Spec& spec) {
  const SpecReader r{spec};
  TrainConfig c;
  const auto model = r.get("model");
  if (!model) {
    throw InputError(spec.file == "<spec>" ? std::string("<cli>") : spec.file, "workload.generator.model", "missing",
                     "name a model, e.g. --set workload.generator.model=gpt3-175b, or custom");
  }
  c.file = spec.file;
  for (const auto& [k, f] : spec.generator_file) {
    if (f == "<cli>") c.cli_fields.push_back(k);
  }
  if (*model == "custom") {
    ModelConfig m;
    m.name = "custom";
    m.source = "user-defined in " + spec.file;
    for (const char* k : {"layers", "hidden", "heads", "vocab"}) {
      if (!r.get(k)) {
        throw InputError(spec.file, std::string("workload.generator.") + k, "missing for model: custom",
                         "give layers, hidden, heads and vocab (and optionally kv_heads, ffn_hidden, ffn, experts, top_k)");
      }
    }
    m.ffn = FfnType::kGelu;
    m.layernorm = true;
    m.tied_embeddings = true;
    c.model = m;
  } else {
    c.model = find_model(*model, r.where("model"), "workload.generator.model");
  }
  ModelConfig& m = c.model;
  const ModelConfig builtin = m;  // before the shape keys
  m.layers = static_cast<std::uint32_t>(r.uint("layers", m.layers));
  const std::uint64_t old_hidden = m.hidden;
  const std::uint32_t old_heads = m.heads;
  m.hidden = r.uint("hidden", m.hidden, 1, kMaxShape);
  m.heads = static_cast<std::uint32_t>(r.uint("heads", m.heads));
  // A multi-head model (kv_heads == heads) given another head count stays multi-head.
  const bool mha = m.kv_heads == 0 || m.kv_heads == old_heads;
  m.kv_heads = static_cast<std::uint32_t>(r.uint("kv_heads", mha ? m.heads : m.kv_heads));
  if (m.attn == AttnType::kGqa && (m.hidden != old_hidden || r.get("heads"))) m.head_dim = static_cast<std::uint32_t>(m.hidden / m.heads);
  m.ffn_hidden = r.uint("ffn_hidden", m.ffn_hidden ? m.ffn_hidden : 4 * m.hidden, 1, kMaxShape);
  if (auto v = r.get("ffn")) {
    if (*v == "gelu") m.ffn = FfnType::kGelu;
    else if (*v == "swiglu") {
      m.ffn = FfnType::kSwiglu;
      m.layernorm = false;
      m.tied_embeddings = false;
      m.rope = true;  // the LLaMA-style block: RMSNorm, SwiGLU, rotary embeddings, untied output
    } else {
      throw InputError(r.where("ffn"), "workload.generator.ffn", "'" + *v + "' is not an FFN kind", "use gelu or swiglu");
    }
  }
  m.vocab = r.uint("vocab", m.vocab, 1, kMaxShape);
  m.experts = static_cast<std::uint32_t>(r.uint("experts", m.experts, 0));
  m.top_k = static_cast<std::uint32_t>(r.uint("top_k", m.top_k ? m.top_k : (m.experts ? 2 : 0), 0));
  m.expert_ffn_hidden = r.uint("expert_ffn_hidden", m.expert_ffn_hidden ? m.expert_ffn_hidden : m.ffn_hidden, 0, kMaxShape);
  if (m.experts > 0 && (m.top_k == 0 || m.top_k > m.experts)) {
    throw InputError(r.where("top_k", {"experts", "model"}), "workload.generator.top_k", "must be between 1 and the expert count",
                     "set top_k, e.g. 2");
  }
  if (*model != "custom") {
    // A built-in model whose shape keys change it is no longer that model: say so in its name (the
    // workload source, run summary and HDF5 meta carry it). Keys restating the built-in value
    // leave the name alone.
    const std::pair<const char*, bool> changed[] = {
        {"layers", m.layers != builtin.layers},          {"hidden", m.hidden != builtin.hidden},
        {"heads", m.heads != builtin.heads},             {"kv_heads", m.kv_heads != builtin.kv_heads},
        {"ffn_hidden", m.ffn_hidden != builtin.ffn_hidden}, {"ffn", m.ffn != builtin.ffn},
        {"vocab", m.vocab != builtin.vocab},             {"experts", m.experts != builtin.experts},
        {"top_k", m.top_k != builtin.top_k},
        {"expert_ffn_hidden", m.experts > 0 && m.expert_ffn_hidden != builtin.expert_ffn_hidden}};
    std::string mods;
    for (const auto& [k, diff] : changed) {
      if (diff && r.get(k)) mods += fmt::format("{}{}={}", mods.empty() ? "" : ",", k, *r.get(k));
    }
    if (!mods.empty()) {
      m.name += "[modified:" + mods + "]";
      m.source += " (shape keys changed: " + mods + ")";
    }
  }
  if (m.heads == 0 || m.hidden % m.heads != 0) {
    if (m.attn == AttnType::kGqa) {
      throw InputError(r.where("hidden", {"heads", "model"}), "workload.generator.hidden", "hidden size not divisible by the head count",
                       "choose hidden = heads * head_dim");
    }
  }
  c.gpu = r.get("gpu").value_or("H100");
  kernels::find_gpu(c.gpu, r.where("gpu"), "workload.generator.gpu");
  c.tp = static_cast<std::uint32_t>(r.uint("tp", 1));
  c.pp = static_cast<std::uint32_t>(r.uint("pp", 1));
  c.dp = static_cast<std::uint32_t>(r.uint("dp", 1));
  c.ep = static_cast<std::uint32_t>(r.uint("ep", 1));
  c.cp = static_cast<std::uint32_t>(r.uint("cp", 1));
  c.vp = static_cast<std::uint32_t>(r.uint("vp", 1));
  c.expected_gpus = static_cast<std::uint32_t>(r.uint("gpus", 0, 0));
  c.sequence_parallel = r.boolean("sequence_parallel", true);
  c.tp_comm_overlap = r.boolean("tp_comm_overlap", false);
  c.pp_split_embedding = r.boolean("account_for_embedding_in_pipeline_split", false);
  c.pp_split_loss = r.boolean("account_for_loss_in_pipeline_split", false);
  c.tp_comm_overlap_rs_sms = static_cast<std::uint32_t>(r.uint("tp_comm_overlap_rs_sms", 24, 0));
  if (r.get("tp_comm_overlap_rs_sms") && !c.tp_comm_overlap) {
    throw InputError(r.where("tp_comm_overlap_rs_sms", {"tp_comm_overlap"}), "workload.generator.tp_comm_overlap_rs_sms",
                     "is set but tp_comm_overlap is false (the margin belongs to the overlapped reduce-scatter)",
                     "set tp_comm_overlap: true or drop tp_comm_overlap_rs_sms");
  }
  c.micro_batch = static_cast<std::uint32_t>(r.uint("micro_batch", 1));
  c.global_batch = static_cast<std::uint32_t>(r.uint("global_batch", 0, 0));
  c.seq_len = static_cast<std::uint32_t>(r.uint("seq_len", 2048));
  if (auto v = r.get("dtype")) c.dtype = kernels::parse_dtype(*v, r.where("dtype"), "workload.generator.dtype");
  if (c.dtype == kernels::Dtype::kFp32 || c.dtype == kernels::Dtype::kTf32) {
    throw InputError(r.where("dtype"), "workload.generator.dtype", "fp32/tf32 training is not modelled", "use bf16, fp16 or fp8");
  }
  c.zero = static_cast<std::uint32_t>(r.uint("zero", 0, 0));
  if (auto v = r.get("recompute")) {
    if (*v == "none") c.recompute = Recompute::kNone;
    else if (*v == "selective") c.recompute = Recompute::kSelective;
    else if (*v == "full") c.recompute = Recompute::kFull;
    else throw InputError(r.where("recompute"), "workload.generator.recompute", "'" + *v + "' is not a mode", "use none, selective or full");
  }
  if (auto v = r.get("attention")) {
    if (*v == "flash") c.flash_attention = true;
    else if (*v == "flash2") c.flash_attention = c.flash2 = true;
    else if (*v == "unfused") c.flash_attention = false;
    else throw InputError(r.where("attention"), "workload.generator.attention", "'" + *v + "' is not an attention kind", "use flash, flash2 or unfused");
  }
  if (auto v = r.get("kernel_model")) {
    if (*v == "shape") c.efficiency.shape_model = true;
    else if (*v == "flat") c.efficiency.shape_model = false;
    else throw InputError(r.where("kernel_model"), "workload.generator.kernel_model", "'" + *v + "' is not a kernel model", "use shape or flat");
  }
  c.overlap_grad_reduce = r.boolean("overlap_grad_reduce", true);
  c.bucket_params = r.uint("bucket_params", 0, 0, kMaxShape);
  c.grad_bytes = static_cast<std::uint32_t>(r.uint("grad_bytes", 2));
  c.iterations = static_cast<std::uint32_t>(r.uint("iterations", 1));
  if (auto v = r.get("fallback")) {
    if (*v == "roofline") c.fallback = kernels::Fallback::kRoofline;
    else if (*v == "none") c.fallback = kernels::Fallback::kNone;
    else throw InputError(r.where("fallback"), "workload.generator.fallback", "'" + *v + "' is not a fallback", "use roofline or none");
  }
  c.efficiency.compute = r.real("compute_efficiency", c.efficiency.compute);
  c.efficiency.memory = r.real("memory_efficiency", c.efficiency.memory);
  // Inference (docs/generators.md "Inference"): its own keys, and the training-only ones refused.
  if (auto v = r.get("mode")) {
    if (*v == "training") c.inference = false;
    else if (*v == "inference") c.inference = true;
    else throw InputError(r.where("mode"), "workload.generator.mode", "'" + *v + "' is not a mode", "use training or inference");
  }
  static const char* const kInferenceKeys[] = {"prompt_tokens", "output_tokens", "batch"};
  static const char* const kTrainingKeys[] = {"micro_batch", "global_batch", "seq_len", "recompute", "zero", "vp",
                                              "sequence_parallel", "tp_comm_overlap", "tp_comm_overlap_rs_sms",
                                              "overlap_grad_reduce", "bucket_params", "grad_bytes", "iterations",
                                              "account_for_embedding_in_pipeline_split",
                                              "account_for_loss_in_pipeline_split"};
  if (c.inference) {
    for (const char* k : kTrainingKeys) {
      if (r.get(k)) {
        throw InputError(r.where(k, {"mode"}), std::string("workload.generator.") + k,
                         "is a training key but mode is inference",
                         "drop it (inference takes batch, prompt_tokens and output_tokens)");
      }
    }
    for (const char* k : kInferenceKeys) {
      if (!r.get(k)) {
        throw InputError(r.where("mode"), std::string("workload.generator.") + k, "missing for mode: inference",
                         "give batch, prompt_tokens and output_tokens (e.g. 16, 2048, 128)");
      }
    }
    c.prompt_tokens = static_cast<std::uint32_t>(r.uint("prompt_tokens", 0));
    c.output_tokens = static_cast<std::uint32_t>(r.uint("output_tokens", 0));
    c.batch = static_cast<std::uint32_t>(r.uint("batch", 0));
    c.sequence_parallel = false;  // activations replicated over TP (no SP in serving engines)
  } else {
    for (const char* k : kInferenceKeys) {
      if (r.get(k)) {
        throw InputError(r.where(k, {"mode"}), std::string("workload.generator.") + k,
                         "is an inference key but mode is training (the default)",
                         "set mode: inference, or drop it");
      }
    }
  }
  return c;
}

kernels::KernelDb load_kernel_db(const std::string& path) {
  return kernels::KernelDb::load(path.empty() ? kernels::KernelDb::default_path() : path);
}

}  // namespace fabricsim::jobs
