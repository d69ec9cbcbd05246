// Workload generators: arithmetic conservation (FLOPs against the Megatron closed form,
// collective bytes against their closed forms), bad configurations, and the Chakra ET round trip.
#include <gtest/gtest.h>

#include <mpi.h>

#include <sys/resource.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <map>

#include "engine/errors.hpp"
#include "io/chakra_reader.hpp"
#include "io/chakra_writer.hpp"
#include "jobs/generators.hpp"
#include "jobs/spec.hpp"

namespace fabricsim::jobs {
namespace {

using models::CollOp;
using models::NodeType;

kernels::KernelDb empty_db() { return kernels::KernelDb{}; }

TrainConfig gpt3_175b(std::uint32_t tp, std::uint32_t pp, std::uint32_t dp, std::uint32_t gbs) {
  TrainConfig c;
  c.model = find_model("gpt3-175b", "<test>", "model");
  c.gpu = "A100";
  c.tp = tp;
  c.pp = pp;
  c.dp = dp;
  c.global_batch = gbs;
  c.seq_len = 2048;
  return c;
}

/// Sum of collective bytes on rank `r` whose communicator name starts with `prefix` and whose
/// node name contains `contains`.
double coll_bytes(const Generated& g, std::uint32_t r, const std::string& prefix, CollOp op,
                  const std::string& contains = "") {
  double s = 0;
  for (const auto& n : g.workload.programs[r]) {
    if (n.type != NodeType::kCollective || n.op != op) continue;
    const auto& name = g.workload.groups[static_cast<std::size_t>(n.group)].name;
    if (name.rfind(prefix, 0) != 0) continue;
    if (!contains.empty() && n.name.find(contains) == std::string::npos) continue;
    s += double(n.bytes);
  }
  return s;
}

// Narayanan et al. SC'21 eq. (3) without recompute: F = 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)),
// i.e. 6·params·tokens + the attention term (Issue 5, must show 2).
TEST(Generators, Gpt3FlopsMatchMegatronClosedForm) {
  const auto g = generate_training(gpt3_175b(8, 8, 2, 16), empty_db());
  const double B = 16, s = 2048, l = 96, h = 12288, V = 51200;
  const double closed = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  EXPECT_NEAR(g.stats.model_flops / closed, 1.0, 0.01);
  EXPECT_NEAR(g.stats.hw_flops / closed, 1.0, 0.01);  // no recompute
  // 6·P·T with P the matrix parameters (12·l·h² + V·h) plus 12·l·s·h·T for attention.
  const double T = B * s;
  EXPECT_NEAR(g.stats.model_flops / (6 * (12 * l * h * h + V * h) * T + 12 * l * s * h * T), 1.0, 0.01);
  EXPECT_NEAR(g.stats.params / 175e9, 1.0, 0.01);  // Brown et al. 2020: 175B
}

TEST(Generators, FullRecomputeAddsOneForwardOfEveryLayer) {
  TrainConfig c = gpt3_175b(8, 4, 1, 4);
  c.recompute = Recompute::kFull;
  const auto g = generate_training(c, empty_db());
  const double B = 4, s = 2048, l = 96, h = 12288, V = 51200;
  // eq. (3) of Narayanan et al. with recompute: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)).
  const double closed = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  EXPECT_NEAR(g.stats.hw_flops / closed, 1.0, 0.01);
  EXPECT_NEAR(g.stats.model_flops / (72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))), 1.0, 0.01);
}

TEST(Generators, ParameterCountsOfBuiltinModelsMatchPublished) {
  for (const auto& m : builtin_models()) {
    EXPECT_NEAR(m.total_params() / (m.reported_params_b * 1e9), 1.0, 0.03) << m.name;
  }
  // Active parameters: Mixtral 12.9B, DeepSeek-V3 37B (model-configs.csv).
  EXPECT_NEAR(find_model("mixtral-8x7b", "", "").active_params() / 12.9e9, 1.0, 0.03);
  EXPECT_NEAR(find_model("deepseek-v3", "", "").active_params() / 37e9, 1.0, 0.03);
}

// Megatron TP (Shoeybi et al. 2019): two AllReduces of s·b·h·B per layer forward; with sequence
// parallelism (Korthikanti et al. 2022) each becomes an AllGather + ReduceScatter of that size.
TEST(Generators, TensorParallelBytesPerLayer) {
  TrainConfig c = gpt3_175b(8, 1, 1, 2);
  c.model.layers = 4;
  c.micro_batch = 2;
  c.sequence_parallel = false;
  const double s = 2048, b = 2, h = 12288, B = 2;
  auto g = generate_training(c, empty_db());
  double fwd = 0;
  for (const auto& n : g.workload.programs[3]) {
    if (n.type == NodeType::kCollective && n.name.rfind("L1.ar", 0) == 0) fwd += double(n.bytes);
  }
  EXPECT_DOUBLE_EQ(fwd, 2 * s * b * h * B);
  // Backward: AllReduce of the input gradient of QKV and fc1 (2 per layer as well).
  double bwd = 0;
  for (const auto& n : g.workload.programs[3]) {
    if (n.type == NodeType::kCollective && n.name.rfind("L1.", 0) == 0 && n.name.find(".arg") != std::string::npos) {
      bwd += double(n.bytes);
    }
  }
  EXPECT_DOUBLE_EQ(bwd, 2 * s * b * h * B);
  c.sequence_parallel = true;
  g = generate_training(c, empty_db());
  double ag = 0, rs = 0;
  for (const auto& n : g.workload.programs[0]) {
    if (n.type != NodeType::kCollective) continue;
    if (n.name == "L1.ag1" || n.name == "L1.ag2") ag += double(n.bytes);
    if (n.name == "L1.rs1" || n.name == "L1.rs2") rs += double(n.bytes);
  }
  EXPECT_DOUBLE_EQ(ag, 2 * s * b * h * B);
  EXPECT_DOUBLE_EQ(rs, 2 * s * b * h * B);
}

// DP gradient bytes per rank per iteration = parameters held / (TP·PP) × grad bytes.
TEST(Generators, DataParallelGradientBytes) {
  const auto g = generate_training(gpt3_175b(8, 8, 2, 8), empty_db());
  const double h = 12288, l = 96, tp = 8, pp = 8;
  // A middle stage (no embedding): 12 layers of (12h²/TP + 2h norm) parameters, bf16 grads.
  const std::uint32_t r = 3 * 8 * 2 + 5;  // stage 3, dp 0, tp 5
  const double exact = (l / pp) * (12 * h * h / tp + 2 * h) * 2;
  EXPECT_DOUBLE_EQ(coll_bytes(g, r, "dp", CollOp::kAllReduce), exact);
  EXPECT_NEAR(exact / (175e9 / (tp * pp) * 2), 1.0, 0.03);  // the params/(TP·PP) rule of thumb
  // ZeRO-1 (distributed optimizer): the same bytes reduce-scattered, then all-gathered.
  TrainConfig c = gpt3_175b(8, 8, 2, 8);
  c.zero = 1;
  const auto z = generate_training(c, empty_db());
  EXPECT_DOUBLE_EQ(coll_bytes(z, r, "dp", CollOp::kReduceScatter), exact);
  EXPECT_DOUBLE_EQ(coll_bytes(z, r, "dp", CollOp::kAllGather, "dp.ag"), exact);
  EXPECT_DOUBLE_EQ(coll_bytes(z, r, "dp", CollOp::kAllReduce), 0.0);
}

// EP AllToAll: dispatch + combine of tokens·top_k·h·B per layer forward, the same in backward.
TEST(Generators, ExpertParallelAllToAllBytes) {
  TrainConfig c;
  c.model = find_model("mixtral-8x7b", "", "");
  c.gpu = "H100";
  c.dp = 8;
  c.ep = 8;
  c.seq_len = 4096;
  c.global_batch = 16;  // 2 micro-batches per DP rank
  const auto g = generate_training(c, empty_db());
  const double tokens = 4096, k = 2, h = 4096, B = 2, L = 32, mbs = 2;
  EXPECT_DOUBLE_EQ(coll_bytes(g, 5, "ep", CollOp::kAllToAll), L * mbs * 4 * tokens * k * h * B);
  // Expert gradients reduced over the expert-DP group: TP·DP/EP = 1 rank here -> none.
  EXPECT_DOUBLE_EQ(coll_bytes(g, 5, "edp", CollOp::kAllReduce), 0.0);
  // Dense (attention, router, norms) gradients over DP.
  EXPECT_GT(coll_bytes(g, 5, "dp", CollOp::kAllReduce), 0.0);
}

TEST(Generators, OneFOneBScheduleAndPointToPoint) {
  TrainConfig c = gpt3_175b(1, 4, 1, 8);
  c.model.layers = 8;
  c.model.hidden = 1024;
  c.model.heads = 8;
  c.model.head_dim = 128;
  c.model.ffn_hidden = 4096;
  const auto g = generate_training(c, empty_db());
  // Every stage but the last sends one activation per micro-batch forward, every stage but the
  // first one gradient per micro-batch backward: s·b·h·B bytes each.
  for (std::uint32_t p = 0; p < 4; ++p) {
    int sends = 0;
    for (const auto& n : g.workload.programs[p]) {
      if (n.type == NodeType::kSend) {
        ++sends;
        EXPECT_EQ(n.bytes, 2048u * 1024u * 2u);
      }
    }
    EXPECT_EQ(sends, 8 * ((p < 3) + (p > 0))) << "stage " << p;
  }
  // Interleaved: 2 virtual stages per rank doubles the stage-boundary traffic.
  c.vp = 2;
  const auto gi = generate_training(c, empty_db());
  int sends = 0;
  for (const auto& n : gi.workload.programs[1]) sends += n.type == NodeType::kSend;
  EXPECT_EQ(sends, 8 * 2 * 2);
}

std::string error_of(TrainConfig c) {
  try {
    validate_train(c);
  } catch (const engine::InputError& e) {
    return e.what();
  }
  return "no error";
}

// Issue 5 must show 5: bad model configs give one clear line (exit 2 through InputError).
TEST(Generators, BadConfigsAreInputErrors) {
  TrainConfig c = gpt3_175b(8, 8, 2, 16);
  c.tp = 5;  // 96 heads
  EXPECT_NE(error_of(c).find("workload.generator.tp: 96 attention heads are not divisible by TP 5"), std::string::npos);
  c = gpt3_175b(8, 7, 2, 16);
  EXPECT_NE(error_of(c).find("96 layers are not divisible by PP 7"), std::string::npos);
  c = gpt3_175b(8, 8, 2, 16);
  c.expected_gpus = 1000;
  EXPECT_NE(error_of(c).find("world size 1000 is not TP·PP·DP·CP"), std::string::npos);
  c = gpt3_175b(8, 8, 2, 15);
  EXPECT_NE(error_of(c).find("global batch 15"), std::string::npos);
  TrainConfig m;
  m.model = find_model("mixtral-8x7b", "", "");
  m.dp = 16;
  m.ep = 16;
  EXPECT_NE(error_of(m).find("EP 16 is above the model's 8 experts"), std::string::npos);
  m.dp = 8;
  m.ep = 8;
  m.dtype = kernels::Dtype::kFp8;
  m.gpu = "A100";
  EXPECT_NE(error_of(m).find("no FP8"), std::string::npos);
  EXPECT_THROW(find_model("gpt-5", "f.yaml", "workload.generator.model"), engine::InputError);
}

TEST(Generators, SpecKeysBuildTheConfig) {
  const Spec s = load_spec("", {"workload.generator.model=llama3-70b", "workload.generator.tp=8",
                                "workload.generator.pp=4", "workload.generator.dp=2", "workload.generator.zero=1",
                                "workload.generator.recompute=full", "workload.generator.gpus=64"});
  const TrainConfig c = train_config_from_spec(s);
  EXPECT_EQ(c.model.layers, 80u);
  EXPECT_EQ(c.tp * c.pp * c.dp, 64u);
  EXPECT_EQ(c.recompute, Recompute::kFull);
  const Spec bad = load_spec("", {"workload.generator.model=llama3-70b", "workload.generator.tp=8",
                                  "workload.generator.gpus=16"});
  EXPECT_THROW(generate_training(train_config_from_spec(bad), empty_db()), engine::InputError);
  EXPECT_THROW(load_spec("", {"workload.generator.modle=x"}), engine::InputError);
}

// Rotary embeddings (LLaMA family): one `rope` kernel per layer and micro-batch forward and one
// `rope_bwd` backward, each reading and writing the rank's q and k once in 16-bit. Llama 3 8B at
// TP 2 (32 q heads, 8 kv heads, head dim 128), seq 1024, 2 micro-batches of 1:
// elements = 1024 * (32 + 8) / 2 * 128 = 2,621,440 -> 2 * 2 bytes each = 10,485,760 bytes per call,
// 32 layers x 2 micro-batches = 64 calls each way. GPT-3 (learned positions) has none; a custom
// model with ffn: swiglu (the LLaMA-style block) has them.
TEST(Generators, RotaryEmbeddingKernelsOfLlamaModels) {
  TrainConfig c;
  c.model = find_model("llama3-8b", "<test>", "model");
  c.gpu = "H100";
  c.tp = 2;
  c.global_batch = 2;
  c.seq_len = 1024;
  std::map<std::string, KernelNeed> by_op;
  for (const auto& k : kernel_plan(c)) by_op[k.op] = k;
  ASSERT_EQ(by_op.count("rope"), 1u);
  ASSERT_EQ(by_op.count("rope_bwd"), 1u);
  EXPECT_DOUBLE_EQ(by_op["rope"].bytes, 10485760.0);
  EXPECT_DOUBLE_EQ(by_op["rope_bwd"].bytes, 10485760.0);
  EXPECT_EQ(by_op["rope"].calls, 64u);
  EXPECT_EQ(by_op["rope_bwd"].calls, 64u);
  for (const auto& k : kernel_plan(gpt3_175b(8, 8, 2, 16))) EXPECT_EQ(k.op.rfind("rope", 0), std::string::npos) << k.op;
  const Spec s = load_spec("", {"workload.generator.model=custom", "workload.generator.layers=2",
                                "workload.generator.hidden=1024", "workload.generator.heads=8",
                                "workload.generator.vocab=32000", "workload.generator.ffn=swiglu"});
  EXPECT_TRUE(train_config_from_spec(s).model.rope);
}

// A write that runs out of space (here: the file-size limit, which fails the write with EFBIG
// like a full disk fails it with ENOSPC) leaves no file behind: no truncated .et, no orphaned
// comm-group file, no temporary file.
TEST(Generators, ChakraExportThatFailsLeavesNoFiles) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  TrainConfig c;
  c.model = find_model("mixtral-8x7b", "", "");
  c.model.layers = 4;
  c.tp = 2;
  c.pp = 2;
  c.dp = 2;
  c.ep = 2;
  c.global_batch = 4;
  c.seq_len = 1024;
  const auto g = generate_training(c, kernels::KernelDb{});
  const auto dir = std::filesystem::temp_directory_path() /
                   ("fabricsim_et_full_" + std::to_string(::getpid()) + "_" + std::to_string(rank));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 4096;  // the comm-group file fits, the first rank's trace does not
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  try {
    (void)io::write_chakra(g.workload, (dir / "gen").string());
  } catch (const engine::InputError& e) {
    threw = true;
    EXPECT_NE(std::string(e.what()).find("write failed"), std::string::npos) << e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(threw);
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) left.push_back(entry.path().filename().string());
  EXPECT_TRUE(left.empty()) << "left behind: " << left.front();
  std::filesystem::remove_all(dir);
}

// Export then read back gives the same DAG (durations rounded to the ET's whole microseconds).
TEST(Generators, ChakraRoundTrip) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  TrainConfig c;
  c.model = find_model("mixtral-8x7b", "", "");
  c.model.layers = 4;
  c.tp = 2;
  c.pp = 2;
  c.dp = 2;
  c.ep = 2;
  c.zero = 1;
  c.global_batch = 4;
  c.seq_len = 1024;
  const auto g = generate_training(c, kernels::KernelDb{});
  const auto dir = std::filesystem::temp_directory_path() /
                   ("fabricsim_et_rt_" + std::to_string(::getpid()) + "_" + std::to_string(rank));
  std::filesystem::create_directories(dir);
  const std::string prefix = (dir / "gen").string();
  const std::string groups = io::write_chakra(g.workload, prefix);
  ASSERT_FALSE(groups.empty());
  const auto back = io::read_chakra(prefix, groups);
  ASSERT_EQ(back.ranks, g.workload.ranks);
  std::map<std::string, std::vector<std::uint32_t>> ga, gb;
  for (const auto& x : g.workload.groups) ga[x.name] = x.ranks;
  auto name_of = [](const models::Workload& w, std::int32_t i) { return w.groups[static_cast<std::size_t>(i)].name; };
  for (std::uint32_t r = 0; r < back.ranks; ++r) {
    const auto& a = g.workload.programs[r];
    const auto& b = back.programs[r];
    ASSERT_EQ(a.size(), b.size()) << "rank " << r;
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name, b[i].name);
      ASSERT_EQ(a[i].type, b[i].type);
      EXPECT_EQ(a[i].deps, b[i].deps) << a[i].name;
      EXPECT_EQ(a[i].bytes, b[i].bytes);
      if (a[i].type == NodeType::kCompute) {
        EXPECT_EQ(b[i].duration_ps, std::llround(double(a[i].duration_ps) / 1e6) * 1000000);
      } else if (a[i].type == NodeType::kCollective) {
        EXPECT_EQ(a[i].op, b[i].op);
        const std::string na = a[i].group == 0 ? "world" : name_of(g.workload, a[i].group);
        const std::string nb = b[i].group == 0 ? "world" : name_of(back, b[i].group);
        EXPECT_EQ(na, nb);
        EXPECT_EQ(ga[na], back.groups[static_cast<std::size_t>(b[i].group)].ranks);
      } else {
        EXPECT_EQ(a[i].peer, b[i].peer);
        EXPECT_EQ(a[i].tag, b[i].tag);
      }
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fabricsim::jobs
