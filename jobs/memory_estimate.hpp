#pragma once
/// @file memory_estimate.hpp
/// GPU memory a generated training job needs per GPU (model states and activations), so a job
/// that could not run on the cluster's GPUs (out of HBM) is flagged before it is simulated.
///
/// Model states (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
/// Parameter Models", SC'20, Sec. 3.1 and 5, Fig. 1): mixed-precision Adam keeps per parameter
/// W bytes of working weights, G bytes of gradients and K = 12 bytes of optimizer state (fp32
/// master weights, momentum and variance; K = 8 when the weights are fp32 already). Over d data-
/// parallel ranks: ZeRO-0 W + G + K, ZeRO-1 (Megatron's distributed optimizer) W + G + K/d,
/// ZeRO-2 W + (G + K)/d, ZeRO-3 (W + G + K)/d. FP8 jobs are counted with FP8 primary weights
/// (1 byte: Megatron-Core `fp8_param_gather` with TransformerEngine), the least an FP8 run holds.
///
/// Where frameworks differ, the estimate takes the frugal choice (16-bit gradient buffers unless
/// grad_bytes says 4, FP8 primary weights, FP8-saved GEMM inputs), so it is a lower bound and a
/// warning means the configuration cannot fit as written.
///
/// Activations (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
/// Models", MLSys'23, Sec. 4.1 and Table 2), generalised from GPT's MHA + 4h GELU MLP to GQA,
/// SwiGLU and MoE: bytes kept per layer and micro-batch, 16-bit activations, s tokens of b
/// sequences, hidden h, heads a:
///   attention: LayerNorm input 2sbh, QKV input 2sbh, Q 2sb·a·d_qk, K 2sb·kv·d_qk,
///              V 2sb·kv·d_v, softmax output 2as²b + dropout mask as²b + dropout output 2as²b
///              (unfused attention; without attention dropout only the softmax output; a fused
///              FlashAttention kernel keeps no s² term, only its fp32 log-sum-exp 4sb·a),
///              projection input 2sb·a·d_v, dropout mask sbh;
///   MLP:       LayerNorm input 2sbh, fc1 input 2sbh, fc1 output 2sb·f (SwiGLU 2sb·2f),
///              activation output 2sb·f, dropout mask sbh; an MoE layer keeps top_k routed
///              copies of the fc1 input/output and activation (expert f) plus the shared
///              experts' and the router's fp32 logits 4sb·E;
/// which gives Korthikanti's sbh·(34 + 5as/h) for GPT. Tensor parallelism divides everything but
/// the 10sbh of LayerNorm inputs, QKV/fc1 inputs and dropout masks by t; sequence parallelism
/// divides those too. Selective recomputation drops the s² terms; full recomputation keeps only
/// each layer's input (2sbh, /t with SP) plus one layer's full set while it is recomputed.
/// The last pipeline stage also holds the fp32 logits of one micro-batch, 4sb·V/t (Korthikanti
/// Sec. 4.3). Context parallelism keeps s/CP tokens per rank and shards the model states over
/// the DP·CP ranks (Megatron-Core's data-parallel-with-context-parallel group).
///
/// Micro-batches in flight on pipeline rank p (Megatron-LM
/// megatron/core/pipeline_parallel/schedules.py, the warm-up counts of
/// forward_backward_pipelining_with/without_interleaving): 1F1B keeps min(PP - p, m) forward
/// activations; interleaved keeps min(2·(PP - p - 1) + (VP - 1)·PP + 1, m·VP) model-chunk
/// micro-batches of L/(PP·VP) layers each (rank 0: (1 + (PP-1)/(PP·VP)) times the 1F1B memory,
/// Korthikanti Sec. 4.2.3). A model chunk's activations are the rank's mean per chunk (exact when
/// its chunks hold equal layers; with the embedding/loss accounted in the pipeline split the first
/// and last chunk hold one layer fewer, so the mean is slightly high for them).
///
/// Not counted (the estimate is a lower bound): the CUDA context and library workspaces
/// (~1-3 GB), NCCL buffers, allocator fragmentation, temporary buffers of a kernel.
#include <cstdint>
#include <string>
#include <vector>

namespace fabricsim::jobs {

struct TrainConfig;

/// Bytes per parameter of the model states under ZeRO (see the file comment; ZeRO paper Fig. 1).
struct StateBytesPerParam {
  double weights = 0;    ///< working weights (16-bit, or 1 byte FP8 primary weights)
  double grads = 0;      ///< gradient buffer
  double optimizer = 0;  ///< fp32 master weights + Adam momentum and variance
  double total() const { return weights + grads + optimizer; }
};

/// Model-state bytes per parameter. @param weight_bytes W (2 for bf16/fp16, 4 for fp32)
/// @param grad_bytes G @param zero stage 0..3 @param dp data-parallel ranks sharing the states
/// (>= 1) @param fp8_weights FP8 primary weights: 1 byte instead of W.
StateBytesPerParam state_bytes_per_param(double weight_bytes, double grad_bytes, std::uint32_t zero, double dp,
                                         bool fp8_weights);

/// One pipeline rank's estimate (bytes per GPU).
struct StageMemory {
  std::uint32_t pp_rank = 0;
  double params = 0;          ///< parameters held (TP/EP shards; embedding and output layer where held)
  double weights_bytes = 0;
  double grads_bytes = 0;
  double optimizer_bytes = 0;
  double activation_bytes = 0;
  double inflight = 0;        ///< model-chunk micro-batches whose activations are kept at the peak
  double total_bytes() const { return weights_bytes + grads_bytes + optimizer_bytes + activation_bytes; }
};

/// The estimate for a job: every pipeline rank, and the largest.
struct MemoryEstimate {
  std::vector<StageMemory> stages;  ///< by pipeline rank
  std::uint32_t peak_stage = 0;     ///< pipeline rank with the largest total
  double capacity_bytes = 0;        ///< the GPU's HBM (kernels::GpuSpec::hbm_gb · 1e9)
  const StageMemory& peak() const { return stages[peak_stage]; }
  /// True if the peak exceeds the GPU's HBM: the job as configured would run out of memory.
  bool exceeds() const { return peak().total_bytes() > capacity_bytes; }
};

/// Activation bytes one layer keeps per micro-batch on one rank (see the file comment).
/// @param moe the layer has an MoE FFN.
double activation_bytes_per_layer(const TrainConfig& c, bool moe);

/// Estimates the memory per GPU of `c` (validated by validate_train first).
/// @throws engine::InputError for an unknown GPU (kernels::find_gpu).
MemoryEstimate estimate_memory(const TrainConfig& c);

/// One warning line when the estimate exceeds the GPU's HBM, naming the breakdown and the fixes
/// that are not in effect yet and would lower the estimate (each checked by estimating `c` again
/// with it): raising tp/pp; recompute selective (only where it drops something: unfused
/// attention) or full, none once full; ZeRO stages above `c.zero` (e.g. "zero: 2-3" at zero 1),
/// none at zero 3 or with one DP rank. Empty when it fits.
/// @throws engine::InputError as estimate_memory.
std::string memory_warning(const TrainConfig& c, const MemoryEstimate& m);

}  // namespace fabricsim::jobs
