// SimAI/AICB workload reader: real SimAI and AICB files, the bad-input corpus, and small files
// written here for group layout and DAG semantics.
#include <gtest/gtest.h>

#include <map>

#include "io/simai_reader.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/scratch.hpp"
#include "tests/support/errors.hpp"

namespace fabricsim::io {
namespace {

using models::CollOp;
using models::NodeType;
using models::WorkNode;
using fabricsim::testing::data_dir;

std::string simai(const std::string& rel) { return (data_dir() / "simai" / rel).string(); }
std::string bad(const std::string& name) { return (data_dir() / "bad" / name).string(); }

std::vector<const WorkNode*> collectives(const std::vector<WorkNode>& prog) {
  std::vector<const WorkNode*> out;
  for (const auto& n : prog) {
    if (n.type == NodeType::kCollective) out.push_back(&n);
  }
  return out;
}

void expect_topological(const models::Workload& w) {
  for (const auto& prog : w.programs) {
    for (std::size_t i = 0; i < prog.size(); ++i) {
      for (const auto d : prog[i].deps) EXPECT_LT(d, i) << prog[i].name;
    }
  }
}

TEST(SimaiReader, MicroAllReduceTp8) {
  const auto w = read_simai(simai("SimAI/example/microAllReduce.txt"), 0);
  ASSERT_EQ(w.ranks, 8u);
  EXPECT_EQ(w.format, "simai");
  expect_topological(w);
  for (std::uint32_t r = 0; r < 8; ++r) {
    const auto& prog = w.programs[r];
    const auto colls = collectives(prog);
    ASSERT_EQ(colls.size(), 2u);
    EXPECT_EQ(colls[0]->op, CollOp::kAllReduce);
    EXPECT_EQ(colls[0]->bytes, 16777216u);
    EXPECT_EQ(colls[1]->bytes, 67108864u);
    EXPECT_EQ(colls[0]->name, "L0.fwd.comm");
    for (const auto* c : colls) {
      const auto& g = w.groups.at(static_cast<std::size_t>(c->group));
      EXPECT_EQ(g.name, "tp0");
      EXPECT_EQ(g.ranks.size(), 8u);
    }
    int fwd_compute = 0;
    for (const auto& n : prog) {
      if (n.type == NodeType::kCompute && n.duration_ps == 556 * engine::kPsPerUs) ++fwd_compute;
    }
    EXPECT_EQ(fwd_compute, 2);
    // Serial forward: compute -> allreduce -> compute -> allreduce.
    EXPECT_EQ(prog[0].name, "L0.fwd.compute");
    EXPECT_EQ(prog[1].deps, std::vector<std::uint32_t>{0});
    EXPECT_EQ(prog[2].deps, std::vector<std::uint32_t>{1});
    EXPECT_EQ(prog[3].deps, std::vector<std::uint32_t>{2});
  }
}

TEST(SimaiReader, AicbMicroAllReduceSweep16) {
  const auto path = simai("aicb/workload/simAI/micro_test/all_reduce.txt");
  EXPECT_INPUT_ERROR(read_simai(path, 0), "all_reduce.txt:1", "all_gpus", "pass --gpus N");
  const auto w = read_simai(path, 16);
  ASSERT_EQ(w.ranks, 16u);
  expect_topological(w);
  for (const auto& prog : w.programs) {
    const auto colls = collectives(prog);
    ASSERT_EQ(colls.size(), 19u);
    for (std::size_t i = 0; i < colls.size(); ++i) {
      EXPECT_EQ(colls[i]->op, CollOp::kAllReduce);
      EXPECT_EQ(colls[i]->bytes, 4096ull << i);  // 4 KiB .. 1 GiB
      EXPECT_EQ(w.groups.at(static_cast<std::size_t>(colls[i]->group)).ranks.size(), 16u);
    }
    // One serial chain: compute(1 ns) -> allreduce, 19 times.
    ASSERT_EQ(prog.size(), 38u);
    EXPECT_EQ(prog[0].duration_ps, 1000);
    for (std::size_t i = 1; i < prog.size(); ++i) EXPECT_EQ(prog[i].deps, std::vector<std::uint32_t>{static_cast<std::uint32_t>(i - 1)});
  }
}

TEST(SimaiReader, Gpt13bTp8Dp2) {
  const auto path = simai("aicb/workload/simAI/model_workload/G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt");
  const auto w = read_simai(path, 16);
  ASSERT_EQ(w.ranks, 16u);
  expect_topological(w);
  // world, tp0, tp1, dp0..dp7
  ASSERT_EQ(w.groups.size(), 11u);
  for (std::uint32_t r = 0; r < 16; ++r) {
    std::map<std::string, int> per_family;
    std::map<CollOp, int> per_op;
    for (const auto* c : collectives(w.programs[r])) {
      const auto& g = w.groups.at(static_cast<std::size_t>(c->group));
      per_family[g.name.substr(0, 2)]++;
      per_op[c->op]++;
      if (g.name.rfind("tp", 0) == 0) {
        EXPECT_EQ(g.ranks.size(), 8u);
        EXPECT_EQ(g.ranks.front(), r / 8 * 8);
      } else {
        EXPECT_EQ(g.name, "dp" + std::to_string(r % 8));
        EXPECT_EQ(g.ranks, (std::vector<std::uint32_t>{r % 8, r % 8 + 8}));
      }
    }
    // 91 fwd + 82 ig collectives in TP, one REDUCESCATTER wg collective in DP.
    EXPECT_EQ(per_family["tp"], 173) << "rank " << r;
    EXPECT_EQ(per_family["dp"], 1) << "rank " << r;
    EXPECT_EQ(per_op[CollOp::kReduceScatter], 1);
    EXPECT_EQ(per_op[CollOp::kBroadcast], 1);
    EXPECT_EQ(per_op[CollOp::kAllGather], 1);
    EXPECT_EQ(per_op[CollOp::kAllReduce], 171);
  }
  // The wg collective is asynchronous: nothing on the chain depends on it, only its update.
  const auto& prog = w.programs[0];
  for (std::uint32_t i = 0; i < prog.size(); ++i) {
    if (prog[i].name != "L1.wg.comm") continue;
    EXPECT_EQ(prog[i].bytes, 6497239040u);
    for (const auto& n : prog) {
      for (const auto d : n.deps) {
        if (d == i) {
          EXPECT_EQ(n.name, "L1.wg.update");
        }
      }
    }
  }
  EXPECT_INPUT_ERROR(read_simai(path, 12), "G13B", "model_parallel_NPU_group", "does not divide");
}

TEST(SimaiReader, OtherRealFiles) {
  const auto w = read_simai(simai("aicb/workload/simAI/model_workload/L7B-D1-C02_Llama7B_deepspeed_zero3_A100.txt"), 8);
  EXPECT_EQ(w.ranks, 8u);
  const auto w2 = read_simai(simai("aicb/workload/simAI/model_workload/L7B-M1-C04_Llama7B_megatron_tp2_pp1_mbs1_A100.txt"), 8);
  EXPECT_EQ(w2.groups[1].ranks, (std::vector<std::uint32_t>{0, 1}));
  const auto w3 = read_simai(simai("aicb/workload/simAI/micro_test/all_gather.txt"), 4);
  EXPECT_EQ(collectives(w3.programs[3]).size(), 19u);
  EXPECT_EQ(collectives(w3.programs[3])[0]->op, CollOp::kAllGather);
}

// ---- bad-input corpus ----

TEST(SimaiReaderBad, Corpus) {
  EXPECT_INPUT_ERROR(read_simai(bad("simai_malformed_line.txt"), 0), "simai_malformed_line.txt:4", "columns",
                     "found 10");
  EXPECT_INPUT_ERROR(read_simai(bad("simai_wrong_layer_count.txt"), 0), "simai_wrong_layer_count.txt:2",
                     "layer count", "declares 3");
  EXPECT_INPUT_ERROR(read_simai(bad("simai_unknown_comm_type.txt"), 0), "simai_unknown_comm_type.txt:4",
                     "column ig_comm_type", "ALLSCATTER");
  EXPECT_INPUT_ERROR(read_simai(bad("simai_negative_size.txt"), 0), "simai_negative_size.txt:4",
                     "column fwd_comm_size", "negative");
  EXPECT_INPUT_ERROR(read_simai(bad("simai_non_numeric.txt"), 0), "simai_non_numeric.txt:4",
                     "column fwd_compute_time", "1e3x");
  EXPECT_INPUT_ERROR(read_simai(bad("simai_missing_all_gpus.txt"), 0), "simai_missing_all_gpus.txt:1",
                     "all_gpus", "--gpus");
  EXPECT_NO_THROW(read_simai(bad("simai_missing_all_gpus.txt"), 4));
  EXPECT_INPUT_ERROR(read_simai(bad("does_not_exist.txt"), 0), "does_not_exist.txt", "cannot open");
}

// ---- small files written here ----

constexpr const char* kLayers =
    "a -1 10 ALLREDUCE 100 20 ALLGATHER_EP 200 30 REDUCESCATTER 300 5\n"
    "b -1 11 NONE 0 21 ALLTOALL_DP_EP 400 31 ALLREDUCE_EP 500 6\n";

TEST(SimaiReaderGenerated, HeaderChecks) {
  fabricsim::testing::ScratchDir dir("simai");
  const auto f = [&](const std::string& name, const std::string& header) {
    return dir.file(name, header + "\n2\n" + kLayers);
  };
  EXPECT_INPUT_ERROR(read_simai(f("pp.txt", "HYBRID_TRANSFORMER model_parallel_NPU_group: 2 pp: 2 all_gpus: 8"), 0),
                     "pp.txt:1", "pp", "pp > 1 is not supported yet");
  EXPECT_INPUT_ERROR(read_simai(f("dlrm.txt", "HYBRID_DLRM model_parallel_NPU_group: 2"), 8), "dlrm.txt:1",
                     "policy", "not supported");
  EXPECT_INPUT_ERROR(read_simai(f("pol.txt", "FOO model_parallel_NPU_group: 2"), 8), "pol.txt:1", "policy", "FOO");
  EXPECT_INPUT_ERROR(read_simai(f("diff.txt", "DATA all_gpus: 8"), 16), "diff.txt:1", "all_gpus", "--gpus is 16");
  EXPECT_INPUT_ERROR(read_simai(f("tok.txt", "DATA all_gpus: 8 bogus"), 0), "tok.txt:1", "bogus");
  EXPECT_INPUT_ERROR(read_simai(f("ep.txt", "MODEL model_parallel_NPU_group: 2 ep: 3 all_gpus: 8"), 0), "ep.txt:4",
                     "ep", "does not divide");
  // Order-free keys, bare pp_comm, checkpoints lists, unknown keys, 13 columns for HYBRID_CUSTOMIZED.
  EXPECT_NO_THROW(read_simai(f("ok.txt", "HYBRID_TRANSFORMER_FWD_IN_BCKWD all_gpus: 8 ga: 1 checkpoints: 2 0 1 "
                                         "checkpoint_initiates: 0 pp_comm 0 model_parallel_NPU_group: 2 ep: 2 "
                                         "newkey: 3 pp: 1"), 0));
  EXPECT_NO_THROW(read_simai(dir.file("cust.txt", "HYBRID_CUSTOMIZED model_parallel_NPU_group: 2 all_gpus: 4\n1\n"
                                                  "a -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1 DATA\n"), 0));
  // A size beyond 64 bits is an integer, just too large: the line says so (was "not an integer").
  EXPECT_INPUT_ERROR(read_simai(dir.file("huge.txt", "DATA all_gpus: 8\n1\n"
                                                 "a -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 18446744073709551615 1\n"), 0),
                     "huge.txt:3", "wg_comm_size", "out of range");
  EXPECT_INPUT_ERROR(read_simai(dir.file("cust12.txt", "HYBRID_CUSTOMIZED all_gpus: 4\n1\n"
                                                    "a -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n"), 0),
                     "cust12.txt:3", "expected 13");
}

TEST(SimaiReaderGenerated, GroupsTpDpEpDpEp) {
  fabricsim::testing::ScratchDir dir("simai");
  // W = 8, tp = 2 -> dp = 4, ep = 2.
  const auto w = read_simai(
      dir.file("g.txt", std::string("HYBRID_TRANSFORMER model_parallel_NPU_group: 2 ep: 2 all_gpus: 8\n2\n") + kLayers), 0);
  expect_topological(w);
  std::map<std::string, std::vector<std::uint32_t>> by_name;
  for (const auto& g : w.groups) by_name[g.name] = g.ranks;
  EXPECT_EQ(by_name["tp1"], (std::vector<std::uint32_t>{2, 3}));
  EXPECT_EQ(by_name["dp1"], (std::vector<std::uint32_t>{1, 3, 5, 7}));
  EXPECT_EQ(by_name["ep0.0"], (std::vector<std::uint32_t>{0, 2}));
  EXPECT_EQ(by_name["ep0.1"], (std::vector<std::uint32_t>{4, 6}));
  EXPECT_EQ(by_name["dpep0.0"], (std::vector<std::uint32_t>{0, 4}));
  EXPECT_EQ(by_name["dpep1.1"], (std::vector<std::uint32_t>{3, 7}));
  // Rank 5: which group does each collective use?
  std::map<std::string, std::string> group_of;
  for (const auto& n : w.programs[5]) {
    if (n.type == NodeType::kCollective) group_of[n.name] = w.groups.at(static_cast<std::size_t>(n.group)).name;
  }
  EXPECT_EQ(group_of["L0.fwd.comm"], "tp2");
  EXPECT_EQ(group_of["L0.ig.comm"], "ep1.1");     // ALLGATHER_EP
  EXPECT_EQ(group_of["L0.wg.comm"], "dp1");       // REDUCESCATTER (wg default: DP)
  EXPECT_EQ(group_of["L1.ig.comm"], "dpep1.0");   // ALLTOALL_DP_EP
  EXPECT_EQ(group_of["L1.wg.comm"], "ep1.1");     // ALLREDUCE_EP
}

TEST(SimaiReaderGenerated, TransformerDagWithGradAccumulation) {
  fabricsim::testing::ScratchDir dir("simai");
  const auto w = read_simai(
      dir.file("ga.txt", std::string("HYBRID_TRANSFORMER model_parallel_NPU_group: 2 ep: 2 ga: 2 all_gpus: 8\n2\n") +
                             kLayers), 0);
  const auto& prog = w.programs[0];
  std::map<std::string, std::uint32_t> idx;
  for (std::uint32_t i = 0; i < prog.size(); ++i) idx[prog[i].name] = i;
  ASSERT_EQ(idx.size(), prog.size()) << "names are unique";
  // Micro-batch 0 has no wg collectives or updates; micro-batch 1 has both.
  EXPECT_EQ(idx.count("mb0.L0.wg.comm"), 0u);
  EXPECT_EQ(idx.count("mb0.L0.wg.update"), 0u);
  ASSERT_EQ(idx.count("mb1.L0.wg.comm"), 1u);
  // Forward of mb1 continues after the backward of mb0 (chain tail = mb0.L0.wg.compute).
  EXPECT_EQ(prog[idx["mb1.L0.fwd.compute"]].deps, std::vector<std::uint32_t>{idx["mb0.L0.wg.compute"]});
  // Layer b has no fwd comm: L1.fwd.compute follows L0.fwd.comm, L1.ig.compute follows L1.fwd.compute.
  EXPECT_EQ(prog[idx["mb1.L1.fwd.compute"]].deps, std::vector<std::uint32_t>{idx["mb1.L0.fwd.comm"]});
  EXPECT_EQ(prog[idx["mb1.L1.ig.compute"]].deps, std::vector<std::uint32_t>{idx["mb1.L1.fwd.compute"]});
  // Backward: ig.compute -> ig.comm -> wg.compute -> (async) wg.comm -> wg.update.
  EXPECT_EQ(prog[idx["mb1.L1.ig.comm"]].deps, std::vector<std::uint32_t>{idx["mb1.L1.ig.compute"]});
  EXPECT_EQ(prog[idx["mb1.L1.wg.compute"]].deps, std::vector<std::uint32_t>{idx["mb1.L1.ig.comm"]});
  EXPECT_EQ(prog[idx["mb1.L1.wg.comm"]].deps, std::vector<std::uint32_t>{idx["mb1.L1.wg.compute"]});
  EXPECT_EQ(prog[idx["mb1.L1.wg.update"]].deps, std::vector<std::uint32_t>{idx["mb1.L1.wg.comm"]});
  EXPECT_EQ(prog[idx["mb1.L1.wg.update"]].duration_ps, 6000);
  // The next layer's backward does not wait for the wg collective.
  EXPECT_EQ(prog[idx["mb1.L0.ig.compute"]].deps, std::vector<std::uint32_t>{idx["mb1.L1.wg.compute"]});
  EXPECT_EQ(prog[idx["mb1.L0.fwd.compute"]].duration_ps, 10000);
  // 2 micro-batches x (2 fwd + 2 ig + 2 wg computes) + 1 fwd comm x 2 + 2 ig comms x 2 + 2 wg comms + 2 updates.
  EXPECT_EQ(prog.size(), 12u + 2u + 4u + 2u + 2u);
}

TEST(SimaiReaderGenerated, InferenceAndDataPolicies) {
  fabricsim::testing::ScratchDir dir("simai");
  const auto inf = read_simai(
      dir.file("inf.txt", std::string("DISTRIBUTED_INFERENCE model_parallel_NPU_group: 2 all_gpus: 4\n2\n") +
                              "a -1 10 ALLREDUCE 100 20 ALLGATHER 200 30 REDUCESCATTER 300 5\n"
                              "b -1 0 ALLREDUCE 0 21 ALLTOALL 400 31 ALLREDUCE 500 6\n"), 0);
  // Forward only; b has compute 0 (omitted) and size 0 (no collective).
  ASSERT_EQ(inf.programs[0].size(), 2u);
  EXPECT_EQ(inf.programs[0][0].name, "L0.fwd.compute");
  EXPECT_EQ(inf.programs[0][1].name, "L0.fwd.comm");
  const auto data = read_simai(
      dir.file("data.txt", std::string("DATA all_gpus: 4\n2\n") + kLayers), 0);
  ASSERT_EQ(data.programs[2].size(), 4u);
  EXPECT_EQ(data.programs[2][0].duration_ps, 30000);
  EXPECT_EQ(data.programs[2][1].op, CollOp::kReduceScatter);
  EXPECT_EQ(data.groups.at(static_cast<std::size_t>(data.programs[2][1].group)).ranks.size(), 4u);
  EXPECT_EQ(data.programs[2][3].op, CollOp::kAllReduce);  // ALLREDUCE_EP with ep 1: size-1 group
  EXPECT_EQ(data.groups.at(static_cast<std::size_t>(data.programs[2][3].group)).ranks.size(), 1u);
}

}  // namespace
}  // namespace fabricsim::io
