// The fabricsim workload of the ns-3 cross-check survives a Chakra ET round trip, and its DAG
// issues send k of every sender at start + k * interval (derived here by walking the read-back
// DAG: a node starts when its last dependency ends; compute nodes last duration_ps, sends are
// instantaneous for this purpose), exactly ns3_chain's send instants.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>

#include "engine/errors.hpp"
#include "io/chakra_reader.hpp"
#include "io/chakra_writer.hpp"
#include "tests/ns3/chain_workload.hpp"
#include "tests/support/scratch.hpp"

namespace fabricsim::tests::ns3chain {
namespace {

TEST(ChainWorkload, ChakraRoundTripSendInstants) {
  ChainTraffic t;
  t.senders = 2;
  t.payload_bytes = 1000;
  t.interval_ps = 1'000'000;
  t.start_ps = 3'000'000;
  t.count = 50;
  const fabricsim::testing::ScratchDir dir("chain_workload");
  const std::string prefix = (dir / "chain").string();
  io::write_chakra(make_chain_workload(t), prefix);
  const models::Workload w = io::read_chakra(prefix);

  ASSERT_EQ(w.ranks, 3u);
  for (std::uint32_t s = 0; s < t.senders; ++s) {
    const auto& prog = w.programs[s];
    std::vector<std::int64_t> end(prog.size(), 0);
    std::map<std::int64_t, std::int64_t> send_at;  // tag -> issue instant
    for (std::size_t i = 0; i < prog.size(); ++i) {
      std::int64_t begin = 0;
      for (auto d : prog[i].deps) begin = std::max(begin, end[d]);
      const bool compute = prog[i].type == models::NodeType::kCompute;
      end[i] = begin + (compute ? prog[i].duration_ps : 0);
      if (prog[i].type == models::NodeType::kSend) {
        EXPECT_EQ(prog[i].peer, 2);
        EXPECT_EQ(prog[i].bytes, 1000u);
        send_at[prog[i].tag] = begin;
      }
    }
    ASSERT_EQ(send_at.size(), t.count);
    for (const auto& [tag, at] : send_at) EXPECT_EQ(at, t.start_ps + tag * t.interval_ps);
  }
  std::map<std::pair<std::int32_t, std::int64_t>, int> recvs;  // (src, tag) -> count
  for (const auto& n : w.programs[2]) {
    ASSERT_EQ(n.type, models::NodeType::kRecv);
    EXPECT_TRUE(n.deps.empty());
    ++recvs[{n.peer, n.tag}];
  }
  EXPECT_EQ(recvs.size(), std::size_t{t.senders} * t.count);
}

TEST(ChainWorkload, SubMicrosecondIntervalIsRejected) {
  ChainTraffic t;
  t.payload_bytes = 1000;
  t.interval_ps = 500'000;  // Chakra COMP_NODE holds whole microseconds only
  t.start_ps = 1'000'000;
  t.count = 1;
  EXPECT_THROW(make_chain_workload(t), engine::InputError);
}

}  // namespace
}  // namespace fabricsim::tests::ns3chain
