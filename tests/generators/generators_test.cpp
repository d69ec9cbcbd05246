// Workload generators: arithmetic conservation (FLOPs against the Megatron closed form,
// collective bytes against their closed forms), bad configurations, and the Chakra ET round trip.
#include <gtest/gtest.h>

#include <mpi.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/errors.hpp"
#include "io/chakra_reader.hpp"
#include "io/chakra_writer.hpp"
#include "jobs/generators.hpp"
#include "models/rank/gpu_rank.hpp"
#include "jobs/spec.hpp"
#include "tests/support/mpi.hpp"
#include "tests/support/train_configs.hpp"
#include "tests/support/scratch.hpp"

using fabricsim::testing::world_rank;

namespace fabricsim::jobs {
namespace {

using models::CollOp;
using models::NodeType;

kernels::KernelDb empty_db() { return kernels::KernelDb{}; }

/// generate_training with every rank's program written out (Workload::unshare): these tests
/// read programs[r] and global group/peer values. Generators.SharedProgramsEqualPerRankOnes
/// checks that this equals generating without sharing.
Generated generate_per_rank(const TrainConfig& c, const kernels::KernelDb& db) {
  Generated g = generate_training(c, db);
  g.workload.unshare();
  return g;
}

TrainConfig gpt3_175b(std::uint32_t tp, std::uint32_t pp, std::uint32_t dp, std::uint32_t gbs) {
  TrainConfig c = testing::train_config("gpt3-175b", "A100", tp, 2048);
  c.pp = pp;
  c.dp = dp;
  c.global_batch = gbs;
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
  const auto g = generate_per_rank(gpt3_175b(8, 8, 2, 16), empty_db());
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
  const auto g = generate_per_rank(c, empty_db());
  const double B = 4, s = 2048, l = 96, h = 12288, V = 51200;
  // eq. (3) of Narayanan et al. with recompute: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)).
  const double closed = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  EXPECT_NEAR(g.stats.hw_flops / closed, 1.0, 0.01);
  EXPECT_NEAR(g.stats.model_flops / (72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))), 1.0, 0.01);
}

TEST(Generators, ParameterCountsOfBuiltinModelsMatchPublished) {
  for (const auto& m : builtin_models()) {
    if (m.reported_params_b == 0) continue;  // published as a size class only (Nemotron-3 8B/22B)
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
  auto g = generate_per_rank(c, empty_db());
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
  g = generate_per_rank(c, empty_db());
  double ag = 0, rs = 0;
  for (const auto& n : g.workload.programs[0]) {
    if (n.type != NodeType::kCollective) continue;
    if (n.name == "L1.ag1" || n.name == "L1.ag2") ag += double(n.bytes);
    if (n.name == "L1.rs1" || n.name == "L1.rs2") rs += double(n.bytes);
  }
  EXPECT_DOUBLE_EQ(ag, 2 * s * b * h * B);
  EXPECT_DOUBLE_EQ(rs, 2 * s * b * h * B);
}

// TransformerEngine userbuffers TP overlap (tp_comm_overlap; NeMo user guide 24.12 "Communication
// Overlap", tensor-parallel section): the overlapped gathers become TP-1 ring-exchange steps under
// a GEMM split into TP row chunks, the reduce-scatters after proj/fc2 are pipelined in 4 chunks
// (NeMo num_splits). What must not change: the bytes each rank moves per layer (Korthikanti et al.
// 2022: forward 2 AllGathers + 2 ReduceScatters of s·b·h·B; backward the same gathers again) and
// the model FLOPs. What must hold in the DAG: chunk j waits for ring step j, steps in order, each
// reduce-scatter chunk after its GEMM chunk, the residual add after the last one.
TEST(Generators, TpCommOverlapConservesBytesAndFlopsAndChainsChunks) {
  TrainConfig c = gpt3_175b(8, 1, 1, 2);
  c.gpu = "H100";
  c.model.layers = 4;
  c.micro_batch = 2;
  const double s = 2048, b = 2, h = 12288, B = 2, tp = 8;
  const auto plain = generate_per_rank(c, empty_db());
  c.tp_comm_overlap = true;
  const auto ovl = generate_per_rank(c, empty_db());
  EXPECT_DOUBLE_EQ(ovl.stats.model_flops, plain.stats.model_flops);
  EXPECT_DOUBLE_EQ(ovl.stats.hw_flops, plain.stats.hw_flops);
  const auto& prog = ovl.workload.programs[0];
  std::map<std::string, std::uint32_t> at;
  for (std::uint32_t i = 0; i < prog.size(); ++i) at[prog[i].name] = i;
  // Closed forms: the sequence shard of a rank is s·b·h·B/TP bytes; each ring-exchange step sends
  // and receives exactly one shard to/from the TP ring neighbours (rank 0: next 1, prev 7), and the
  // TP-1 steps receive (TP-1)·shard = what the unoverlapped AllGather of s·b·h·B delivers per rank.
  const std::uint64_t shard = std::uint64_t(s * b * h * B / tp);
  ASSERT_EQ(shard, 2048ull * 2 * 12288 * 2 / 8);
  std::uint64_t rx_fwd = 0, tx_fwd = 0, rx_bwd = 0;
  double rs_fwd = 0;
  int steps = 0, rs_chunks = 0;
  for (const auto& n : prog) {
    if (n.name.rfind("L1.", 0) != 0) continue;
    EXPECT_FALSE(n.type == NodeType::kCollective && n.op == CollOp::kAllGather && n.name.find(".agw") == std::string::npos)
        << n.name << ": overlapped gathers are ring exchanges, not collectives";
    const bool fwd_step = n.name.rfind("L1.qkv.", 0) == 0 || n.name.rfind("L1.fc1.", 0) == 0;
    const bool bwd_step = n.name.rfind("L1.fc2.dg.", 0) == 0 || n.name.rfind("L1.proj.dg.", 0) == 0;
    if (n.type == NodeType::kSend || n.type == NodeType::kRecv) {
      EXPECT_EQ(n.bytes, shard) << n.name;
      EXPECT_EQ(n.peer, n.type == NodeType::kSend ? 1 : 7) << n.name;
      if (fwd_step) (n.type == NodeType::kSend ? tx_fwd : rx_fwd) += n.bytes;
      if (bwd_step && n.type == NodeType::kRecv) rx_bwd += n.bytes;
      if (fwd_step && n.type == NodeType::kRecv) ++steps;
    }
    const bool fwd_rs = n.name.rfind("L1.proj.rs", 0) == 0 || n.name.rfind("L1.fc2.rs", 0) == 0;
    if (fwd_rs) {
      EXPECT_EQ(n.op, CollOp::kReduceScatter);
      rs_fwd += double(n.bytes);
      ++rs_chunks;
    }
  }
  // Exact per-rank bytes of the two gathers (qkv, fc1) and of the two backward ones (fc2, proj dgrad).
  EXPECT_EQ(rx_fwd, 2 * std::uint64_t(tp - 1) * shard);
  EXPECT_EQ(tx_fwd, rx_fwd);
  EXPECT_EQ(rx_bwd, 2 * std::uint64_t(tp - 1) * shard);
  EXPECT_EQ(rx_fwd, 2 * std::uint64_t(s * b * h * B * (tp - 1) / tp));  // = the AllGather's per-rank receive
  // The reduce-scatter chunks (a collective each, TE's userbuffers reduce-scatter kernel) add up to
  // the unchunked reduce-scatter's buffer exactly.
  EXPECT_EQ(rs_fwd, 2 * s * b * h * B);
  EXPECT_EQ(steps, 2 * 7);      // TP-1 ring-exchange steps for qkv and for fc1
  EXPECT_EQ(rs_chunks, 2 * 4);  // 4 pipelined chunks for proj and for fc2
  EXPECT_EQ(at.count("L1.ag1") + at.count("L1.rs1") + at.count("L1.fc2.agg") + at.count("L1.proj.agg"), 0u);
  auto has_dep = [&](const std::string& node, const std::string& dep) {
    const auto& d = prog[at.at(node)].deps;
    return std::find(d.begin(), d.end(), at.at(dep)) != d.end();
  };
  for (int j = 1; j < 8; ++j) {
    EXPECT_TRUE(has_dep(fmt::format("L1.qkv.c{}", j), fmt::format("L1.qkv.rx{}", j))) << j;
    EXPECT_TRUE(has_dep(fmt::format("L1.fc2.dg.c{}", j), fmt::format("L1.fc2.dg.rx{}", j))) << j;
    // The send and receive of a step share one tag; the steps' tags differ.
    EXPECT_EQ(prog[at.at(fmt::format("L1.qkv.tx{}", j))].tag, prog[at.at(fmt::format("L1.qkv.rx{}", j))].tag) << j;
    if (j > 1) {
      // Step j forwards what step j-1 received.
      EXPECT_TRUE(has_dep(fmt::format("L1.qkv.tx{}", j), fmt::format("L1.qkv.rx{}", j - 1))) << j;
      EXPECT_NE(prog[at.at(fmt::format("L1.qkv.tx{}", j))].tag, prog[at.at(fmt::format("L1.qkv.tx{}", j - 1))].tag);
    }
  }
  // Every rank emits the same step sequence: rank 3 sends step j with rank 0's tag to rank 4.
  const auto& prog3 = ovl.workload.programs[3];
  for (const auto& n : prog3) {
    if (n.name == "L1.qkv.tx5") {
      EXPECT_EQ(n.peer, 4);
      EXPECT_EQ(n.tag, prog[at.at("L1.qkv.tx5")].tag);
    }
    if (n.name == "L1.qkv.rx5") {
      EXPECT_EQ(n.peer, 2);
    }
  }
  EXPECT_TRUE(has_dep("L1.qkv.tx1", "L1.ln1"));  // the first step sends the local shard
  EXPECT_FALSE(prog[at.at("L1.qkv.c0")].deps.empty());  // after ln1 only: the local shard
  EXPECT_TRUE(has_dep("L1.qkv.c0", "L1.ln1"));
  for (int j = 0; j < 4; ++j) {
    EXPECT_TRUE(has_dep(fmt::format("L1.proj.rs{}", j), fmt::format("L1.proj.c{}", j))) << j;
    if (j > 0) {
      EXPECT_TRUE(has_dep(fmt::format("L1.proj.rs{}", j), fmt::format("L1.proj.rs{}", j - 1))) << j;
    }
  }
  EXPECT_TRUE(has_dep("L1.add1", "L1.proj.rs3"));
  EXPECT_TRUE(has_dep("L1.add2", "L1.fc2.rs3"));
  // SM margin: the pipelined-RS GEMM chunks run on 132 - 24 of H100's 132 SMs (H100 whitepaper
  // SM count; 24 = the tp_comm_overlap_rs_sms default), so a chunk takes 132/108 of the same
  // chunk generated with a zero margin; the ring-exchange chunks keep all SMs.
  c.tp_comm_overlap_rs_sms = 0;
  const auto nomargin = generate_per_rank(c, empty_db());
  std::map<std::string, std::uint32_t> at0;
  for (std::uint32_t i = 0; i < nomargin.workload.programs[0].size(); ++i) at0[nomargin.workload.programs[0][i].name] = i;
  const double with = double(prog[at.at("L1.proj.c1")].duration_ps);
  const double without = double(nomargin.workload.programs[0][at0.at("L1.proj.c1")].duration_ps);
  EXPECT_NEAR(with / without, 132.0 / 108.0, 1e-6);
  EXPECT_EQ(prog[at.at("L1.qkv.c1")].duration_ps, nomargin.workload.programs[0][at0.at("L1.qkv.c1")].duration_ps);
}

// Word-embedding backward (dense autograd gradient + the DDP hook's add into main_grad), per
// micro-batch on the first stage: 3·T·h·B for the scatter of the output gradient, plus the zero
// fill of the V/TP x h gradient (B bytes per element) and the add into main_grad (read B, read and
// write grad_bytes). GPT-3 175B at TP 8, s = 2048, b = 1, bf16 grads (grad_bytes 2):
// 3·2048·12288·2 + 6400·12288·(2·2 + 2·2) = 150,994,944 + 629,145,600 = 780,140,544 bytes.
TEST(Generators, EmbeddingBackwardWritesTheDenseGradient) {
  TrainConfig c = gpt3_175b(8, 1, 1, 1);
  c.model.layers = 2;
  std::map<std::string, KernelNeed> by_op;
  for (const auto& k : kernel_plan(c)) by_op[k.op] = k;
  ASSERT_EQ(by_op.count("embedding_bwd"), 1u);
  EXPECT_DOUBLE_EQ(by_op["embedding_bwd"].bytes, 780140544.0);
  EXPECT_EQ(by_op["embedding_bwd"].calls, 1u);
}

// DP gradient bytes per rank per iteration = parameters held / (TP·PP) × grad bytes.
TEST(Generators, DataParallelGradientBytes) {
  const auto g = generate_per_rank(gpt3_175b(8, 8, 2, 8), empty_db());
  const double h = 12288, l = 96, tp = 8, pp = 8;
  // A middle stage (no embedding): 12 layers of (12h²/TP + 2h norm) parameters, bf16 grads.
  const std::uint32_t r = 3 * 8 * 2 + 5;  // stage 3, dp 0, tp 5
  const double exact = (l / pp) * (12 * h * h / tp + 2 * h) * 2;
  EXPECT_DOUBLE_EQ(coll_bytes(g, r, "dp", CollOp::kAllReduce), exact);
  EXPECT_NEAR(exact / (175e9 / (tp * pp) * 2), 1.0, 0.03);  // the params/(TP·PP) rule of thumb
  // ZeRO-1 (distributed optimizer): the same bytes reduce-scattered, then all-gathered.
  TrainConfig c = gpt3_175b(8, 8, 2, 8);
  c.zero = 1;
  const auto z = generate_per_rank(c, empty_db());
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
  const auto g = generate_per_rank(c, empty_db());
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
  c.model.kv_heads = 8;  // MHA
  c.model.head_dim = 128;
  c.model.ffn_hidden = 4096;
  const auto g = generate_per_rank(c, empty_db());
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
  const auto gi = generate_per_rank(c, empty_db());
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
  // Interleaving: the two reasons apart (one message listed both, one of them true).
  c = gpt3_175b(8, 1, 2, 16);
  c.vp = 2;
  EXPECT_NE(error_of(c).find("interleaved schedule (vp 2) needs pipeline parallelism, but pp is 1"), std::string::npos);
  c = gpt3_175b(8, 8, 2, 12);  // 6 micro-batches per pipeline
  c.vp = 2;
  EXPECT_NE(error_of(c).find("needs micro-batches (6) divisible by PP 8"), std::string::npos);
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
  c = gpt3_175b(8, 8, 2, 16);
  c.tp_comm_overlap = true;
  c.sequence_parallel = false;
  EXPECT_NE(error_of(c).find("workload.generator.tp_comm_overlap: TP communication overlap"), std::string::npos);
  c.sequence_parallel = true;
  c.gpu = "H100";
  c.tp_comm_overlap_rs_sms = 132;
  EXPECT_NE(error_of(c).find("132 SMs is not below the 132 SMs of H100"), std::string::npos);
}

// Context parallelism (Megatron-Core + TransformerEngine, cp_comm_type p2p): CP ranks split each
// sequence, so the same job on CP x the GPUs keeps its model FLOPs (the closed form) and every
// per-token collective shrinks by CP; attention runs as a ring of CP steps whose P2P sends carry
// K and V of s/CP tokens (forward) and K, V, dK, dV (backward); gradients are reduced over the
// DP·CP ranks. Rank order tp-cp-dp-pp.
TEST(Generators, ContextParallelismSplitsTokensAndRingsKeyValueChunks) {
  TrainConfig c;
  c.model = find_model("llama3-8b", "", "");
  c.model.layers = 4;
  c.tp = 2;
  c.pp = 2;
  c.dp = 2;
  c.seq_len = 8192;
  c.global_batch = 4;  // 2 micro-batches per DP rank
  const auto one = generate_per_rank(c, empty_db());
  c.cp = 4;
  const auto g = generate_per_rank(c, empty_db());
  ASSERT_EQ(g.workload.ranks, 2u * 2 * 2 * 4);
  const double tokens = 4.0 * 8192;
  EXPECT_EQ(g.stats.tokens, tokens);
  EXPECT_NEAR(g.stats.model_flops / one.stats.model_flops, 1.0, 1e-9);
  EXPECT_NEAR(g.stats.model_flops / closed_form_model_flops(c.model, tokens, c.seq_len), 1.0, 0.01);
  // TP all-gathers (SP) of a rank: s/CP·b·h·B each.
  const double B = 2;
  EXPECT_DOUBLE_EQ(coll_bytes(g, 0, "tp", CollOp::kAllGather), coll_bytes(one, 0, "tp", CollOp::kAllGather) / 4);
  // The KV ring of rank r = t + TP·(c + CP·(d + DP·p)): t 1, c 2, d 1, p 0 -> 1 + 2·(2 + 4·1) = 13.
  const std::uint32_t r = 13;
  const std::uint32_t next = 1 + 2 * (3 + 4 * 1), prev = 1 + 2 * (1 + 4 * 1);
  const double kv = 8192.0 / 4 * 1 * (double(c.model.kv_heads) / 2) * double(c.model.head_dim * 2) * B;
  double tx_f = 0, tx_b = 0, rx = 0;
  std::uint32_t steps_f = 0, kernels_f = 0;
  for (const auto& n : g.workload.programs[r]) {
    const bool fwd = n.name.find(".attn.cptx") != std::string::npos, bwd = n.name.find(".attn.b.cptx") != std::string::npos;
    if (n.type == NodeType::kSend && (fwd || bwd)) {
      EXPECT_EQ(n.peer, static_cast<std::int32_t>(next)) << n.name;
      (bwd ? tx_b : tx_f) += double(n.bytes);
      steps_f += fwd;
    }
    if (n.type == NodeType::kRecv && n.name.find(".cprx") != std::string::npos) {
      EXPECT_EQ(n.peer, static_cast<std::int32_t>(prev)) << n.name;
      rx += double(n.bytes);
    }
    if (n.type == NodeType::kCompute && n.name.find(".attn.cp") != std::string::npos) ++kernels_f;
  }
  // Stage 0 holds 2 layers, 2 micro-batches: (CP-1) steps per layer and micro-batch each way.
  const double per = 2 * 2 * 3;
  EXPECT_EQ(steps_f, per);
  EXPECT_DOUBLE_EQ(tx_f, per * kv);
  EXPECT_DOUBLE_EQ(tx_b, per * 2 * kv);
  EXPECT_DOUBLE_EQ(rx, tx_f + tx_b);
  EXPECT_EQ(kernels_f, 2u * 2 * 4);  // CP fused-attention steps per layer and micro-batch, forward
  // DP gradient reduction over the DP·CP = 8 ranks of (t, p): same bytes per rank as CP 1.
  for (const auto& grp : g.workload.groups) {
    if (grp.name.rfind("dp", 0) == 0) {
      EXPECT_EQ(grp.ranks.size(), 8u) << grp.name;
    }
  }
  EXPECT_DOUBLE_EQ(coll_bytes(g, r, "dp", CollOp::kAllReduce), coll_bytes(one, 1 + 2 * (1 + 2 * 0), "dp", CollOp::kAllReduce));
  // Refused: unfused attention, a sequence not divisible by 2·CP, MoE layers.
  TrainConfig u = c;
  u.flash_attention = false;
  EXPECT_NE(error_of(u).find("workload.generator.cp: context parallelism runs TransformerEngine's fused attention"),
            std::string::npos);
  u = c;
  u.seq_len = 8188;
  EXPECT_NE(error_of(u).find("not divisible by 2·CP = 8"), std::string::npos);
  TrainConfig m;
  m.model = find_model("mixtral-8x7b", "", "");
  m.cp = 2;
  m.dp = 8;
  m.ep = 8;
  EXPECT_NE(error_of(m).find("with MoE layers is not modelled"), std::string::npos);
}

// Megatron-Core's account_for_embedding/loss_in_pipeline_split: Llama 3.1 405B's 126 layers + 2
// over PP 8 x VP 8 = 2 units per virtual stage, so the first and last virtual stages build one
// layer and the others two; the stages cover every layer once, in order.
/// QKV projection forward kernels per "rank:layer" over ranks 0 .. ranks-1 of a generated job
/// (one per micro-batch; the backward's "<layer>.qkv.*" kernels are not counted).
template <typename W>
std::map<std::string, int> qkv_calls(const W& w, std::uint32_t ranks) {
  std::map<std::string, int> qkv;
  for (std::uint32_t r = 0; r < ranks; ++r) {
    for (const auto& n : w.workload.programs[r]) {
      if (n.type == NodeType::kCompute && n.name.find(".qkv") != std::string::npos &&
          n.name.find(".qkv.") == std::string::npos) {
        ++qkv[std::to_string(r) + ":" + n.name.substr(0, n.name.find('.'))];
      }
    }
  }
  return qkv;
}

TEST(Generators, EmbeddingAndLossAccountedInThePipelineSplit) {
  TrainConfig c;
  c.model = find_model("llama3-405b", "", "");
  ASSERT_EQ(c.model.layers, 126u);
  c.tp = 8;
  c.pp = 8;
  c.vp = 8;
  c.dp = 1;
  c.global_batch = 8;
  EXPECT_NE(error_of(c).find("126 layers are not divisible by PP 8 x VP 8"), std::string::npos);
  c.pp_split_embedding = c.pp_split_loss = true;
  EXPECT_EQ(error_of(c), "no error");
  std::uint32_t next = 0;
  for (std::uint32_t v = 0; v < 64; ++v) {
    const auto [b, e] = chunk_layers(c, v);
    EXPECT_EQ(b, next) << v;
    EXPECT_EQ(e - b, (v == 0 || v == 63) ? 1u : 2u) << v;
    next = e;
  }
  EXPECT_EQ(next, 126u);
  // Only the embedding accounted: 127 units over 127 stages would be one each; 6 layers + 1
  // over PP 7: stage 0 has none, the others one.
  TrainConfig s = c;
  s.model = find_model("gpt3-13b", "", "");
  s.model.layers = 6;
  s.tp = 1;
  s.pp = 7;
  s.vp = 1;
  s.pp_split_loss = false;
  EXPECT_EQ(chunk_layers(s, 0), (std::pair<std::uint32_t, std::uint32_t>{0, 0}));
  EXPECT_EQ(chunk_layers(s, 6), (std::pair<std::uint32_t, std::uint32_t>{5, 6}));
  // End to end on a small model: the FLOPs still match the closed form and every layer's
  // kernels appear exactly once per micro-batch.
  TrainConfig g;
  g.model = find_model("gpt3-13b", "", "");
  g.model.layers = 6;
  g.pp = 2;
  g.vp = 2;
  g.dp = 1;
  g.global_batch = 2;
  g.pp_split_embedding = g.pp_split_loss = true;  // (6 + 2) / 4 = 2: layers 0 | 1-2 | 3-4 | 5
  const auto w = generate_per_rank(g, empty_db());
  EXPECT_NEAR(w.stats.model_flops / closed_form_model_flops(g.model, 2.0 * 2048, 2048), 1.0, 0.01);
  const auto qkv = qkv_calls(w, 2);
  // Rank 0 holds virtual stages 0 and 2 (layers 0, 3, 4), rank 1 stages 1 and 3 (1, 2, 5).
  EXPECT_EQ(qkv.size(), 6u);
  for (const char* k : {"0:L0", "0:L3", "0:L4", "1:L1", "1:L2", "1:L5"}) EXPECT_EQ(qkv.at(k), 2) << k;
}

/// The InputError text of loading `path` with `sets` and validating the generator config.
std::string spec_error(const std::string& path, const std::vector<std::string>& sets) {
  try {
    const TrainConfig c = train_config_from_spec(load_spec(path, sets));
    validate_train(c);
  } catch (const engine::InputError& e) {
    return e.what();
  }
  return "no error";
}
std::vector<std::string> gen(std::initializer_list<std::string> kv) {
  std::vector<std::string> out;
  for (const auto& s : kv) out.push_back("workload.generator." + s);
  return out;
}

// pipeline_layout (Megatron-Core pipeline_model_parallel_layout, decoder layers): DeepSeek-V3's
// 61 layers over PP 16 as Megatron-Bridge's recipe lays them out (deepseek_v3.py layout map,
// (16, 1): 4 on stages 0-14, 1 on stage 15). The ranges tile [0, 61) in order; the layout's
// length and sum are checked against PP x VP and the layer count, and bad entries name the key.
TEST(Generators, PipelineLayoutSplitsLayersUnevenly) {
  const TrainConfig c = train_config_from_spec(load_spec(
      "", gen({"model=deepseek-v3", "tp=1", "pp=16", "dp=1", "ep=1", "global_batch=16", "pipeline_layout=4*15,1"})));
  ASSERT_EQ(c.pipeline_layout.size(), 16u);
  EXPECT_EQ(error_of(c), "no error");
  std::uint32_t next = 0;
  for (std::uint32_t v = 0; v < 16; ++v) {
    const auto [b, e] = chunk_layers(c, v);
    EXPECT_EQ(b, next) << v;
    EXPECT_EQ(e - b, v < 15 ? 4u : 1u) << v;
    next = e;
  }
  EXPECT_EQ(next, 61u);
  // Without a layout 61 layers do not divide over 16 stages.
  TrainConfig even = c;
  even.pipeline_layout.clear();
  EXPECT_NE(error_of(even).find("61 layers are not divisible by PP 16"), std::string::npos);
  EXPECT_NE(spec_error("", gen({"model=deepseek-v3", "tp=1", "pp=16", "dp=1", "global_batch=16",
                                "pipeline_layout=4*15"})).find("lists 15 stages with 60 layers"),
            std::string::npos);
  EXPECT_NE(spec_error("", gen({"model=deepseek-v3", "pp=2", "global_batch=2", "pipeline_layout=30,x"}))
                .find("workload.generator.pipeline_layout: 'x' is not a layer count"),
            std::string::npos);
  EXPECT_NE(spec_error("", gen({"model=deepseek-v3", "pp=2", "global_batch=2", "pipeline_layout=31,30",
                                "account_for_loss_in_pipeline_split=true"}))
                .find("together with account_for"),
            std::string::npos);
  // End to end on a small model with interleaving: 6 layers over PP 2 x VP 2 laid out 3,1,1,1;
  // rank 0 holds virtual stages 0 and 2 (layers 0-2 and 4), rank 1 stages 1 and 3 (3 and 5).
  TrainConfig g;
  g.model = find_model("gpt3-13b", "", "");
  g.model.layers = 6;
  g.pp = 2;
  g.vp = 2;
  g.dp = 1;
  g.global_batch = 2;
  g.pipeline_layout = {3, 1, 1, 1};
  const auto w = generate_per_rank(g, empty_db());
  EXPECT_NEAR(w.stats.model_flops / closed_form_model_flops(g.model, 2.0 * 2048, 2048), 1.0, 0.01);
  const auto qkv = qkv_calls(w, 2);
  EXPECT_EQ(qkv.size(), 6u);
  for (const char* k : {"0:L0", "0:L1", "0:L2", "0:L4", "1:L3", "1:L5"}) EXPECT_EQ(qkv.at(k), 2) << k;
}

// 32-bit keys are range-checked instead of wrapping modulo 2^32 (4294967304 = 2^32 + 8 would be 8).
TEST(Generators, WholeNumberKeysAboveTheirFieldAreRefused) {
  for (const char* k : {"tp", "pp", "dp", "ep", "vp", "zero", "global_batch", "seq_len", "iterations", "grad_bytes",
                        "gpus", "micro_batch", "tp_comm_overlap_rs_sms", "layers", "heads", "kv_heads", "experts",
                        "top_k"}) {
    SCOPED_TRACE(k);
    const std::string e = spec_error("", gen({"model=gpt3-13b", "tp_comm_overlap=true", std::string(k) + "=4294967304"}));
    EXPECT_EQ(e.rfind(fmt::format("<cli>: workload.generator.{}: '4294967304' is above 4294967295", k), 0), 0u) << e;
  }
  for (const char* k : {"hidden", "ffn_hidden", "vocab", "expert_ffn_hidden", "bucket_params"}) {
    SCOPED_TRACE(k);
    const std::string e = spec_error("", gen({"model=gpt3-13b", std::string(k) + "=1099511627777"}));
    EXPECT_EQ(e.rfind(fmt::format("<cli>: workload.generator.{}: '1099511627777' is above 1099511627776", k), 0), 0u) << e;
  }
  // The largest 32-bit value itself is read as it is (and then judged by the cross checks).
  EXPECT_EQ(train_config_from_spec(load_spec("", gen({"model=gpt3-13b", "iterations=4294967295"}))).iterations,
            4294967295u);
}

// The reduce-scatter SM margin is applied on every GPU or refused: H20 has no SM count in the
// tables, so a margin there is an error, 0 works; above the SM count of a known GPU (GB300: 160,
// NVIDIA's Blackwell Ultra blog) it is an error; set without tp_comm_overlap it is an error.
TEST(Generators, ReduceScatterSmMarginIsCheckedOnEveryGpu) {
  for (const char* gpu : {"H20"}) {
    SCOPED_TRACE(gpu);
    for (const char* sms : {"24", "200"}) {
      const std::string e = spec_error("", gen({"model=gpt3-13b", "tp=8", std::string("gpu=") + gpu, "tp_comm_overlap=true",
                                                std::string("tp_comm_overlap_rs_sms=") + sms}));
      EXPECT_NE(e.find(fmt::format("workload.generator.tp_comm_overlap_rs_sms: an SM margin of {} cannot be applied: "
                                   "the SM count of {} is not in the GPU tables", sms, gpu)),
                std::string::npos) << e;
    }
    EXPECT_EQ(spec_error("", gen({"model=gpt3-13b", "tp=8", std::string("gpu=") + gpu, "tp_comm_overlap=true",
                                  "tp_comm_overlap_rs_sms=0"})),
              "no error");
  }
  // The default margin (24) on a GPU without an SM count is refused too: nothing is ignored silently.
  EXPECT_NE(spec_error("", gen({"model=gpt3-13b", "tp=8", "gpu=H20", "tp_comm_overlap=true"})).find("cannot be applied"),
            std::string::npos);
  EXPECT_NE(spec_error("", gen({"model=gpt3-13b", "tp=8", "gpu=H100", "tp_comm_overlap=true", "tp_comm_overlap_rs_sms=200"}))
                .find("200 SMs is not below the 132 SMs of H100"),
            std::string::npos);
  EXPECT_NE(spec_error("", gen({"model=gpt3-13b", "tp=8", "gpu=GB300", "tp_comm_overlap=true", "tp_comm_overlap_rs_sms=200"}))
                .find("200 SMs is not below the 160 SMs of GB300"),
            std::string::npos);
  EXPECT_EQ(spec_error("", gen({"model=gpt3-13b", "tp=8", "gpu=GB300", "tp_comm_overlap=true"})), "no error");
  const std::string off = spec_error("", gen({"model=gpt3-13b", "tp=8", "tp_comm_overlap_rs_sms=16"}));
  EXPECT_EQ(off.rfind("<cli>: workload.generator.tp_comm_overlap_rs_sms: is set but tp_comm_overlap is false", 0), 0u)
      << off;
  EXPECT_NE(off.find("set tp_comm_overlap: true or drop tp_comm_overlap_rs_sms"), std::string::npos) << off;
}

// Shape overrides: KV heads must divide the heads; an MoE model needs a positive expert FFN size;
// a changed built-in model says so in its name; the workload source tells runs apart.
TEST(Generators, ShapeOverridesAreCheckedAndNamed) {
  EXPECT_NE(spec_error("", gen({"model=gpt3-13b", "heads=16", "kv_heads=3"}))
                .find("workload.generator.kv_heads: 3 KV heads do not divide the 16 attention heads"),
            std::string::npos);
  EXPECT_NE(spec_error("", gen({"model=gpt3-13b", "heads=16", "kv_heads=32"}))
                .find("workload.generator.kv_heads: 32 KV heads do not divide the 16 attention heads"),
            std::string::npos);
  // An MHA model given another head count stays MHA.
  EXPECT_EQ(spec_error("", gen({"model=gpt3-13b", "heads=16"})), "no error");
  EXPECT_NE(spec_error("", gen({"model=mixtral-8x7b", "expert_ffn_hidden=0"}))
                .find("workload.generator.expert_ffn_hidden: an MoE model (8 experts) needs a positive expert FFN size"),
            std::string::npos);
  const TrainConfig moe = train_config_from_spec(load_spec("", gen({"model=gpt3-13b", "experts=8", "layers=2"})));
  EXPECT_EQ(moe.model.name, "gpt3-13b[modified:layers=2,experts=8]");
  EXPECT_EQ(train_config_from_spec(load_spec("", gen({"model=gpt3-13b"}))).model.name, "gpt3-13b");
  // Restating a built-in value is no modification.
  EXPECT_EQ(train_config_from_spec(load_spec("", gen({"model=gpt3-13b", "layers=40", "heads=40"}))).model.name,
            "gpt3-13b");
  const auto src = [](std::initializer_list<std::string> extra) {
    std::vector<std::string> sets = gen({"model=gpt3-13b", "layers=2", "tp=8", "gpu=H100"});
    for (const auto& e : extra) sets.push_back("workload.generator." + e);
    return generate_per_rank(train_config_from_spec(load_spec("", sets)), empty_db()).workload.source;
  };
  const std::string base = src({});
  EXPECT_NE(base.find("gpt3-13b[modified:layers=2]"), std::string::npos) << base;
  for (const auto& v : {"tp_comm_overlap=true", "zero=1", "recompute=full", "attention=unfused", "attention=flash2",
                        "sequence_parallel=false"}) {
    EXPECT_NE(src({v}), base) << v;
  }
  EXPECT_NE(src({"tp_comm_overlap=true"}), src({"tp_comm_overlap=true", "tp_comm_overlap_rs_sms=8"}));
}

// A cross-key check that fails because of a --set value names <cli>, even when the key it
// reports is in the file; the same check failing on the file's own values names the file.
TEST(Generators, CrossKeyChecksNameTheCommandLineWhenASetCausedThem) {
  const testing::ScratchDir dir("gen_cli");
  const std::string f = (dir / "spec.yaml").string();
  auto write = [&](const std::string& gen_body) {
    std::ofstream(f) << "workload:\n  generator:\n" << gen_body;
  };
  auto starts = [](const std::string& e, const std::string& prefix) { return e.rfind(prefix, 0) == 0; };
  write("    model: gpt3-13b\n    tp: 8\n    tp_comm_overlap: true\n    tp_comm_overlap_rs_sms: 24\n");
  EXPECT_EQ(spec_error(f, {}), "no error");
  std::string e = spec_error(f, gen({"sequence_parallel=false"}));
  EXPECT_TRUE(starts(e, "<cli>: workload.generator.tp_comm_overlap:")) << e;
  e = spec_error(f, gen({"gpu=H20"}));
  EXPECT_TRUE(starts(e, "<cli>: workload.generator.tp_comm_overlap_rs_sms:")) << e;
  e = spec_error(f, gen({"tp_comm_overlap=false"}));
  EXPECT_TRUE(starts(e, "<cli>: workload.generator.tp_comm_overlap_rs_sms:")) << e;
  write("    model: gpt3-13b\n    tp: 8\n    sequence_parallel: false\n");
  e = spec_error(f, gen({"tp_comm_overlap=true"}));
  EXPECT_TRUE(starts(e, "<cli>: workload.generator.tp_comm_overlap:")) << e;
  write("    model: gpt3-13b\n    tp: 8\n    sequence_parallel: false\n    tp_comm_overlap: true\n");
  e = spec_error(f, gen({"dp=1"}));
  EXPECT_TRUE(starts(e, f + ": workload.generator.tp_comm_overlap:")) << e;
  write("    model: mixtral-8x7b\n    top_k: 4\n");
  EXPECT_EQ(spec_error(f, {}), "no error");
  e = spec_error(f, gen({"experts=2"}));
  EXPECT_TRUE(starts(e, "<cli>: workload.generator.top_k:")) << e;
  write("    model: gpt3-13b\n    hidden: 5120\n");
  e = spec_error(f, gen({"heads=15"}));
  EXPECT_TRUE(starts(e, "<cli>: workload.generator.hidden:")) << e;
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
  EXPECT_THROW(generate_per_rank(train_config_from_spec(bad), empty_db()), engine::InputError);
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

// Nemotron's squared-ReLU MLP (NeMo nemotron.py): two matrices as GELU's (no gate), a memory-bound
// `sq_relu` reading and writing the rank's fc1 output once forward (2 x elements x 2 bytes) and
// reading two and writing one backward; rope over half of each head (rotary_percent 0.5).
// Nemotron-4 15B at TP 2, seq 1024, one micro-batch: fc1 output 1024 x 24576 / 2 = 12,582,912
// elements; q+k heads (48 + 8) / 2 x 128 x 0.5 x 1024 = 1,835,008 elements.
TEST(Generators, SquaredReluMlpOfNemotron) {
  TrainConfig c;
  c.model = find_model("nemotron4-15b", "<test>", "model");
  c.gpu = "H100";
  c.tp = 2;
  c.global_batch = 1;
  c.seq_len = 1024;
  EXPECT_EQ(c.model.ffn_type_mats(), 2u);
  EXPECT_NEAR(c.model.total_params() / 15.6e9, 1.0, 0.01);
  std::map<std::string, KernelNeed> by_op;
  for (const auto& k : kernel_plan(c)) by_op[k.op] = k;
  ASSERT_EQ(by_op.count("sq_relu"), 1u);
  ASSERT_EQ(by_op.count("sq_relu_bwd"), 1u);
  EXPECT_EQ(by_op.count("gelu"), 0u);
  EXPECT_EQ(by_op.count("swiglu"), 0u);
  EXPECT_DOUBLE_EQ(by_op["sq_relu"].bytes, 2.0 * 12582912 * 2);
  EXPECT_DOUBLE_EQ(by_op["sq_relu_bwd"].bytes, 3.0 * 12582912 * 2);
  EXPECT_DOUBLE_EQ(by_op["rope"].bytes, 2.0 * 1835008 * 2);
  const Spec s = load_spec("", {"workload.generator.model=custom", "workload.generator.layers=2",
                                "workload.generator.hidden=1024", "workload.generator.heads=8",
                                "workload.generator.vocab=32000", "workload.generator.ffn=squared_relu"});
  EXPECT_EQ(train_config_from_spec(s).model.ffn, FfnType::kSquaredRelu);
  EXPECT_NE(spec_error("", gen({"model=custom", "layers=2", "hidden=1024", "heads=8", "vocab=32000", "ffn=relu3"}))
                .find("use gelu, swiglu or squared_relu"),
            std::string::npos);
}

// Mixtral 8x7B cut to 4 layers on TP 2 x PP 2 x DP 2 with EP 2: every node type and
// communicator kind of an MoE workload, small enough to write as Chakra ET in a test.
TrainConfig small_mixtral() {
  TrainConfig c;
  c.model = find_model("mixtral-8x7b", "", "");
  c.model.layers = 4;
  c.tp = 2;
  c.pp = 2;
  c.dp = 2;
  c.ep = 2;
  c.global_batch = 4;
  c.seq_len = 1024;
  return c;
}

// A write that runs out of space (here: the file-size limit, which fails the write with EFBIG
// like a full disk fails it with ENOSPC) leaves no file behind: no truncated .et, no orphaned
// comm-group file, no temporary file.
TEST(Generators, ChakraExportThatFailsLeavesNoFiles) {
  const int rank = world_rank();
  const auto g = generate_per_rank(small_mixtral(), kernels::KernelDb{});
  const testing::ScratchDir dir("et_full_" + std::to_string(rank));
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 4096;  // the first rank's trace does not fit
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
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) left.push_back(entry.path().filename().string());
  EXPECT_TRUE(left.empty()) << "left behind: " << left.front();
}

// Export then read back gives the same DAG (durations rounded to the ET's whole microseconds).
TEST(Generators, ChakraRoundTrip) {
  const int rank = world_rank();
  TrainConfig c = small_mixtral();
  c.zero = 1;
  const auto g = generate_per_rank(c, kernels::KernelDb{});
  const testing::ScratchDir dir("et_rt_" + std::to_string(rank));
  const std::string prefix = (dir / "gen").string();
  // Written from the shared-program workload, as `fabricsim generate` writes it (global groups
  // and peers through Workload::group_of/peer_of), read back and compared with per-rank programs.
  const auto shared = generate_training(c, kernels::KernelDb{});
  ASSERT_TRUE(shared.workload.shared());
  const std::string groups = io::write_chakra(shared.workload, prefix);
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
}

// ---- inference (mode: inference; docs/generators.md "Inference") ---------------------------------

TrainConfig inference(const char* model, std::uint32_t tp, std::uint32_t pp, std::uint32_t dp, std::uint32_t ep,
                      std::uint32_t batch, std::uint32_t prompt, std::uint32_t output) {
  TrainConfig c = testing::train_config(model, "H100", tp, 2048);
  c.inference = true;
  c.sequence_parallel = false;
  c.pp = pp;
  c.dp = dp;
  c.ep = ep;
  c.batch = batch;
  c.prompt_tokens = prompt;
  c.output_tokens = output;
  return c;
}

/// Inference FLOPs of one replica written out from the published shapes (not from ModelConfig):
/// 2 · (matrix parameters per token) per token + logits of the last position of each request +
/// 2·layers·heads·(d + d)·batch·Σ context. `per_layer` = attention + FFN matrix parameters a token
/// touches in one layer.
double inference_closed_form(double layers, double per_layer, double heads, double d, double V, double h, double b,
                             double P, std::uint32_t step) {
  const double tokens = step == 0 ? b * P : b;
  const double ctx = step == 0 ? P * (P + 1) / 2 : P + step;
  return 2 * layers * per_layer * tokens + 2 * V * h * b + 2 * layers * heads * 2 * d * b * ctx;
}

// Llama 3 70B (Dubey et al. 2024, Table 3: h 8192, 80 layers, 64 heads, 8 KV heads, FFN 28,672
// SwiGLU, vocabulary 128,256): prefill and every decode step equal the closed form within 1%,
// with TP 8 and with TP 4 x PP 2 on two replicas (the FLOPs do not depend on the partition).
TEST(Generators, InferenceFlopsMatchClosedForm) {
  const double h = 8192, L = 80, heads = 64, kv = 8, d = 128, ffn = 28672, V = 128256, b = 4, P = 512;
  const double per_layer = h * (heads + 2 * kv) * d + heads * d * h + 3 * h * ffn;
  for (auto [tp, pp, dp] : {std::tuple{8u, 1u, 1u}, {4u, 2u, 2u}}) {
    const auto g = generate_per_rank(inference("llama3-70b", tp, pp, dp, 1, 4, 512, 5), empty_db());
    ASSERT_TRUE(g.infer.used);
    ASSERT_EQ(g.infer.phase_flops.size(), 5u);
    for (std::uint32_t k = 0; k < 5; ++k) {
      const double cf = dp * inference_closed_form(L, per_layer, heads, d, V, h, b, P, k);
      EXPECT_NEAR(g.infer.phase_flops[k] / cf, 1.0, 0.01) << "tp " << tp << " pp " << pp << " phase " << k;
      EXPECT_NEAR(g.infer.phase_flops[k] / (dp * closed_form_inference_flops(g.config.model, 4, 512, k)), 1.0, 1e-9);
    }
    // Decode steps: m = batch rows, so 2·params·batch (+ a small attention term) each.
    EXPECT_NEAR(g.infer.phase_flops[1] / (dp * 2 * (L * per_layer + V * h) * b), 1.0, 0.01);
    EXPECT_GT(g.infer.phase_flops[4], g.infer.phase_flops[1]);  // the context grew by 3 tokens
  }
  // TP 16 > 8 KV heads: vLLM replicates each KV head on 2 ranks; the replicated work is not model FLOPs.
  const auto g16 = generate_per_rank(inference("llama3-8b", 16, 1, 1, 1, 2, 256, 2), empty_db());
  const double h8 = 4096, per8 = h8 * (32 + 2 * 8) * 128 + 32 * 128 * h8 + 3 * h8 * 14336;
  EXPECT_NEAR(g16.infer.phase_flops[0] / inference_closed_form(32, per8, 32, 128, 128256, h8, 2, 256, 0), 1.0, 0.01);
}

// Mixtral 8x7B (Jiang et al. 2024: h 4096, 32 layers, 32 heads, 8 KV heads, 8 experts of FFN
// 14,336, top-2, vocabulary 32,000): the MoE FLOPs are 2 experts per token plus the router, the
// same with experts TP-sharded (EP 1), EP = TP = 2 and EP over DP replicas (TP 1, DP 4, EP 4).
TEST(Generators, InferenceMoeFlopsAreTheActiveParameters) {
  const double h = 4096, L = 32, heads = 32, kv = 8, d = 128, fe = 14336, V = 32000, b = 4, P = 256;
  const double per_layer = h * (heads + 2 * kv) * d + heads * d * h + 2 * 3 * h * fe + h * 8;
  for (auto [tp, dp, ep] : {std::tuple{2u, 1u, 1u}, {2u, 1u, 2u}, {1u, 4u, 4u}}) {
    const auto g = generate_per_rank(inference("mixtral-8x7b", tp, 1, dp, ep, 4, 256, 3), empty_db());
    for (std::uint32_t k = 0; k < 3; ++k) {
      EXPECT_NEAR(g.infer.phase_flops[k] / (dp * inference_closed_form(L, per_layer, heads, d, V, h, b, P, k)), 1.0, 0.01)
          << "tp " << tp << " dp " << dp << " ep " << ep << " phase " << k;
    }
  }
}

// Per rank and phase: TP AllReduce(T·h·B) after the attention projection and after the MLP of
// every layer of the stage, plus the vocab-parallel embedding's on stage 0 (no sequence
// parallelism); the last stage AllGathers batch·V·B of logits. T = batch·prompt in prefill,
// batch in a decode step.
TEST(Generators, InferenceTensorParallelBytes) {
  const double h = 8192, L = 80, V = 128256, B = 2, b = 4, P = 512, steps = 2;
  const auto g = generate_per_rank(inference("llama3-70b", 8, 1, 1, 1, 4, 512, 3), empty_db());
  const double prefill = (2 * L + 1) * b * P * h * B, decode = steps * (2 * L + 1) * b * h * B;
  EXPECT_DOUBLE_EQ(coll_bytes(g, 3, "tp", CollOp::kAllReduce, "pre."), prefill);
  EXPECT_DOUBLE_EQ(coll_bytes(g, 3, "tp", CollOp::kAllReduce), prefill + decode);
  EXPECT_DOUBLE_EQ(coll_bytes(g, 3, "tp", CollOp::kAllGather), (steps + 1) * b * V * B);
  // PP 2: stage 0 (rank 0) has 40 layers and the embedding, stage 1 (rank 4) 40 layers and the
  // logits; activations of T·h·B go from stage 0 to 1 once per phase, token ids (4 B per request)
  // back before each decode step.
  const auto p = generate_per_rank(inference("llama3-70b", 4, 2, 1, 1, 4, 512, 3), empty_db());
  const double half = L / 2;
  EXPECT_DOUBLE_EQ(coll_bytes(p, 0, "tp", CollOp::kAllReduce), (2 * half + 1) * b * h * B * (P + steps));
  EXPECT_DOUBLE_EQ(coll_bytes(p, 4, "tp", CollOp::kAllReduce), 2 * half * b * h * B * (P + steps));
  double sent = 0, tok = 0;
  for (const auto& n : p.workload.programs[0]) {
    if (n.type == NodeType::kSend) sent += double(n.bytes);
    if (n.type == NodeType::kRecv) tok += double(n.bytes);
  }
  EXPECT_DOUBLE_EQ(sent, b * h * B * (P + steps));
  EXPECT_DOUBLE_EQ(tok, steps * b * 4);
  // The phase ends are the last stage's sampling kernels, one per phase.
  EXPECT_TRUE(p.infer.phase_end_nodes[0].empty());
  ASSERT_EQ(p.infer.phase_end_nodes[4].size(), 3u);
  EXPECT_EQ(p.workload.programs[4][p.infer.phase_end_nodes[4][2]].name, "d2.sample");
}

// Case: the inference export wrote the DP groups although no node uses them (replicas serve
// independently: no gradient reduction). The comm-group file lists exactly the communicators the
// nodes name: TP 2, PP 2, DP 2 gives one TP group per (stage, replica), ranks t + TP·(d + DP·p),
// and nothing else; the reader (which creates a group on first use) gets back as many.
TEST(Generators, InferenceChakraExportWritesOnlyUsedCommunicators) {
  const int rank = world_rank();
  const std::uint32_t tp = 2, pp = 2, dp = 2;
  const auto g = generate_training(inference("llama3-70b", tp, pp, dp, 1, 2, 64, 2), empty_db());
  bool has_dp = false;  // the workload has DP groups, so the export has something to leave out
  for (const auto& x : g.workload.groups) has_dp = has_dp || x.name.rfind("dp", 0) == 0;
  ASSERT_TRUE(has_dp);
  const testing::ScratchDir dir("et_inf_" + std::to_string(rank));
  const std::string prefix = (dir / "inf").string();
  const std::string groups = io::write_chakra(g.workload, prefix);
  ASSERT_FALSE(groups.empty());
  std::ifstream in(groups);
  const auto j = nlohmann::json::parse(in);
  std::set<std::vector<std::uint32_t>> want, got;
  for (std::uint32_t p = 0; p < pp; ++p) {
    for (std::uint32_t d = 0; d < dp; ++d) {
      std::vector<std::uint32_t> members;
      for (std::uint32_t t = 0; t < tp; ++t) members.push_back(t + tp * (d + dp * p));
      want.insert(members);
    }
  }
  for (const auto& [name, ranks] : j.items()) {
    EXPECT_EQ(name.rfind("tp", 0), 0u) << name;
    got.insert(ranks.get<std::vector<std::uint32_t>>());
  }
  EXPECT_EQ(j.size(), std::size_t{pp * dp});
  EXPECT_EQ(got, want);
  const auto back = io::read_chakra(prefix, groups);
  EXPECT_EQ(back.groups.size(), j.size() + 1);  // + the world
}

// EP AllToAll: each rank dispatches and combines the tokens it routes, top_k copies of h·B each:
// with EP over the DP replicas (TP 1) the batch of its own replica (batch·top_k·h·B per layer
// each way); with EP = TP = 2 its T/TP share, and the TP ranks AllGather(T·h·B) the MoE output.
TEST(Generators, InferenceExpertParallelAllToAllBytes) {
  const double h = 4096, L = 32, k = 2, B = 2, b = 4, P = 256, steps = 2;
  const auto g = generate_per_rank(inference("mixtral-8x7b", 1, 1, 4, 4, 4, 256, 3), empty_db());
  EXPECT_DOUBLE_EQ(coll_bytes(g, 2, "ep", CollOp::kAllToAll, "pre."), L * 2 * b * P * k * h * B);
  EXPECT_DOUBLE_EQ(coll_bytes(g, 2, "ep", CollOp::kAllToAll, "d2."), L * 2 * b * k * h * B);
  EXPECT_DOUBLE_EQ(coll_bytes(g, 2, "tp", CollOp::kAllReduce), 0.0);
  const auto t = generate_per_rank(inference("mixtral-8x7b", 2, 1, 1, 2, 4, 256, 3), empty_db());
  EXPECT_DOUBLE_EQ(coll_bytes(t, 1, "ep", CollOp::kAllToAll), L * 2 * (b / 2) * k * h * B * (P + steps));
  EXPECT_DOUBLE_EQ(coll_bytes(t, 1, "tp", CollOp::kAllGather, ".moe.ag"), L * b * h * B * (P + steps));
  EXPECT_DOUBLE_EQ(coll_bytes(t, 1, "tp", CollOp::kAllReduce), (L + 1) * b * h * B * (P + steps));
  // EP 1 with TP 2: experts TP-sharded, no AllToAll, the MLP's AllReduce instead.
  const auto s = generate_per_rank(inference("mixtral-8x7b", 2, 1, 1, 1, 4, 256, 3), empty_db());
  EXPECT_DOUBLE_EQ(coll_bytes(s, 1, "ep", CollOp::kAllToAll), 0.0);
  EXPECT_DOUBLE_EQ(coll_bytes(s, 1, "tp", CollOp::kAllReduce), (2 * L + 1) * b * h * B * (P + steps));
}

// Decode attention reads every request's whole K and V cache: 2·kv_heads/TP·head_dim·context·B
// bytes per layer, context = prompt + k in step k. Llama 3 70B, TP 4 (2 KV heads per rank), PP 2
// (40 layers on rank 0), batch 3, prompt 1000, 6 output tokens = 5 decode steps.
TEST(Generators, InferenceDecodeReadsTheKvCache) {
  const auto g = generate_per_rank(inference("llama3-70b", 4, 2, 1, 1, 3, 1000, 6), empty_db());
  double expect = 0;
  for (int k = 1; k <= 5; ++k) expect += 40.0 * 3 * 2 * 2 * 128 * (1000 + k) * 2;
  EXPECT_DOUBLE_EQ(g.infer.kv_read_bytes_rank0, expect);
  // TP 16 on Llama 3 8B (8 KV heads): one replicated KV head per rank.
  const auto r = generate_per_rank(inference("llama3-8b", 16, 1, 1, 1, 1, 100, 3), empty_db());
  EXPECT_DOUBLE_EQ(r.infer.kv_read_bytes_rank0, 32.0 * 1 * 2 * 1 * 128 * (101 + 102) * 2);
}

// Inference memory per GPU: weights (no gradients or optimizer states) and the KV cache at the
// full context. Llama 3 70B on TP 8 (one KV head per rank), batch 16, 2048 + 128 tokens: the
// eight ranks hold the 70.55B parameters once (16-bit; norms replicated: +0.01%), and the KV
// cache is 80 layers x 16 x 2 x 128 x 2175 x 2 B = 1.425 GB. On one GPU (TP 1) the 141 GB of
// weights exceed the H100's 80 GB: the warning names the inference fixes.
TEST(Generators, InferenceMemoryIsWeightsAndKvCache) {
  TrainConfig c = inference("llama3-70b", 8, 1, 1, 1, 16, 2048, 128);
  const MemoryEstimate m = estimate_inference_memory(c);
  ASSERT_EQ(m.stages.size(), 1u);
  const StageMemory& s = m.stages[0];
  EXPECT_NEAR(8 * s.weights_bytes / (2 * c.model.total_params()), 1.0, 1e-3);
  EXPECT_EQ(s.grads_bytes + s.optimizer_bytes, 0.0);
  const double kv = 80.0 * 16 * 2 * 128 * 2175 * 2;
  EXPECT_GE(s.activation_bytes, kv);
  EXPECT_LT(s.activation_bytes, kv + 3e9);  // + the prefill's transient activations and logits
  EXPECT_FALSE(m.exceeds());
  EXPECT_TRUE(inference_memory_warning(c, m).empty());
  c.tp = 1;
  const MemoryEstimate one = estimate_inference_memory(c);
  EXPECT_NEAR(one.stages[0].weights_bytes / (2 * c.model.total_params()), 1.0, 1e-3);
  EXPECT_TRUE(one.exceeds());
  EXPECT_NE(inference_memory_warning(c, one).find("lower batch or the context, or use dtype: fp8"), std::string::npos);
  // FP8 halves the GEMM weights (embedding and LM head stay 16-bit).
  c.tp = 8;
  c.dtype = kernels::Dtype::kFp8;
  const double fp8 = estimate_inference_memory(c).stages[0].weights_bytes;
  const double emb = 2.0 * 128256 * 8192 / 8 * 2;  // embedding + LM head, 16-bit, per rank
  EXPECT_NEAR((fp8 - emb) / ((s.weights_bytes - emb) / 2), 1.0, 1e-3);
  // Already FP8 (on one GPU ~70 GB of weights + 11 GB of KV cache still exceed): the warning does
  // not advise dtype: fp8.
  c.tp = 1;
  const MemoryEstimate one_fp8 = estimate_inference_memory(c);
  ASSERT_TRUE(one_fp8.exceeds());
  const std::string w8 = inference_memory_warning(c, one_fp8);
  EXPECT_EQ(w8.find("fp8"), std::string::npos) << w8;
  EXPECT_NE(w8.find("raise tp/pp, or lower batch or the context ("), std::string::npos) << w8;
  // generate_training attaches it (not the training estimate with gradients and Adam states).
  const auto g = generate_per_rank(inference("llama3-8b", 2, 1, 1, 1, 2, 128, 2), empty_db());
  EXPECT_EQ(g.stats.memory.peak().optimizer_bytes, 0.0);
}

// Shared programs (TrainConfig::share_programs, the default): every rank's DAG, read through
// Workload::program/group_of/peer_of, equals the DAG generated for that rank alone (share off),
// node for node and field for field, and the totals agree; the run's executor reads only these.
// Covers MoE (EP, expert DP), interleaved 1F1B (VP), tied embeddings over PP, CP 2 rings,
// TP-overlap rings (TP 4: next != previous), ZeRO 3, and inference pipelines.
TEST(Generators, SharedProgramsEqualPerRankOnes) {
  std::vector<std::pair<std::string, TrainConfig>> cases;
  {
    TrainConfig c;
    c.model = find_model("mixtral-8x7b", "", "");
    c.model.layers = 8;
    c.gpu = "H100";
    c.tp = 2;
    c.pp = 4;
    c.vp = 2;
    c.dp = 4;
    c.ep = 4;
    c.zero = 1;
    c.seq_len = 1024;
    c.global_batch = 16;
    cases.emplace_back("moe tp2 pp4 vp2 dp4 ep4", c);
  }
  {
    TrainConfig c = gpt3_175b(4, 2, 2, 8);  // tied embeddings: emb groups on stages 0 and 1
    c.model.layers = 4;
    c.cp = 2;
    c.tp_comm_overlap = true;
    c.zero = 3;
    cases.emplace_back("gpt3 tp4 pp2 dp2 cp2 tp-overlap zero3", c);
  }
  cases.emplace_back("inference tp2 pp2 dp2", inference("llama3-70b", 2, 2, 2, 1, 2, 128, 3));
  for (auto& [name, c] : cases) {
    c.share_programs = true;
    const Generated sh = generate_training(c, empty_db());
    c.share_programs = false;
    const Generated pr = generate_training(c, empty_db());
    const models::Workload& a = sh.workload;
    const models::Workload& b = pr.workload;
    ASSERT_TRUE(a.shared()) << name;
    ASSERT_FALSE(b.shared()) << name;
    EXPECT_NO_THROW(a.check_shared()) << name;
    ASSERT_EQ(a.ranks, b.ranks) << name;
    // One program per pipeline stage and CP position (nothing else tells the ranks apart here).
    EXPECT_EQ(a.programs.size(), std::size_t{c.pp} * c.cp) << name;
    ASSERT_EQ(a.groups.size(), b.groups.size()) << name;
    for (std::size_t g = 0; g < a.groups.size(); ++g) {
      EXPECT_EQ(a.groups[g].name, b.groups[g].name);
      EXPECT_EQ(a.groups[g].ranks, b.groups[g].ranks);
    }
    EXPECT_EQ(a.total_nodes(), b.total_nodes()) << name;
    EXPECT_EQ(sh.stats.nodes, pr.stats.nodes) << name;
    EXPECT_NEAR(sh.stats.model_flops / pr.stats.model_flops, 1.0, 1e-12) << name;
    EXPECT_NEAR(sh.stats.hw_flops / pr.stats.hw_flops, 1.0, 1e-12) << name;
    EXPECT_EQ(sh.stats.kernels_modelled + sh.stats.kernels_scaled + sh.stats.kernels_measured,
              pr.stats.kernels_modelled + pr.stats.kernels_scaled + pr.stats.kernels_measured) << name;
    EXPECT_EQ(sh.stats.compute_ps_rank0, pr.stats.compute_ps_rank0) << name;
    EXPECT_EQ(sh.infer.phase_end_nodes, pr.infer.phase_end_nodes) << name;
    for (std::size_t k = 0; k < pr.infer.phase_flops.size(); ++k) {
      EXPECT_NEAR(sh.infer.phase_flops[k] / pr.infer.phase_flops[k], 1.0, 1e-12) << name;
    }
    std::uint64_t colls = 0, p2p = 0;
    for (std::uint32_t r = 0; r < a.ranks; ++r) {
      const auto& pa = a.program(r);
      const auto& pb = b.programs[r];
      ASSERT_EQ(pa.size(), pb.size()) << name << " rank " << r;
      for (std::size_t i = 0; i < pa.size(); ++i) {
        const auto& x = pa[i];
        const auto& y = pb[i];
        ASSERT_TRUE(x.name == y.name && x.type == y.type && x.op == y.op && x.bytes == y.bytes && x.tag == y.tag &&
                    x.duration_ps == y.duration_ps && x.deps == y.deps && x.root == y.root && x.source_id == y.source_id)
            << name << " rank " << r << " node " << i << " " << y.name;
        ASSERT_EQ(a.group_of(r, x), y.group) << name << " rank " << r << " node " << i << " " << y.name;
        ASSERT_EQ(a.peer_of(r, x), y.peer) << name << " rank " << r << " node " << i << " " << y.name;
        colls += y.type == NodeType::kCollective;
        p2p += y.type == NodeType::kSend || y.type == NodeType::kRecv;
      }
    }
    EXPECT_GT(colls, 0u) << name;
    EXPECT_GT(p2p, 0u) << name;
    // The executor's shared index (instances counted per group slot) equals each rank's own
    // (counted per communicator), so the ranks of a program can share it.
    for (std::uint32_t r = 0; r < a.ranks; ++r) {
      ASSERT_TRUE(models::ProgramIndex::shareable(a, r)) << name << " rank " << r;
      const auto shared_index = models::ProgramIndex::of_shared(a, a.program_of[r]);
      const auto own = models::ProgramIndex::build(b.programs[r], b.groups.size(),
                                                   [](const models::WorkNode& n) { return n.group; });
      ASSERT_EQ(shared_index->instance, own.instance) << name << " rank " << r;
      ASSERT_EQ(shared_index->dep_begin, own.dep_begin) << name << " rank " << r;
      ASSERT_EQ(shared_index->dep_index, own.dep_index) << name << " rank " << r;
    }
    // unshare() gives the per-rank workload back.
    models::Workload u = a;
    u.unshare();
    ASSERT_FALSE(u.shared());
    for (std::uint32_t r = 0; r < u.ranks; ++r) {
      for (std::size_t i = 0; i < u.programs[r].size(); ++i) {
        ASSERT_EQ(u.programs[r][i].group, b.programs[r][i].group);
        ASSERT_EQ(u.programs[r][i].peer, b.programs[r][i].peer);
      }
    }
  }
}

TEST(Generators, InferenceBadConfigsAreInputErrors) {
  TrainConfig c = inference("llama3-70b", 8, 1, 1, 1, 0, 512, 4);
  EXPECT_NE(error_of(c).find("workload.generator.batch: must be >= 1"), std::string::npos) << error_of(c);
  c = inference("llama3-70b", 8, 1, 1, 1, 4, 0, 4);
  EXPECT_NE(error_of(c).find("workload.generator.prompt_tokens: must be >= 1"), std::string::npos);
  c = inference("llama3-70b", 8, 1, 1, 1, 4, 512, 0);
  EXPECT_NE(error_of(c).find("workload.generator.output_tokens: must be >= 1"), std::string::npos);
  c = inference("llama3-70b", 5, 1, 1, 1, 4, 512, 4);
  EXPECT_NE(error_of(c).find("64 attention heads are not divisible by TP 5"), std::string::npos);
  c = inference("llama3-70b", 8, 3, 1, 1, 4, 512, 4);
  EXPECT_NE(error_of(c).find("80 layers are not divisible by PP 3"), std::string::npos);
  c = inference("llama3-70b", 8, 1, 1, 1, 4, 512, 4);
  c.expected_gpus = 16;
  EXPECT_NE(error_of(c).find("world size 16 is not TP·PP·DP·CP"), std::string::npos);
  c = inference("mixtral-8x7b", 1, 1, 16, 16, 4, 512, 4);
  EXPECT_NE(error_of(c).find("EP 16 is above the model's 8 experts"), std::string::npos);
  c = inference("mixtral-8x7b", 4, 1, 1, 4, 6, 512, 4);
  EXPECT_NE(error_of(c).find("workload.generator.batch: batch 6 is not divisible by TP 4"), std::string::npos);
  c = inference("deepseek-v3", 8, 1, 1, 8, 8, 512, 4);
  EXPECT_NE(error_of(c).find("inference of multi-head latent attention"), std::string::npos);
  c = inference("llama3-70b", 8, 1, 1, 1, 4, 512, 4);
  c.flash_attention = false;
  EXPECT_NE(error_of(c).find("workload.generator.attention:"), std::string::npos);
  c = inference("llama3-70b", 8, 1, 1, 1, 4, 512, 4);
  c.cp = 2;
  EXPECT_NE(error_of(c).find("workload.generator.cp: context parallelism is not modelled for inference"),
            std::string::npos) << error_of(c);
  c = inference("llama3-70b", 8, 1, 1, 1, 4, 512, 100000);
  EXPECT_NE(error_of(c).find("workload.generator.output_tokens:"), std::string::npos);
  // Spec keys: the training-only keys are refused with mode: inference, the inference keys
  // without it, and each inference key is required; each error is one line naming the key.
  const auto base = gen({"model=llama3-70b", "mode=inference", "tp=8", "batch=4", "prompt_tokens=512", "output_tokens=4"});
  EXPECT_EQ(spec_error("", base), "no error");
  auto with = [&](std::vector<std::string> extra) {
    auto s = base;
    for (auto& e : extra) s.push_back("workload.generator." + e);
    return spec_error("", s);
  };
  for (const char* k : {"seq_len=2048", "micro_batch=2", "global_batch=8", "recompute=full", "zero=1", "iterations=2",
                        "sequence_parallel=true", "vp=2", "account_for_loss_in_pipeline_split=true"}) {
    const std::string e = with({k});
    EXPECT_EQ(e.rfind("<cli>: workload.generator." + std::string(k).substr(0, std::string(k).find('=')) +
                          ": is a training key but mode is inference", 0), 0u) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos);
  }
  EXPECT_NE(with({"mode=serving"}).find("workload.generator.mode: 'serving' is not a mode"), std::string::npos);
  EXPECT_NE(spec_error("", gen({"model=llama3-70b", "batch=4"})).find("workload.generator.batch: is an inference key"),
            std::string::npos);
  EXPECT_NE(spec_error("", gen({"model=llama3-70b", "mode=inference", "batch=4", "prompt_tokens=512"}))
                .find("workload.generator.output_tokens: missing for mode: inference"),
            std::string::npos);
  EXPECT_NE(with({"batch=-1"}).find("workload.generator.batch: '-1' is not a whole number >= 1"), std::string::npos);
}


// Qwen3-235B-A22B (HF config.json): head_dim 128 with hidden 4096 and 64 heads, so the QKV GEMM's
// output is (64 + 2 x 4) x 128 / TP, not 3 x hidden / TP, and q/k RMSNorm kernels over the rank's
// q and k heads. TP 2, seq 1024, one micro-batch: qkv n = 72 x 128 / 2 = 4608; qk_norm elements
// = 1024 x (64 + 4) / 2 x 128 = 4,456,448 -> forward 2 x n x 2 bytes, backward 3 x n x 2 bytes,
// 94 layers each way. Total parameters as published: 235B.
TEST(Generators, HeadDimAndQkNormOfQwen3) {
  TrainConfig c;
  c.model = find_model("qwen3-235b-a22b", "<test>", "model");
  c.gpu = "H100";
  c.tp = 2;
  c.ep = 2;
  c.global_batch = 1;
  c.seq_len = 1024;
  EXPECT_EQ(c.model.head_dim, 128u);
  EXPECT_NEAR(c.model.total_params() / 235e9, 1.0, 0.01);
  std::map<std::string, KernelNeed> by_op;
  bool qkv_seen = false;
  for (const auto& k : kernel_plan(c)) {
    by_op[k.op] = k;
    if (k.shape.find("n=4608 k=4096") != std::string::npos) qkv_seen = true;
  }
  EXPECT_TRUE(qkv_seen);
  ASSERT_EQ(by_op.count("qk_norm"), 1u);
  ASSERT_EQ(by_op.count("qk_norm_bwd"), 1u);
  EXPECT_DOUBLE_EQ(by_op["qk_norm"].bytes, 2.0 * 4456448 * 2);
  EXPECT_DOUBLE_EQ(by_op["qk_norm_bwd"].bytes, 3.0 * 4456448 * 2);
  EXPECT_EQ(by_op["qk_norm"].calls, 94u);
  // The same shape as a custom model: head_dim and qk_norm keys; hidden need not be heads x head_dim.
  const Spec s = load_spec("", {"workload.generator.model=custom", "workload.generator.layers=2",
                                "workload.generator.hidden=4096", "workload.generator.heads=64",
                                "workload.generator.kv_heads=4", "workload.generator.head_dim=128",
                                "workload.generator.qk_norm=true", "workload.generator.vocab=32000",
                                "workload.generator.ffn=swiglu"});
  const TrainConfig t = train_config_from_spec(s);
  EXPECT_EQ(t.model.head_dim, 128u);
  EXPECT_TRUE(t.model.qk_norm);
  EXPECT_NE(spec_error("", gen({"model=deepseek-v3", "head_dim=64"})).find("remove head_dim"), std::string::npos);
  EXPECT_NE(spec_error("", gen({"model=custom", "layers=2", "hidden=1000", "heads=64", "vocab=32000"})).find("give head_dim"),
            std::string::npos);
}

}  // namespace
}  // namespace fabricsim::jobs
