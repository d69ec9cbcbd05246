#pragma once
/// @file generators.hpp
/// Megatron-LM-style training (and inference) workload generator: one DAG per rank (models::Workload) with every
/// kernel timed from the kernel database (kernels/kernel_db.hpp) and every collective with its
/// communicator and size derived from the model shapes. docs/generators.md lists each formula
/// with its source; the short version:
///
/// Ranks: rank = tp_rank + TP·(cp_rank + CP·(dp_rank + DP·pp_rank)) (Megatron's default order
/// tp-cp-dp-pp, TP fastest; CP = 1 unless context parallelism is on, docs/generators.md).
/// Per layer and micro-batch (b sequences of s tokens, hidden h, dtype bytes B):
///  * TP (Shoeybi et al. 2019; Korthikanti et al. 2022 for sequence parallelism, SP):
///    without SP: forward AllReduce(s·b·h·B) after the attention output projection and after the
///    MLP's second GEMM; backward AllReduce of the input gradient of QKV and of fc1.
///    With SP: each forward AllReduce becomes AllGather(s·b·h·B) before QKV/fc1 plus
///    ReduceScatter(s·b·h·B) after proj/fc2; backward: AllGather of the output gradient
///    (row-parallel), AllGather of the saved input for the weight gradient (column-parallel,
///    overlapped with the data-gradient GEMM) and ReduceScatter of the input gradient (overlapped
///    with the weight-gradient GEMM), as Megatron's LinearWithGradAccumulationAndAsyncCommunication.
///  * PP (Narayanan et al. SC'21): 1F1B, or interleaved with VP virtual stages per rank (needs
///    micro-batches % PP == 0); activations/gradients of s·b·h·B bytes (÷TP with SP) sent between
///    neighbouring (virtual) stages.
///  * DP: gradients bucketed (Megatron DDP: bucket = max(40M, 1M·DP) parameters) in backward
///    order, each bucket reduced as soon as its last weight-gradient GEMM of the last micro-batch
///    finishes (overlap_grad_reduce), AllReduce (ZeRO 0) or ReduceScatter + AllGather of the
///    updated parameters after the optimizer (ZeRO 1 = distributed optimizer; ZeRO 2 reduces
///    every micro-batch, DeepSpeed-style; ZeRO 3 also AllGathers each layer's parameters before
///    its forward and backward). Gradient bytes per rank per iteration = parameters held by the
///    rank × grad bytes (≈ params/(TP·PP) × B).
///  * EP (MoE, expert TP = 1): the stage's TP·DP ranks are split into EP groups; each rank routes
///    its s·b/TP tokens (SP) to top_k experts: AllToAll(tokens·top_k·h·B) dispatch and combine in
///    forward, the same two in backward; expert gradients are reduced over the expert-DP group
///    (TP·DP/EP ranks).
/// Inference (TrainConfig::inference): prefill and decode steps of a request batch per replica,
/// no SP (AllReduce(T·h·B) after attention and MLP), EP AllToAll for MoE, PP p2p, KV-cache reads
/// in decode; see docs/generators.md "Inference" and Builder::build_inference_rank in
/// jobs/generators/inference.cpp. The builder is split by concern under jobs/generators/
/// (jobs/generators/builder.hpp lists the files).
/// FLOPs: GEMM 2mnk; attention core 2·b·s²·heads·(d_qk + d_v) per layer forward (Megatron counts
/// the full s² even with a causal mask; kernels are timed with half of it when causal); backward
/// = 2× forward; full recompute adds one more forward of every layer.
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "jobs/memory_estimate.hpp"
#include "jobs/model_configs.hpp"
#include "kernels/kernel_db.hpp"
#include "models/core/workload.hpp"

namespace fabricsim::jobs {
struct Spec;
}

namespace fabricsim::jobs {

/// Activation recomputation (Korthikanti et al. 2022).
enum class Recompute : std::uint8_t { kNone, kSelective, kFull };

/// A training job to generate. Defaults follow Megatron-LM's.
struct TrainConfig {
  ModelConfig model;
  std::string gpu = "H100";            ///< kernels::find_gpu name
  kernels::Dtype dtype = kernels::Dtype::kBf16;  ///< GEMM math dtype (bf16, fp16 or fp8)
  std::uint32_t tp = 1, pp = 1, dp = 1, ep = 1, cp = 1, vp = 1;
  bool sequence_parallel = true;       ///< SP (only meaningful with TP > 1)
  /// TransformerEngine userbuffers TP communication overlap (Megatron-Core / NeMo / Megatron-Bridge
  /// `tp_comm_overlap`; needs SP): the SP all-gathers that feed a GEMM (qkv and fc1 forward, the
  /// output-gradient gathers before the proj and fc2 data-gradient GEMMs) become TP-1 in-order
  /// ring-exchange steps of T·h/TP each, with the GEMM split into TP row chunks, chunk j waiting for
  /// step j; the reduce-scatters after the proj and fc2 forward GEMMs are split into 4 chunks that
  /// follow their GEMM chunk (NeMo's num_splits), so one chunk stays exposed. Source: NeMo Framework user guide 24.12,
  /// "Communication Overlap", section "Tensor-parallel Communication Overlap" (pipelined overlap:
  /// all-gather replaced by P2P ring exchanges of the input, reduce-scatter pipelined in chunks;
  /// the bulk overlaps of the backward, all-gather with dgrad and reduce-scatter with wgrad, are
  /// modelled either way). Not applied to MLA's several input projections (bulk gather kept).
  bool tp_comm_overlap = false;
  /// SMs the pipelined reduce-scatter kernels reserve beside the proj/fc2 forward GEMM chunks
  /// (TE `set_sm_margin`); the chunks run on the rest (time x SMs / (SMs - this)). 24: the median
  /// of the PipelineOverlapCfg num_sm values of NeMo's H100 userbuffers presets (8-24; NVIDIA/NeMo
  /// @26005325 nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py).
  std::uint32_t tp_comm_overlap_rs_sms = 24;
  /// Megatron-Core `account_for_embedding_in_pipeline_split` / `account_for_loss_in_pipeline_split`
  /// (TransformerConfig; used by Megatron-Bridge's Llama 3.1 405B recipes): the embedding and the
  /// output layer + loss each count as one layer when the layers are split over the PP·VP virtual
  /// stages, so the first / last virtual stage builds one transformer layer fewer (126 layers + 2
  /// over PP 8 x VP 8: 2 per virtual stage, 1 on the first and the last). See chunk_layers.
  bool pp_split_embedding = false, pp_split_loss = false;
  /// Megatron-Core `pipeline_model_parallel_layout`, decoder layers only: transformer layers of
  /// each virtual pipeline stage in model order (PP·VP entries summing to the layer count; the
  /// embedding stays on the first stage and the output layer + loss on the last). Empty = the
  /// even split of chunk_layers. Megatron-Bridge's DeepSeek-V3 recipes use it for 61 layers
  /// (e.g. PP 16: 4 on each of the first 15 stages, 1 on the last).
  std::vector<std::uint32_t> pipeline_layout;
  std::uint32_t micro_batch = 1;       ///< sequences per micro-batch per DP rank
  std::uint32_t global_batch = 0;      ///< sequences per iteration (0 = micro_batch · DP)
  std::uint32_t seq_len = 2048;
  bool causal = true;                  ///< causal attention mask (timing only)
  /// Attention core kernels: FlashAttention (one fused kernel each way; Megatron-Core/TE, 2023+)
  /// or unfused as in Megatron-LM 2021-2022 (CoreAttention: baddbmm QK^T, fused
  /// scale-mask-softmax, dropout, bmm with V; their backward kernels). Unfused materialises the
  /// b·heads/TP·s² score matrix in HBM several times per layer.
  bool flash_attention = true;
  /// With flash_attention: time the kernels as the FlashAttention-2 class (Megatron/TE before
  /// Hopper-native attention, 2023) instead of the GPU's native fused attention
  /// (FlashAttention-3 / cuDNN 9 class on Hopper). Only the efficiency model distinguishes them.
  bool flash2 = false;
  double attention_dropout = 0.1;      ///< unfused only: dropout on the probabilities (GPT-3/Megatron default 0.1; 0 = none)
  std::uint32_t zero = 0;              ///< 0 (DDP), 1 (distributed optimizer), 2, 3
  Recompute recompute = Recompute::kNone;
  bool overlap_grad_reduce = true;     ///< reduce buckets during the last backward
  std::uint64_t bucket_params = 0;     ///< parameters per DP bucket (0 = max(40M, 1M·DP))
  std::uint32_t grad_bytes = 2;        ///< bytes per gradient element in DP reductions
  std::uint32_t iterations = 1;
  std::uint32_t expected_gpus = 0;     ///< if > 0, must equal TP·PP·DP·CP
  /// Ranks whose DAGs differ only in the communicators and peers they name share one program
  /// (models::Workload::program_of; one per pipeline stage and CP position): memory and
  /// generation time per pipeline stage instead of per rank. false builds one program per rank
  /// (the same DAGs, with global groups and peers; tests compare the two).
  bool share_programs = true;
  /// Inference instead of a training iteration (`mode: inference`; docs/generators.md
  /// "Inference"): each of the DP independent replicas (TP·PP GPUs) serves `batch` requests of
  /// `prompt_tokens` prompt tokens at once: one prefill, then output_tokens - 1 decode steps (the
  /// prefill yields the first output token, as vLLM counts output_len). The training-only keys
  /// (micro_batch, global_batch, seq_len, recompute, zero, vp, ...) are refused with it.
  bool inference = false;
  std::uint32_t prompt_tokens = 0;     ///< inference: prompt length per request (tokens)
  std::uint32_t output_tokens = 0;     ///< inference: tokens generated per request, the prefill's included
  std::uint32_t batch = 0;             ///< inference: concurrent requests per replica
  kernels::Fallback fallback = kernels::Fallback::kRoofline;
  /// `kernels: measured`: GEMMs and fused attention are timed from the measured tables of the GPU
  /// first (kernels/measured_tables.hpp); false (`kernels: model`): the database rows and model only.
  bool measured_kernels = true;
  /// Roofline/efficiency settings; measured table times run at the sustained clock unless
  /// `workload.generator.clock: burst` (RooflineEfficiency::sustained_tables).
  kernels::RooflineEfficiency efficiency{.sustained_tables = true};
  std::string file = "<spec>";         ///< for error messages
  /// workload.generator keys (without the prefix) given with --set: a check failing on one of
  /// them names "<cli>" instead of `file`.
  std::vector<std::string> cli_fields;
};

/// What a generated workload contains, for reports and tests.
struct GenStats {
  std::uint32_t microbatches = 0;      ///< per DP rank per iteration
  double model_flops = 0;              ///< FLOPs per iteration, all ranks, no recompute (MFU numerator)
  double hw_flops = 0;                 ///< FLOPs per iteration, all ranks, recompute included
  double params = 0;                   ///< model parameters (ModelConfig::total_params)
  double tokens = 0;                   ///< tokens per iteration (global_batch · seq_len)
  std::uint64_t nodes = 0;             ///< DAG nodes over all ranks
  std::uint64_t kernels_measured = 0;  ///< compute nodes timed from measured/interpolated rows
  std::uint64_t kernels_scaled = 0;    ///< ... roofline-scaled from another GPU's rows
  std::uint64_t kernels_modelled = 0;  ///< ... from the analytic roofline or extrapolation
  double compute_ps_rank0 = 0;         ///< sum of rank 0's compute durations (ps)
  /// Compute durations of all ranks (ps) by where their time came from, indexed by
  /// kernels::EstimateSource: measured, interpolated, extrapolated, model.
  std::array<double, 4> compute_ps_by_source{};
  /// Folder of the measured tables used (e.g. "h100_sxm"), empty when the GPU has none or
  /// `kernels: model` was asked for.
  std::string kernel_table;
  MemoryEstimate memory;               ///< HBM per GPU the job needs (jobs/memory_estimate.hpp)
};

/// What a generated inference workload contains (TrainConfig::inference), for the run summary
/// and tests. Phase 0 is the prefill, phase k >= 1 decode step k (context prompt_tokens + k).
struct InferStats {
  bool used = false;
  /// Model FLOPs per phase over all ranks: 2 · (matrix parameters a token touches) per token,
  /// logits for the last position of each request only, plus the causal attention core
  /// (closed_form_inference_flops).
  std::vector<double> phase_flops;
  /// Bytes of KV cache read by rank 0's decode attention kernels, all steps (B).
  double kv_read_bytes_rank0 = 0;
  /// Per rank: the node that ends each phase (the sampling kernel of the last pipeline stage;
  /// phases + 1 entries), empty for ranks of other stages. The run summary takes the time a
  /// phase ends as the latest completion of its nodes over the ranks.
  std::vector<std::vector<std::uint32_t>> phase_end_nodes;
};

/// A generated workload and its statistics.
struct Generated {
  models::Workload workload;
  GenStats stats;
  TrainConfig config;
  InferStats infer;  ///< inference workloads only (infer.used)
};

/// HBM per GPU of an inference job (TrainConfig::inference), per pipeline rank: the weights held
/// (TP/EP/PP shards, replicated KV heads included; GEMM weights 1 byte with FP8, embedding, LM
/// head, norms and router 16-bit) and, as activation_bytes, the KV cache at the full context
/// (layers of the stage · batch · 2 · kv_heads/TP · head_dim · (prompt + output - 1) · 2 bytes)
/// plus the prefill's largest transient (batch·prompt tokens of the residual stream twice and the
/// widest QKV/first-MLP GEMM output, 16-bit) and the last stage's fp32 logits of the last
/// positions. No gradients or optimizer states. Not counted: CUDA context, NCCL buffers, the
/// serving engine's preallocated KV pool: a lower bound. @throws engine::InputError (unknown GPU).
MemoryEstimate estimate_inference_memory(const TrainConfig& c);

/// One warning line when estimate_inference_memory's peak exceeds the GPU's HBM, naming the fixes
/// (raise tp/pp, lower batch or the context, and dtype: fp8 unless it is FP8 already); empty
/// when it fits.
std::string inference_memory_warning(const TrainConfig& c, const MemoryEstimate& m);

/// Model FLOPs of one inference phase of one replica (all its GPUs): 2 · P_m · tokens +
/// 2 · V · h · batch (logits of each request's last position) + 2 · layers · heads ·
/// (d_qk + d_v) · batch · Σ_q context(q) (QK^T and PV over the causal context of every query:
/// P(P+1)/2 for a prefill of P tokens, P + k for decode step k). P_m = the matrix parameters a
/// token touches in the layers (attention, dense FFN or top_k + shared experts and the router;
/// ModelConfig). @param step 0 = prefill (batch · prompt tokens), k >= 1 = decode step k.
double closed_form_inference_flops(const ModelConfig& m, std::uint32_t batch, std::uint32_t prompt,
                                   std::uint32_t step);

/// Checks a training configuration. @throws engine::InputError (one line naming the field and
/// the fix) for: heads or kv_heads not divisible by TP, layers not divisible by PP·VP, world size
/// different from TP·PP·DP·CP, EP above the expert count or not dividing experts or TP·DP,
/// global batch not a multiple of micro_batch·DP, interleaving without micro-batches % PP == 0,
/// CP > 1 with unfused attention, MoE layers or a sequence not divisible by 2·CP, FP8 on a GPU
/// without FP8, ZeRO stage > 3.
void validate_train(const TrainConfig& c);

/// Parameters of transformer layer l (0-based) that one rank holds: `dense` = attention / TP +
/// the two norms, plus the dense FFN / TP, or for an MoE layer the router (hidden x experts) and
/// the shared experts (replicated over TP); `expert` = the routed experts of its EP rank
/// (experts / EP FFNs, expert TP = 1). The generator's DP gradient buckets and the memory
/// estimate both use it.
struct LayerParams {
  double dense = 0, expert = 0;
};
LayerParams rank_layer_params(const TrainConfig& c, std::uint32_t l);

/// Transformer layers [first, second) of virtual pipeline stage v (0 .. PP·VP-1; virtual stage
/// v = chunk·PP + pp_rank): L/(PP·VP) each, or with the embedding/loss accounted (TrainConfig::
/// pp_split_embedding / pp_split_loss) (L + e + l)/(PP·VP) units each, the embedding taking the
/// first unit of stage 0 and the loss the last unit of the last stage; with
/// TrainConfig::pipeline_layout the layers listed for v, after those of stages 0 .. v-1.
std::pair<std::uint32_t, std::uint32_t> chunk_layers(const TrainConfig& c, std::uint32_t v);

/// Generates one rank DAG per GPU. Compute durations come from `db` for the config's GPU with
/// `c.fallback`. Also estimates the memory per GPU (stats.memory); when it exceeds the GPU's
/// HBM, memory_warning's line is added to the workload's warnings. @throws engine::InputError (validate_train, or a kernel the data does not cover
/// when the fallback is kNone).
Generated generate_training(const TrainConfig& c, const kernels::KernelDb& db);

/// One distinct kernel the generated workload needs (for `fabricsim kernels profile-plan`).
struct KernelNeed {
  std::string op;
  kernels::Dtype dtype = kernels::Dtype::kBf16;
  std::string shape;   ///< "key=value ..." (see kernels/profile/profile.cu)
  double flops = 0, bytes = 0;
  std::uint64_t calls = 0;  ///< calls per iteration on rank 0
};

/// The distinct kernels of rank 0's DAG for `c` (no DAG is built).
std::vector<KernelNeed> kernel_plan(const TrainConfig& c);

/// Builds a TrainConfig from a spec's workload.generator.* keys (Spec::generator). A built-in
/// `model` may be overridden by the custom-model keys; `model: custom` needs layers, hidden,
/// heads and vocab. @throws engine::InputError naming the key (file or <cli>) and the fix.
TrainConfig train_config_from_spec(const Spec& spec);

/// Loads the kernel database a config asks for (`kernel_db` key, else KernelDb::default_path())
/// with the shipped measured tables attached (kernels::MeasuredTables::shipped()).
kernels::KernelDb load_kernel_db(const std::string& path);

/// Model FLOPs of one iteration by Narayanan et al. SC'21 eq. (3) without recompute,
/// generalised to GQA/SwiGLU/MoE: 6 · (matrix params a token touches, logits included) · tokens
/// + 6 · layers · 2 · s · heads·(d_qk + d_v)/2 · tokens. For GPT this is
/// 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)).
double closed_form_model_flops(const ModelConfig& m, double tokens, std::uint32_t seq_len);

}  // namespace fabricsim::jobs
