// SimAI/AICB workload reader: real SimAI and AICB files, the bad-input corpus, and small files
// written here for group layout and DAG semantics.
#include <gtest/gtest.h>

#include <map>
#include <set>

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
  // pp > 1 runs as a pipeline; it needs the bytes sent between stages.
  EXPECT_NO_THROW(read_simai(f("pp.txt", "HYBRID_TRANSFORMER model_parallel_NPU_group: 2 pp: 2 all_gpus: 8 pp_comm: 64"), 0));
  EXPECT_INPUT_ERROR(read_simai(f("ppc.txt", "HYBRID_TRANSFORMER model_parallel_NPU_group: 2 pp: 2 all_gpus: 8"), 0),
                     "ppc.txt:1", "pp_comm", "write 'pp_comm: <bytes>'");
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

// ---- pipeline parallelism (pp > 1) ----

// pp 2, ga 2, tp 2 on 8 GPUs, written as AICB writes it: one iteration-level line, the two
// micro-batches of the stage's two layers, one iteration-level line.
constexpr const char* kPp2 =
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 2 vpp: 1 ga: 2 all_gpus: 8 "
    "checkpoints: 0 checkpoint_initiates: 0 pp_comm: 1048576\n"
    "6\n"
    "grad_param_comm -1 1 NONE 0 1 NONE 0 1 REDUCESCATTER 4194304 100\n"
    "attn -1 100000 ALLREDUCE 65536 200000 ALLREDUCE 65536 100000 NONE 0 100\n"
    "mlp -1 150000 ALLREDUCE 65536 300000 ALLREDUCE 65536 150000 NONE 0 100\n"
    "attn -1 100000 ALLREDUCE 65536 200000 ALLREDUCE 65536 100000 NONE 0 100\n"
    "mlp -1 150000 ALLREDUCE 65536 300000 ALLREDUCE 65536 150000 NONE 0 100\n"
    "optimizer -1 0 ALLREDUCE 4 0 NONE 0 0 NONE 0 0\n";

/// "recv.act", "send.grad", ... of a pipeline node named "mb<m>.c<c>.<kind>".
std::string p2p_kind(const std::string& name) { return name.substr(name.find('.', name.find('.') + 1) + 1); }

/// The steps of a stage program in order: "F<mb>" / "B<mb>" from each step's first node.
std::vector<std::string> steps_of(const std::vector<WorkNode>& prog) {
  std::vector<std::string> out;
  std::string last;
  for (const auto& n : prog) {
    if (n.name.rfind("mb", 0) != 0) continue;
    const auto dot = n.name.find('.', n.name.find('.') + 1);  // "mb<m>.c<c>."
    const std::string step = n.name.substr(0, dot);
    const bool fwd = n.name.find(".fwd.") != std::string::npos || n.name.find(".act") != std::string::npos;
    const std::string key = (fwd ? "F" : "B") + step;
    if (key != last) out.push_back(key);
    last = key;
  }
  return out;
}

TEST(SimaiReaderPipeline, Pp2Ga2Structure) {
  fabricsim::testing::ScratchDir dir("simai");
  const auto w = read_simai(dir.file("pp2.txt", kPp2), 0);
  ASSERT_EQ(w.ranks, 8u);
  ASSERT_TRUE(w.shared());
  EXPECT_NO_THROW(w.check_shared());
  ASSERT_EQ(w.programs.size(), 2u);  // one program per stage
  // rank = t + tp * (s + pp * d): stage s = (r / 2) % 2.
  for (std::uint32_t r = 0; r < 8; ++r) EXPECT_EQ(w.program_of[r], (r / 2) % 2) << r;
  // Megatron 1F1B with p = 2, m = 2: stage 0 warms up with p - s - 1 = 1 forward.
  EXPECT_EQ(steps_of(w.programs[0]), (std::vector<std::string>{"Fmb0.c0", "Fmb1.c0", "Bmb0.c0", "Bmb1.c0"}));
  EXPECT_EQ(steps_of(w.programs[1]), (std::vector<std::string>{"Fmb0.c0", "Bmb0.c0", "Fmb1.c0", "Bmb1.c0"}));
  // Per stage: 2 activations sent forward and 2 gradients back, pp_comm bytes each; stage 0
  // sends activations and receives gradients, stage 1 the other way round.
  for (std::uint32_t s = 0; s < 2; ++s) {
    std::map<std::string, int> count;
    for (const auto& n : w.programs[s]) {
      if (n.type == NodeType::kSend || n.type == NodeType::kRecv) {
        EXPECT_EQ(n.bytes, 1048576u) << n.name;
        count[p2p_kind(n.name)]++;
      }
    }
    EXPECT_EQ(count[s == 0 ? "send.act" : "recv.act"], 2) << s;
    EXPECT_EQ(count[s == 0 ? "recv.grad" : "send.grad"], 2) << s;
    EXPECT_EQ(count.size(), 2u) << s;
  }
  // Peers: rank 5 = (t 1, s 0, d 1) sends to rank 7 = (t 1, s 1, d 1); tags pair up.
  std::multiset<std::pair<std::int64_t, std::int32_t>> sent, received;  // (tag, src rank) per dst 7
  for (const auto& n : w.program(5)) {
    if (n.type == NodeType::kSend) {
      EXPECT_EQ(w.peer_of(5, n), 7);
      sent.insert({n.tag, 5});
    }
  }
  for (const auto& n : w.program(7)) {
    if (n.type == NodeType::kRecv) {
      EXPECT_EQ(w.peer_of(7, n), 5);
      received.insert({n.tag, 5});
    }
  }
  EXPECT_EQ(sent, received);
  EXPECT_EQ(sent.size(), 2u);
  // A send is issued off the chain: nothing but the next step's nodes follow it, and no node
  // depends on it. A receive is on the chain: the step's first compute depends on it.
  const auto& p1 = w.programs[1];
  for (std::uint32_t i = 0; i < p1.size(); ++i) {
    if (p1[i].type == NodeType::kSend) {
      for (const auto& n : p1) {
        for (const auto d : n.deps) EXPECT_NE(d, i) << n.name << " waits for " << p1[i].name;
      }
    }
    if (p1[i].name == "mb0.c0.L1.fwd.compute") {
      ASSERT_EQ(p1[i].deps.size(), 1u);
      EXPECT_EQ(p1[p1[i].deps[0]].name, "mb0.c0.recv.act");
    }
  }
  // Micro-batch 1 runs its own lines of the file (3 and 4), micro-batch 0 lines 1 and 2.
  std::map<std::string, std::uint64_t> line_of;
  for (const auto& n : p1) line_of[n.name] = n.source_id;
  EXPECT_EQ(line_of["mb0.c0.L1.fwd.compute"], 4u);  // file line = index + 3
  EXPECT_EQ(line_of["mb1.c0.L3.fwd.compute"], 6u);
  // Collectives per rank: 2 micro-batches x 2 layers x (fwd + ig) TP all-reduces, the
  // optimizer's all-reduce, and the one DP reduce-scatter; DP group of rank 6 = {2, 6}.
  for (std::uint32_t r = 0; r < 8; ++r) {
    int tp = 0, dp = 0;
    for (const auto& n : w.program(r)) {
      if (n.type != NodeType::kCollective) continue;
      const auto& g = w.groups.at(static_cast<std::size_t>(w.group_of(r, n)));
      if (g.name.rfind("tp", 0) == 0) {
        ++tp;
        EXPECT_EQ(g.ranks, (std::vector<std::uint32_t>{r / 2 * 2, r / 2 * 2 + 1}));
      } else {
        ++dp;
        EXPECT_EQ(n.op, CollOp::kReduceScatter);
        EXPECT_EQ(g.ranks, (std::vector<std::uint32_t>{r % 4, r % 4 + 4}));
      }
    }
    EXPECT_EQ(tp, 9) << r;
    EXPECT_EQ(dp, 1) << r;
  }
  // The iteration-level lines: line 0 forward first and backward last; the reduce-scatter is
  // the last collective (after every micro-batch's backward).
  EXPECT_EQ(w.programs[0].front().name, "L0.fwd.compute");
  const WorkNode* last_coll = nullptr;
  for (const auto& n : w.programs[0]) {
    if (n.type == NodeType::kCollective) last_coll = &n;
  }
  ASSERT_NE(last_coll, nullptr);
  EXPECT_EQ(last_coll->name, "L0.wg.comm");
}

TEST(SimaiReaderPipeline, InterleavedOrderAndSimaiExample) {
  // SimAI's published 9,216-GPU MoE example (github.com/aliyun/SimAI example/workload_analytical.txt).
  const auto w = read_simai(simai("SimAI/example/workload_analytical.txt"), 0);
  ASSERT_EQ(w.ranks, 9216u);
  ASSERT_EQ(w.programs.size(), 12u);
  EXPECT_NO_THROW(w.check_shared());
  constexpr std::uint32_t p = 12, v = 8, m = 24;
  for (std::uint32_t s = 0; s < p; ++s) {
    std::map<std::string, int> count;
    for (const auto& n : w.programs[s]) {
      if (n.type == NodeType::kSend || n.type == NodeType::kRecv) {
        EXPECT_EQ(n.bytes, 50331648u);
        count[p2p_kind(n.name)]++;
      }
    }
    // Every (micro-batch, chunk) forward receives unless it is the first virtual stage
    // (stage 0, chunk 0) and sends unless it is the last one (stage 11, chunk 7).
    EXPECT_EQ(count["recv.act"], static_cast<int>(m * v - (s == 0 ? m : 0))) << s;
    EXPECT_EQ(count["send.act"], static_cast<int>(m * v - (s == p - 1 ? m : 0))) << s;
    EXPECT_EQ(count["recv.grad"], static_cast<int>(m * v - (s == p - 1 ? m : 0))) << s;
    EXPECT_EQ(count["send.grad"], static_cast<int>(m * v - (s == 0 ? m : 0))) << s;
    // Interleaved warm-up on stage s: (p - s - 1) * 2 + (v - 1) * p forwards, then the steady
    // state's first forward, before the first backward.
    const auto steps = steps_of(w.programs[s]);
    ASSERT_EQ(steps.size(), 2u * m * v);
    std::size_t warm = 0;
    while (steps[warm][0] == 'F') ++warm;
    EXPECT_EQ(warm, (p - s - 1) * 2 + (v - 1) * p + 1) << s;
  }
  // Virtual micro-batch k: chunk (k mod p*v) / p of micro-batch (k / (p*v)) * p + k mod p.
  const auto steps0 = steps_of(w.programs[0]);
  EXPECT_EQ(steps0[0], "Fmb0.c0");
  EXPECT_EQ(steps0[11], "Fmb11.c0");
  EXPECT_EQ(steps0[12], "Fmb0.c1");
  // Rank 2 (t 0, stage 1, replica 0): EP and DP_EP groups lie inside its stage's DP group
  // (ranks 2 + 24k, k < 384): EP = 16 consecutive DP members, DP_EP = every 16th.
  std::map<std::string, std::vector<std::uint32_t>> group_of;
  for (const auto& n : w.program(2)) {
    if (n.type == NodeType::kCollective) {
      const auto& g = w.groups.at(static_cast<std::size_t>(w.group_of(2, n)));
      group_of[g.name.substr(0, g.name.find_first_of("0123456789"))] = g.ranks;
    }
  }
  ASSERT_EQ(group_of["ep"].size(), 16u);
  EXPECT_EQ(group_of["ep"][1], 26u);
  ASSERT_EQ(group_of["dpep"].size(), 24u);
  EXPECT_EQ(group_of["dpep"][1], 2u + 16u * 24u);
  ASSERT_EQ(group_of["dp"].size(), 384u);
  EXPECT_EQ(group_of["dp"][1], 26u);
  EXPECT_EQ(group_of["tp"], (std::vector<std::uint32_t>{2, 3}));
}

TEST(SimaiReaderPipeline, UnrolledGaAtPp1RunsTheListOnce) {
  fabricsim::testing::ScratchDir dir("simai");
  std::string pp1 = kPp2;
  pp1.replace(pp1.find("pp: 2"), 5, "pp: 1");
  pp1.replace(pp1.find("pp_comm: 1048576"), 16, "pp_comm: 0");
  const auto w = read_simai(dir.file("pp1.txt", pp1), 0);
  EXPECT_FALSE(w.shared());
  ASSERT_EQ(w.warnings.size(), 1u);
  EXPECT_NE(w.warnings[0].find("written out"), std::string::npos) << w.warnings[0];
  // SimAI's flat pass: each of the 6 lines once forward, once backward (no mb<m> repetition).
  int fwd = 0;
  for (const auto& n : w.programs[0]) {
    EXPECT_EQ(n.name.rfind("mb", 0), std::string::npos) << n.name;
    if (n.name.find(".fwd.compute") != std::string::npos) ++fwd;
  }
  EXPECT_EQ(fwd, 5);  // line 5 has no forward compute
}

TEST(SimaiReaderPipeline, BadHeaders) {
  fabricsim::testing::ScratchDir dir("simai");
  const auto f = [&](const std::string& name, const std::string& header) {
    return dir.file(name, header + "\n2\n" + kLayers);
  };
  EXPECT_INPUT_ERROR(read_simai(f("div.txt", "HYBRID_TRANSFORMER model_parallel_NPU_group: 2 pp: 3 all_gpus: 8 pp_comm: 8"), 0),
                     "div.txt:1", "pp", "does not divide the 8 GPUs");
  EXPECT_INPUT_ERROR(read_simai(f("vpp.txt", "HYBRID_TRANSFORMER model_parallel_NPU_group: 2 pp: 2 vpp: 3 all_gpus: 8 pp_comm: 8"), 0),
                     "vpp.txt:1", "vpp", "micro-batch has 2 layer lines");
  EXPECT_INPUT_ERROR(read_simai(f("ga.txt", "HYBRID_TRANSFORMER model_parallel_NPU_group: 2 pp: 2 vpp: 2 ga: 3 all_gpus: 8 pp_comm: 8"), 0),
                     "ga.txt:1", "ga", "not a multiple of pp");
  EXPECT_INPUT_ERROR(read_simai(f("data.txt", "DATA pp: 2 all_gpus: 8 pp_comm: 8"), 0), "data.txt:1", "pp", "DATA");
  // vpp with pp 1 is what AICB writes for every file (vpp: layers per stage): accepted, no effect.
  const auto a = read_simai(f("v1.txt", "HYBRID_TRANSFORMER model_parallel_NPU_group: 2 vpp: 8 all_gpus: 8"), 0);
  const auto b = read_simai(f("v0.txt", "HYBRID_TRANSFORMER model_parallel_NPU_group: 2 all_gpus: 8"), 0);
  ASSERT_EQ(a.programs.size(), b.programs.size());
  EXPECT_EQ(a.programs[0].size(), b.programs[0].size());
  // A non-repeating file with ga > 1 repeats its list ga times on every stage (vpp 1: any ga).
  const auto r = read_simai(f("rep.txt", "HYBRID_TRANSFORMER model_parallel_NPU_group: 2 pp: 2 ga: 3 all_gpus: 8 pp_comm: 8"), 0);
  EXPECT_EQ(steps_of(r.programs[0]).size(), 6u);
}

}  // namespace
}  // namespace fabricsim::io
