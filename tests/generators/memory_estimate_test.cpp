// Memory per GPU of a generated job (jobs/memory_estimate.hpp): model states against the ZeRO
// paper's published figure, activations against Korthikanti et al.'s closed forms, the pipeline
// schedules' micro-batches in flight, and the warning for a job that cannot fit.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "jobs/generators.hpp"
#include "jobs/memory_estimate.hpp"
#include "jobs/spec.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/train_configs.hpp"

namespace fabricsim::jobs {
namespace {

// ZeRO (Rajbhandari et al. SC'20) Fig. 1: a 7.5B-parameter model, 64-way data parallelism,
// mixed-precision Adam (K = 12): 120 GB baseline, 31.4 GB with P_os, 16.6 GB with P_os+g,
// 1.88 GB with P_os+g+p per device.
TEST(MemoryEstimate, ModelStatesMatchTheZeroPaperFigure1) {
  const double psi = 7.5e9;
  const double gb[4] = {120.0, 31.4, 16.6, 1.88};
  for (std::uint32_t z = 0; z < 4; ++z) {
    const double got = state_bytes_per_param(2, 2, z, 64, false).total() * psi / 1e9;
    EXPECT_NEAR(got, gb[z], 0.01 * gb[z]) << "ZeRO stage " << z;
  }
  // Exact forms: 16Ψ, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N.
  EXPECT_DOUBLE_EQ(state_bytes_per_param(2, 2, 0, 64, false).total(), 16.0);
  EXPECT_DOUBLE_EQ(state_bytes_per_param(2, 2, 1, 64, false).total(), 4.0 + 12.0 / 64);
  EXPECT_DOUBLE_EQ(state_bytes_per_param(2, 2, 2, 64, false).total(), 2.0 + 14.0 / 64);
  EXPECT_DOUBLE_EQ(state_bytes_per_param(2, 2, 3, 64, false).total(), 16.0 / 64);
  // fp32 weights carry no master copy: K = 8 (momentum + variance).
  EXPECT_DOUBLE_EQ(state_bytes_per_param(4, 4, 0, 1, false).total(), 16.0);
  // FP8 primary weights: 1 byte.
  EXPECT_DOUBLE_EQ(state_bytes_per_param(2, 2, 1, 8, true).weights, 1.0);
}

TrainConfig gpt(std::uint32_t tp, bool sp, Recompute rc, bool flash) {
  TrainConfig c = testing::train_config("gpt3-175b", "A100", tp, 2048);
  c.sequence_parallel = sp;
  c.recompute = rc;
  c.flash_attention = flash;
  c.attention_dropout = 0.1;
  c.micro_batch = 1;
  return c;
}

// Korthikanti et al. (MLSys'23) Table 2, bytes of activations per layer (GPT: MHA, 4h GELU MLP,
// dropout, unfused attention, 16-bit): sbh(34 + 5as/h) with no parallelism; TP t:
// sbh(10 + 24/t + 5as/(ht)); TP + SP: sbh(34/t + 5as/(ht)); TP + selective recompute:
// sbh(10 + 24/t); TP + SP + selective: sbh(34/t); full recompute: 2sbh.
TEST(MemoryEstimate, ActivationsMatchKorthikantiTable2) {
  const TrainConfig base = gpt(1, false, Recompute::kNone, false);
  const double s = 2048, b = 1, h = double(base.model.hidden), a = base.model.heads;
  ASSERT_EQ(base.model.ffn_hidden, 4 * base.model.hidden);
  ASSERT_EQ(base.model.heads * base.model.head_dim, base.model.hidden);
  const double sbh = s * b * h;
  const double t = 8;
  auto near = [](double got, double want) { EXPECT_NEAR(got / want, 1.0, 1e-12) << got << " vs " << want; };
  near(activation_bytes_per_layer(gpt(1, false, Recompute::kNone, false), false), sbh * (34 + 5 * a * s / h));
  near(activation_bytes_per_layer(gpt(8, false, Recompute::kNone, false), false),
       sbh * (10 + 24 / t + 5 * a * s / (h * t)));
  near(activation_bytes_per_layer(gpt(8, true, Recompute::kNone, false), false), sbh * (34 / t + 5 * a * s / (h * t)));
  near(activation_bytes_per_layer(gpt(8, false, Recompute::kSelective, false), false), sbh * (10 + 24 / t));
  near(activation_bytes_per_layer(gpt(8, true, Recompute::kSelective, false), false), sbh * 34 / t);
  near(activation_bytes_per_layer(gpt(8, false, Recompute::kFull, false), false), 2 * sbh);
  // FlashAttention keeps no s^2 term, only a fp32 log-sum-exp per query row and head.
  near(activation_bytes_per_layer(gpt(8, true, Recompute::kNone, true), false), sbh * 34 / t + 4 * s * b * a / t);
}

// 1F1B keeps PP - p micro-batches' activations on pipeline rank p (capped at m); the
// interleaved schedule keeps (1 + (PP-1)/(PP·VP)) times that on rank 0 (Korthikanti Sec. 4.2.3).
TEST(MemoryEstimate, PipelineRanksHoldTheScheduleMicroBatchesInFlight) {
  TrainConfig c = gpt(8, true, Recompute::kSelective, false);
  c.pp = 8;
  c.dp = 2;
  c.global_batch = 64;  // m = 32 micro-batches
  const MemoryEstimate one = estimate_memory(c);
  ASSERT_EQ(one.stages.size(), 8u);
  const double per_layer = activation_bytes_per_layer(c, false);
  const double layers = 96.0 / 8;
  for (std::uint32_t p = 0; p + 1 < 8; ++p) {
    EXPECT_DOUBLE_EQ(one.stages[p].inflight, 8.0 - p);
    EXPECT_NEAR(one.stages[p].activation_bytes / (per_layer * layers * (8.0 - p)), 1.0, 1e-12);
  }
  // The last stage holds one micro-batch plus the fp32 logits 4sbV/t.
  EXPECT_NEAR(one.stages[7].activation_bytes, per_layer * layers + 4.0 * 2048 * double(c.model.vocab) / 8, 1.0);
  EXPECT_EQ(one.peak_stage, 0u);
  c.vp = 4;
  const MemoryEstimate inter = estimate_memory(c);
  EXPECT_NEAR(inter.stages[0].activation_bytes / one.stages[0].activation_bytes, 1.0 + 7.0 / (8.0 * 4), 1e-12);
  // Fewer micro-batches than stages: rank 0 keeps them all, no more.
  c.vp = 1;
  c.global_batch = 2 * 3;
  EXPECT_DOUBLE_EQ(estimate_memory(c).stages[0].inflight, 3.0);
}

// Context parallelism: a rank keeps s/CP tokens' activations, model states shard over DP·CP.
TEST(MemoryEstimate, ContextParallelismDividesActivationsAndShardsStatesOverDpCp) {
  TrainConfig c = gpt(8, true, Recompute::kSelective, true);
  c.pp = 2;
  c.dp = 2;
  c.zero = 1;
  c.global_batch = 8;
  TrainConfig p = c;
  p.cp = 4;
  EXPECT_NEAR(activation_bytes_per_layer(p, false) / activation_bytes_per_layer(c, false), 0.25, 1e-12);
  const StageMemory a = estimate_memory(c).stages[0], b = estimate_memory(p).stages[0];
  EXPECT_NEAR(b.optimizer_bytes / a.optimizer_bytes, 0.25, 1e-12);  // K/d with d = DP·CP
  EXPECT_DOUBLE_EQ(b.weights_bytes, a.weights_bytes);
}

// Parameters held over the pipeline ranks add up to the model (TP 1, untied output layer).
TEST(MemoryEstimate, HeldParametersAddUpToTheModel) {
  TrainConfig c;
  c.model = find_model("llama3-8b", "<test>", "model");
  c.pp = 4;
  c.dp = 2;
  c.global_batch = 8;
  const MemoryEstimate m = estimate_memory(c);
  double held = 0;
  for (const auto& s : m.stages) held += s.params;
  EXPECT_NEAR(held / c.model.total_params(), 1.0, 1e-12);
}

// Configurations that trained (published) fit; one that cannot (GPT-3 175B on 8 GPUs, TP 8)
// gets one warning line naming the breakdown and the fixes.
TEST(MemoryEstimate, PublishedConfigsFitAndAnImpossibleOneIsFlagged) {
  TrainConfig c = gpt(8, true, Recompute::kSelective, false);
  c.gpu = "A100";
  c.pp = 8;
  c.dp = 16;
  c.global_batch = 1536;  // Korthikanti et al. Table 3's 175B row: TP 8, PP 8, selective
  EXPECT_FALSE(estimate_memory(c).exceeds());
  EXPECT_TRUE(memory_warning(c, estimate_memory(c)).empty());
  TrainConfig l = c;  // Llama 3 70B, Megatron-Bridge H100 FP8: TP 4, PP 8, VP 5, seq 8192
  l.model = find_model("llama3-70b", "<test>", "model");
  l.gpu = "H100";
  l.dtype = kernels::Dtype::kFp8;
  l.flash_attention = true;
  l.recompute = Recompute::kNone;
  l.tp = 4;
  l.vp = 5;
  l.dp = 2;
  l.zero = 1;
  l.seq_len = 8192;
  l.global_batch = 128;
  EXPECT_FALSE(estimate_memory(l).exceeds()) << estimate_memory(l).peak().total_bytes();
  c.pp = 1;
  c.dp = 1;
  c.global_batch = 4;
  c.file = "job.yaml";
  const MemoryEstimate m = estimate_memory(c);
  ASSERT_TRUE(m.exceeds());
  // 175B / 8 parameters x 16 bytes (ZeRO 0) alone are ~350 GB.
  EXPECT_GT(m.peak().weights_bytes + m.peak().grads_bytes + m.peak().optimizer_bytes, 3.4e11);
  const std::string w = memory_warning(c, m);
  EXPECT_NE(w.find("job.yaml: workload.generator:"), std::string::npos) << w;
  EXPECT_NE(w.find("run out of memory"), std::string::npos) << w;
  EXPECT_EQ(w.find('\n'), std::string::npos);
}

// The warning's advice names only the fixes not in effect yet that would lower the estimate
// ("zero: 1-3" was advised to a job with zero: 1). GPT-3 175B, TP 8, DP 2 on A100: the model
// states alone are 21.9e9 parameters x 16/2 B = 175 GB even with ZeRO-3, so every variant
// below still exceeds the 80 GB.
TEST(MemoryEstimate, WarningAdvisesOnlyFixesNotInEffect) {
  auto warning = [](std::uint32_t zero, Recompute rc, bool flash, std::uint32_t dp) {
    TrainConfig c = gpt(8, true, rc, flash);
    c.dp = dp;
    c.global_batch = dp;
    c.zero = zero;
    c.file = "job.yaml";
    const MemoryEstimate m = estimate_memory(c);
    EXPECT_TRUE(m.exceeds()) << "zero " << zero;
    const std::string w = memory_warning(c, m);
    EXPECT_NE(w.find("raise tp/pp"), std::string::npos) << w;
    EXPECT_EQ(w.find('\n'), std::string::npos) << w;
    return w;
  };
  auto has = [](const std::string& w, const char* what) { return w.find(what) != std::string::npos; };
  // ZeRO: the stages above the configured one; none at 3.
  const std::string z0 = warning(0, Recompute::kNone, false, 2);
  EXPECT_TRUE(has(z0, "or zero: 1-3")) << z0;
  const std::string z1 = warning(1, Recompute::kNone, false, 2);
  EXPECT_FALSE(has(z1, "zero: 1-3")) << z1;
  EXPECT_TRUE(has(z1, "or zero: 2-3")) << z1;
  const std::string z2 = warning(2, Recompute::kNone, false, 2);
  EXPECT_FALSE(has(z2, "zero: 2-3")) << z2;
  EXPECT_TRUE(has(z2, "or zero: 3 (")) << z2;
  const std::string z3 = warning(3, Recompute::kNone, false, 2);
  EXPECT_FALSE(has(z3, "zero")) << z3;
  // One DP rank: ZeRO shards nothing (the states per parameter are the same at every stage).
  EXPECT_DOUBLE_EQ(state_bytes_per_param(2, 2, 0, 1, false).total(), state_bytes_per_param(2, 2, 3, 1, false).total());
  const std::string d1 = warning(0, Recompute::kNone, false, 1);
  EXPECT_FALSE(has(d1, "zero")) << d1;
  // Recomputation: selective or full from none (unfused attention), full from selective, nothing
  // once full.
  EXPECT_TRUE(has(z0, "use recompute: selective or full")) << z0;
  const std::string sel = warning(0, Recompute::kSelective, false, 2);
  EXPECT_TRUE(has(sel, "use recompute: full,")) << sel;
  EXPECT_FALSE(has(sel, "selective")) << sel;
  const std::string full = warning(0, Recompute::kFull, false, 2);
  EXPECT_FALSE(has(full, "recompute")) << full;
  EXPECT_TRUE(has(full, "raise tp/pp, or zero: 1-3 (")) << full;
  // Fused attention keeps no s^2 term, so selective recomputation drops nothing there.
  EXPECT_DOUBLE_EQ(activation_bytes_per_layer(gpt(8, true, Recompute::kNone, true), false),
                   activation_bytes_per_layer(gpt(8, true, Recompute::kSelective, true), false));
  const std::string flash = warning(1, Recompute::kNone, true, 2);
  EXPECT_TRUE(has(flash, "use recompute: full,")) << flash;
  EXPECT_FALSE(has(flash, "selective")) << flash;
  // All set: only more TP/PP is left.
  const std::string all = warning(3, Recompute::kFull, false, 2);
  EXPECT_TRUE(has(all, "out of memory; raise tp/pp (docs/generators.md")) << all;
}

}  // namespace
}  // namespace fabricsim::jobs

namespace fabricsim::jobs {
namespace {

// A generated job's cluster gets its GPU's NVLink rate per direction (half the datasheet's
// bidirectional figure: A100 600 GB/s, B200 1.8 TB/s) unless cluster.nvlink_bandwidth is given.
TEST(GeneratorCluster, NvlinkRateFollowsTheGeneratorsGpu) {
  auto nvl = [](std::vector<std::string> sets) { return load_spec("", sets).cluster.nvlink_bps; };
  EXPECT_EQ(nvl({"workload.generator.model=gpt3-13b", "workload.generator.gpu=A100"}), 2400'000'000'000ull);
  EXPECT_EQ(nvl({"workload.generator.model=gpt3-13b", "workload.generator.gpu=B200"}), 7200'000'000'000ull);
  EXPECT_EQ(nvl({"workload.generator.model=gpt3-13b"}), 3600'000'000'000ull);  // H100, the default
  EXPECT_EQ(nvl({"workload.generator.model=gpt3-13b", "workload.generator.gpu=A100", "cluster.nvlink_bandwidth=1000Gbps"}),
            1000'000'000'000ull);
}

}  // namespace
}  // namespace fabricsim::jobs

namespace fabricsim::jobs {
namespace {

// Every example spec the README runs (with the --set values of its line) that generates its
// workload fits its GPU: the estimate, recomputed here from the spec, is within the HBM capacity.
// Trace and SimAI workloads carry no estimate and sweep files are not run specs; they are left
// out by their kind, named in the trace.
TEST(MemoryEstimate, EveryReadmeExampleFitsItsGpu) {
  const std::string root = testing::source_dir();
  std::ifstream in(root + "/README.md");
  ASSERT_TRUE(in) << root << "/README.md";
  const std::regex spec_re(R"((examples/[A-Za-z0-9_./-]+\.yaml))"), set_re(R"(--set ([^ =]+=[^ ]+))");
  std::set<std::string> checked;
  std::string line;
  int generated = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, spec_re)) continue;
    const std::string rel = m[1];
    if (rel.rfind("examples/sweeps/", 0) == 0) continue;  // sweep files, not run specs
    std::vector<std::string> sets;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), set_re); it != std::sregex_iterator(); ++it) {
      sets.push_back((*it)[1]);
    }
    if (!checked.insert(rel + " " + ::testing::PrintToString(sets)).second) continue;
    SCOPED_TRACE(rel + " " + ::testing::PrintToString(sets));
    const Spec spec = load_spec(root + "/" + rel, sets);
    if (spec.generator.empty()) continue;  // a trace or SimAI workload: no estimate
    const TrainConfig c = train_config_from_spec(spec);
    const MemoryEstimate est = c.inference ? estimate_inference_memory(c) : estimate_memory(c);
    ASSERT_FALSE(est.stages.empty());
    EXPECT_GT(est.capacity_bytes, 0.0);
    EXPECT_LE(est.peak().total_bytes(), est.capacity_bytes)
        << rel << " needs " << est.peak().total_bytes() / 1e9 << " GB of " << est.capacity_bytes / 1e9;
    EXPECT_FALSE(est.exceeds());
    ++generated;
  }
  EXPECT_GE(generated, 3) << "the README runs the quickstart, oversub_128 and the inference example";
}

}  // namespace
}  // namespace fabricsim::jobs
