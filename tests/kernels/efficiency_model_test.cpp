// Shape-dependent efficiency model (kernels/efficiency_model.hpp). Expected values are computed
// here by hand from the published figures the model cites (MAMF table of stas00/ml-engineering,
// the FlashAttention-3 forward table of pytorch/benchmark ff65cb67, the FlashAttention-2/-3 paper
// ratios) and the tile/wave arithmetic of NVIDIA's Matrix Multiplication Background guide, not
// taken from the code under test.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/errors.hpp"
#include "kernels/efficiency_model.hpp"
#include "kernels/kernel_db.hpp"

namespace fabricsim::kernels {
namespace {

const GpuSpec& h100() { return find_gpu("H100"); }

// Sustained / burst ratio of Hopper: H200 BF16 MSMF 698.6 / MAMF 823.9 (all 8 GPUs busy).
constexpr double kHopper = 698.6 / 823.9;

// A GEMM that fills one wave of 128x256 tiles exactly (12 x 11 = 132 tiles on 132 SMs) runs at
// the MAMF figure times the sustained ratio: H100 BF16 794.5 of 989 dense TFLOP/s.
TEST(EfficiencyModel, PerfectlyQuantisedGemmRunsAtTheMeasuredMaximum) {
  const double m = 12 * 128, n = 11 * 256, k = 8192;
  const double f = 2 * m * n * k, b = (m * k + k * n + m * n) * 2;
  const auto t = gemm_model_us(h100(), Dtype::kBf16, KernelShape::gemm(m, n, k), f, b, 0.8);
  ASSERT_TRUE(t.has_value());
  const double rate = 794.5 / 989.0 * kHopper * 989.4e12;
  EXPECT_NEAR(*t, f / rate * 1e6, 1e-9 * *t);
  // FP8 on the same shape: 1402.6 of 1979 dense FP8 TFLOP/s.
  const auto t8 = gemm_model_us(h100(), Dtype::kFp8, KernelShape::gemm(m, n, k), f, b / 2, 0.8);
  ASSERT_TRUE(t8.has_value());
  EXPECT_NEAR(*t8, f / (1402.6 / 1979.0 * kHopper * 1978.9e12) * 1e6, 1e-9 * *t8);
  // A100 (108 SMs, 256x128 tiles): 9 x 12 = 108 tiles, 271.2 of 312 TFLOP/s burst, at the
  // power-limited HPL clock: x 1305 / 1410 MHz = 251.0 TFLOP/s.
  const double ma = 9 * 256, na = 12 * 128;
  const auto ta = gemm_model_us(find_gpu("A100"), Dtype::kFp16, KernelShape::gemm(ma, na, k), 2 * ma * na * k, 1, 0.8);
  ASSERT_TRUE(ta.has_value());
  EXPECT_NEAR(*ta, 2 * ma * na * k / (271.2e12 * 1305.0 / 1410.0) * 1e6, 1e-9 * *ta);
}

// A100 wave quantization: one output tile more than SMs (109 tiles of 256x128 on 108 SMs) takes
// two waves. Candidates: 256x128 -> 1 x 109 tiles, 2 waves, u = 256*13952 / (2*108*256*128) =
// 109/216; 128x256 -> 2 x 55 = 110 tiles, 2 waves, same u; 128x128 -> 2 x 109 = 218 tiles, 3 waves,
// u = 256*13952 / (3*108*128*128) = 218/324, x 0.9 = 0.6056 (best). One tile fewer (108) is one
// full wave (u = 1). The time ratio follows: t(109 tiles) / t(108 tiles) = (109/108) / u.
TEST(EfficiencyModel, OneTileMoreThanSmsTakesTwoWavesOnA100) {
  const GpuEfficiency* e = find_efficiency(find_gpu("A100"));
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->sms, 108u);
  EXPECT_NEAR(gemm_tile_utilisation(*e, KernelShape::gemm(256, 108 * 128, 8192)), 1.0, 1e-12);
  const double u = gemm_tile_utilisation(*e, KernelShape::gemm(256, 109 * 128, 8192));
  EXPECT_NEAR(u, 0.9 * 218.0 / 324.0, 1e-12);
  EXPECT_GT(u, 109.0 / 216.0);  // the 128x128 fallback beats two half-empty waves of large tiles
  const auto time = [](double n) {
    const double m = 256, k = 8192;
    return *gemm_model_us(find_gpu("A100"), Dtype::kBf16, KernelShape::gemm(m, n, k), 2 * m * n * k,
                          (m * k + k * n + m * n) * 2, 0.8);
  };
  EXPECT_NEAR(time(109 * 128) / time(108 * 128), (109.0 / 108.0) / (0.9 * 218.0 / 324.0), 1e-9);
}

// One column more spills into a second wave. Candidates (guide Sec. 3): 128x256 -> 12 x 12 =
// 144 tiles, 2 waves, u = 1536*2817 / (2*132*128*256) = 0.50; 256x128 -> 6 x 23 = 138 tiles,
// 2 waves, u = 0.50; 128x128 -> 12 x 23 = 276 tiles, 3 waves, u = 1536*2817/(3*132*16384) =
// 0.667, times 0.9 = 0.600 (best).
TEST(EfficiencyModel, WaveQuantisationPicksTheBestTile) {
  const GpuEfficiency* e = find_efficiency(h100());
  ASSERT_NE(e, nullptr);
  const double m = 1536, n = 2817;
  const double want = 0.9 * (m * n) / (3.0 * 132 * 128 * 128);
  EXPECT_NEAR(gemm_tile_utilisation(*e, KernelShape::gemm(m, n, 4096)), want, 1e-12);
  EXPECT_NEAR(gemm_tile_utilisation(*e, KernelShape::gemm(1536, 2816, 4096)), 1.0, 1e-12);
  // Batched: 2 problems of one full wave each = 2 full waves.
  EXPECT_NEAR(gemm_tile_utilisation(*e, KernelShape::gemm(1536, 2816, 4096, 2)), 1.0, 1e-12);
  // A tiny GEMM (one 128x128 tile on 132 SMs, K = 512: no split-K): u = 0.9 / 132; with
  // K = 4096 it is split into 4096 / 512 = 8 slices: u = 0.9 * 8 / 132.
  EXPECT_NEAR(gemm_tile_utilisation(*e, KernelShape::gemm(128, 128, 512)), 0.9 / 132, 1e-12);
  EXPECT_NEAR(gemm_tile_utilisation(*e, KernelShape::gemm(128, 128, 4096)), 0.9 * 8 / 132, 1e-12);
}

// A skinny GEMM is bound by HBM: bytes / (eff_m * 3.35 TB/s).
TEST(EfficiencyModel, SkinnyGemmIsMemoryBound) {
  const double m = 8192, n = 16, k = 8192;
  const double f = 2 * m * n * k, b = (m * k + k * n + m * n) * 2;
  const auto t = gemm_model_us(h100(), Dtype::kBf16, KernelShape::gemm(m, n, k), f, b, 0.8);
  ASSERT_TRUE(t.has_value());
  EXPECT_NEAR(*t, b / (0.8 * 3.35e12) * 1e6, 1e-9 * *t);
}

// FlashAttention-3 forward, H100, d = 128: 620.73 TFLOP/s at s = 16384 (non-causal) and, with a
// causal mask, at s = 32768 (s_eff = s/2); 565.544 at s = 2048; halfway in log s between 2048
// and 4096 the rate is the mean of 565.544 and 590.233. Backward: x 63/73 (FlashAttention-2
// paper). FlashAttention-2 class on H100: 35% of 989.4 (FlashAttention-3 paper abstract).
TEST(EfficiencyModel, AttentionFollowsThePublishedForwardTable) {
  const double f = 1e12;
  auto t = [&](double s, bool causal, bool bwd, bool fa2 = false) {
    const auto r = attention_model_us(h100(), Dtype::kBf16, KernelShape::attention(16, s, 128, causal, bwd, fa2), f, 0, 0.8);
    EXPECT_TRUE(r.has_value());
    return r.value_or(0);
  };
  EXPECT_NEAR(t(16384, false, false), f / 620.73e12 * 1e6, 1e-6);
  EXPECT_NEAR(t(32768, true, false), f / 620.73e12 * 1e6, 1e-6);
  EXPECT_NEAR(t(2048, false, false), f / 565.544e12 * 1e6, 1e-6);
  EXPECT_NEAR(t(std::sqrt(2048.0 * 4096.0), false, false), f / (0.5 * (565.544 + 590.233) * 1e12) * 1e6, 1e-6);
  EXPECT_NEAR(t(16384, false, true), f / (620.73e12 * 63 / 73) * 1e6, 1e-6);
  EXPECT_NEAR(t(16384, false, false, true), f / (0.35 * 989.4e12) * 1e6, 1e-6);
  // Shorter sequences are slower per FLOP.
  EXPECT_GT(t(1024, true, false), t(8192, true, false));
  // FP8 attention and GPUs without figures are not modelled.
  EXPECT_FALSE(attention_model_us(h100(), Dtype::kFp8, KernelShape::attention(16, 4096, 128, true, false), f, 0, 0.8));
  EXPECT_FALSE(attention_model_us(find_gpu("H20"), Dtype::kBf16, KernelShape::attention(16, 4096, 128, true, false), f, 0, 0.8));
}

// In KernelDb::estimate the model is the fallback only: measured rows win, an unknown shape or
// a GPU without figures keeps the analytic roofline, and shape_model = false restores it.
TEST(EfficiencyModel, DatabaseRowsWinAndTheRooflineRemainsTheLastResort) {
  const double m = 1536, n = 2816, k = 8192, f = 2 * m * n * k, b = (m * k + k * n + m * n) * 2;
  const KernelShape s = KernelShape::gemm(m, n, k);
  KernelDb db;
  auto e = db.estimate(h100(), "gemm", Dtype::kBf16, f, b, Fallback::kRoofline, {}, s);
  EXPECT_EQ(e.how, "efficiency model");
  EXPECT_NEAR(e.time_us, f / (794.5 / 989.0 * kHopper * 989.4e12) * 1e6, 1e-9 * e.time_us);
  RooflineEfficiency flat;
  flat.shape_model = false;
  e = db.estimate(h100(), "gemm", Dtype::kBf16, f, b, Fallback::kRoofline, flat, s);
  EXPECT_EQ(e.how, "roofline model");
  EXPECT_NEAR(e.time_us, f / (0.7 * 989.4e12) * 1e6, 1e-9 * e.time_us);
  e = db.estimate(h100(), "gemm", Dtype::kBf16, f, b, Fallback::kRoofline);
  EXPECT_EQ(e.how, "roofline model");
  e = db.estimate(find_gpu("H20"), "gemm", Dtype::kBf16, f, b, Fallback::kRoofline, {}, s);
  EXPECT_EQ(e.how, "roofline model");
  EXPECT_THROW(db.estimate(h100(), "gemm", Dtype::kBf16, f, b, Fallback::kNone, {}, s), engine::InputError);
  db.add({"H100", "gemm", Dtype::kBf16, "measured", f, b, 123.0, "test", "synthetic"});
  e = db.estimate(h100(), "gemm", Dtype::kBf16, f, b, Fallback::kRoofline, {}, s);
  EXPECT_EQ(e.how, "measured");
  EXPECT_DOUBLE_EQ(e.time_us, 123.0);
}

}  // namespace
}  // namespace fabricsim::kernels
