#pragma once
/// @file efficiency_model.hpp
/// Shape-dependent efficiency model for matrix kernels (GEMMs and fused attention), used by
/// KernelDb::estimate when no measured row covers a query and the caller gave the kernel's shape.
/// It replaces the flat "70% of dense peak" of the analytic roofline for these kernels; it never
/// overrides a measured or interpolated row. Every constant is from a public measurement or is
/// marked as an assumption (kernels/data/SOURCES.md, docs/kernels.md "Efficiency model").
///
/// GEMM (C[m×n] += A[m×k]·B[k×n], `batch` independent problems):
///   t = max(F / (P · u), bytes / (eff_m · BW))
///  * P = the GPU's maximum achievable matmul FLOP/s for the dtype (MAMF: a brute-force search
///    over shapes, mean of 100 iterations after 50 warm-ups; S. Bekman, ml-engineering,
///    compute/accelerator/README.md "Maximum Achievable Matmul FLOPS comparison table") times
///    the sustained/burst ratio MSMF/MAMF of the architecture (a training GPU runs at its power
///    limit; same author, compute/accelerator/benchmarks/README.md), where one is published;
///    for A100 the ratio of the clock NVIDIA's HPL ratings assume at the power limit to the
///    boost clock, 1305 / 1410 MHz (efficiency_model.cpp).
///  * u = useful fraction of the SM-tile slots (tile and wave quantization, NVIDIA "Matrix
///    Multiplication Background User's Guide" Sec. 3): the output is cut into Tm×Tn tiles, one
///    tile per SM at a time; tiles = ⌈m/Tm⌉·⌈n/Tn⌉·batch, waves = ⌈tiles/SMs⌉,
///    u = m·n·batch / (waves · SMs · Tm · Tn). The library picks the tile that maximises
///    r·u over the candidates {Tm×Tn, Tn×Tm, 128×128} with r = 1 for the large tile and
///    r = 0.9 for 128×128 (assumption: a smaller tile re-reads its operands more often,
///    same guide Sec. 2.3; not measured). With fewer tiles than SMs the K dimension is split
///    (split-K) into up to ⌊SMs/tiles⌋ slices of at least 512 (assumption). Quantization
///    applies only to compute-bound GEMMs (F/bytes at or above the ridge point); a memory-bound
///    GEMM runs at P and the memory term decides.
///  * the memory term is the same as the roofline's (skinny GEMMs).
///
/// Fused attention (FlashAttention-style, one kernel each way, b·heads problems of s×s, head
/// dim d; the head dimension is not modelled, all figures are for d = 128): achieved FLOP/s =
/// A(s_eff), s_eff = s/2 when causal (a causal row sees s/2 keys on
/// average; assumption), from a measured throughput-vs-sequence table of the kernel class on the
/// GPU (log-linear interpolation, linear in s below the first point, flat above the last);
/// backward = forward rate × 63/73 (FlashAttention-2 paper: forward up to 73%, backward up to
/// 63% of A100 peak, Dao 2023, arXiv:2307.08691).
#include <cstdint>
#include <optional>
#include <string>

#include "kernels/gpu_specs.hpp"

namespace fabricsim::kernels {

/// Shape of one matrix-kernel call, for the efficiency model.
struct KernelShape {
  enum class Kind : std::uint8_t {
    kNone,       ///< unknown shape: the analytic roofline applies
    kGemm,       ///< (batched/grouped) GEMM: m, n, k, batch
    kAttention,  ///< fused attention: batch = b·heads, seq, head_dim, causal, backward
  };
  Kind kind = Kind::kNone;
  double m = 0, n = 0, k = 0;  ///< GEMM dimensions (elements)
  double batch = 1;            ///< independent problems (GEMM batch / groups; attention b·heads)
  double seq = 0;              ///< attention: sequence length (queries = keys)
  double head_dim = 0;         ///< attention: head dimension of Q/K
  bool causal = true;          ///< attention: causal mask
  bool backward = false;       ///< attention: backward kernel
  /// attention: FlashAttention-2 kernel class (Megatron/TE before Hopper-native kernels) instead
  /// of the GPU's native fused attention (FlashAttention-3 / cuDNN 9 on Hopper, FA2 on Ampere)
  bool flash2 = false;
  double heads = 0;     ///< attention: query heads on this GPU (0 = unknown: no table lookup)
  double kv_heads = 0;  ///< attention: KV heads on this GPU (0 = unknown)
  double window = 0;    ///< attention: sliding window (tokens), 0 = full

  static KernelShape gemm(double m, double n, double k, double batch = 1) {
    KernelShape s;
    s.kind = Kind::kGemm;
    s.m = m;
    s.n = n;
    s.k = k;
    s.batch = batch;
    return s;
  }
  static KernelShape attention(double batch_heads, double seq, double head_dim, bool causal, bool backward,
                               bool flash2 = false) {
    KernelShape s;
    s.kind = Kind::kAttention;
    s.batch = batch_heads;
    s.seq = seq;
    s.head_dim = head_dim;
    s.causal = causal;
    s.backward = backward;
    s.flash2 = flash2;
    return s;
  }
};

/// Per-GPU constants of the model (one row of the built-in table, see efficiency_model.cpp).
struct GpuEfficiency {
  std::string gpu;            ///< GpuSpec::name
  std::uint32_t sms = 0;      ///< streaming multiprocessors (compute units)
  double tile_m = 0, tile_n = 0;  ///< large GEMM tile (elements)
  double mamf_16bit = 0;      ///< achieved / dense peak for BF16/FP16 GEMMs (0 = not measured)
  double mamf_fp8 = 0;        ///< achieved / dense FP8 peak (0 = not measured)
  double sustained = 1;       ///< sustained (power-saturated) / burst matmul rate (MSMF / MAMF, or a clock ratio)
  double attn_plateau = 0;    ///< native fused attention forward: achieved / BF16 peak at the longest measured s (0 = none)
  double attn_fa2_plateau = 0;  ///< the same for the FlashAttention-2 kernel class
  std::string source;         ///< where the figures come from
};

/// The model's row for `gpu`, or nullptr when the GPU has no published measurements (then the
/// flat roofline applies).
const GpuEfficiency* find_efficiency(const GpuSpec& gpu);

/// Modelled time (µs) of one GEMM call, or nullopt when the model has no figures for this GPU
/// and dtype. @param flops executed FLOPs (2·m·n·k·batch), @param bytes HBM bytes,
/// @param mem_eff achieved / peak HBM bandwidth for the memory term.
std::optional<double> gemm_model_us(const GpuSpec& gpu, Dtype d, const KernelShape& s, double flops, double bytes,
                                    double mem_eff);

/// Modelled time (µs) of one fused-attention call (forward or backward per `s.backward`), or
/// nullopt when the model has no figures for the GPU or the dtype is not 16-bit.
/// @param flops executed FLOPs of the call (causal half already applied by the caller).
std::optional<double> attention_model_us(const GpuSpec& gpu, Dtype d, const KernelShape& s, double flops,
                                         double bytes, double mem_eff);

/// Useful fraction u of the SM-tile slots for a GEMM (see the file comment), in (0, 1].
/// @returns the best r·u over the tile candidates.
double gemm_tile_utilisation(const GpuEfficiency& e, const KernelShape& s);

/// Forward fused-attention rate (FLOP/s) on `gpu` at effective sequence length `s_eff` for
/// 16-bit inputs (see the file comment); `flash2` selects the FlashAttention-2 class. 0 when the
/// GPU has no attention figures.
double attention_forward_rate(const GpuSpec& gpu, double s_eff, bool flash2 = false);

}  // namespace fabricsim::kernels
