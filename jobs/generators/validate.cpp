/// @file validate.cpp
/// Checks of a TrainConfig (validate_train) and the GPU SM lookup they share with the builder.
#include "jobs/generators/builder.hpp"

namespace fabricsim::jobs::gen {

std::uint32_t gpu_sms(const std::string& gpu, const std::string& file) {
  const kernels::GpuEfficiency* e = kernels::find_efficiency(kernels::find_gpu(gpu, file, "workload.generator.gpu"));
  return e != nullptr ? e->sms : 0;
}

}  // namespace fabricsim::jobs::gen

namespace fabricsim::jobs {

using namespace gen;

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
  if (!c.pipeline_layout.empty()) {
    if (c.pp_split_embedding || c.pp_split_loss) {
      bad(c, "pipeline_layout", "is given together with account_for_embedding/loss_in_pipeline_split",
          "use one of them: the layout already says how many layers each stage builds",
          {"account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split"});
    }
    std::uint64_t sum = 0;
    for (std::uint32_t n : c.pipeline_layout) sum += n;
    if (c.pipeline_layout.size() != std::size_t(c.pp) * c.vp || sum != m.layers) {
      bad(c, "pipeline_layout",
          fmt::format("lists {} stages with {} layers in all, but PP {} x VP {} = {} virtual stages hold the {} layers",
                      c.pipeline_layout.size(), sum, c.pp, c.vp, c.pp * c.vp, m.layers),
          "give one entry per virtual stage (pp*vp) summing to the layer count", {"pp", "vp", "model", "layers"});
    }
  }
  const std::uint32_t split_units = m.layers + (c.pp_split_embedding ? 1 : 0) + (c.pp_split_loss ? 1 : 0);
  if (c.pipeline_layout.empty() && split_units % (c.pp * c.vp) != 0) {
    const bool acc = c.pp_split_embedding || c.pp_split_loss;
    bad(c, c.vp > 1 ? "vp" : "pp",
        fmt::format("{} layers{} are not divisible by PP {} x VP {} = {} (virtual) stages", m.layers,
                    acc ? fmt::format(" (+{} for the embedding/loss = {})", split_units - m.layers, split_units) : "",
                    c.pp, c.vp, c.pp * c.vp),
        acc ? "choose pp (and vp) so that pp*vp divides layers plus the accounted embedding/loss"
            : "choose pp (and vp) so that pp*vp divides the layer count (or set account_for_embedding_in_pipeline_split / "
              "account_for_loss_in_pipeline_split, as Megatron-Bridge does for Llama 3.1 405B, or give pipeline_layout)",
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

}  // namespace fabricsim::jobs
