// Kernel database: loading, lookup, interpolation, roofline scaling, errors. Expected values are
// derived independently (datasheet ratios from ../shared/reference/gpu-specs.csv, published
// times from ../shared/reference/kernel-times.csv) rather than from the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "engine/errors.hpp"
#include "kernels/kernel_db.hpp"
#include "tests/support/paths.hpp"

namespace fabricsim::kernels {
namespace {

using fabricsim::testing::source_dir;

KernelDb shipped() { return KernelDb::load(source_dir() + "/kernels/data/kernels.csv"); }

// Files written by write_tmp, removed when the test program ends (they were left in /tmp).
struct TmpFiles {
  std::vector<std::filesystem::path> paths;
  ~TmpFiles() {
    std::error_code ec;
    for (const auto& p : paths) std::filesystem::remove(p, ec);
  }
};
TmpFiles g_tmp_files;

std::string write_tmp(const std::string& name, const std::string& text) {
  const auto p = std::filesystem::temp_directory_path() / ("fabricsim_kdb_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  g_tmp_files.paths.push_back(p);
  return p.string();
}

TEST(GpuSpecs, DatasheetFigures) {
  // gpu-specs.csv: A100 312 dense BF16 TFLOP/s, 2.039 TB/s; H100 SXM 989.4, 3.35 TB/s.
  const auto& a = find_gpu("A100");
  const auto& h = find_gpu("h100-sxm5-80gb");
  EXPECT_DOUBLE_EQ(a.peak_flops(Dtype::kBf16), 312e12);
  EXPECT_DOUBLE_EQ(a.hbm_bytes_per_s(), 2.039e12);
  EXPECT_DOUBLE_EQ(h.peak_flops(Dtype::kBf16), 989.4e12);
  EXPECT_DOUBLE_EQ(h.peak_flops(Dtype::kFp8), 1978.9e12);
  EXPECT_EQ(find_gpu("GB200").scaleup_domain, 72u);
  EXPECT_THROW(a.peak_flops(Dtype::kFp8), engine::InputError);  // no FP8 on Ampere
  EXPECT_THROW(find_gpu("V100"), engine::InputError);
  for (const char* g : {"A100", "H100", "H200", "H800", "H20", "B200", "GB200", "MI300X"}) {
    EXPECT_FALSE(find_gpu(g).source.empty()) << g;
  }
}

// Issue 5 "must show" 1: on a GPU with twice the A100's memory bandwidth, the SimAI (NSDI'25)
// A100 LayerNorm of 715 us and Embedding of 3,425 us halve (memory-bound: t' = t·B/B').
TEST(Roofline, TwiceTheBandwidthHalvesMemoryBoundSimaiKernels) {
  const KernelDb db = shipped();
  const GpuSpec& a100 = find_gpu("A100");
  const auto ln = db.estimate(a100, "layernorm", Dtype::kBf16, 0, 0, Fallback::kNone);
  const auto emb = db.estimate(a100, "embedding", Dtype::kBf16, 0, 0, Fallback::kNone);
  EXPECT_DOUBLE_EQ(ln.time_us, 715.0);
  EXPECT_DOUBLE_EQ(emb.time_us, 3425.0);
  EXPECT_EQ(ln.cls, KernelClass::kMemory);
  GpuSpec fast = a100;
  fast.name = "A100x2bw";
  fast.hbm_tbps = 2 * a100.hbm_tbps;
  EXPECT_NEAR(roofline_scale_us(ln.time_us, ln.cls, a100, fast, Dtype::kBf16), 357.5, 1e-9);
  EXPECT_NEAR(roofline_scale_us(emb.time_us, emb.cls, a100, fast, Dtype::kBf16), 1712.5, 1e-9);
  // Twice the FLOP/s alone does not help a memory-bound kernel.
  GpuSpec more_flops = a100;
  more_flops.bf16_tflops *= 2;
  EXPECT_DOUBLE_EQ(roofline_scale_us(715, KernelClass::kMemory, a100, more_flops, Dtype::kBf16), 715);
}

TEST(Roofline, ComputeBoundGemmScalesByFlopRatioA100ToH100) {
  const GpuSpec& a = find_gpu("A100");
  const GpuSpec& h = find_gpu("H100");
  const double m = 8192, n = 8192, k = 8192;
  const double f = 2 * m * n * k, b = (m * k + k * n + m * n) * 2;
  ASSERT_EQ(classify("gemm", f, b, a, Dtype::kBf16), KernelClass::kCompute);
  const double t = roofline_scale_us(1000, KernelClass::kCompute, a, h, Dtype::kBf16);
  EXPECT_NEAR(t, 1000 * 312 / 989.4, 1e-9);  // gpu-specs.csv dense BF16
  EXPECT_LT(t, 1000);                        // a faster GPU takes less time
  const double tm = roofline_scale_us(1000, KernelClass::kMemory, a, h, Dtype::kBf16);
  EXPECT_NEAR(tm, 1000 * 2.039 / 3.35, 1e-9);
  EXPECT_LT(tm, 1000);
  // The reverse direction is slower by the same ratio.
  EXPECT_NEAR(roofline_scale_us(t, KernelClass::kCompute, h, a, Dtype::kBf16), 1000, 1e-9);
}

TEST(Roofline, ClassFlipsAtTheRidgePoint) {
  const GpuSpec& a = find_gpu("A100");
  const double ridge = 312e12 / 2.039e12;  // ~153 FLOP/byte
  EXPECT_NEAR(a.ridge_flops_per_byte(Dtype::kBf16), ridge, 1e-9);
  const double bytes = 1e6;
  EXPECT_EQ(classify("x", ridge * bytes * 0.999, bytes, a, Dtype::kBf16), KernelClass::kMemory);
  EXPECT_EQ(classify("x", ridge * bytes * 1.001, bytes, a, Dtype::kBf16), KernelClass::kCompute);
  // H20 has a low ridge (148 TF / 4 TB/s = 37): the same kernel at intensity 100 is
  // memory-bound on A100 but compute-bound on H20.
  const GpuSpec& h20 = find_gpu("H20");
  EXPECT_EQ(classify("x", 100 * bytes, bytes, a, Dtype::kBf16), KernelClass::kMemory);
  EXPECT_EQ(classify("x", 100 * bytes, bytes, h20, Dtype::kBf16), KernelClass::kCompute);
  // Unknown work: the op's default class.
  EXPECT_EQ(classify("gemm", 0, 0, a, Dtype::kBf16), KernelClass::kCompute);
  EXPECT_EQ(classify("rmsnorm", 0, 0, a, Dtype::kBf16), KernelClass::kMemory);
  // Only recognized kinds may rest on the name (`kernels scale --op foo` is refused).
  for (const char* k : {"gemm", "flash_attn_fwd", "layernorm", "rmsnorm", "gelu", "embedding", "adam", "rope",
                        "moe_permute", "residual_add", "softmax"}) {
    EXPECT_TRUE(known_kind(k)) << k;
  }
  EXPECT_FALSE(known_kind("foo"));
  EXPECT_FALSE(known_kind("x"));
}

TEST(KernelDb, InterpolatesAchievedRateInLogWork) {
  KernelDb db;
  const double f1 = 1e9, f2 = 1e11, b = 1e6;  // intensity >> ridge: compute-bound
  db.add({"H100", "gemm", Dtype::kBf16, "a", f1, b, 10.0, "test", "synthetic"});    // 100 TFLOP/s
  db.add({"H100", "gemm", Dtype::kBf16, "b", f2, b * 10, 200.0, "test", "synthetic"});  // 500 TFLOP/s
  const GpuSpec& h = find_gpu("H100");
  auto e = db.estimate(h, "gemm", Dtype::kBf16, f1, b, Fallback::kNone);
  EXPECT_EQ(e.how, "measured");
  EXPECT_DOUBLE_EQ(e.time_us, 10.0);
  // Geometric midpoint: rate is the arithmetic mean (300 TFLOP/s) -> t = 1e10 / 3e14 s.
  e = db.estimate(h, "gemm", Dtype::kBf16, 1e10, b, Fallback::kNone);
  EXPECT_EQ(e.how, "interpolated");
  EXPECT_NEAR(e.time_us, 1e10 / 3e14 * 1e6, 1e-9);
  EXPECT_GT(e.time_us, 10.0);
  EXPECT_LT(e.time_us, 200.0);
  // Outside the measured range: error without a model, nearest rate with one.
  EXPECT_THROW(db.estimate(h, "gemm", Dtype::kBf16, 1e12, b, Fallback::kNone), engine::InputError);
  e = db.estimate(h, "gemm", Dtype::kBf16, 1e12, b, Fallback::kRoofline);
  EXPECT_EQ(e.how, "extrapolated");
  EXPECT_NEAR(e.time_us, 1e12 / 5e14 * 1e6, 1e-9);
  // No rows at all for an op: error without a model; analytic roofline with one.
  EXPECT_THROW(db.estimate(h, "rmsnorm", Dtype::kBf16, 1e6, 1e8, Fallback::kNone), engine::InputError);
  e = db.estimate(h, "rmsnorm", Dtype::kBf16, 1e6, 1e8, Fallback::kRoofline, RooflineEfficiency{0.5, 0.5, 0});
  EXPECT_EQ(e.how, "roofline model");
  EXPECT_NEAR(e.time_us, 1e8 / (0.5 * 3.35e12) * 1e6, 1e-9);
}

TEST(KernelDb, OtherGpuRowsAreRooflineScaled) {
  KernelDb db;
  const double f = 2.0 * 4096 * 4096 * 4096, b = 3.0 * 4096 * 4096 * 2;
  db.add({"A100", "gemm", Dtype::kBf16, "4096^3", f, b, 500.0, "test", "synthetic"});
  const auto e = db.estimate(find_gpu("H100"), "gemm", Dtype::kBf16, f, b, Fallback::kNone);
  EXPECT_EQ(e.how, "scaled from A100");
  EXPECT_NEAR(e.time_us, 500.0 * 312 / 989.4, 1e-9);
}

TEST(KernelDb, LoaderReportsBadRowsWithLineAndColumn) {
  const std::string hdr = "gpu,op,dtype,shape,flops,bytes,time_us,source,quality\n";
  auto msg = [&](const std::string& body) {
    try {
      KernelDb::load(write_tmp("bad.csv", body));
    } catch (const engine::InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(msg(hdr + "V100,gemm,bf16,x,1,1,1,src,q\n").find("line 2 column gpu"), std::string::npos);
  EXPECT_NE(msg(hdr + "H100,gemm,bf16,x,1,1,abc,src,q\n").find("column time_us"), std::string::npos);
  EXPECT_NE(msg(hdr + "H100,gemm,bf16,x,1,1,0,src,q\n").find("must be > 0"), std::string::npos);
  EXPECT_NE(msg(hdr + "H100,gemm,int4,x,1,1,1,src,q\n").find("column dtype"), std::string::npos);
  EXPECT_NE(msg(hdr + "H100,gemm,bf16,x,1,1,1,,q\n").find("provenance"), std::string::npos);
  EXPECT_NE(msg("gpu,op,time_us\n").find("missing column"), std::string::npos);
  // Quoted fields with commas load.
  const auto db = KernelDb::load(write_tmp("ok.csv", hdr + "# c\nH100,gemm,bf16,\"m=1, n=2\",4,2,1.5,\"a, b\",measured\n"));
  ASSERT_EQ(db.rows().size(), 1u);
  EXPECT_EQ(db.rows()[0].shape, "m=1, n=2");
  EXPECT_EQ(db.rows()[0].source, "a, b");
}

TEST(KernelDb, ShippedDatabaseLoadsWithProvenance) {
  const KernelDb db = shipped();
  EXPECT_GE(db.rows().size(), 30u);
  for (const auto& r : db.rows()) {
    EXPECT_FALSE(r.source.empty());
    EXPECT_GT(r.time_us, 0);
  }
}

}  // namespace
}  // namespace fabricsim::kernels
