// NCCL_* settings as NCCL reads them (../shared/reference/nccl.md §3.6; NCCL 2.28 src/init.cc,
// src/graph/tuning.cc, src/graph/connect.cc): unknown names, bad values and combinations NCCL
// refuses are one-line input errors naming the setting and where it came from; the names the
// published nccl-validation runs carry take effect or are refused as not modelled.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "engine/errors.hpp"
#include "simccl/nccl_settings.hpp"

namespace {

using fabricsim::engine::InputError;
using fabricsim::simccl::Algo;
using fabricsim::simccl::Func;
using fabricsim::simccl::load_nccl_settings;
using fabricsim::simccl::NcclSettings;
using fabricsim::simccl::Proto;

std::string error_of(const std::vector<std::pair<std::string, std::string>>& pairs, const std::string& file = "s.yaml") {
  try {
    load_nccl_settings(pairs, file, false);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string cluster_error(const NcclSettings& s, unsigned gph, unsigned domain, unsigned hosts) {
  try {
    fabricsim::simccl::check_nccl_settings_for_cluster(s, gph, domain, hosts);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(NcclSettingsMore, UnknownNameIsAnErrorWithTheNearestKnownName) {
  const std::string e = error_of({{"NCCL_ALOG", "Ring"}});
  EXPECT_EQ(e.rfind("s.yaml: NCCL_ALOG: unknown NCCL setting", 0), 0u) << e;
  EXPECT_NE(e.find("did you mean NCCL_ALGO?"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos);
  // Far from every known name: no suggestion, still the fix.
  const std::string f = error_of({{"NCCL_QWERTYUIOP_ZZZ", "1"}});
  EXPECT_EQ(f.find("did you mean"), std::string::npos) << f;
  EXPECT_NE(f.find("fabricsim describe"), std::string::npos) << f;
  // From the environment the origin is <env>; from --set the caller's label (<cli>).
  ::setenv("NCCL_FANCY_FEATURE", "1", 1);
  std::string env;
  try {
    load_nccl_settings({}, "s.yaml", true);
  } catch (const InputError& x) {
    env = x.what();
  }
  ::unsetenv("NCCL_FANCY_FEATURE");
  EXPECT_EQ(env.rfind("<env>: NCCL_FANCY_FEATURE: unknown NCCL setting", 0), 0u) << env;
  const std::map<std::string, std::string> origins = {{"NCCL_MIN_NCHANNELS", "<cli>"}};
  std::string cli;
  try {
    load_nccl_settings({{"NCCL_MIN_NCHANNELS", "-1"}}, "s.yaml", false, &origins);
  } catch (const InputError& x) {
    cli = x.what();
  }
  EXPECT_EQ(cli.rfind("<cli>: NCCL_MIN_NCHANNELS: '-1' is out of range", 0), 0u) << cli;
}

TEST(NcclSettingsMore, RefusedNamesSayNotModelled) {
  for (const char* n : {"NCCL_TUNER_PLUGIN", "NCCL_GRAPH_FILE"}) {
    const std::string e = error_of({{n, "x"}});
    EXPECT_NE(e.find(std::string(n) + ": not modelled by simccl"), std::string::npos) << e;
  }
  // Accepting NCCL_DEBUG without effect is right: logging does not change timing.
  EXPECT_EQ(error_of({{"NCCL_DEBUG", "INFO"}}), "");
}

TEST(NcclSettingsMore, ChannelBoundsCombineAsNcclDoes) {
  // ncclTopoPostset: min = max(NCCL_MIN_NCHANNELS, minCTAs), max = min(NCCL_MAX_NCHANNELS, maxCTAs).
  const NcclSettings a = load_nccl_settings({{"NCCL_MIN_CTAS", "2"}, {"NCCL_MIN_NCHANNELS", "4"}}, "s", false);
  EXPECT_EQ(a.min_nchannels, 4);
  const NcclSettings b = load_nccl_settings({{"NCCL_MIN_CTAS", "6"}, {"NCCL_MIN_NCHANNELS", "4"}}, "s", false);
  EXPECT_EQ(b.min_nchannels, 6);
  const NcclSettings c = load_nccl_settings({{"NCCL_MAX_CTAS", "8"}, {"NCCL_MAX_NCHANNELS", "16"}}, "s", false);
  EXPECT_EQ(c.max_nchannels, 8);
  const std::string e = error_of({{"NCCL_MIN_CTAS", "8"}, {"NCCL_MAX_NCHANNELS", "4"}});
  EXPECT_EQ(e.rfind("s.yaml: NCCL_MIN_CTAS: 8 is above NCCL_MAX_NCHANNELS 4", 0), 0u) << e;
  EXPECT_NE(error_of({{"NCCL_MIN_NCHANNELS", "-2"}}).find("between 1 and 64"), std::string::npos);
  EXPECT_NE(error_of({{"NCCL_MIN_CTAS", "0"}}).find("between 1 and 64"), std::string::npos);
}

TEST(NcclSettingsMore, QpsPerConnectionRange) {
  EXPECT_EQ(load_nccl_settings({{"NCCL_IB_QPS_PER_CONNECTION", "4"}}, "s", false).ib_qps_per_connection, 4);
  // net_ib.cc: at most 128 QPs per connection.
  EXPECT_NE(error_of({{"NCCL_IB_QPS_PER_CONNECTION", "129"}}).find("between 1 and 128"), std::string::npos);
  EXPECT_NE(error_of({{"NCCL_IB_QPS_PER_CONNECTION", "0"}}).find("between 1 and 128"), std::string::npos);
}

TEST(NcclSettingsMore, AlgoAndProtoInAllTheirForms) {
  // Per-collective entries only (NCCL 2.24+ form): the other functions keep every algorithm.
  const auto en = fabricsim::simccl::parse_algo_list("allreduce:tree;allgather:ring", "s", "NCCL_ALGO");
  const auto at = [&](Func f, Algo a) { return en[static_cast<int>(f)][static_cast<int>(a)]; };
  EXPECT_TRUE(at(Func::kAllReduce, Algo::kTree));
  EXPECT_FALSE(at(Func::kAllReduce, Algo::kRing));
  EXPECT_TRUE(at(Func::kAllGather, Algo::kRing));
  EXPECT_FALSE(at(Func::kAllGather, Algo::kNvls));
  EXPECT_TRUE(at(Func::kBroadcast, Algo::kRing));
  EXPECT_TRUE(at(Func::kReduceScatter, Algo::kNvls));
  // An exclusion list for one function.
  const auto ex = fabricsim::simccl::parse_algo_list("Ring,Tree;allreduce:^tree", "s", "NCCL_ALGO");
  EXPECT_TRUE(ex[static_cast<int>(Func::kAllReduce)][static_cast<int>(Algo::kNvls)]);
  EXPECT_FALSE(ex[static_cast<int>(Func::kAllReduce)][static_cast<int>(Algo::kTree)]);
  EXPECT_FALSE(ex[static_cast<int>(Func::kAllGather)][static_cast<int>(Algo::kNvls)]);
  // A func entry that leaves the function no algorithm it has: NCCL fails every such call.
  const std::string e = error_of({{"NCCL_ALGO", "allgather:tree"}});
  EXPECT_NE(e.find("'allgather:tree' enables no algorithm AllGather has"), std::string::npos) << e;
  EXPECT_NE(e.find("name one of Ring, PAT, NVLS, CollNetDirect"), std::string::npos) << e;
  // Without a prefix Tree applies to every function and stays valid for AllReduce-only jobs.
  EXPECT_EQ(error_of({{"NCCL_ALGO", "Tree"}}), "");
  EXPECT_NE(error_of({{"NCCL_ALGO", "Ring,Bogus"}}).find("'Bogus' is not an NCCL algorithm"), std::string::npos);
  const auto pr = fabricsim::simccl::parse_proto_list("^LL128;allreduce:LL128", "s", "NCCL_PROTO");
  EXPECT_TRUE(pr[static_cast<int>(Func::kAllReduce)][static_cast<int>(Proto::kLL128)]);
  EXPECT_FALSE(pr[static_cast<int>(Func::kAllReduce)][static_cast<int>(Proto::kSimple)]);
  EXPECT_FALSE(pr[static_cast<int>(Func::kAllGather)][static_cast<int>(Proto::kLL128)]);
  EXPECT_TRUE(pr[static_cast<int>(Func::kAllGather)][static_cast<int>(Proto::kLL)]);
  EXPECT_NE(error_of({{"NCCL_PROTO", "LL129"}}).find("'LL129' is not an NCCL protocol"), std::string::npos);
  // The origin of NCCL_ALGO / NCCL_PROTO is kept for the tuner's "nothing left" error.
  const NcclSettings s = load_nccl_settings({{"NCCL_ALGO", "Ring"}, {"NCCL_PROTO", "Simple"}}, "my.yaml", false);
  EXPECT_EQ(s.algo_origin, "my.yaml");
  EXPECT_EQ(s.proto_origin, "my.yaml");
}

TEST(NcclSettingsMore, MnnvlAgainstTheCluster) {
  const NcclSettings on = load_nccl_settings({{"NCCL_MNNVL_ENABLE", "1"}}, "s.yaml", false);
  // init.cc: several nodes, no MNNVL fabric, NCCL_MNNVL_ENABLE=1 -> "MNNVL is not supported".
  EXPECT_NE(cluster_error(on, 8, 8, 2).find("s.yaml: NCCL_MNNVL_ENABLE: 1 needs an NVLink domain spanning hosts"),
            std::string::npos);
  EXPECT_EQ(cluster_error(on, 4, 72, 18), "");  // an NVL72 rack of 18 hosts x 4 GPUs
  EXPECT_EQ(cluster_error(on, 8, 8, 1), "");    // one node: no check in NCCL
  const NcclSettings off = load_nccl_settings({{"NCCL_MNNVL_ENABLE", "0"}}, "s.yaml", false);
  EXPECT_NE(cluster_error(off, 4, 72, 18).find("not modelled"), std::string::npos);
  EXPECT_EQ(cluster_error(off, 8, 8, 2), "");  // hosts joined by the network anyway
  EXPECT_NE(error_of({{"NCCL_MNNVL_ENABLE", "3"}}).find("between 0 and 2"), std::string::npos);
  const NcclSettings nocumem = load_nccl_settings({{"NCCL_CUMEM_ENABLE", "0"}}, "s.yaml", false);
  EXPECT_NE(cluster_error(nocumem, 4, 72, 18).find("NCCL_CUMEM_ENABLE: 0 on a cluster whose NVLink domain spans hosts"),
            std::string::npos);
  EXPECT_EQ(cluster_error(nocumem, 8, 8, 2), "");
  EXPECT_NE(error_of({{"NCCL_CUMEM_ENABLE", "2"}}).find("between 0 and 1"), std::string::npos);
}

TEST(NcclSettingsMore, GdrC2cAndWorkFifo) {
  EXPECT_EQ(error_of({{"NCCL_NET_GDR_C2C", "1"}}), "");
  EXPECT_NE(error_of({{"NCCL_NET_GDR_C2C", "0"}}).find("NCCL_NET_GDR_C2C: 0 (network buffers staged through host "
                                                        "memory on Grace systems) is not modelled"),
            std::string::npos);
  EXPECT_EQ(error_of({{"NCCL_WORK_FIFO_BYTES", "1048576"}}), "");
  EXPECT_NE(error_of({{"NCCL_WORK_FIFO_BYTES", "1000000"}}).find("not a power of two"), std::string::npos);
  EXPECT_NE(error_of({{"NCCL_WORK_FIFO_BYTES", "1024"}}).find("between 4096 and 1073741824"), std::string::npos);
}

TEST(NcclSettingsMore, MinimumSetIsKnown) {
  // Every name of the minimum set has a kind (none falls through to "unknown").
  for (const char* n : {"NCCL_MNNVL_ENABLE", "NCCL_CUMEM_ENABLE", "NCCL_NET_GDR_C2C", "NCCL_WORK_FIFO_BYTES",
                        "NCCL_MIN_CTAS", "NCCL_IB_QPS_PER_CONNECTION", "NCCL_ALGO", "NCCL_PROTO"}) {
    bool found = false;
    for (const auto& k : fabricsim::simccl::known_nccl_setting_kinds()) found = found || std::string(k.name) == n;
    EXPECT_TRUE(found) << n;
  }
}

}  // namespace
