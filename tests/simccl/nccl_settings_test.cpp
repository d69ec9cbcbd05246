// NCCL_ALGO / NCCL_PROTO syntax (NCCL src/graph/tuning.cc parseList, nccl.md §3.6) and the
// spec-over-environment rule.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/errors.hpp"
#include "simccl/nccl_settings.hpp"

namespace {

using namespace fabricsim::simccl;
constexpr int AR = static_cast<int>(Func::kAllReduce), BC = static_cast<int>(Func::kBroadcast),
              AG = static_cast<int>(Func::kAllGather);
constexpr int TREE = 0, RING = 1, CND = 2, NVLS = 4, PAT = 6;
constexpr int LL = 0, LL128 = 1, SIMPLE = 2;

TEST(NcclAlgoList, PlainListEnablesOnlyListed) {
  const auto en = parse_algo_list("Ring", "t", "NCCL_ALGO");
  for (int f = 0; f < kNumFuncs; ++f) {
    for (int a = 0; a < kNumAlgos; ++a) EXPECT_EQ(en[f][a], a == RING) << f << " " << a;
  }
}

TEST(NcclAlgoList, CaretExcludes) {
  const auto en = parse_algo_list("^tree,NVLS", "t", "NCCL_ALGO");
  EXPECT_FALSE(en[AR][TREE]);
  EXPECT_FALSE(en[AR][NVLS]);
  EXPECT_TRUE(en[AR][RING]);
  EXPECT_TRUE(en[AR][PAT]);
}

TEST(NcclAlgoList, PerFunctionPrefixResetsThatRow) {
  // Example from NCCL's source comment: "ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring".
  const auto en = parse_algo_list("ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring", "t", "NCCL_ALGO");
  EXPECT_TRUE(en[AG][RING]);
  EXPECT_TRUE(en[AG][CND]);
  EXPECT_FALSE(en[AG][TREE]);
  EXPECT_TRUE(en[AR][TREE]);
  EXPECT_TRUE(en[AR][CND]);
  EXPECT_FALSE(en[AR][RING]);
  EXPECT_TRUE(en[BC][RING]);
  EXPECT_FALSE(en[BC][CND]);
}

TEST(NcclProtoList, ExamplesFromNcclSource) {
  auto en = parse_proto_list("LL,Simple;allreduce:^LL", "t", "NCCL_PROTO");
  EXPECT_TRUE(en[AG][LL]);
  EXPECT_FALSE(en[AG][LL128]);
  EXPECT_TRUE(en[AG][SIMPLE]);
  EXPECT_FALSE(en[AR][LL]);
  EXPECT_TRUE(en[AR][LL128]);
  EXPECT_TRUE(en[AR][SIMPLE]);
  en = parse_proto_list("^LL128;allreduce:LL128", "t", "NCCL_PROTO");
  EXPECT_TRUE(en[AG][LL]);
  EXPECT_FALSE(en[AG][LL128]);
  EXPECT_FALSE(en[AR][LL]);
  EXPECT_TRUE(en[AR][LL128]);
}

TEST(NcclLists, BadNamesAreInputErrors) {
  EXPECT_THROW(parse_algo_list("Rnig", "spec.yaml", "NCCL_ALGO"), fabricsim::engine::InputError);
  EXPECT_THROW(parse_algo_list("allreduc:Ring", "spec.yaml", "NCCL_ALGO"), fabricsim::engine::InputError);
  EXPECT_THROW(parse_algo_list("Ring;Tree", "spec.yaml", "NCCL_ALGO"), fabricsim::engine::InputError);
  EXPECT_THROW(parse_proto_list("LL256", "spec.yaml", "NCCL_PROTO"), fabricsim::engine::InputError);
  EXPECT_THROW(parse_proto_list("", "spec.yaml", "NCCL_PROTO"), fabricsim::engine::InputError);
  try {
    parse_algo_list("Foo", "spec.yaml", "NCCL_ALGO");
  } catch (const fabricsim::engine::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("spec.yaml: NCCL_ALGO: 'Foo' is not an NCCL algorithm"), std::string::npos) << e.what();
  }
}

TEST(NcclSettings, SpecWinsOverEnvironmentAndUnknownNamesWarn) {
  ::setenv("NCCL_ALGO", "Tree", 1);
  ::setenv("NCCL_BUFFSIZE", "1048576", 1);
  ::setenv("NCCL_FANCY_FEATURE", "1", 1);
  const NcclSettings s = load_nccl_settings({{"NCCL_ALGO", "Ring"}, {"NCCL_MAX_NCHANNELS", "4"}}, "spec.yaml", true);
  ::unsetenv("NCCL_ALGO");
  ::unsetenv("NCCL_BUFFSIZE");
  ::unsetenv("NCCL_FANCY_FEATURE");
  EXPECT_TRUE(s.algo_enabled[AR][RING]);
  EXPECT_FALSE(s.algo_enabled[AR][TREE]);
  EXPECT_EQ(s.buffsize_simple, 1048576u);  // from the environment
  EXPECT_EQ(s.max_nchannels, 4);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_NE(s.warnings[0].find("NCCL_FANCY_FEATURE"), std::string::npos);
}

TEST(NcclSettings, BadValuesAreErrors) {
  using fabricsim::engine::InputError;
  EXPECT_THROW(load_nccl_settings({{"NCCL_BUFFSIZE", "-1"}}, "s", false), InputError);
  EXPECT_THROW(load_nccl_settings({{"NCCL_BUFFSIZE", "4MB"}}, "s", false), InputError);
  EXPECT_THROW(load_nccl_settings({{"NCCL_MAX_NCHANNELS", "65"}}, "s", false), InputError);
  EXPECT_THROW(load_nccl_settings({{"NCCL_MIN_NCHANNELS", "8"}, {"NCCL_MAX_NCHANNELS", "4"}}, "s", false), InputError);
  EXPECT_THROW(load_nccl_settings({{"NCCL_NVLS_ENABLE", "3"}}, "s", false), InputError);  // 0, 1 or 2
  EXPECT_EQ(load_nccl_settings({{"NCCL_NVLS_ENABLE", "1"}}, "s", false).nvls_enable, 1);  // force on: modelled
  EXPECT_THROW(load_nccl_settings({{"NCCL_NVLS_CHUNKSIZE", "1K"}}, "s", false), InputError);
  EXPECT_THROW(load_nccl_settings({{"NCCL_COLLNET_ENABLE", "1"}}, "s", false), InputError);
  EXPECT_THROW(load_nccl_settings({{"NCCL_P2P_PXN_LEVEL", "3"}}, "s", false), InputError);
  EXPECT_NO_THROW(load_nccl_settings({{"NCCL_NVLS_ENABLE", "0"}, {"NCCL_DEBUG", "INFO"}}, "s", false));
}

}  // namespace
