#include "kernels/efficiency_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>
#include <vector>

namespace fabricsim::kernels {

namespace {

// MAMF figures: S. Bekman, stas00/ml-engineering compute/accelerator/README.md, "Maximum
// Achievable Matmul FLOPS comparison table" (BF16 and FP8 `float8_e4m3fn` tables; efficiency =
// MAMF / dense peak). A100 SXM BF16 271.2 of 312 (torch 2.6.0+cu126); H100 SXM BF16 794.5 of 989
// ("H200 is the same"), FP8 1402.6 of 1979; H200 SXM FP8 1453.4 of 1979; B200 SXM BF16 1745 of
// 2250, FP8 3432.5 of 4500; GB200 BF16 1822 of 2500, FP8 3615.6 of 5000; MI300X BF16 668.4 of
// 1300 (PYTORCH_TUNABLEOP_ENABLED=1). FP16 uses the BF16 figure (same tensor-core rate).
// SM counts: NVIDIA A100 / H100 / Blackwell architecture whitepapers (108, 132, 148 SMs per GPU);
// MI300X: 304 CUs (AMD CDNA 3 whitepaper).
// Large tiles: 256x128 on A100 (NVIDIA Matrix Multiplication Background User's Guide Sec. 2.3,
// "Typical Tile Dimensions In cuBLAS": 256x128 is the most efficient), 128x256 per SM on Hopper
// and Blackwell (warp-group / 2-SM MMA kernels); the transposed orientation is always a candidate.
// Attention plateau (fused attention forward, BF16, head dim 128, longest measured sequence):
//   H100: 620.7 TFLOP/s = 0.627 of 989.4 (FlashAttention-3, pytorch/benchmark commit ff65cb67,
//         D60117034: B·S = 16k, 16 heads, d = 128; see kAttnTable);
//   A100: 0.73 (FlashAttention-2 paper abstract: forward "50-73% of the theoretical maximum
//         FLOPs/s on A100"), with the H100 table's shape over s (its 512..16k range spans
//         0.69..1.0 of the plateau, i.e. 50..73% on A100, consistent with the paper's range);
//   B200/GB200: assumption, the H100 fraction (no measurement at hand).
// FlashAttention-2 class plateau: A100 0.73 (above); Hopper 0.35 (FlashAttention-3 paper, Shah et
// al. 2024, arXiv:2407.08608, abstract: "FlashAttention-2 achieving only 35% utilization on the
// H100 GPU"); Blackwell: the Hopper fraction (assumption).
// Sustained / burst ratio (MSMF / MAMF): MAMF is a boost-clock burst; a training GPU runs
// power-saturated, and the "maximum sustainable matmul FLOPS" (MSMF: same search, measured after
// a thermal soak at the saturated clock) "matches real training throughput" (ml-engineering,
// compute/accelerator/benchmarks/README.md, "What we measured: alone vs all-8 concurrent", BF16,
// all 8 GPUs of the node computing, n = 40): H200 698.6 / 823.9, B200 1426.4 / 1751.2. Applied
// to BF16 and FP8 of the same architecture (assumption for FP8: no FP8 MSMF published).
// A100 has no MSMF figure; its sustained/burst ratio is the clock ratio instead: NVIDIA rates an
// A100's HPL peak at the clock the GPU sustains at its power limit while running HPL's
// tensor-core matmuls, 1305 MHz, against the 1410 MHz boost clock at which the burst MAMF runs
// (G. Lockwood, "Peak FLOPS", glennklockwood.com/garden/peak-FLOPS, section Rpeak). Tensor-core
// throughput is proportional to the SM clock (FLOP/clock fixed per SM), so 1305 / 1410. (The
// same reasoning on Hopper, ~1.7 of 1.98 GHz, is consistent with the measured 0.848.) MI300X: no
// figure, 1.0 (AMD reports no boost burst).
constexpr double kHopperSustained = 698.6 / 823.9;
constexpr double kBlackwellSustained = 1426.4 / 1751.2;
constexpr double kAmpereSustained = 1305.0 / 1410.0;

const std::array<GpuEfficiency, 8>& table() {
  static const std::array<GpuEfficiency, 8> t = {{
      {"A100", 108, 256, 128, 271.2 / 312.0, 0, kAmpereSustained, 0.73, 0.73,
       "MAMF A100 SXM BF16 271.2/312 (ml-engineering) x HPL sustained/boost clock 1305/1410 MHz (NVIDIA HPL Rpeak practice); FlashAttention-2 forward up to 73% of peak (arXiv:2307.08691)"},
      {"H100", 132, 128, 256, 794.5 / 989.0, 1402.6 / 1979.0, kHopperSustained, 620.73 / 989.4, 0.35,
       "MAMF H100 SXM BF16 794.5/989, FP8 1402.6/1979 x H200 MSMF/MAMF 698.6/823.9 (ml-engineering); FlashAttention-3 forward (pytorch/benchmark ff65cb67)"},
      {"H200", 132, 128, 256, 794.5 / 989.0, 1453.4 / 1979.0, kHopperSustained, 620.73 / 989.4, 0.35,
       "MAMF H200 SXM FP8 1453.4/1979, BF16 as H100, x MSMF/MAMF 698.6/823.9 (ml-engineering); attention as H100"},
      {"H800", 132, 128, 256, 794.5 / 989.0, 1402.6 / 1979.0, kHopperSustained, 620.73 / 989.4, 0.35,
       "H800 = H100 SXM compute die (NVLink differs): H100 figures"},
      {"B200", 148, 128, 256, 1745.0 / 2250.0, 3432.5 / 4500.0, kBlackwellSustained, 620.73 / 989.4, 0.35,
       "MAMF B200 SXM BF16 1745/2250, FP8 3432.5/4500 x B200 MSMF/MAMF 1426.4/1751.2 (ml-engineering); attention: H100 fraction (assumption)"},
      {"GB200", 148, 128, 256, 1822.0 / 2500.0, 3615.6 / 5000.0, kBlackwellSustained, 620.73 / 989.4, 0.35,
       "MAMF GB200 BF16 1822/2500, FP8 3615.6/5000 x B200 MSMF/MAMF (ml-engineering); attention: H100 fraction (assumption)"},
      {"GB300", 160, 128, 256, 1822.0 / 2500.0, 3615.6 / 5000.0, kBlackwellSustained, 620.73 / 989.4, 0.35,
       "160 SMs (NVIDIA technical blog 'Inside NVIDIA Blackwell Ultra', Hot Chips 2025); no GB300 MAMF published: the GB200 fractions (assumption, same Blackwell SM and tensor core)"},
      {"MI300X", 304, 256, 128, 668.4 / 1300.0, 0, 1.0, 0, 0,
       "MAMF MI300X BF16 668.4/1300, TunableOp (ml-engineering; AMD reports no boost burst: MAMF ~ sustained); no attention figures"},
  }};
  return t;
}

// FlashAttention-3 forward on H100 SXM5, BF16, head dim 128, 16 heads, batch·seq = 16k
// (pytorch/benchmark commit ff65cb675209d2308f7d27c6920af8a32de9aa90, "Fix dimension order for
// FlashAttention-3 (#2391)", test plan table, flash_v3 column; TFLOP/s).
constexpr std::array<std::pair<double, double>, 6> kAttnTable = {{
    {512, 430.32}, {1024, 517.099}, {2048, 565.544}, {4096, 590.233}, {8192, 614.234}, {16384, 620.73}}};

// FlashAttention-2 paper (Dao 2023, Sec. 4.1): backward up to 63%, forward up to 73% of A100 peak.
constexpr double kBwdOverFwd = 63.0 / 73.0;
// Relative throughput of the 128x128 fallback tile (assumption, see the header).
constexpr double kSmallTileRate = 0.9;
// Smallest K slice of a split-K GEMM (assumption: 4 k-iterations of a 128-deep main loop).
constexpr double kMinSplitK = 512;

double attn_shape(double s) {
  const auto& t = kAttnTable;
  const double top = t.back().second;
  if (s <= t.front().first) return t.front().second / top * std::max(s, 1.0) / t.front().first;
  if (s >= t.back().first) return 1.0;
  for (std::size_t i = 0; i + 1 < t.size(); ++i) {
    if (s <= t[i + 1].first) {
      const double u = (std::log(s) - std::log(t[i].first)) / (std::log(t[i + 1].first) - std::log(t[i].first));
      return (t[i].second + u * (t[i + 1].second - t[i].second)) / top;
    }
  }
  return 1.0;
}

}  // namespace

const GpuEfficiency* find_efficiency(const GpuSpec& gpu) {
  for (const auto& e : table()) {
    if (e.gpu == gpu.name) return e.sms > 0 ? &e : nullptr;
  }
  return nullptr;
}

double gemm_tile_utilisation(const GpuEfficiency& e, const KernelShape& s) {
  const double m = std::max(1.0, s.m), n = std::max(1.0, s.n), b = std::max(1.0, s.batch), k = std::max(1.0, s.k);
  const double sms = e.sms;
  auto util = [&](double tm, double tn) {
    const double tiles = std::ceil(m / tm) * std::ceil(n / tn) * b;
    // Split-K when the output has fewer tiles than SMs (cuBLAS/CUTLASS split-K and stream-K
    // kernels): each K slice of at least kMinSplitK elements becomes a tile of its own.
    const double split = tiles < sms ? std::max(1.0, std::min(std::floor(sms / tiles), std::floor(k / kMinSplitK))) : 1.0;
    const double waves = std::ceil(tiles * split / sms);
    return m * n * b * split / (waves * sms * tm * tn);
  };
  double best = std::max(util(e.tile_m, e.tile_n), util(e.tile_n, e.tile_m));
  best = std::max(best, kSmallTileRate * util(128, 128));
  return std::min(1.0, best);
}

std::optional<double> gemm_model_us(const GpuSpec& gpu, Dtype d, const KernelShape& s, double flops, double bytes,
                                    double mem_eff) {
  const GpuEfficiency* e = find_efficiency(gpu);
  if (e == nullptr || s.kind != KernelShape::Kind::kGemm) return std::nullopt;
  double frac = 0;
  if (d == Dtype::kBf16 || d == Dtype::kFp16) frac = e->mamf_16bit * e->sustained;
  if (d == Dtype::kFp8) frac = e->mamf_fp8 * e->sustained;
  if (!(frac > 0) || !(gpu.peak_flops(d) > 0)) return std::nullopt;
  // Tile/wave quantization applies to compute-bound GEMMs (intensity at or above the ridge
  // point); below it the library picks narrow or split-K kernels and the HBM term decides.
  const bool compute_bound = !(bytes > 0) || flops / bytes >= gpu.ridge_flops_per_byte(d);
  const double rate = frac * gpu.peak_flops(d) * (compute_bound ? gemm_tile_utilisation(*e, s) : 1.0);
  const double tc = flops > 0 ? flops / rate : 0.0;
  const double tm = bytes > 0 ? bytes / (mem_eff * gpu.hbm_bytes_per_s()) : 0.0;
  return std::max(tc, tm) * 1e6;
}

double attention_forward_rate(const GpuSpec& gpu, double s_eff, bool flash2) {
  const GpuEfficiency* e = find_efficiency(gpu);
  if (e == nullptr) return 0;
  const double plateau = flash2 ? e->attn_fa2_plateau : e->attn_plateau;
  if (!(plateau > 0)) return 0;
  return plateau * gpu.peak_flops(Dtype::kBf16) * attn_shape(s_eff);
}

std::optional<double> attention_model_us(const GpuSpec& gpu, Dtype d, const KernelShape& s, double flops,
                                         double bytes, double mem_eff) {
  if (s.kind != KernelShape::Kind::kAttention || (d != Dtype::kBf16 && d != Dtype::kFp16)) return std::nullopt;
  const double s_eff = s.causal ? s.seq / 2 : s.seq;
  double rate = attention_forward_rate(gpu, s_eff, s.flash2);
  if (!(rate > 0)) return std::nullopt;
  if (s.backward) rate *= kBwdOverFwd;
  const double tc = flops > 0 ? flops / rate : 0.0;
  const double tm = bytes > 0 ? bytes / (mem_eff * gpu.hbm_bytes_per_s()) : 0.0;
  return std::max(tc, tm) * 1e6;
}

}  // namespace fabricsim::kernels
