// Chakra ET reader: real ASTRA-sim microbenchmark and MSCCL custom-collective traces, a bad-input
// corpus, and traces written here to exercise each validation.
#include <gtest/gtest.h>

#include <google/protobuf/util/delimited_message_util.h>

#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "et_def.pb.h"
#include "io/chakra_reader.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/scratch.hpp"
#include "tests/support/errors.hpp"

namespace fabricsim::io {
namespace {

using models::CollOp;
using models::NodeType;
using fabricsim::testing::data_dir;

std::string micro(const std::string& sub) {
  return (data_dir() / "chakra/astra-sim/examples/workload/microbenchmarks" / sub).string();
}

/// Every dep points to an earlier node (programs are topologically ordered).
void expect_topological(const models::Workload& w) {
  for (const auto& prog : w.programs) {
    for (std::size_t i = 0; i < prog.size(); ++i) {
      for (const auto d : prog[i].deps) EXPECT_LT(d, i) << prog[i].name;
    }
  }
}

void expect_single_collective(const models::Workload& w, std::uint32_t ranks, CollOp op) {
  ASSERT_EQ(w.ranks, ranks);
  EXPECT_EQ(w.format, "chakra");
  ASSERT_EQ(w.programs.size(), ranks);
  ASSERT_EQ(w.groups.size(), 1u);
  EXPECT_EQ(w.groups[0].ranks.size(), ranks);
  for (std::uint32_t r = 0; r < ranks; ++r) {
    ASSERT_EQ(w.programs[r].size(), 1u) << "rank " << r;
    const auto& n = w.programs[r][0];
    EXPECT_EQ(n.type, NodeType::kCollective);
    EXPECT_EQ(n.op, op);
    EXPECT_EQ(n.bytes, 1048576u);
    EXPECT_EQ(n.group, 0);
    EXPECT_TRUE(n.deps.empty());
  }
}

TEST(ChakraReader, AllReduce8Ranks) {
  const auto w = read_chakra(micro("all_reduce/8npus_1MB/all_reduce"));
  expect_single_collective(w, 8, CollOp::kAllReduce);
  EXPECT_EQ(w.programs[0][0].name, "all_reduce_8npus_1MB");
  EXPECT_EQ(w.programs[1][0].source_id, 1u);
}

TEST(ChakraReader, AllGather16Ranks) {
  expect_single_collective(read_chakra(micro("all_gather/16npus_1MB/all_gather")), 16, CollOp::kAllGather);
}

TEST(ChakraReader, AllReduce16RanksReduceScatterAllToAll) {
  expect_single_collective(read_chakra(micro("all_reduce/16npus_1MB/all_reduce")), 16, CollOp::kAllReduce);
  expect_single_collective(read_chakra(micro("reduce_scatter/4npus_1MB/reduce_scatter")), 4,
                           CollOp::kReduceScatter);
  expect_single_collective(read_chakra(micro("all_to_all/8npus_1MB/all_to_all")), 8, CollOp::kAllToAll);
}

TEST(ChakraReader, CustomRingAllReduceSendRecv) {
  const auto prefix = data_dir() / "chakra/astra-sim/examples/system/custom_collectives/"
                                   "custom_ring_allreduce_8npus_1MB/custom_allreduce";
  const auto w = read_chakra(prefix.string());
  ASSERT_EQ(w.ranks, 8u);
  expect_topological(w);
  // (src, dst, tag) -> (count, bytes) of sends and of receives.
  std::map<std::tuple<int, int, long>, std::pair<int, unsigned long>> sends, recvs;
  for (std::uint32_t r = 0; r < 8; ++r) {
    int n_send = 0, n_recv = 0, n_comp = 0;
    for (const auto& n : w.programs[r]) {
      switch (n.type) {
        case NodeType::kSend:
          ++n_send;
          EXPECT_EQ(n.peer, static_cast<int>((r + 1) % 8));  // ring: send to the next rank
          EXPECT_EQ(n.bytes, 131072u);                      // 1 MiB / 8 chunks
          ++sends[{static_cast<int>(r), n.peer, n.tag}].first;
          sends[{static_cast<int>(r), n.peer, n.tag}].second += n.bytes;
          break;
        case NodeType::kRecv:
          ++n_recv;
          EXPECT_EQ(n.peer, static_cast<int>((r + 7) % 8));  // receive from the previous rank
          EXPECT_EQ(n.bytes, 131072u);
          ++recvs[{n.peer, static_cast<int>(r), n.tag}].first;
          recvs[{n.peer, static_cast<int>(r), n.tag}].second += n.bytes;
          break;
        case NodeType::kCompute:
          ++n_comp;
          EXPECT_EQ(n.duration_ps, 7 * engine::kPsPerUs);
          break;
        default: ADD_FAILURE() << "unexpected node " << n.name;
      }
    }
    // Ring all-reduce on 8 ranks: 2*(8-1) sends and receives, 8-1 reductions.
    EXPECT_EQ(n_send, 14) << "rank " << r;
    EXPECT_EQ(n_recv, 14) << "rank " << r;
    EXPECT_EQ(n_comp, 7) << "rank " << r;
  }
  EXPECT_EQ(sends, recvs);
  // First node of rank 0 is its step-0 send (id 0); the receive (id 1) depends on it.
  EXPECT_EQ(w.programs[0][0].type, NodeType::kSend);
  EXPECT_EQ(w.programs[0][1].deps, std::vector<std::uint32_t>{0});
}

TEST(ChakraReader, PrefixDetection) {
  const std::string p = micro("all_reduce/8npus_1MB/all_reduce");
  EXPECT_TRUE(looks_like_chakra_prefix(p));
  EXPECT_TRUE(looks_like_chakra_prefix(p + ".3.et"));
  EXPECT_EQ(chakra_prefix_of(p + ".3.et"), p);
  EXPECT_EQ(chakra_prefix_of(p + ".12.et"), p);
  EXPECT_EQ(chakra_prefix_of(p), p);
  EXPECT_EQ(chakra_prefix_of("foo.et"), "foo.et");
  EXPECT_FALSE(looks_like_chakra_prefix(p + ".99.et"));
  EXPECT_FALSE(looks_like_chakra_prefix(micro("all_reduce/8npus_1MB/nothing")));
  EXPECT_FALSE(looks_like_chakra_prefix((data_dir() / "simai/SimAI/example/microAllReduce.txt").string()));
}

// ---- bad-input corpus (tests/data/bad) ----

TEST(ChakraReaderBad, Truncated) {
  EXPECT_INPUT_ERROR(read_chakra((data_dir() / "bad/truncated").string()), "truncated.0.et", "record 1",
                     "truncated");
}

TEST(ChakraReaderBad, Garbage) {
  EXPECT_INPUT_ERROR(read_chakra((data_dir() / "bad/garbage").string()), "garbage.0.et", "record 0 (GlobalMetadata)",
                     "garbage bytes");
}

TEST(ChakraReaderBad, UnknownControlDependencyRefusedWithMissingDepsError) {
  ChakraReadOptions opt;
  opt.missing_ctrl_deps = MissingDeps::kError;
  EXPECT_INPUT_ERROR(read_chakra((data_dir() / "bad/unknown_dep").string(), "", opt), "unknown_dep.0.et",
                     "node 1 'allreduce_b'", "ctrl_deps", "unknown node id 42", "missing_deps: ignore");
}

TEST(ChakraReaderBad, UnknownControlDependencyDroppedByDefaultWithOneWarning) {
  const auto w = read_chakra((data_dir() / "bad/unknown_dep").string());
  ASSERT_EQ(w.warnings.size(), 1u);
  EXPECT_NE(w.warnings[0].find("dropped 1 control dependencies"), std::string::npos) << w.warnings[0];
  EXPECT_NE(w.warnings[0].find("-> id 42"), std::string::npos) << w.warnings[0];
}

// ---- traces written here ----

using ChakraProtoMsg::Node;

class EtWriter {
 public:
  explicit EtWriter(const fabricsim::testing::ScratchDir& dir) : dir_(dir) {}
  /// Writes PREFIX.<rank>.et with a GlobalMetadata record and `nodes`; returns the prefix.
  std::string write(std::uint32_t rank, const std::vector<Node>& nodes, const std::string& base = "t") {
    const auto prefix = (dir_ / base).string();
    std::ofstream out(prefix + "." + std::to_string(rank) + ".et", std::ios::binary);
    ChakraProtoMsg::GlobalMetadata meta;
    meta.set_version("0.0.4");
    google::protobuf::util::SerializeDelimitedToOstream(meta, &out);
    for (const auto& n : nodes) google::protobuf::util::SerializeDelimitedToOstream(n, &out);
    return prefix;
  }

 private:
  const fabricsim::testing::ScratchDir& dir_;
};

/// A node with id, name and type only (its attributes are the test's).
Node bare(std::uint64_t id, const std::string& name, ChakraProtoMsg::NodeType type) {
  Node n;
  n.set_id(id);
  n.set_name(name);
  n.set_type(type);
  return n;
}

Node comp(std::uint64_t id, std::uint64_t us, std::vector<std::uint64_t> deps = {}) {
  Node n = bare(id, "comp" + std::to_string(id), ChakraProtoMsg::COMP_NODE);
  n.set_duration_micros(us);
  for (auto d : deps) n.add_data_deps(d);
  return n;
}

Node coll(std::uint64_t id, std::int64_t type, std::int64_t bytes, const std::string& pg = "") {
  Node n = bare(id, "coll" + std::to_string(id), ChakraProtoMsg::COMM_COLL_NODE);
  auto* a = n.add_attr();
  a->set_name("comm_type");
  a->set_int64_val(type);
  a = n.add_attr();
  a->set_name("comm_size");
  a->set_int64_val(bytes);
  if (!pg.empty()) {
    a = n.add_attr();
    a->set_name("pg_name");
    a->set_string_val(pg);
  }
  return n;
}

TEST(ChakraReaderGenerated, StableTopologicalOrderAndDepUnion) {
  fabricsim::testing::ScratchDir dir("chakra");
  EtWriter et(dir);
  // Input order 5, 3, 9, 1: 9 depends on 5 (data) and 3 (ctrl); 3 on 1.
  Node n9 = comp(9, 1, {5});
  n9.add_ctrl_deps(3);
  n9.add_ctrl_deps(5);  // duplicate of the data dep: counted once
  const auto prefix = et.write(0, {comp(5, 2), comp(3, 3, {1}), n9, comp(1, 4)});
  const auto w = read_chakra(prefix);
  ASSERT_EQ(w.programs[0].size(), 4u);
  std::vector<std::uint64_t> ids;
  for (const auto& n : w.programs[0]) ids.push_back(n.source_id);
  EXPECT_EQ(ids, (std::vector<std::uint64_t>{1, 3, 5, 9}));
  EXPECT_EQ(w.programs[0][3].deps, (std::vector<std::uint32_t>{1, 2}));
  EXPECT_EQ(w.programs[0][0].duration_ps, 4 * engine::kPsPerUs);
}

TEST(ChakraReaderGenerated, BarrierIsFourByteAllReduce) {
  fabricsim::testing::ScratchDir dir("chakra");
  EtWriter et(dir);
  Node b = coll(0, ChakraProtoMsg::BARRIER, 0);
  const auto prefix = et.write(0, {b});
  et.write(1, {b});
  const auto w = read_chakra(prefix);
  EXPECT_EQ(w.programs[1][0].op, CollOp::kAllReduce);
  EXPECT_EQ(w.programs[1][0].bytes, 4u);
}

TEST(ChakraReaderGenerated, IntegerEncodingsAndIgnoredCommTypeOnSendRecv) {
  fabricsim::testing::ScratchDir dir("chakra");
  EtWriter et(dir);
  Node s = bare(0, "send", ChakraProtoMsg::COMM_SEND_NODE);
  auto* a = s.add_attr(); a->set_name("comm_type"); a->set_int64_val(5);
  a = s.add_attr(); a->set_name("comm_size"); a->set_uint64_val(4096);
  a = s.add_attr(); a->set_name("comm_dst"); a->set_uint32_val(1);
  a = s.add_attr(); a->set_name("comm_tag"); a->set_int32_val(77);
  Node r = bare(0, "recv", ChakraProtoMsg::COMM_RECV_NODE);
  a = r.add_attr(); a->set_name("comm_type"); a->set_int32_val(6);
  a = r.add_attr(); a->set_name("comm_size"); a->set_int32_val(4096);
  a = r.add_attr(); a->set_name("comm_src"); a->set_int64_val(0);
  a = r.add_attr(); a->set_name("comm_tag"); a->set_uint64_val(77);
  const auto prefix = et.write(0, {s});
  et.write(1, {r});
  const auto w = read_chakra(prefix);
  EXPECT_EQ(w.programs[0][0].type, NodeType::kSend);
  EXPECT_EQ(w.programs[0][0].peer, 1);
  EXPECT_EQ(w.programs[0][0].tag, 77);
  EXPECT_EQ(w.programs[1][0].type, NodeType::kRecv);
  EXPECT_EQ(w.programs[1][0].peer, 0);
  EXPECT_EQ(w.programs[1][0].bytes, 4096u);
}

TEST(ChakraReaderGenerated, UnmatchedSend) {
  fabricsim::testing::ScratchDir dir("chakra");
  EtWriter et(dir);
  Node s = bare(0, "send", ChakraProtoMsg::COMM_SEND_NODE);
  auto* a = s.add_attr(); a->set_name("comm_size"); a->set_uint64_val(4096);
  a = s.add_attr(); a->set_name("comm_dst"); a->set_uint32_val(1);
  const auto prefix = et.write(0, {s});
  et.write(1, {comp(0, 1)});
  EXPECT_INPUT_ERROR(read_chakra(prefix), "t.0.et", "send 0->1 tag 0", "1 sends");
}

TEST(ChakraReaderGenerated, CommGroupsFromJson) {
  fabricsim::testing::ScratchDir dir("chakra");
  EtWriter et(dir);
  const auto prefix = et.write(0, {coll(0, ChakraProtoMsg::ALL_GATHER, 8192, "tp"), coll(1, 0, 64)});
  et.write(1, {coll(0, ChakraProtoMsg::ALL_GATHER, 8192, "tp"), coll(1, 0, 64)});
  et.write(2, {coll(0, ChakraProtoMsg::ALL_GATHER, 8192, "tp2")});
  et.write(3, {coll(0, ChakraProtoMsg::ALL_GATHER, 8192, "tp2")});
  {
    // Without a comm group file every pg_name is the world (as in ASTRA-sim), with one warning per name.
    const auto w0 = read_chakra(prefix);
    ASSERT_EQ(w0.groups.size(), 1u);
    EXPECT_EQ(w0.programs[0][0].group, 0);
    ASSERT_EQ(w0.warnings.size(), 2u);
    EXPECT_NE(w0.warnings[0].find("'tp'"), std::string::npos);
    EXPECT_NE(w0.warnings[0].find("workload.comm_groups"), std::string::npos);
  }
  const auto json = dir.file("groups.json", R"({"tp": [0, 1], "tp2": [3, 2], "unused": [0]})");
  const auto w = read_chakra(prefix, json);
  ASSERT_EQ(w.groups.size(), 3u);
  EXPECT_EQ(w.groups[1].name, "tp");
  EXPECT_EQ(w.groups[1].ranks, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(w.groups[2].ranks, (std::vector<std::uint32_t>{3, 2}));
  EXPECT_EQ(w.programs[0][0].group, 1);
  EXPECT_EQ(w.programs[0][1].group, 0);
  EXPECT_EQ(w.programs[3][0].group, 2);
  // A rank outside the world, and a rank using a group it is not part of.
  EXPECT_INPUT_ERROR(read_chakra(prefix, dir.file("bad.json", R"({"tp": [0, 4], "tp2": [2, 3]})")),
                     "bad.json", "tp", "rank 4");
  EXPECT_INPUT_ERROR(read_chakra(prefix, dir.file("bad2.json", R"({"tp": [0, 2], "tp2": [2, 3]})")),
                     "t.1.et", "pg_name", "not a member");
  EXPECT_INPUT_ERROR(read_chakra(prefix, dir.file("bad3.json", R"({"tp": [0, 1]})")), "t.2.et",
                     "pg_name", "'tp2' is not in");
}

TEST(ChakraReaderGenerated, Errors) {
  fabricsim::testing::ScratchDir dir("chakra");
  EtWriter et(dir);
  // Cycle: 1 -> 2 -> 1.
  EXPECT_INPUT_ERROR(read_chakra(et.write(0, {comp(0, 1), comp(1, 1, {2}), comp(2, 1, {1})}, "cycle")),
                     "cycle.0.et", "node 1 'comp1'", "cycle");
  // Duplicate id.
  EXPECT_INPUT_ERROR(read_chakra(et.write(0, {comp(4, 1), comp(4, 2)}, "dup")), "dup.0.et", "node 4",
                     "duplicate node id");
  // Comm node without comm_size.
  Node no_size = coll(3, 0, 0);
  no_size.mutable_attr()->RemoveLast();
  EXPECT_INPUT_ERROR(read_chakra(et.write(0, {no_size}, "nosize")), "nosize.0.et", "node 3 'coll3'",
                     "comm_size");
  // Negative and absurd sizes.
  EXPECT_INPUT_ERROR(read_chakra(et.write(0, {coll(0, 0, -5)}, "neg")), "neg.0.et", "attr comm_size", "-5");
  EXPECT_INPUT_ERROR(read_chakra(et.write(0, {coll(0, 0, 1ll << 50)}, "huge")), "huge.0.et",
                     "attr comm_size", "out of range");
  // Unknown node type and unsupported collectives.
  Node bad_type = comp(0, 1);
  bad_type.set_type(static_cast<ChakraProtoMsg::NodeType>(42));
  EXPECT_INPUT_ERROR(read_chakra(et.write(0, {bad_type}, "type")), "type.0.et", "node 0 'comp0'",
                     "unknown node type 42");
  bad_type.set_type(ChakraProtoMsg::INVALID_NODE);
  EXPECT_INPUT_ERROR(read_chakra(et.write(0, {bad_type}, "inval")), "inval.0.et", "unknown node type 0");
  EXPECT_INPUT_ERROR(read_chakra(et.write(0, {coll(0, ChakraProtoMsg::GATHER, 64)}, "gather")),
                     "gather.0.et", "comm_type", "GATHER is not supported yet");
  EXPECT_INPUT_ERROR(read_chakra(et.write(0, {coll(0, ChakraProtoMsg::SCATTER, 64)}, "scatter")),
                     "scatter.0.et", "SCATTER is not supported yet");
  // Files: none at all, and a gap in the rank numbering.
  EXPECT_INPUT_ERROR(read_chakra((dir / "missing").string()), "missing.0.et", "no Chakra ET file");
  et.write(0, {comp(0, 1)}, "gap");
  et.write(2, {comp(0, 1)}, "gap");
  EXPECT_INPUT_ERROR(read_chakra((dir / "gap").string()), "gap.2.et", "rank 1 is missing");
  // A GlobalMetadata-less file (first record is a Node) is rejected.
  {
    std::ofstream out(dir / "nometa.0.et", std::ios::binary);
    google::protobuf::util::SerializeDelimitedToOstream(coll(7, 0, 1024), &out);
  }
  EXPECT_INPUT_ERROR(read_chakra((dir / "nometa").string()), "nometa.0.et", "GlobalMetadata");
}

}  // namespace
}  // namespace fabricsim::io

namespace fabricsim::io {
namespace {

// A trace shaped like the output of Chakra's PyTorch converter: control parents that the
// converter filtered out (ids 100..) next to data dependencies that all resolve.
std::vector<Node> converter_style_rank() {
  Node a = comp(1, 5);
  a.add_ctrl_deps(100);  // filtered parent
  Node b = comp(2, 7, {1});
  b.add_ctrl_deps(101);
  b.add_ctrl_deps(1);
  Node c = coll(3, ChakraProtoMsg::ALL_REDUCE, 1 << 20);
  c.add_data_deps(2);
  c.add_ctrl_deps(102);
  c.add_ctrl_deps(103);
  return {a, b, c};
}

TEST(ChakraReaderGenerated, ConverterStyleFilteredControlParentsAreDroppedAndCounted) {
  fabricsim::testing::ScratchDir dir("chakra");
  EtWriter et(dir);
  const auto prefix = et.write(0, converter_style_rank());
  et.write(1, converter_style_rank());
  const auto w = read_chakra(prefix);
  ASSERT_EQ(w.ranks, 2u);
  // 4 filtered parents per rank file, 2 files: one warning with the total count.
  ASSERT_EQ(w.warnings.size(), 1u);
  EXPECT_NE(w.warnings[0].find("dropped 8 control dependencies"), std::string::npos) << w.warnings[0];
  EXPECT_NE(w.warnings[0].find("-> id 100"), std::string::npos) << w.warnings[0];
  // The dependencies that resolve are kept: comp1 -> comp2 -> allreduce.
  for (const auto& prog : w.programs) {
    ASSERT_EQ(prog.size(), 3u);
    EXPECT_TRUE(prog[0].deps.empty());
    EXPECT_EQ(prog[1].deps, (std::vector<std::uint32_t>{0}));
    EXPECT_EQ(prog[2].deps, (std::vector<std::uint32_t>{1}));
  }
  ChakraReadOptions strict;
  strict.missing_ctrl_deps = MissingDeps::kError;
  EXPECT_INPUT_ERROR(read_chakra(prefix, "", strict), "t.0.et", "node 1 'comp1'", "ctrl_deps", "unknown node id 100");
}

TEST(ChakraReaderGenerated, MissingDataDependencyIsAlwaysAnError) {
  fabricsim::testing::ScratchDir dir("chakra");
  EtWriter et(dir);
  const auto prefix = et.write(0, {comp(1, 5), comp(2, 7, {1, 77})});
  EXPECT_INPUT_ERROR(read_chakra(prefix), "t.0.et", "node 2 'comp2'", "data_deps", "unknown node id 77");
}

TEST(ChakraReaderGenerated, ControlDependenciesCanBeLeftOutOfTheOrder) {
  fabricsim::testing::ScratchDir dir("chakra");
  EtWriter et(dir);
  // comp 1 waits for comp 5 only through a control dependency.
  Node n1 = comp(1, 3);
  n1.add_ctrl_deps(5);
  const auto prefix = et.write(0, {n1, comp(5, 2)});
  const auto both = read_chakra(prefix);
  EXPECT_EQ(both.programs[0][0].source_id, 5u);
  EXPECT_EQ(both.programs[0][1].deps, (std::vector<std::uint32_t>{0}));
  ChakraReadOptions data_only;
  data_only.ctrl_deps = false;
  const auto w = read_chakra(prefix, "", data_only);
  EXPECT_EQ(w.programs[0][0].source_id, 1u);  // smallest id first once nothing orders them
  EXPECT_TRUE(w.programs[0][0].deps.empty());
  EXPECT_TRUE(w.programs[0][1].deps.empty());
}

// ---- CPU ops and PyTorch process-group metadata ----

Node cpu_op(std::uint64_t id, std::uint64_t us, std::vector<std::uint64_t> deps = {}) {
  Node n = comp(id, us, std::move(deps));
  n.set_name("cpu" + std::to_string(id));
  auto* a = n.add_attr();
  a->set_name("is_cpu_op");
  a->set_bool_val(true);
  return n;
}

/// "## process_group:init ##" as PyTorch records it and Chakra's converter keeps it: inputs.values
/// is the Python repr of a one-string list holding the JSON list of process groups.
Node pg_init(std::uint64_t id, const std::string& json) {
  Node n = bare(id, "## process_group:init ##", ChakraProtoMsg::METADATA_NODE);
  n.mutable_inputs()->set_values("['" + json + "']");
  return n;
}

TEST(ChakraReaderGenerated, CpuOpsRunOnTheHostOrAreSkipped) {
  fabricsim::testing::ScratchDir dir("chakra");
  EtWriter et(dir);
  const auto prefix = et.write(0, {cpu_op(1, 9), comp(2, 4, {1})});
  const auto w = read_chakra(prefix);
  ASSERT_EQ(w.programs[0].size(), 2u);
  EXPECT_TRUE(w.programs[0][0].host);
  EXPECT_EQ(w.programs[0][0].duration_ps, 9 * engine::kPsPerUs);
  EXPECT_FALSE(w.programs[0][1].host);
  ChakraReadOptions skip;
  skip.cpu_ops = CpuOps::kSkip;
  const auto s = read_chakra(prefix, "", skip);
  EXPECT_FALSE(s.programs[0][0].host);
  EXPECT_EQ(s.programs[0][0].duration_ps, 0);
  EXPECT_EQ(s.programs[0][1].duration_ps, 4 * engine::kPsPerUs);
  EXPECT_EQ(parse_cpu_ops("host", "s.yaml", "workload.chakra.cpu_ops"), CpuOps::kHost);
  EXPECT_INPUT_ERROR(parse_cpu_ops("gpu", "s.yaml", "workload.chakra.cpu_ops"), "s.yaml", "workload.chakra.cpu_ops",
                     "use host or skip");
  // is_cpu_op that is not a bool is refused.
  Node bad = comp(1, 1);
  auto* a = bad.add_attr();
  a->set_name("is_cpu_op");
  a->set_string_val("yes");
  EXPECT_INPUT_ERROR(read_chakra(et.write(0, {bad}, "b")), "b.0.et", "node 1 'comp1': attr is_cpu_op", "bool");
}

TEST(ChakraReaderGenerated, ProcessGroupMetadataDefinesCommunicators) {
  fabricsim::testing::ScratchDir dir("chakra");
  EtWriter et(dir);
  const std::string pgs = R"([{"pg_name": "0", "pg_desc": "default_pg", "ranks": [], "pg_size": 4},)"
                          R"( {"pg_name": "1", "pg_desc": "tp", "ranks": [0, 1], "pg_size": 2},)"
                          R"( {"pg_name": "2", "pg_desc": "tp", "ranks": [2, 3], "pg_size": 2}])";
  std::string prefix;
  for (std::uint32_t r = 0; r < 4; ++r) {
    Node c = coll(2, ChakraProtoMsg::ALL_REDUCE, 1 << 20, r < 2 ? "1" : "2");
    c.add_data_deps(1);
    prefix = et.write(r, {pg_init(1, pgs), c});
  }
  const auto w = read_chakra(prefix);
  ASSERT_EQ(w.ranks, 4u);
  EXPECT_TRUE(w.warnings.empty());
  ASSERT_EQ(w.groups.size(), 3u);  // world, "1", "2"
  const auto& g0 = w.groups[static_cast<std::size_t>(w.programs[0][1].group)];
  const auto& g3 = w.groups[static_cast<std::size_t>(w.programs[3][1].group)];
  EXPECT_EQ(g0.name, "1");
  EXPECT_EQ(g0.ranks, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(g3.name, "2");
  EXPECT_EQ(g3.ranks, (std::vector<std::uint32_t>{2, 3}));
  // A rank that uses a group it is not in, a bad list, and a rank beyond the world are refused.
  EXPECT_INPUT_ERROR(read_chakra(et.write(0, {pg_init(1, R"([{"pg_name": "1", "ranks": [1]}])"),
                                             coll(2, ChakraProtoMsg::ALL_REDUCE, 8, "1")}, "m")),
                     "m.0.et", "rank 0 is not a member of communicator '1'");
  EXPECT_INPUT_ERROR(read_chakra(et.write(0, {pg_init(1, "not json")}, "j")), "j.0.et", "inputs.values",
                     "not a process-group list");
  // Two rank files make a 2-rank world; metadata naming rank 5 does not fit it.
  et.write(1, {comp(1, 1)}, "o");
  EXPECT_INPUT_ERROR(read_chakra(et.write(0, {pg_init(1, R"([{"pg_name": "1", "ranks": [0, 5]}])")}, "o")),
                     "o.0.et", "names rank 5 of a 2-rank world", "workload.gpus");
}

// One rank's trace with its communicators: it runs on the world its metadata gives (or
// workload.gpus), each rank on the translated group of the same stride.
TEST(ChakraReaderGenerated, SingleRankTraceReplicatesToTheWorldItsGroupsDescribe) {
  fabricsim::testing::ScratchDir dir("chakra");
  EtWriter et(dir);
  // 8 ranks as TP=2 (stride 1) x DP=4 (stride 2): rank 0 is in tp {0,1} and dp {0,2,4,6}.
  const std::string pgs = R"([{"pg_name": "0", "ranks": [], "pg_size": 8},)"
                          R"( {"pg_name": "3", "ranks": [0, 1], "pg_size": 2},)"
                          R"( {"pg_name": "7", "ranks": [0, 2, 4, 6], "pg_size": 4}])";
  Node tp = coll(2, ChakraProtoMsg::ALL_REDUCE, 4096, "3");
  tp.add_data_deps(1);
  Node dp = coll(3, ChakraProtoMsg::ALL_GATHER, 8192, "7");
  dp.add_data_deps(2);
  Node world = coll(4, ChakraProtoMsg::ALL_REDUCE, 64, "0");
  world.add_data_deps(3);
  const auto prefix = et.write(0, {pg_init(1, pgs), tp, dp, world});
  const auto w = read_chakra(prefix);
  ASSERT_EQ(w.ranks, 8u);
  ASSERT_EQ(w.programs.size(), 8u);
  auto group_of = [&](std::uint32_t r, std::size_t node) {
    return w.groups[static_cast<std::size_t>(w.programs[r][node].group)].ranks;
  };
  for (std::uint32_t r = 0; r < 8; ++r) {
    ASSERT_EQ(w.programs[r].size(), 4u);
    const std::uint32_t tp0 = r - r % 2;
    EXPECT_EQ(group_of(r, 1), (std::vector<std::uint32_t>{tp0, tp0 + 1})) << "rank " << r;
    const std::uint32_t dp0 = r % 2;
    EXPECT_EQ(group_of(r, 2), (std::vector<std::uint32_t>{dp0, dp0 + 2, dp0 + 4, dp0 + 6})) << "rank " << r;
    EXPECT_EQ(group_of(r, 3).size(), 8u);
    EXPECT_EQ(w.programs[r][2].bytes, 8192u);
  }
  // Every rank is in exactly the groups it uses: 4 TP groups, 2 DP groups, the world.
  std::set<std::vector<std::uint32_t>> distinct;
  for (std::uint32_t r = 0; r < 8; ++r) {
    for (std::size_t i = 1; i < 4; ++i) distinct.insert(group_of(r, i));
  }
  EXPECT_EQ(distinct.size(), 4u + 2u + 1u);
  // workload.gpus overrides the metadata only when it is consistent with it.
  ChakraReadOptions four;
  four.world_size = 4;
  EXPECT_INPUT_ERROR(read_chakra(prefix, "", four), "t.0.et", "names rank");  // dp names rank 6
  ChakraReadOptions sixteen;
  sixteen.world_size = 16;
  const auto w16 = read_chakra(prefix, "", sixteen);
  EXPECT_EQ(w16.ranks, 16u);
  EXPECT_EQ(w16.groups[static_cast<std::size_t>(w16.programs[9][2].group)].ranks,
            (std::vector<std::uint32_t>{9, 11, 13, 15}));
  // Groups without a uniform stride, and point-to-point nodes, cannot be replicated.
  const auto odd = et.write(0, {pg_init(1, R"([{"pg_name": "0", "ranks": [], "pg_size": 8},)"
                                           R"( {"pg_name": "5", "ranks": [0, 1, 3], "pg_size": 3}])"),
                                coll(2, ChakraProtoMsg::ALL_REDUCE, 64, "5")}, "odd");
  EXPECT_INPUT_ERROR(read_chakra(odd), "odd.0.et", "communicator '5'", "uniform stride");
  Node send = bare(2, "send", ChakraProtoMsg::COMM_SEND_NODE);
  for (auto [k, v] : {std::pair<const char*, int>{"comm_size", 64}, {"comm_dst", 1}}) {
    auto* a = send.add_attr();
    a->set_name(k);
    a->set_int64_val(v);
  }
  const auto p2p = et.write(0, {pg_init(1, R"([{"pg_name": "0", "ranks": [], "pg_size": 2}])"), send}, "p2p");
  EXPECT_INPUT_ERROR(read_chakra(p2p), "p2p.0.et", "node 2 'send'", "point-to-point", "one trace file per rank");
  // Several rank files and a different workload.gpus: refused.
  et.write(1, {comp(1, 1)}, "two");
  ChakraReadOptions three;
  three.world_size = 3;
  EXPECT_INPUT_ERROR(read_chakra(et.write(0, {comp(1, 1)}, "two"), "", three), "two", "workload.gpus", "2 rank files");
}

TEST(ChakraReaderGenerated, MissingDepsValuesParse) {
  EXPECT_EQ(parse_missing_deps("ignore", "s.yaml", "workload.chakra.missing_deps"), MissingDeps::kIgnore);
  EXPECT_EQ(parse_missing_deps("error", "s.yaml", "workload.chakra.missing_deps"), MissingDeps::kError);
  EXPECT_INPUT_ERROR(parse_missing_deps("drop", "s.yaml", "workload.chakra.missing_deps"), "s.yaml",
                     "workload.chakra.missing_deps", "use ignore or error");
}

}  // namespace
}  // namespace fabricsim::io
