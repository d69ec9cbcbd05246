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

TEST(NcclSettings, SpecWinsOverEnvironment) {
  ::setenv("NCCL_ALGO", "Tree", 1);
  ::setenv("NCCL_BUFFSIZE", "1048576", 1);
  const NcclSettings s = load_nccl_settings({{"NCCL_ALGO", "Ring"}, {"NCCL_MAX_NCHANNELS", "4"}}, "spec.yaml", true);
  ::unsetenv("NCCL_ALGO");
  ::unsetenv("NCCL_BUFFSIZE");
  EXPECT_TRUE(s.algo_enabled[AR][RING]);
  EXPECT_FALSE(s.algo_enabled[AR][TREE]);
  EXPECT_EQ(s.buffsize_simple, 1048576u);  // from the environment
  EXPECT_EQ(s.max_nchannels, 4);
  EXPECT_TRUE(s.warnings.empty());
  // Unknown names are errors (nccl_settings_more_test.cpp).
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

// Case: every NCCL_* value simccl reads is parsed strictly, also the names it does not model
// (NCCL_NTHREADS=abc was accepted, NCCL_P2P_LEVEL=bogus dropped), from the spec and from the
// environment alike; the error names where the value came from, the name and the allowed values.
TEST(NcclSettings, EveryKnownValueIsParsedStrictlyFromSpecAndEnvironment) {
  using fabricsim::engine::InputError;
  struct Bad {
    const char* name;
    const char* value;
    const char* allowed;  // part of the fix the error must give
  };
  const Bad bad[] = {{"NCCL_NTHREADS", "abc", "multiple of 32 (the warp size) between 64 and 512"},
                     {"NCCL_NTHREADS", "100", "multiple of 32"},
                     {"NCCL_NTHREADS", "1024", "between 64 and 512"},
                     {"NCCL_LL128_NTHREADS", "128", "between 160 and 640"},
                     {"NCCL_P2P_LEVEL", "bogus", "LOC, NVL, PIX, PXB, PHB, SYS or 0..5"},
                     {"NCCL_P2P_LEVEL", "6", "or 0..5"},
                     {"NCCL_NET_GDR_LEVEL", "NVL", "LOC, PIX, PXB, PHB, SYS or 0..5"},
                     {"NCCL_DEBUG", "LOUD", "VERSION, WARN, INFO, ABORT, TRACE"},
                     {"NCCL_LAUNCH_MODE", "serial", "PARALLEL, GROUP"},
                     {"NCCL_P2P_DISABLE", "yes", "between 0 and 1"},
                     {"NCCL_IB_SL", "16", "between -1 and 15"},
                     {"NCCL_IB_TC", "x", "between -1 and 255"},
                     {"NCCL_IB_TIMEOUT", "0", "between 1 and 31"},
                     {"NCCL_IB_RETRY_CNT", "8", "between 0 and 7"},
                     {"NCCL_IB_GID_INDEX", "-2", "between -1 and 1023"},
                     {"NCCL_MAX_NCHANNELS", "4 ", "between 1 and 64"}};
  for (const Bad& b : bad) {
    const std::string head = std::string(b.name) + ": '" + b.value + "'";
    try {
      load_nccl_settings({{b.name, b.value}}, "spec.yaml", false);
      ADD_FAILURE() << head << " accepted from the spec";
    } catch (const InputError& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind("spec.yaml: " + head, 0), 0u) << m;
      EXPECT_NE(m.find(b.allowed), std::string::npos) << m;
    }
    ::setenv(b.name, b.value, 1);
    try {
      load_nccl_settings({}, "spec.yaml", true);
      ADD_FAILURE() << head << " accepted from the environment";
    } catch (const InputError& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind("<env>: " + head, 0), 0u) << m;
      EXPECT_NE(m.find(b.allowed), std::string::npos) << m;
    }
    ::unsetenv(b.name);
  }
  // Values NCCL documents are accepted (names compared case-insensitively, as NCCL does).
  const std::vector<std::pair<std::string, std::string>> good = {
      {"NCCL_NTHREADS", "256"},   {"NCCL_LL128_NTHREADS", "640"}, {"NCCL_P2P_LEVEL", "nvl"},
      {"NCCL_NET_GDR_LEVEL", "3"}, {"NCCL_DEBUG", "WARN"},        {"NCCL_LAUNCH_MODE", "GROUP"},
      {"NCCL_IB_TC", "106"},      {"NCCL_IB_SL", "-1"},           {"NCCL_SOCKET_IFNAME", "=eth0"},
      {"NCCL_IB_HCA", "mlx5_0:1,mlx5_1:1"}};
  const NcclSettings s = load_nccl_settings(good, "spec.yaml", false);
  EXPECT_EQ(s.applied.size(), good.size());
  EXPECT_TRUE(s.warnings.empty()) << s.warnings.front();
  // A check across settings names where they came from (was always the spec file).
  ::setenv("NCCL_MIN_NCHANNELS", "8", 1);
  try {
    load_nccl_settings({{"NCCL_MAX_NCHANNELS", "4"}}, "spec.yaml", true);
    ADD_FAILURE() << "MIN > MAX accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("<env>: NCCL_MIN_NCHANNELS", 0), 0u) << e.what();
  }
  ::unsetenv("NCCL_MIN_NCHANNELS");
}

}  // namespace
