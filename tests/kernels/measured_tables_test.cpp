// Measured kernel tables (kernels/measured_tables.hpp): exact rows, interpolation between grid
// points, the off-grid rule, GPUs without tables and malformed files. Expected values come from
// the table rows themselves (kernels/data/measured, read through read_zstd_file/parse_gemm_table
// or quoted from kernels/data/measured/SOURCES.md and ../shared/inputs/kernels/SOURCES.md) and
// from the closed forms of the documented rules.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "engine/errors.hpp"
#include "jobs/generators.hpp"
#include "kernels/kernel_db.hpp"
#include "kernels/measured_tables.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/train_configs.hpp"

namespace fabricsim::kernels {
namespace {

using fabricsim::testing::source_dir;

std::string measured_dir() { return source_dir() + "/kernels/data/measured"; }

const MeasuredTables& tables() {
  static const MeasuredTables t(measured_dir());
  return t;
}

/// The H100 GEMM grids parsed straight from the shipped file.
const std::map<std::string, Grid3>& h100_gemm_grids() {
  static const std::map<std::string, Grid3> g = [] {
    std::map<std::string, Grid3> out;
    const std::string path = measured_dir() + "/h100_sxm/gemm.csv.zst";
    parse_gemm_table(read_zstd_file(path), path, out);
    return out;
  }();
  return g;
}

TEST(MeasuredTables, H100Bf16Gemm4096CubedIsTheMeasuredRow) {
  // SOURCES.md "Plausibility check": H100 SXM bf16 m=n=k=4096 latency 0.174285 ms.
  const auto t = tables().gemm(find_gpu("H100"), Dtype::kBf16, 4096, 4096, 4096);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->how, TableHow::kMeasured);
  EXPECT_NEAR(t->time_us, 174.285, 0.0005);
  // Exactly the row (ms -> µs), not a reconstruction through log/exp.
  const auto row = h100_gemm_grids().at("bfloat16").lookup({4096, 4096, 4096});
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(t->time_us, row->time_us);
  // 8192^3: 1.404784 ms (same table).
  const auto t8 = tables().gemm(find_gpu("H100-SXM5-80GB"), Dtype::kBf16, 8192, 8192, 8192);
  ASSERT_TRUE(t8.has_value());
  EXPECT_NEAR(t8->time_us, 1404.784, 0.0005);
}

TEST(MeasuredTables, EveryShippedSystemLoads) {
  // ../shared/inputs/kernels/SOURCES.md: 8192^3 bf16 reaches H100 782.7, H200 806, B200 1492,
  // GB200 1407, A100 263 TFLOP/s (2mnk / t); H100 fp8 1243.
  const struct {
    const char* gpu;
    Dtype d;
    double tflops;
  } cases[] = {{"H100", Dtype::kBf16, 782.7}, {"H200", Dtype::kBf16, 806}, {"B200", Dtype::kBf16, 1492},
               {"GB200", Dtype::kBf16, 1407},  {"A100", Dtype::kBf16, 263}, {"H100", Dtype::kFp8, 1243}};
  for (const auto& c : cases) {
    const auto t = tables().gemm(find_gpu(c.gpu), c.d, 8192, 8192, 8192);
    ASSERT_TRUE(t.has_value()) << c.gpu;
    EXPECT_EQ(t->how, TableHow::kMeasured) << c.gpu;
    EXPECT_NEAR(2.0 * 8192 * 8192 * 8192 / (t->time_us * 1e-6) / 1e12, c.tflops, 0.5) << c.gpu;
  }
}

TEST(MeasuredTables, BetweenGridPointsLiesBetweenNeighboursAndIsMonotone) {
  const Grid3& g = h100_gemm_grids().at("bfloat16");
  std::mt19937 rng(7);
  int cells = 0;
  for (int trial = 0; trial < 4000 && cells < 60; ++trial) {
    std::array<std::size_t, 3> lo{};
    for (int a = 0; a < 3; ++a) {
      std::uniform_int_distribution<std::size_t> d(0, g.axis(a).size() - 2);
      lo[static_cast<std::size_t>(a)] = d(rng);
    }
    // The 8 corners of the cell, straight from the table.
    std::array<double, 8> corner{};
    bool complete = true;
    for (int c = 0; c < 8 && complete; ++c) {
      const auto v = g.at(lo[0] + (c & 1), lo[1] + ((c >> 1) & 1), lo[2] + ((c >> 2) & 1));
      complete = v.has_value();
      if (v) corner[static_cast<std::size_t>(c)] = *v * 1e3;
    }
    if (!complete) continue;
    ++cells;
    std::uniform_real_distribution<double> u01(0.05, 0.95);
    std::array<double, 3> u{u01(rng), u01(rng), u01(rng)};
    auto at_u = [&](const std::array<double, 3>& uu) {
      std::array<double, 3> x{};
      for (std::size_t a = 0; a < 3; ++a) {
        const double l = g.axis(int(a))[lo[a]], h = g.axis(int(a))[lo[a] + 1];
        x[a] = std::exp(std::log(l) + uu[a] * (std::log(h) - std::log(l)));
      }
      const auto t = g.lookup(x);
      EXPECT_TRUE(t.has_value());
      return t ? t->time_us : 0.0;
    };
    const double mid = at_u(u);
    const double mn = *std::min_element(corner.begin(), corner.end());
    const double mx = *std::max_element(corner.begin(), corner.end());
    EXPECT_GE(mid, mn * (1 - 1e-12));
    EXPECT_LE(mid, mx * (1 + 1e-12));
    EXPECT_EQ(g.lookup({g.axis(0)[lo[0]] * 1.0001, g.axis(1)[lo[1]], g.axis(2)[lo[2]]})->how, TableHow::kInterpolated);
    // Along each axis, with the other two fixed inside the cell: monotone from one face to the other.
    for (std::size_t a = 0; a < 3; ++a) {
      auto uu = u;
      uu[a] = 0;
      const double f0 = at_u(uu);
      uu[a] = 1;
      const double f1 = at_u(uu);
      double prev = f0;
      for (int s = 1; s <= 8; ++s) {
        uu[a] = s / 9.0;
        const double f = at_u(uu);
        if (f1 >= f0) {
          EXPECT_GE(f, prev * (1 - 1e-12)) << "axis " << a;
        } else {
          EXPECT_LE(f, prev * (1 + 1e-12)) << "axis " << a;
        }
        prev = f;
      }
    }
    // On an edge of the cell (two axes on grid values): the closed form t_lo^(1-u)·t_hi^u.
    const double lm = g.axis(0)[lo[0]], hm = g.axis(0)[lo[0] + 1];
    const double xm = std::exp(std::log(lm) + u[0] * (std::log(hm) - std::log(lm)));
    const auto e = g.lookup({xm, g.axis(1)[lo[1]], g.axis(2)[lo[2]]});
    ASSERT_TRUE(e.has_value());
    EXPECT_NEAR(e->time_us, std::pow(corner[0], 1 - u[0]) * std::pow(corner[1], u[0]), 1e-9 * corner[0]);
  }
  EXPECT_GE(cells, 60);
}

TEST(MeasuredTables, OffGridFollowsTheEdgeRule) {
  const GpuSpec& h100 = find_gpu("H100");
  // Above the largest m (32768): t(65536) = t(32768)·65536/32768, t(32768,4096,4096) = 1.4271334 ms.
  const auto big = tables().gemm(h100, Dtype::kBf16, 65536, 4096, 4096);
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(big->how, TableHow::kExtrapolated);
  EXPECT_NEAR(big->time_us, 2 * 1427.1334012349446, 1e-6);
  // Beyond in m (3x the largest) and inside in n: linear in m from the edge row; n between grid
  // points is interpolated at the edge as anywhere else. 16384 is on the n grid, so the
  // extrapolated value is 3 x the row (m 32768, n 16384, k 4096).
  const auto edge = tables().gemm(h100, Dtype::kBf16, 32768, 16384, 4096);
  const auto both = tables().gemm(h100, Dtype::kBf16, 98304, 16384, 4096);
  ASSERT_TRUE(edge && both);
  EXPECT_EQ(edge->how, TableHow::kMeasured);
  EXPECT_NEAR(both->time_us, edge->time_us * 3, 1e-9 * both->time_us);
  // Below the smallest k (32): the k = 32 row unchanged (0.0157792 ms at m = n = 4096).
  const auto small = tables().gemm(h100, Dtype::kBf16, 4096, 4096, 16);
  ASSERT_TRUE(small.has_value());
  EXPECT_EQ(small->how, TableHow::kExtrapolated);
  EXPECT_NEAR(small->time_us, 15.779200196266174, 1e-9);
}

TEST(MeasuredTables, AttentionRowsAndHeadInterpolation) {
  const GpuSpec& h100 = find_gpu("H100");
  // Rows of h100_sxm/context_attention.csv.zst (bf16, head dim 128, full causal, batch 1):
  // 8 heads / 8 KV heads, isl 4096: 0.132224 ms; 4/4 heads: 0.0763200 ms.
  const auto t8 = tables().attention(h100, Dtype::kBf16, 1, 4096, 8, 8, 128, 0);
  ASSERT_TRUE(t8.has_value());
  EXPECT_EQ(t8->how, TableHow::kMeasured);
  EXPECT_NEAR(t8->time_us, 132.22400347391763, 1e-9);
  // 5/5 heads is not measured: between the 4- and 8-head rows in log space.
  const auto t5 = tables().attention(h100, Dtype::kBf16, 1, 4096, 5, 5, 128, 0);
  ASSERT_TRUE(t5.has_value());
  EXPECT_EQ(t5->how, TableHow::kInterpolated);
  const double u = std::log(5.0 / 4.0) / std::log(2.0);
  EXPECT_NEAR(t5->time_us, std::pow(76.32000247637431, 1 - u) * std::pow(132.22400347391763, u), 1e-9);
  // A GQA group the table lacks for this head dim, and an fp32 query: no answer.
  EXPECT_FALSE(tables().attention(h100, Dtype::kBf16, 1, 4096, 6, 4, 128, 0).has_value());
  EXPECT_FALSE(tables().attention(h100, Dtype::kFp32, 1, 4096, 8, 8, 128, 0).has_value());
  // Dimensions int cannot hold match no row (and are not converted: UBSan, docs/fuzzing.md).
  EXPECT_FALSE(tables().attention(h100, Dtype::kBf16, 1, 4096, 8, 8, 1e30, 0).has_value());
  EXPECT_FALSE(tables().attention(h100, Dtype::kBf16, 1, 4096, 8, 8, 128, 1e30).has_value());
  EXPECT_FALSE(tables().attention(h100, Dtype::kBf16, 1, 4096, 1e30, 1, 128, 0).has_value());
}

TEST(MeasuredTables, KernelDbUsesTablesFirstAndScalesAttentionBackward) {
  KernelDb db;
  db.use_tables(&tables());
  const GpuSpec& h100 = find_gpu("H100");
  const double f = 2.0 * 4096 * 4096 * 4096;
  const auto e = db.estimate(h100, "gemm", Dtype::kBf16, f, 3 * 4096.0 * 4096 * 2, Fallback::kRoofline, {},
                             KernelShape::gemm(4096, 4096, 4096));
  EXPECT_EQ(e.source, EstimateSource::kMeasured);
  EXPECT_NEAR(e.time_us, 174.285, 0.0005);
  // kernels: model skips the tables.
  const auto m = db.estimate(h100, "gemm", Dtype::kBf16, f, 3 * 4096.0 * 4096 * 2, Fallback::kRoofline, {},
                             KernelShape::gemm(4096, 4096, 4096), false);
  EXPECT_EQ(m.source, EstimateSource::kModel);
  // Attention backward: forward row × 2.5 · 73/63 (FlashAttention-2, arXiv:2307.08691).
  KernelShape a = KernelShape::attention(8, 4096, 128, true, true);
  a.heads = 8;
  a.kv_heads = 8;
  const auto b = db.estimate(h100, "flash_attn_bwd", Dtype::kBf16, 1e12, 1e8, Fallback::kRoofline, {}, a);
  EXPECT_EQ(b.source, EstimateSource::kMeasured);
  EXPECT_NEAR(b.time_us, 132.22400347391763 * 2.5 * 73 / 63, 1e-9);
  // A GPU without tables (H800) falls back to the model.
  const auto h800 = db.estimate(find_gpu("H800"), "gemm", Dtype::kBf16, f, 3 * 4096.0 * 4096 * 2,
                                Fallback::kRoofline, {}, KernelShape::gemm(4096, 4096, 4096));
  EXPECT_EQ(h800.source, EstimateSource::kModel);
  EXPECT_EQ(table_system(find_gpu("H800")), "");
  EXPECT_FALSE(tables().gemm(find_gpu("H800"), Dtype::kBf16, 4096, 4096, 4096).has_value());
}

TEST(MeasuredTables, RunSaysWhereComputeTimeCameFrom) {
  kernels::KernelDb db;
  db.use_tables(&tables());
  jobs::TrainConfig c = testing::train_config("gpt3-13b", "H100", 8, 2048);
  const auto g = jobs::generate_training(c, db);
  EXPECT_EQ(g.stats.kernel_table, "h100_sxm");
  const auto& s = g.stats.compute_ps_by_source;
  const double total = s[0] + s[1] + s[2] + s[3];
  EXPECT_GT(s[0] + s[1], 0.5 * total);  // GEMMs and attention dominate a dense layer
  EXPECT_GT(s[3], 0.0);                 // norms, activations, optimizer: modelled
  // Same job on a GPU without tables: every picosecond modelled, and no table named.
  c.gpu = "H800";
  const auto m = jobs::generate_training(c, db);
  EXPECT_EQ(m.stats.kernel_table, "");
  const auto& t = m.stats.compute_ps_by_source;
  EXPECT_GT(t[3], 0.0);
  EXPECT_EQ(t[0] + t[1] + t[2], 0.0);
  // fallback: none on that GPU: one line naming the key and the fix.
  c.fallback = Fallback::kNone;
  try {
    jobs::generate_training(c, db);
    ADD_FAILURE() << "no error";
  } catch (const engine::InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("workload.generator.fallback"), std::string::npos) << msg;
    EXPECT_NE(msg.find("roofline"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(MeasuredTables, BadFilesGiveOneClearError) {
  const auto dir = std::filesystem::temp_directory_path() / ("fabricsim_mt_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "h100_sxm");
  const auto path = (dir / "h100_sxm" / "gemm.csv.zst").string();
  std::ofstream(path) << "gemm_dtype,m,n,k,latency\nbfloat16,1,2,3,0.5\n";  // plain text, not zstd
  const MeasuredTables bad(dir.string());
  try {
    (void)bad.gemm(find_gpu("H100"), Dtype::kBf16, 1, 2, 3);
    ADD_FAILURE() << "no error";
  } catch (const engine::InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("zstd"), std::string::npos) << msg;
  }
  std::filesystem::remove_all(dir);
  std::map<std::string, Grid3> out;
  try {
    parse_gemm_table("gemm_dtype,m,n,k,latency\nbfloat16,1,2,3,0.5\nbfloat16,1,2,x,0.5\n", "t.csv.zst", out);
    ADD_FAILURE() << "no error";
  } catch (const engine::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("t.csv.zst: line 3 column k"), std::string::npos) << e.what();
  }
  try {
    parse_gemm_table("gemm_dtype,m,n,latency\n", "t.csv.zst", out);
    ADD_FAILURE() << "no error";
  } catch (const engine::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("missing column 'k'"), std::string::npos) << e.what();
  }
  try {
    parse_gemm_table("gemm_dtype,m,n,k,latency\nbfloat16,1,2,3,0\n", "t.csv.zst", out);
    ADD_FAILURE() << "no error";
  } catch (const engine::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("line 2 column latency"), std::string::npos) << e.what();
  }
  // Attention rows key grids by whole dimensions; one beyond int range (found by fuzz_kernels)
  // or with a fraction is refused naming its column.
  const std::string attn_header =
      "batch_size,isl,num_heads,num_key_value_heads,head_dim,window_size,attn_dtype,kv_cache_dtype,latency\n";
  std::map<AttentionKey, Grid3> attn;
  for (const char* row : {"1,1024,8,8,8.2e24,0,bfloat16,bfloat16,0.5\n", "1,1024,8,8,128.5,0,bfloat16,bfloat16,0.5\n"}) {
    try {
      parse_attention_table(attn_header + row, "a.csv.zst", attn);
      ADD_FAILURE() << "no error for " << row;
    } catch (const engine::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("a.csv.zst: line 2 column head_dim"), std::string::npos) << e.what();
    }
  }
  parse_attention_table(attn_header + "1,1024,8,2,128,0,bfloat16,bfloat16,0.5\n", "a.csv.zst", attn);
  EXPECT_EQ(attn.count(AttentionKey{128, 0, "bfloat16", "bfloat16", 4}), 1u);
}

}  // namespace
}  // namespace fabricsim::kernels
