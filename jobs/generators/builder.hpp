#pragma once
/// @file builder.hpp
/// Internal to the workload generator (jobs/generators.hpp is the public interface): the kernel
/// descriptors and timer, and the Builder that emits every rank's DAG. Its members are defined by
/// concern in jobs/generators/: builder.cpp (groups, node emission, shared programs, run),
/// kernels.cpp (kernel work of each layer piece), layers.cpp (forward/backward of a layer and the
/// logits), moe.cpp (MoE/EP FFN), cp.cpp (context-parallel attention), tp_overlap.cpp (TE
/// userbuffers TP overlap), schedule.cpp (1F1B / interleaved pipeline schedule), dp.cpp (DP/ZeRO
/// gradient buckets and the optimizer step), inference.cpp (prefill and decode). The public
/// functions of jobs/generators.hpp outside the builder: validate.cpp (validate_train),
/// model_shapes.cpp (layer parameters, pipeline split, closed-form FLOPs, load_kernel_db),
/// spec_config.cpp (train_config_from_spec), inference.cpp (inference memory and FLOPs).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/errors.hpp"
#include "engine/time.hpp"
#include "jobs/generators.hpp"
#include "kernels/efficiency_model.hpp"

namespace fabricsim::jobs::gen {

using engine::InputError;
using kernels::Dtype;
using models::CollOp;
using models::NodeType;
using models::WorkNode;

/// `v` rounded to the nearest whole number (bytes, shape sizes).
inline std::uint64_t u64(double v) { return static_cast<std::uint64_t>(std::llround(v)); }

/// Streaming multiprocessors of `gpu` (kernels::GpuEfficiency::sms), 0 when the tables have none.
/// @throws engine::InputError (unknown GPU, naming `file`).
std::uint32_t gpu_sms(const std::string& gpu, const std::string& file);

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
Kernel gemm(double m, double n, double k, double B, double groups = 1, const char* op = "gemm");
/// The data-gradient GEMM of a linear layer whose forward is `fwd` (dX[m×k] = dY[m×n]·W^T):
/// same FLOPs and bytes, shape (m, k, n).
Kernel dgrad_of(const Kernel& fwd);
/// The weight-gradient GEMM (dW[k×n] = X^T[k×m]·dY[m×n]): shape (k, n, m) per group.
Kernel wgrad_of(const Kernel& fwd);
Kernel mem(const std::string& op, const std::string& shape, double flops, double bytes);
/// Shape strings of element-wise kernels: "elements=N", "tokens=T hidden=H".
std::string el(double n);
std::string th(double t, double h);

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
      : c_(c), db_(db), gpu_(kernels::find_gpu(c.gpu, c.file, "workload.generator.gpu")) {
    if (db_ != nullptr && c_.measured_kernels && db_->tables() != nullptr && db_->tables()->has(gpu_, "gemm")) {
      table_ = kernels::table_system(gpu_);
    }
  }
  struct Result {
    engine::SimTime ps;
    int how;  // 0 measured/interpolated, 1 scaled, 2 modelled or extrapolated
    kernels::EstimateSource source = kernels::EstimateSource::kModel;
  };
  /// Duration of `k` in dtype `d` (cached per kernel key); 0 ps, "modelled" without a database.
  /// @throws engine::InputError naming workload.generator.fallback when `fallback: none` asks
  /// for measured kernels on a GPU without measured tables.
  Result time(const Kernel& k, Dtype d);
  /// The measured-table folder in use ("" when none).
  const std::string& table() const { return table_; }

 private:
  const TrainConfig& c_;
  const kernels::KernelDb* db_;
  const kernels::GpuSpec& gpu_;
  std::string table_;  ///< measured-table folder of the GPU when used
  bool checked_ = false;
  std::unordered_map<KernelKey, Result, KernelKeyHash> cache_;
};

/// Group indices a rank uses (-1 = no such communicator: size 1).
struct RankGroups {
  std::int32_t tp = -1, dp = -1, ep = -1, edp = -1, emb = -1;
};

/// Builds every rank's DAG.
class Builder {
 public:
  Builder(const TrainConfig& c, const kernels::KernelDb* db, bool plan_only);

  /// Megatron's rank order tp-cp-dp-pp: rank = t + TP·(c + CP·(dp_rank + DP·p)). Inside the
  /// builder `d` is the combined index c + CP·dp_rank in [0, DP·CP): gradients are reduced and
  /// optimizer states sharded over the DP·CP ranks of a (t, p) (Megatron-Core's
  /// data-parallel-with-context-parallel group), so every DP group below spans them.
  std::uint32_t rank_of(std::uint32_t t, std::uint32_t d, std::uint32_t p) const { return t + c_.tp * (d + dpx_ * p); }

  /// Fills w.ranks and w.groups (world, then TP, DP·CP, EP, expert-DP, tied-embedding groups of
  /// >= 2 ranks) and each rank's group indices (rg_).
  void make_groups(models::Workload& w);

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
  std::vector<std::uint32_t> peer_table(std::uint32_t t, std::uint32_t d, std::uint32_t p) const;
  /// Slot of communicator `g` among R's group slots. @throws engine::InternalError if none.
  std::int32_t group_slot(const Rank& R, std::int32_t g) const;
  /// Slot of `peer` among the current rank's peer slots. @throws engine::InternalError if none.
  std::int32_t peer_slot(std::uint32_t peer) const;

  /// Appends `n` (deps sorted, duplicates dropped) to R's program. @returns its index.
  std::uint32_t push(Rank& R, WorkNode n);

  /// A compute node after the stream's previous one (and `extra` deps). `recompute` kernels
  /// count as hardware FLOPs only.
  std::uint32_t comp(Rank& R, const std::string& name, const Kernel& k, std::vector<std::uint32_t> extra = {},
                     bool recompute = false, Dtype d = Dtype::kBf16);

  /// A collective on group `g` (skipped, returning `fallback_dep`, when g < 0).
  std::int64_t coll(Rank& R, const std::string& name, CollOp op, double bytes, std::int32_t g,
                    std::vector<std::uint32_t> deps);

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
  /// LayerNorm / RMSNorm (forward or backward) over `tokens` rows of hidden size.
  Kernel norm_k(double tokens, bool bwd) const;

  /// Attention-core model FLOPs of one kernel call: the whole s x s score matrix with CP 1; with
  /// CP, one ring step's (s/CP) x (s/CP) block (CP steps per rank, CP ranks: the same total).
  double attn_core_flops() const;
  /// Fused attention (FlashAttention class) of one micro-batch, forward or backward.
  Kernel flash_k(bool bwd) const;

  /// Rotary position embedding of the rank's q and k (Megatron-Core `apply_rotary_pos_emb`, TE's
  /// fused RoPE kernel, one call for q and k each way): reads and writes every rotated element
  /// once in 16-bit, ~3 FLOPs per element (two multiplies, one add); the backward applies the
  /// inverse rotation to the gradients, same bytes. Rotated elements per token: GQA/MHA all q
  /// and k heads of the rank (heads/TP + kv_heads/TP, head_dim each); MLA only the decoupled
  /// rope dims (heads/TP query parts and the one shared key part, qk_rope_dim each).
  Kernel rope_k(bool bwd) const;
  /// q/k RMSNorm (ModelConfig::qk_norm): memory-bound over the rank's q and k heads, n =
  /// T·(heads + kv_heads)/TP·head_dim elements; forward reads and writes them once (2·n·B
  /// bytes, 4·n FLOPs as the RMSNorm of norm_k), backward reads the output gradient and the
  /// input and writes the input gradient (3·n·B bytes, 8·n FLOPs). The per-head weights
  /// (head_dim elements each) are negligible and not counted.
  Kernel qk_norm_k(bool bwd) const;

  /// Unfused attention core of Megatron-LM 2021-2022 (megatron/model/transformer.py
  /// CoreAttention): per local head (b·heads/TP batches) baddbmm S = QK^T (s×s×d_qk), fused
  /// scale-mask-softmax (FusedScaleMaskSoftmax: reads and writes s² elements), dropout on the
  /// probabilities (writes s² elements and a 1-byte mask), bmm O = PV (s×d_v×s). The mask does
  /// not skip work: both bmms compute the full s². FLOPs: 2·s²·d per bmm per head; bytes: the
  /// operands and results each read/written once.
  double score_elems() const { return double(c_.micro_batch) * (m_.heads / c_.tp) * double(c_.seq_len) * c_.seq_len; }
  Kernel bmm_k(const char* what, double m, double n, double k) const;
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
  void cp_attention(Rank& R, const std::string& L, bool bwd, bool recompute);
  /// Attention core forward of layer `L`: CP ring, fused, or unfused (QK^T, softmax, dropout, PV).
  void attn_core_fwd(Rank& R, const std::string& L, bool recompute);
  /// Attention core backward of layer `L` (the reverse of attn_core_fwd).
  void attn_core_bwd(Rank& R, const std::string& L);

  /// Attention-block linear layers: (name, k, n, column-parallel?) with n/k already TP-sharded.
  struct Lin {
    const char* name;
    double k, n;
    bool col;
  };
  std::vector<Lin> attn_in() const;
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
  Kernel emb_bwd_k() const;

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
               std::vector<std::uint32_t> step_deps, std::vector<std::uint32_t> first, bool recompute);
  /// n ring steps (TP-overlap all-gathers, CP ring attention): step j's `compute(j, deps)` runs
  /// after receive j (deps = `first` for j = 0); before it, send/receive j+1 forwards what step j
  /// received (the own chunk first) to `next` and takes one from `prev`, posted after
  /// `step_deps` (j = 0) or receive j. Tags: one per step from the rank's ring counter, the same
  /// sequence on every rank of the ring. Node names `<tx><j+1>` / `<rx><j+1>`; the messages
  /// are tagged `kind` (TP for the overlap rings, CP for context-parallel attention).
  void ring_steps(Rank& R, std::uint32_t n, std::uint32_t next, std::uint32_t prev, double bytes, const std::string& tx,
                  const std::string& rx_name, std::vector<std::uint32_t> step_deps, std::vector<std::uint32_t> first,
                  const std::function<void(std::uint32_t, std::vector<std::uint32_t>)>& compute, models::CommKind kind);
  /// A send or receive of a ring-exchange step with explicit deps (p2p() waits for the stream),
  /// serving parallelism `kind` (WorkNode::kind).
  std::int64_t ring_p2p(Rank& R, bool send, std::uint32_t peer, double bytes, std::int64_t tg, const std::string& name,
                        std::vector<std::uint32_t> deps, models::CommKind kind);
  /// GEMM followed by the reduce-scatter of its output, pipelined (TE userbuffers `pipeline`
  /// method): kTpOverlapRsSplits row chunks, each chunk's partial result reduce-scattered
  /// (T_·h·B_/splits bytes, so the chunks move what the whole reduce-scatter moves) while the next
  /// chunk computes; the chunks' reductions run in order. The GEMM chunks run beside the
  /// reduce-scatter kernels on SMs - tp_comm_overlap_rs_sms SMs (set_sm_margin). Returns the last
  /// reduction (what the consumer of the reduced output waits for): one chunk stays exposed.
  std::int64_t gemm_rs(Rank& R, const std::string& name, const std::function<Kernel(double)>& chunk,
                       std::vector<std::uint32_t> first, bool recompute);

  // ---- forward of one layer ------------------------------------------------------------------
  /// Emits layer `l`'s forward. `in` = node its input depends on (recv or previous). Returns the
  /// last node of the layer (compute).
  void layer_fwd(Rank& R, std::uint32_t l, std::vector<std::uint32_t> in, bool recompute,
                 std::vector<std::int64_t>* zero3_wait);

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

  /// FFN activation (SwiGLU or GELU) over n elements, forward or backward.
  Kernel act_k(double n, bool bwd) const;

  /// MoE FFN forward on the rank's Tl_ tokens (expert TP = 1).
  void moe_fwd(Rank& R, std::uint32_t l, bool recompute);
  /// MoE FFN backward of layer `l` (the reverse of moe_fwd: combine, expert GEMMs, dispatch,
  /// router); `in` = what its first kernel waits for; weight-gradient nodes appended to `wg`.
  void moe_bwd(Rank& R, std::uint32_t l, const std::vector<std::uint32_t>& in, std::vector<std::uint32_t>* wg);

  // ---- backward of one layer -----------------------------------------------------------------
  /// Backward of a (column-parallel when `col`) linear layer with SP/TP communication.
  /// Returns the comm node the next backward piece must wait for (input-gradient reduction).
  /// `ag_steps` (row-parallel layer with TrainConfig::tp_comm_overlap): the output gradient's SP
  /// all-gather is overlapped with the data-gradient GEMM as ring-exchange steps (ag_gemm); `pre`
  /// then holds what the gradient waits for (the caller emits no gather).
  std::int64_t lin_bwd(Rank& R, const std::string& name, const Kernel& fwd, bool col, bool tp_comm,
                       std::vector<std::uint32_t> pre, std::vector<std::uint32_t>* wgrads,
                       const std::vector<Kernel>& prep = {}, bool ag_steps = false);

  /// Emits layer `l`'s backward (full recompute first when configured; ZeRO-3 parameter gather);
  /// its weight-gradient nodes end up in last_wgrads_.
  void layer_bwd(Rank& R, std::uint32_t l, std::vector<std::uint32_t> in);

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

  /// Reduces bucket `b` (AllReduce with ZeRO 0, else ReduceScatter) over the DP (or expert-DP)
  /// group once it holds bucket_ parameters (any amount with `force`); without
  /// overlap_grad_reduce it is deferred to the end of the backward.
  void flush(Rank& R, Bucket& b, bool expert, Buckets& bk, bool force);
  /// Adds `dense` / `expert` parameters whose gradients are final after `wg` to the buckets.
  void grads_ready(Rank& R, Buckets& bk, double dense, double expert, const std::vector<std::uint32_t>& wg);
  /// End of an iteration's backward: flushes the remaining buckets (and, without
  /// overlap_grad_reduce, every deferred one), then the tied-embedding gradient AllReduce.
  /// @returns what the optimizer step waits for.
  std::vector<std::uint32_t> dp_sync(Rank& R, Buckets& bk);
  /// dp_sync, the optimizer step over the rank's (ZeRO: 1/DP of its) parameters, the ZeRO-1/2
  /// parameter AllGathers and the FP8 weight casts. @returns what the next iteration's first
  /// compute waits for.
  std::vector<std::uint32_t> finish_iteration(Rank& R, Buckets& bk);

  // ---- schedule ------------------------------------------------------------------------------
  struct Op {
    bool fwd;
    std::uint32_t chunk, mb;
  };
  /// Pipeline stage p's ops of one iteration: 1F1B (VP 1) or interleaved 1F1B (Narayanan et al.
  /// SC'21): warm-up forwards, steady one-forward-one-backward, cool-down backwards.
  std::vector<Op> schedule(std::uint32_t p) const;

  std::int64_t tag(std::uint32_t it, std::uint32_t mb, std::uint32_t v, bool grad) const {
    return ((std::int64_t(it) * mbs_ + mb) * vstages_ + v) * 2 + (grad ? 1 : 0);
  }
  /// Bytes of the activation (or its gradient) sent between pipeline stages: T·h·B (÷TP with SP).
  double act_bytes_pp() const { return T_ * double(m_.hidden) * B_ / (sp_ ? double(c_.tp) : 1.0); }
  /// Forward of one micro-batch on virtual stage op.chunk·PP + p of iteration `it`: receive (or
  /// embed), the stage's layers, send (or logits and loss); `in` = extra deps of the first node.
  void fwd_op(Rank& R, std::uint32_t it, const Op& op, std::vector<std::uint32_t> in);
  /// Backward of one micro-batch on its virtual stage; `reduce_now`: the stage's gradients are
  /// final here (last backward of the chunk, or every one with ZeRO 2/3) and go into buckets.
  void bwd_op(Rank& R, std::uint32_t it, const Op& op, bool reduce_now, Buckets& bk, std::vector<std::uint32_t> in);

  /// R's training iterations: the schedule's forward and backward ops, then finish_iteration.
  void build_rank(Rank& R);

  /// Parameters R holds (its virtual stages' layers, embedding, final norm and output layer).
  double rank_params(const Rank& R) const;

  /// A pipeline send or receive after the stream's last compute.
  std::uint32_t p2p(Rank& R, bool send, std::uint32_t peer, double bytes, std::int64_t tg, const std::string& name);

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
  Kernel xent_k(double n, bool bwd) const;

  /// Final norm, output layer, vocab-parallel cross entropy (last stage, forward).
  void logits_fwd(Rank& R);
  /// Their backward. @returns the output layer's weight-gradient node.
  std::vector<std::uint32_t> logits_bwd(Rank& R, std::vector<std::uint32_t> in);

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
  Kernel igemm(double m, double n, double k, double groups = 1, const char* op = "gemm", bool keep16 = false) const;
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
  std::int64_t inf_moe(Rank& R, const std::string& L, double T);

  /// Layer `l` of inference phase `k` (0 = prefill of batch·prompt tokens, k >= 1 = decode step
  /// k of batch tokens attending to prompt + k keys each). No sequence parallelism: the T tokens'
  /// activations are replicated over the TP ranks, so the attention output projection and the
  /// MLP end in AllReduce(T·h·B) (Shoeybi et al. 2019; vLLM RowParallelLinear).
  void inf_layer(Rank& R, std::uint32_t l, std::uint32_t k, double T, std::vector<std::uint32_t> in);

  /// One rank of an inference replica: the prefill, then output_tokens - 1 decode steps, each
  /// through the rank's pipeline stage. Stage 0 embeds (vocab-parallel: AllReduce(T·h·B) over TP);
  /// a stage sends its T·h·B output activations to the next; the last stage runs the final norm,
  /// the LM head on the last position of each request (batch rows, V/TP columns), AllGathers the
  /// vocab-parallel logits (batch·V·B; vLLM LogitsProcessor) and samples. With PP > 1 the sampled
  /// token ids (4 bytes per request) go back to stage 0, which starts the next step on them
  /// (standing in for the scheduler's round trip); with PP = 1 the stream order does it.
  void build_inference_rank(Rank& R);

  // ---- whole workload ------------------------------------------------------------------------
  /// A class of ranks sharing one program (TrainConfig::share_programs).
  struct ProgramClass {
    std::uint32_t program = 0;
    std::vector<std::uint32_t> reused;  ///< the ranks that reuse the program (not its builder)
    GenStats delta;                     ///< what building one rank of the class added to stats_
    std::vector<double> phase_flops;    ///< ... and to infer_.phase_flops
    std::vector<std::uint32_t> phase_end_nodes;
  };
  /// models::Workload::source: every setting that changes the workload.
  std::string workload_source() const;
  /// Rank r's coordinates (t, d, p) in Megatron's order (rank_of).
  Rank rank_at(std::uint32_t r) const;
  /// Builds R's program: build_inference_rank or build_rank.
  void build_any(Rank& R);
  /// Shared programs: files rank R under its class (building the class's program if it is the
  /// first rank of it, else adding the class's contribution to the totals) and sets its slots.
  void build_shared(models::Workload& w, Rank& R, std::map<std::vector<std::int64_t>, ProgramClass>& classes);
  /// Builds two reusing ranks of every class again on their own and checks their programs equal
  /// the class's node for node (totals left as they were). @throws engine::InternalError if not.
  void check_shared(const models::Workload& w, const std::map<std::vector<std::int64_t>, ProgramClass>& classes);
  /// Every rank's DAG and the statistics.
  Generated run();

  /// The distinct kernels of rank 0 (plan_only builder).
  std::vector<KernelNeed> plan();

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
  std::uint32_t gb_ = 0, mbs_ = 0, vstages_ = 1;
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

}  // namespace fabricsim::jobs::gen
