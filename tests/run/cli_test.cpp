// Real inputs run end to end; bad input gives
// one line naming file and field, exit code 2, and no output file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <optional>
#include <string>

#include "engine/heap_pages.hpp"
#include "tests/support/cli.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/scratch.hpp"

namespace {

namespace fs = std::filesystem;

using Outcome = fabricsim::testing::CliOutcome;
using fabricsim::testing::count_lines;
using fabricsim::testing::run_fabricsim;
using fabricsim::testing::run_shell;

class Cli : public fabricsim::testing::ScratchDirTest {
 protected:
  std::string out_h5() const { return (dir_ / "out.h5").string(); }
  // Runs a command that must fail as bad input and checks the contract.
  void expect_bad(const std::string& args, const std::vector<std::string>& must_mention) {
    const Outcome o = run_fabricsim(args + " -o " + out_h5() + " --summary-json " + (dir_ / "s.json").string(), dir_.string());
    fabricsim::testing::expect_bad_input(o, must_mention, args);
    for (const auto& entry : fs::directory_iterator(dir_)) {
      const auto name = entry.path().filename().string();
      EXPECT_TRUE(name == "stderr.txt" || name == "spec.yaml") << "left behind: " << entry.path();
    }
  }
};

TEST_F(Cli, VersionAndHelp) {
  const Outcome v = run_fabricsim("--version", dir_.string());
  EXPECT_EQ(v.code, 0);
  EXPECT_NE(v.out.find("fabricsim"), std::string::npos);
  const Outcome h = run_fabricsim("run --help", dir_.string());
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("--workload"), std::string::npos);
  // A subcommand's help lists its own examples only; the top-level help lists all of them.
  EXPECT_NE(h.out.find("fabricsim run examples/quickstart.yaml"), std::string::npos);
  EXPECT_EQ(h.out.find("fabricsim sweep "), std::string::npos) << h.out;
  // Nested subcommands too: `kernels lookup --help` ends with its own example, not the top list;
  // one without an example (`kernels gpus`) has no Examples heading.
  const Outcome kl = run_fabricsim("kernels lookup --help", dir_.string());
  EXPECT_EQ(kl.code, 0);
  EXPECT_NE(kl.out.find("fabricsim kernels lookup --gpu"), std::string::npos) << kl.out;
  EXPECT_EQ(kl.out.find("fabricsim run "), std::string::npos) << kl.out;
  EXPECT_EQ(kl.out.find("fabricsim kernels scale "), std::string::npos) << kl.out;
  const Outcome kg = run_fabricsim("kernels gpus --help", dir_.string());
  EXPECT_EQ(kg.code, 0);
  EXPECT_EQ(kg.out.find("Examples:"), std::string::npos) << kg.out;
  const Outcome top = run_fabricsim("--help", dir_.string());
  EXPECT_NE(top.out.find("fabricsim sweep "), std::string::npos);
  EXPECT_NE(top.out.find("fabricsim run "), std::string::npos);
  const Outcome bad = run_fabricsim("frobnicate", dir_.string());
  EXPECT_EQ(bad.code, 2);
}

// The summary's first lines say what was simulated and where the time went: the job's parallelism,
// the leaf oversubscription (given as cluster.oversubscription, or from explicit spines: 4 NICs
// x 400G over 1 spine x 400G = 4:1), the rung; the shares of compute, exposed communication (by
// kind) and bubble add up to the iteration (compute + exposed - pp_wait + bubble = iteration per
// rank, docs/hdf5_schema.md), checked against the summary JSON's means.
TEST_F(Cli, SummarySaysWhatWasSimulatedAndWhereTheTimeWent) {
  const std::string gen =
      " --set workload.generator.model=custom --set workload.generator.layers=2 --set workload.generator.hidden=512"
      " --set workload.generator.heads=8 --set workload.generator.vocab=1024 --set workload.generator.ffn=gelu"
      " --set workload.generator.seq_len=256 --set cluster.gpus_per_host=2 --set cluster.topology=leaf_spine"
      " --set cluster.nics_per_leaf=4";
  struct Case {
    std::string set, simulated;
  };
  const std::vector<Case> cases = {
      {" --set workload.generator.tp=2 --set workload.generator.dp=4 --set cluster.spines=1",
       "simulated: 8 GPUs as TP 2 x PP 1 x DP 4 on 4 hosts, leaf-spine fabric, leaves oversubscribed 4:1; packet rung"},
      {" --set workload.generator.tp=2 --set workload.generator.pp=2 --set workload.generator.dp=2"
       " --set workload.generator.global_batch=4 --set cluster.oversubscription=2:1 --fidelity flow",
       "simulated: 8 GPUs as TP 2 x PP 2 x DP 2 on 4 hosts, leaf-spine fabric, leaves oversubscribed 2:1; flow rung"},
      {" --set workload.generator.tp=2 --set workload.generator.dp=4 --set cluster.spines=4",
       "simulated: 8 GPUs as TP 2 x PP 1 x DP 4 on 4 hosts, leaf-spine fabric; packet rung"}};
  for (const auto& k : cases) {
    const std::string json = (dir_ / "s.json").string();
    const Outcome o = run_fabricsim("run" + gen + k.set + " -o " + out_h5() + " --summary-json " + json, dir_.string());
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_NE(o.out.find("\n" + k.simulated), std::string::npos) << o.out;
    const auto at = o.out.find("\nwhere the time went (mean per rank): compute ");
    ASSERT_NE(at, std::string::npos) << o.out;
    const std::string line = o.out.substr(at + 1, o.out.find('\n', at + 1) - at - 1);
    std::vector<double> pct;
    for (auto p = line.find('('); p != std::string::npos; p = line.find('(', p + 1)) {
      if (line.find("%)", p) != std::string::npos && std::isdigit(static_cast<unsigned char>(line[p + 1]))) {
        pct.push_back(std::stod(line.substr(p + 1)));
      }
    }
    ASSERT_GE(pct.size(), 4u) << line;  // compute, exposed, >= 1 kind, bubble
    std::ifstream in(json);
    const auto j = nlohmann::json::parse(in);
    const double it = j["iteration_time_ps"].get<double>();
    const double comp = j["compute_ps_mean"].get<double>(), bubble = j["bubble_ps_mean"].get<double>();
    EXPECT_NEAR(pct.front(), 100.0 * comp / it, 0.051) << line;
    EXPECT_NEAR(pct[1], 100.0 * (it - comp - bubble) / it, 0.051) << line;
    EXPECT_NEAR(pct.back(), 100.0 * bubble / it, 0.051) << line;
    double kinds = 0;
    for (std::size_t i = 2; i + 1 < pct.size(); ++i) kinds += pct[i];
    EXPECT_NEAR(kinds, pct[1], 0.051 * static_cast<double>(pct.size() - 3)) << line;
    EXPECT_EQ(o.out.find("fabric: ") != std::string::npos, k.simulated.find("packet rung") != std::string::npos);
  }
}

TEST_F(Cli, RunsRealChakraTraceAndWritesOutputs) {
  const std::string w = fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_gather/16npus_1MB/all_gather");
  const std::string json = (dir_ / "s.json").string();
  const Outcome o = run_fabricsim("run --workload " + w + " -o " + out_h5() + " --summary-json " + json, dir_.string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(fs::exists(out_h5()));
  EXPECT_NE(o.out.find("iteration time"), std::string::npos);
  EXPECT_NE(o.out.find("busbw"), std::string::npos);
  std::ifstream in(json);
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["ranks"], 16);
  EXPECT_EQ(j["processes"], 1);
  // One entry per (op, bytes, ranks): here the trace's one AllGather.
  ASSERT_EQ(j["collectives"].size(), 1u);
  EXPECT_EQ(j["collectives_total"], 1);
  const auto& c = j["collectives"][0];
  EXPECT_EQ(c["op"], "all_gather");
  EXPECT_EQ(c["bytes"], 1048576);
  EXPECT_EQ(c["ranks"], 16);
  EXPECT_EQ(c["count"], 1);
  EXPECT_EQ(c["time_ps_min"], c["time_ps_max"]);
  // nccl-tests convention: busbw = algbw * (n-1)/n for AllGather; algbw = bytes / time.
  const double t = c["time_ps_mean"].get<double>() * 1e-12;
  EXPECT_NEAR(c["algbw_GBps_mean"].get<double>(), 1048576 / t / 1e9, 1e-9);
  EXPECT_NEAR(c["busbw_GBps_mean"].get<double>(), c["algbw_GBps_mean"].get<double>() * 15.0 / 16.0, 1e-9);
  EXPECT_GT(j["simulated_time_ps"].get<long long>(), 0);
}

TEST_F(Cli, TruncatedEt) { expect_bad("run --workload " + fabricsim::testing::data("bad/truncated"), {"truncated.0.et"}); }
TEST_F(Cli, GarbageEt) { expect_bad("run --workload " + fabricsim::testing::data("bad/garbage"), {"garbage.0.et"}); }
TEST_F(Cli, UnknownDependency) {
  expect_bad("run --workload " + fabricsim::testing::data("bad/unknown_dep") + " --set workload.chakra.missing_deps=error",
             {"unknown_dep.0.et"});
}
TEST_F(Cli, MalformedSimaiLine) {
  expect_bad("run --workload " + fabricsim::testing::data("bad/simai_malformed_line.txt") + " --gpus 8",
             {"simai_malformed_line.txt"});
}
TEST_F(Cli, UnknownSpecKeySuggestsClosest) {
  const std::string spec = (dir_ / "spec.yaml").string();
  std::ofstream(spec) << "workload:\n  path: x.txt\ncluster:\n  nic_bandwith: 400Gbps\n";
  expect_bad("run " + spec, {"spec.yaml", "cluster.nic_bandwith", "did you mean 'cluster.nic_bandwidth'"});
  fs::remove(spec);
}
TEST_F(Cli, UnknownSetKey) {
  expect_bad("run --workload x --set sim.sed=3", {"sim.sed", "did you mean 'sim.seed'"});
}
TEST_F(Cli, NegativeBandwidth) {
  const std::string w = fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce");
  expect_bad("run --workload " + w + " --set cluster.nic_bandwidth=-400Gbps", {"cluster.nic_bandwidth", "negative"});
}
TEST_F(Cli, BadProxyModel) {
  const std::string w = fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce");
  expect_bad("run --workload " + w + " --set simccl.proxy=fast", {"simccl.proxy", "'fast' is not a proxy model", "use none or nccl"});
}
TEST_F(Cli, MoreRanksThanGpus) {
  const std::string w = fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/16npus_1MB/all_reduce");
  expect_bad("run --workload " + w + " --set cluster.hosts=1", {"cluster.hosts", "16 ranks"});
}
// A cross-key check that fails because of a --set value names <cli>, not the spec file that
// is valid as written; a check failing on the file's own values still names the file.
TEST_F(Cli, SetValueThatBreaksACrossKeyCheckNamesTheCommandLine) {
  const std::string spec = (dir_ / "spec.yaml").string();
  std::ofstream(spec) << "workload:\n  generator:\n    model: gpt3-13b\n    tp: 8\n    pp: 1\n    dp: 1\n"
                         "cluster:\n  hosts: 1\n";
  for (const char* set : {"workload.generator.tp=3", "workload.generator.pp=7", "workload.generator.dp=2",
                          "cluster.hosts=0"}) {
    SCOPED_TRACE(set);
    const Outcome o = run_fabricsim(std::string("run ") + spec + " --set " + set + " -o " + out_h5(), dir_.string());
    EXPECT_EQ(o.code, 2) << o.err;
    EXPECT_EQ(o.err.rfind("fabricsim: error: <cli>: ", 0), 0u) << o.err;
  }
  std::ofstream(spec) << "workload:\n  generator:\n    model: gpt3-13b\n    tp: 3\n";
  const Outcome f = run_fabricsim("run " + spec + " --set workload.generator.dp=1 -o " + out_h5(), dir_.string());
  EXPECT_EQ(f.code, 2) << f.err;
  EXPECT_EQ(f.err.rfind("fabricsim: error: " + spec + ": workload.generator.tp", 0), 0u) << f.err;
  // Topology cross-key checks: pods set on the command line -> <cli>; pods in the file -> the file.
  std::ofstream(spec) << "cluster:\n  tiers: 3\n  hosts: 64\n";
  const Outcome t = run_fabricsim("topo " + spec + " --set cluster.pods=3", dir_.string());
  EXPECT_EQ(t.code, 2) << t.err;
  EXPECT_EQ(t.err.rfind("fabricsim: error: <cli>: cluster.pods", 0), 0u) << t.err;
  std::ofstream(spec) << "cluster:\n  tiers: 3\n  hosts: 64\n  pods: 3\n";
  const Outcome tf = run_fabricsim("topo " + spec + " --set cluster.nic_bandwidth=200Gbps", dir_.string());
  EXPECT_EQ(tf.code, 2) << tf.err;
  EXPECT_EQ(tf.err.rfind("fabricsim: error: " + spec + ": cluster.pods", 0), 0u) << tf.err;
  fs::remove(spec);
}
// Fresh-user findings (2026-12-01): --gpus that disagrees with the generator's world size, a
// trace range past the last rank, a shorthand option contradicting a --set, `generate -o` naming
// a directory or a prefix that holds a trace with more ranks. Each one line, exit 2.
TEST_F(Cli, GeneratorWorldSizeTraceRangeShorthandAndGeneratePrefix) {
  const std::string g = "--set workload.generator.model=gpt3-13b --set workload.generator.layers=4 "
                        "--set workload.generator.tp=8 ";
  expect_bad("run " + g + "--gpus 16", {"<cli>: workload.gpus", "8 ranks"});
  expect_bad("run " + g + "--trace " + (dir_ / "t.json").string() + " --trace-ranks 100",
             {"output.trace_ranks", "8 ranks"});
  expect_bad("run " + g + "--set sim.fidelity=flow --fidelity packet", {"sim.fidelity", "different values"});
  // --set may repeat a key (the last wins): tp=4 then tp=8 validates as tp 8.
  const Outcome twice = run_fabricsim("validate " + g + "--set workload.generator.tp=4 --set workload.generator.tp=8",
                                      dir_.string());
  EXPECT_EQ(twice.code, 0) << twice.err;
  EXPECT_NE(twice.out.find("tp8"), std::string::npos) << twice.out;
  const Outcome d = run_fabricsim("generate " + g + "-o " + dir_.string() + "/", dir_.string());
  EXPECT_EQ(d.code, 2) << d.err;
  EXPECT_NE(d.err.find("is a directory"), std::string::npos) << d.err;
  const std::string prefix = (dir_ / "tr").string();
  ASSERT_EQ(run_fabricsim("generate " + g + "--set workload.generator.dp=2 -o " + prefix, dir_.string()).code, 0);
  const Outcome stale = run_fabricsim("generate " + g + "-o " + prefix, dir_.string());
  EXPECT_EQ(stale.code, 2) << stale.err;
  EXPECT_NE(stale.err.find("tr.8.et exists"), std::string::npos) << stale.err;
  EXPECT_TRUE(fs::exists(prefix + ".15.et"));  // the earlier trace is untouched
}

// A model shape that TP, PP, EP or CP does not divide, a GPU without a kernel table under
// fallback: none, and sim.fold: dp where the replicas differ: each one line naming the key and
// the fix, exit 2, nothing written.
TEST_F(Cli, ShapeTableAndFoldErrorsNameTheKeyAndTheFix) {
  const std::string spec = (dir_ / "spec.yaml").string();
  auto bad_spec = [&](const std::string& gen, const std::string& rest, const std::vector<std::string>& needles) {
    SCOPED_TRACE(gen + rest);
    std::ofstream(spec) << "workload:\n  generator:\n" << gen << rest;
    std::vector<std::string> with_file = needles;
    with_file.push_back(spec + ": ");
    expect_bad("run " + spec, with_file);
  };
  const std::string gpt = "    model: gpt3-13b\n    layers: 4\n";  // 40 heads, 2048-token sequences
  // TP: 40 heads over 3 ranks.
  bad_spec(gpt + "    tp: 3\n", "", {"workload.generator.tp", "40 attention heads are not divisible by TP 3",
                                      "choose a TP that divides the head count"});
  // PP: 4 layers over 3 stages.
  bad_spec(gpt + "    pp: 3\n", "", {"workload.generator.pp", "4 layers are not divisible by PP 3", "choose pp"});
  // CP: 2048 tokens in 2*3 load-balanced chunks.
  bad_spec(gpt + "    attention: flash\n    cp: 3\n", "",
           {"workload.generator.seq_len", "not divisible by 2·CP = 6", "choose a sequence length divisible by 2*cp"});
  // EP: Mixtral's 8 experts over 3 ranks.
  bad_spec("    model: mixtral-8x7b\n    layers: 2\n    dp: 3\n    ep: 3\n", "",
           {"workload.generator.ep", "8 experts not divisible by EP 3", "choose an EP that divides the expert count"});
  // A GPU without a kernel table (H800) and fallback: none.
  bad_spec(gpt + "    tp: 8\n    gpu: H800\n    fallback: none\n", "", {"workload.generator.fallback", "roofline"});
  // sim.fold: dp where the DP replicas differ: a straggler in replica 1, and MoE experts spread over
  // the replicas (EP 2 of DP 2).
  bad_spec(gpt + "    tp: 8\n    dp: 2\n", "sim:\n  fidelity: analytical\n  fold: dp\ncompute:\n  stragglers: 9:1.5\n",
           {"sim.fold", "make the DP replicas' compute differ", "drop the stragglers", "or set sim.fold: none"});
  bad_spec("    model: mixtral-8x7b\n    layers: 2\n    dp: 2\n    ep: 2\n", "sim:\n  fidelity: analytical\n  fold: dp\n",
           {"sim.fold", "no group of fewer than DP = 2 replicas", "or set sim.fold: none"});
  fs::remove(spec);
}

// `generate --memory`: the estimate per pipeline rank (no DAG), the peak marked; a job that cannot
// fit (GPT-3 175B, TP 8 on 8 H100: ~360 GB) gets one warning line; --memory with -o is refused.
TEST_F(Cli, GenerateMemoryEstimatesPerPipelineRankAndWarnsWhenTooBig) {
  const std::string fit = "--set workload.generator.model=gpt3-175b --set workload.generator.tp=8 "
                          "--set workload.generator.pp=8 --set workload.generator.dp=16 "
                          "--set workload.generator.global_batch=1536 --set workload.generator.recompute=selective";
  const Outcome ok = run_fabricsim("generate --memory " + fit, dir_.string());
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(count_lines(ok.out), 2 + 8) << ok.out;  // title, header, 8 pipeline ranks
  EXPECT_NE(ok.out.find("<- peak"), std::string::npos) << ok.out;
  EXPECT_TRUE(ok.err.empty()) << ok.err;
  const Outcome big = run_fabricsim("generate --memory --set workload.generator.model=gpt3-175b --set workload.generator.tp=8",
                                    dir_.string());
  EXPECT_EQ(big.code, 0) << big.err;
  EXPECT_EQ(count_lines(big.err), 1) << big.err;
  EXPECT_NE(big.err.find("run out of memory"), std::string::npos) << big.err;
  const Outcome both = run_fabricsim("generate --memory --set workload.generator.model=gpt3-13b -o " + (dir_ / "t").string(),
                                     dir_.string());
  EXPECT_EQ(both.code, 2) << both.err;
  EXPECT_EQ(count_lines(both.err), 1) << both.err;
  EXPECT_NE(both.err.find("--memory"), std::string::npos) << both.err;
}

// An unknown option followed by a value: the option is named, not the value as a missing spec.
TEST_F(Cli, UnknownOptionWithValueNamesTheOption) {
  expect_bad("run --bogus 3", {"--bogus", "not expected"});
  const Outcome o = run_fabricsim("run --bogus 3", dir_.string());
  EXPECT_EQ(o.err.find("File does not exist"), std::string::npos) << o.err;
}
TEST_F(Cli, UnknownOptionWithValueBeforeSpecNamesOnlyTheOption) {
  const std::string spec = fabricsim::testing::source_dir() + "/examples/zero3_16.yaml";
  expect_bad("run --bogus 3 " + spec, {"--bogus"});
  const Outcome o = run_fabricsim("run --bogus 3 " + spec, dir_.string());
  EXPECT_EQ(o.err.find("zero3_16.yaml"), std::string::npos) << o.err;
}
// Two outputs on one path: refused before anything runs (the later writer used to win silently).
TEST_F(Cli, TwoOutputsOnOnePath) {
  const std::string w = fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce");
  const std::string same = (dir_ / "same.out").string();
  for (const std::string& args : {"-o " + same + " --summary-json " + same, "-o " + out_h5() + " --summary-json " + same + " --trace " + same,
                                  "-o " + same + " --save-partition " + same}) {
    const Outcome o = run_fabricsim("run --workload " + w + " " + args, dir_.string());
    EXPECT_EQ(o.code, 2) << args << ": " << o.err;
    EXPECT_EQ(count_lines(o.err), 1) << o.err;
    EXPECT_NE(o.err.find("is the same path as"), std::string::npos) << o.err;
    EXPECT_FALSE(fs::exists(same)) << args;
    EXPECT_FALSE(fs::exists(out_h5())) << args;
  }
}
// Every boolean key takes the same words (true/false, yes/no, on/off, 1/0, any case) and
// refuses others with one line naming the key.
TEST_F(Cli, BooleanKeysShareOneParser) {
  const std::string w = fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce");
  for (const char* key : {"simccl.lazy_plans", "output.flows", "cluster.nvswitch_cut_through"}) {
    expect_bad("run --workload " + w + " --set " + key + "=maybe", {key, "maybe", "not a boolean"});
    for (const char* val : {"TRUE", "yes", "Off", "0"}) {
      const Outcome o = run_fabricsim("run -q --workload " + w + " --set " + key + "=" + val + " -o " + out_h5(), dir_.string());
      EXPECT_EQ(o.code, 0) << key << "=" << val << ": " << o.err;
      fs::remove(out_h5());  // the next expect_bad checks that nothing is left in the directory
    }
  }
}
TEST_F(Cli, MissingSpecFileNamed) { expect_bad("run /nonexistent/spec.yaml", {"/nonexistent/spec.yaml"}); }
TEST_F(Cli, MissingWorkload) { expect_bad("run --workload /nonexistent/trace", {"/nonexistent/trace"}); }
TEST_F(Cli, SimaiWithoutWorldSize) {
  expect_bad("run --workload " + fabricsim::testing::data("bad/simai_missing_all_gpus.txt"), {"--gpus"});
}
TEST_F(Cli, OutputDirectoryMissing) {
  const std::string w = fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce");
  const Outcome o = run_fabricsim("run --workload " + w + " -o /nonexistent_dir/out.h5", dir_.string());
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(count_lines(o.err), 1) << o.err;
}

TEST_F(Cli, DuplicateSpecKey) {
  const std::string spec = (dir_ / "spec.yaml").string();
  std::ofstream(spec) << "cluster:\n  mtu: 4KiB\n  mtu: 8KiB\n";
  expect_bad("run " + spec, {"spec.yaml", "cluster.mtu", "appears twice"});
}
TEST_F(Cli, KeyWithoutValueIsNotASilentDefault) {
  // 'key:' / 'key: ~' left the default in place without a word; now one line naming the key.
  const std::string spec = (dir_ / "spec.yaml").string();
  for (const char* text : {"simccl: {launch_latency: ~}\n", "sim:\n  fidelity:\n", "cluster: {nvls_bandwidth: null}\n"}) {
    std::ofstream(spec) << text;
    const std::string key = std::string(text).find("launch") != std::string::npos ? "simccl.launch_latency"
                            : std::string(text).find("fidelity") != std::string::npos ? "sim.fidelity"
                                                                                        : "cluster.nvls_bandwidth";
    expect_bad("run " + spec, {"spec.yaml", key, "has no value"});
  }
}
TEST_F(Cli, SectionGivenAValue) {
  const std::string spec = (dir_ / "spec.yaml").string();
  std::ofstream(spec) << "cluster: 5\n";
  expect_bad("run " + spec, {"spec.yaml", "cluster", "is a section"});
}
TEST_F(Cli, AbsurdRateAndLatency) {
  const std::string w = fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce");
  expect_bad("run --workload " + w + " --set cluster.nic_bandwidth=1bps", {"cluster.nic_bandwidth", "1 Mbps"});
  expect_bad("run --workload " + w + " --set cluster.nvlink_latency=9000000s", {"cluster.nvlink_latency", "1 s"});
}
TEST_F(Cli, SimulatedTimeBeyondHorizonIsInputError) {
  // Two compute nodes of 1e15 ns (1e18 ps) each end after 2^60 ps, the engine's horizon.
  const std::string wl = (dir_ / "spec.yaml").string();  // name exempt from the leftover check
  std::ofstream(wl) << "MICRO\n2\nl1 -1 0 NONE 0 0 NONE 0 1000000000000000 NONE 0 0\n"
                       "l2 -1 0 NONE 0 0 NONE 0 1000000000000000 NONE 0 0\n";
  expect_bad("run --workload " + wl + " --gpus 1", {"error: " + wl + ": simulated time", "2^60"});
}
TEST_F(Cli, OutputMustNotBeAnInputOrADirectory) {
  const std::string w = fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce");
  const Outcome o = run_fabricsim("run --workload " + w + " -o " + w + ".0.et", dir_.string());
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.err.find("is the same file as"), std::string::npos) << o.err;
  const Outcome d = run_fabricsim("run --workload " + w + " -o " + out_h5() + " --summary-json " + dir_.string(), dir_.string());
  EXPECT_EQ(d.code, 2);
  EXPECT_NE(d.err.find("is a directory"), std::string::npos) << d.err;
  EXPECT_FALSE(fs::exists(out_h5()));
}
// access(W_OK) says yes to root on pseudo file systems; the results would be lost after the run.
TEST_F(Cli, OutputOnAFileSystemThatRefusesFilesFailsBeforeTheRun) {
  const std::string w = fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce");
  for (const std::string out : {"-o /proc/fabricsim_test.h5", "--summary-json /proc/fabricsim_test.json"}) {
    const Outcome o = run_fabricsim("run --workload " + w + " " + out, dir_.string());
    EXPECT_EQ(o.code, 2) << out << ": " << o.err;
    EXPECT_EQ(count_lines(o.err), 1) << o.err;
    EXPECT_NE(o.err.find("cannot create a file in /proc"), std::string::npos) << o.err;
  }
}
// Results are written to a temporary file and renamed into place: a symbolic link must keep
// pointing at its target (which gets the results) and a pipe or device must be refused, not
// replaced by a regular file (as root, `-o /dev/null` replaced the machine's /dev/null).
TEST_F(Cli, OutputThroughALinkKeepsTheLinkAndAPipeIsRefused) {
  const std::string w = fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce");
  fs::create_directories(dir_ / "real");
  fs::create_symlink("real/target.h5", dir_ / "link.h5");
  fs::create_symlink("real/s.json", dir_ / "link.json");
  const Outcome o = run_fabricsim("run -q --workload " + w + " -o " + (dir_ / "link.h5").string() + " --summary-json " +
                                (dir_ / "link.json").string(),
                                  dir_.string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir_ / "link.h5")));
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(dir_ / "link.json")));
  EXPECT_GT(fs::file_size(dir_ / "real" / "target.h5"), 0u);
  EXPECT_GT(fs::file_size(dir_ / "real" / "s.json"), 0u);
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string opt : {"-o ", "--summary-json ", "--trace "}) {
    const Outcome p = run_fabricsim("run -q --workload " + w + " " + opt + fifo, dir_.string());
    EXPECT_EQ(p.code, 2) << opt << p.err;
    EXPECT_EQ(count_lines(p.err), 1) << p.err;
    EXPECT_NE(p.err.find("is not a regular file"), std::string::npos) << p.err;
    EXPECT_TRUE(fs::is_fifo(fifo)) << opt;
  }
  // The null device discards (same results digest, no file anywhere) and stays a device.
  const Outcome n = run_fabricsim("run -q --workload " + w + " -o /dev/null --summary-json /dev/null --trace /dev/null",
                                  dir_.string());
  EXPECT_EQ(n.code, 0) << n.err;
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  fs::remove_all(dir_ / "real");
  fs::remove(dir_ / "link.h5");
  fs::remove(dir_ / "link.json");
  fs::remove(fifo);
}
TEST_F(Cli, UsageErrorsAreOneLine) {
  for (const std::string args : {"run --gpus 0", "run --threads 0", "run /nonexistent.yaml", "run --bogus", "frobnicate"}) {
    const Outcome o = run_fabricsim(args, dir_.string());
    EXPECT_EQ(o.code, 2) << args;
    EXPECT_EQ(count_lines(o.err), 1) << args << ": " << o.err;
    EXPECT_EQ(o.err.rfind("fabricsim: error: <cli>: ", 0), 0u) << o.err;
  }
}

}  // namespace

// Issue 3 must-show 9 (fabric part): bad fabric settings are one line naming the key, exit 2.
TEST_F(Cli, FabricBadInput) {
  const std::string w = fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce");
  expect_bad("run --workload " + w + " --set nic.cc=swift", {"nic.cc", "'swift'", "none, dcqcn, hpcc or timely"});
  expect_bad("run --workload " + w + " --set switch.routing=random", {"switch.routing", "ecmp, spray or adaptive"});
  expect_bad("run --workload " + w + " --set switch.routing=spray --set switch.pfc=false", {"<cli>: switch.routing", "switch.pfc"});
  expect_bad("run --workload " + w + " --set switch.buffer=16KiB", {"<cli>: switch.buffer", "headroom"});
  expect_bad("run --workload " + w + " --set switch.ecn_kmin=500KB --set switch.ecn_kmax=100KB", {"switch.ecn_kmin"});
  expect_bad("run --workload " + w + " --set nic.qps_per_connection=0", {"nic.qps_per_connection"});
  expect_bad("run --workload " + w + " --set cc.dcqcn_g=2", {"cc.dcqcn_g"});
  expect_bad("run --workload " + w + " --set switch.pfc=maybe", {"switch.pfc", "boolean"});
}

TEST_F(Cli, KernelsLookupWithoutWorkOrWithNonFiniteShapesIsRefused) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases{
      {"kernels lookup --gpu H100", {"kernels lookup", "no work given"}},
      {"kernels lookup --m inf --n 1 --k 1", {"--m", "finite"}},
      {"kernels lookup --m 4096 --n 4096 --k 4096 --flops 1e12", {"--flops", "--m/--n/--k"}}};
  for (const auto& [args, must] : cases) {
    const Outcome o = run_fabricsim(args, dir_.string());
    EXPECT_EQ(o.code, 2) << args << "\n" << o.err;
    EXPECT_EQ(count_lines(o.err), 1) << o.err;
    for (const auto& m : must) EXPECT_NE(o.err.find(m), std::string::npos) << "missing '" << m << "' in: " << o.err;
  }
  EXPECT_EQ(run_fabricsim("kernels lookup --gpu H100 --m 4096 --n 4096 --k 4096", dir_.string()).code, 0);
}

// Case: `kernels scale` without --op silently scaled as compute-bound. Without a kind or the work
// it is refused (one line, exit 2, nothing on stdout); each way of giving the class works, with
// the datasheet ratios (A100 -> H100 BF16: 312 -> 989.4 TFLOP/s, 2.039 -> 3.35 TB/s).
TEST_F(Cli, KernelsScaleNeedsTheRooflineClass) {
  const std::string base = "kernels scale --from A100 --to H100 --time-us 715";
  const Outcome bad = run_fabricsim(base, dir_.string());
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_EQ(count_lines(bad.err), 1) << bad.err;
  EXPECT_TRUE(bad.out.empty()) << bad.out;
  for (const char* m : {"fabricsim: error: <cli>: kernels scale:", "roofline class", "--op", "--flops", "--m/--n/--k"}) {
    EXPECT_NE(bad.err.find(m), std::string::npos) << "missing '" << m << "' in: " << bad.err;
  }
  auto scaled = [&](const std::string& extra, double want_us, const char* cls) {
    const Outcome o = run_fabricsim(base + " " + extra, dir_.string());
    EXPECT_EQ(o.code, 0) << extra << ": " << o.err;
    EXPECT_NE(o.out.find(fmt::format("-> {:.3f} us on H100 ({}-bound", want_us, cls)), std::string::npos)
        << extra << ": " << o.out;
  };
  scaled("--op gemm", 715 * 312 / 989.4, "compute");
  scaled("--op layernorm", 715 * 2.039 / 3.35, "memory");
  scaled("--flops 1e9", 715 * 312 / 989.4, "compute");
  scaled("--bytes 1e6", 715 * 2.039 / 3.35, "memory");
}

// Case: `validate` goes through run's checks (RunOptions::dry_run), so a spec `run` refuses is
// refused by `validate` with the same line: a bad NCCL_ALGO, a missing schedule, partition or
// NCCL topology file, an output path that cannot be created. validate writes nothing, not even
// sim.save_partition.
TEST_F(Cli, ValidateRefusesWhatRunRefusesWithTheSameLine) {
  const std::string spec = fabricsim::testing::source_dir() + "/examples/zero3_16.yaml";
  const std::vector<std::string> bad = {"nccl.NCCL_ALGO=bogus",
                                        "simccl.schedule=" + (dir_ / "missing.json").string(),
                                        "sim.partition=" + (dir_ / "missing.part").string(),
                                        "nccl.NCCL_TOPO_FILE=" + (dir_ / "missing.xml").string(),
                                        "output.summary_json=/proc/fabricsim_qa.json",
                                        "output.h5=/proc/fabricsim_qa.h5"};
  for (const auto& set : bad) {
    const Outcome v = run_fabricsim("validate " + spec + " --set " + set, dir_.string());
    const Outcome r = run_fabricsim("run " + spec + " -q --set " + set, dir_.string());
    EXPECT_EQ(v.code, 2) << set << ": " << v.err;
    EXPECT_EQ(r.code, 2) << set << ": " << r.err;
    EXPECT_EQ(count_lines(v.err), 1) << set << ": " << v.err;
    EXPECT_EQ(v.err, r.err) << set;
    EXPECT_EQ(v.out, "") << set;
  }
  const std::string part = (dir_ / "saved.part").string();
  const Outcome ok = run_fabricsim("validate " + spec + " --set sim.save_partition=" + part, dir_.string());
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(ok.out.rfind("ok\nworkload: ", 0), 0u) << ok.out;
  EXPECT_FALSE(fs::exists(part)) << "validate wrote the partition file";
}

// Case: a NUL byte in a partition file cut the error line at the NUL ("bad entry '0 0 0" and
// nothing after it). Every reader that quotes file content (partition, topology file, SimAI
// workload) now shows unprintable bytes escaped: one line, exit 2, the text after the byte kept.
TEST_F(Cli, UnprintableBytesInInputFilesAreEscapedInTheErrorLine) {
  using namespace std::string_literals;
  const std::string spec = fabricsim::testing::source_dir() + "/examples/zero3_16.yaml";
  auto check = [&](const std::string& args, const std::string& must) {
    const Outcome o = run_fabricsim(args, dir_.string());
    EXPECT_EQ(o.code, 2) << o.err;
    EXPECT_EQ(count_lines(o.err), 1) << o.err;
    EXPECT_EQ(o.err.find('\0'), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find('\x1b'), std::string::npos) << o.err;
    EXPECT_NE(o.err.find(must), std::string::npos) << "missing '" << must << "' in: " << o.err;
  };
  // Partition file: a valid header, then an entry with a NUL inside.
  const std::string good = (dir_ / "good.part").string(), bad = (dir_ / "bad.part").string();
  ASSERT_EQ(run_fabricsim("run " + spec + " -q -o " + (dir_ / "r.h5").string() + " --set sim.save_partition=" + good, dir_.string()).code, 0);
  std::ifstream saved(good);
  std::string header;
  ASSERT_TRUE(std::getline(saved, header));
  std::ofstream(bad) << header << "\n" << "0 0 0\0 junk\n"s;
  check("run " + spec + " -q -o " + (dir_ / "p.h5").string() + " --partition " + bad, "line 2: bad entry '0 0 0\\x00 junk'");
  check("validate " + spec + " --set sim.partition=" + bad, "line 2: bad entry '0 0 0\\x00 junk'");
  EXPECT_FALSE(fs::exists(dir_ / "p.h5"));
  // Topology file: a node kind with a NUL and a terminal escape sequence.
  const std::string topo = (dir_ / "bad.topo").string();
  std::ofstream(topo) << "fabricsim-topology 1\nnode gpu0 gp\0u\x1b[31m\n"s;
  check("validate " + spec + " --set cluster.topology=file --set cluster.topology_file=" + topo,
        "unknown node kind 'gp\\x00u\\x1b[31m'");
  // SimAI workload: a comm type with a NUL (the file's first three lines are a valid header).
  std::ifstream real(fabricsim::testing::source_dir() +
                     "/examples/workloads/G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt");
  std::string l1, l2, l3;
  ASSERT_TRUE(std::getline(real, l1) && std::getline(real, l2) && std::getline(real, l3));
  const std::string wl = (dir_ / "bad.txt").string();
  std::ofstream out(wl);
  out << l1 << "\n" << l2 << "\n" << l3 << "\n" << "bad\t-1\t0\tBOG\0US\t1\t1\tNONE\t0\t1\tNONE\t0\t100\n"s;
  out << real.rdbuf();
  out.close();
  check("validate --workload " + wl + " --gpus 8", "unknown comm type 'BOG\\x00US'");
}

// Case: a partition file saved by a 2-process run could not be validated without mpiexec (validate
// checked it against its own 1 process). `validate --processes 2` checks it for 2; without it
// the file is refused as made for another process count; --processes 0 is bad input.
TEST_F(Cli, ValidateChecksAPartitionFileForTheGivenProcessCount) {
  const std::string spec = fabricsim::testing::source_dir() + "/examples/zero3_16.yaml";
  const std::string one = (dir_ / "one.part").string(), two = (dir_ / "two.part").string();
  ASSERT_EQ(run_fabricsim("run " + spec + " -q -o " + (dir_ / "r.h5").string() + " --set sim.save_partition=" + one, dir_.string()).code, 0);
  // The same placement with LP 0 moved to a second process: a 2-process partition file.
  std::ifstream in(one);
  std::ofstream out(two);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  const auto at = line.find(" procs 1 ");
  ASSERT_NE(at, std::string::npos) << line;
  out << line.substr(0, at) << " procs 2 " << line.substr(at + 9) << "\n";
  bool moved = false;
  while (std::getline(in, line)) {
    if (!moved && line.rfind("0 0 ", 0) == 0) {
      out << "0 1 " << line.substr(4) << "\n";
      moved = true;
    } else {
      out << line << "\n";
    }
  }
  out.close();
  ASSERT_TRUE(moved);
  const Outcome plain = run_fabricsim("validate " + spec + " --set sim.partition=" + two, dir_.string());
  EXPECT_EQ(plain.code, 2) << plain.err;
  EXPECT_NE(plain.err.find("line 1"), std::string::npos) << plain.err;
  const Outcome for2 = run_fabricsim("validate " + spec + " --processes 2 --set sim.partition=" + two, dir_.string());
  EXPECT_EQ(for2.code, 0) << for2.err;
  EXPECT_NE(for2.out.find("partition: 2 process(es) x 1 thread(s), lookahead "), std::string::npos) << for2.out;
  EXPECT_EQ(for2.out.find("lookahead none"), std::string::npos) << for2.out;  // LP 0's links are cut
  const Outcome one_ok = run_fabricsim("validate " + spec + " --set sim.partition=" + one, dir_.string());
  EXPECT_EQ(one_ok.code, 0) << one_ok.err;
  EXPECT_NE(one_ok.out.find("partition: 1 process(es) x 1 thread(s), lookahead none (nothing cut)"), std::string::npos)
      << one_ok.out;
  for (const char* bad : {"0", "1048577", "4294967295"}) {  // 1..2^20 (validate's work grows with N)
    const Outcome o = run_fabricsim("validate " + spec + " --processes " + bad, dir_.string());
    EXPECT_EQ(o.code, 2) << bad << ": " << o.err;
    EXPECT_EQ(count_lines(o.err), 1) << o.err;
    EXPECT_NE(o.err.find("not in range 1 to 1048576"), std::string::npos) << o.err;
  }
  // Case: validate takes the run's thread count (--threads, OMP_NUM_THREADS) for the partition check.
  const std::string threads2 = (dir_ / "threads2.part").string();
  ASSERT_EQ(run_fabricsim("run " + spec + " -q --threads 2 -o " + (dir_ / "t.h5").string() + " --set sim.save_partition=" + threads2,
                          dir_.string()).code, 0);
  EXPECT_EQ(run_fabricsim("validate " + spec + " --set sim.partition=" + threads2, dir_.string()).code, 2);
  EXPECT_EQ(run_fabricsim("validate " + spec + " --threads 2 --set sim.partition=" + threads2, dir_.string()).code, 0);
  EXPECT_EQ(run_fabricsim("validate " + spec + " --set sim.partition=" + threads2, dir_.string(), "OMP_NUM_THREADS=2").code, 0);
}

// Case: nccl-tests and plan size the cluster from -g/-n; a --set of cluster.gpus_per_host or
// cluster.hosts was overridden without a word. Now one line naming the key, exit 2.
TEST_F(Cli, NcclTestsRefuseClusterSizeSets) {
  for (const std::string args : {"nccl-tests all_reduce -b 1M -e 1M -g 16 --set cluster.gpus_per_host=4",
                                 "nccl-tests all_reduce -b 1M -e 1M -g 8 --set cluster.hosts=2",
                                 "plan all_reduce 1G -g 8 -n 2 --set cluster.hosts=3"}) {
    const Outcome o = run_fabricsim(args, dir_.string());
    EXPECT_EQ(o.code, 2) << args << ": " << o.err;
    EXPECT_EQ(count_lines(o.err), 1) << o.err;
    EXPECT_NE(o.err.find("give -g/-n instead"), std::string::npos) << o.err;
    EXPECT_EQ(o.out, "") << args;
  }
  EXPECT_EQ(run_fabricsim("nccl-tests all_reduce -b 1M -e 1M -g 8 --set cluster.nic_bandwidth=200Gbps", dir_.string()).code, 0);
}

// Case: sim.ring_flows: stream where it changes nothing (packet rung, NCCL planner) says so in one
// warning line and the summary does not claim it.
TEST_F(Cli, RingFlowsStreamWarnsWhereItHasNoEffect) {
  const std::string spec = fabricsim::testing::source_dir() + "/examples/zero3_16.yaml";
  const Outcome packet = run_fabricsim("run " + spec + " -o " + (dir_ / "p.h5").string() + " --set sim.ring_flows=stream", dir_.string());
  EXPECT_EQ(packet.code, 0) << packet.err;
  EXPECT_NE(packet.err.find("sim.ring_flows: stream has no effect at the packet rung"), std::string::npos) << packet.err;
  const Outcome nccl = run_fabricsim("run " + spec + " --fidelity flow --set simccl.planner=nccl -o " + (dir_ / "n.h5").string() +
                                   " --set sim.ring_flows=stream", dir_.string());
  EXPECT_EQ(nccl.code, 0) << nccl.err;
  EXPECT_NE(nccl.err.find("has no effect with simccl.planner: nccl"), std::string::npos) << nccl.err;
  EXPECT_EQ(nccl.out.find("ring flows: stream"), std::string::npos) << nccl.out;
  const Outcome ring = run_fabricsim("run " + spec + " --fidelity flow --set simccl.planner=ring -o " + (dir_ / "r.h5").string() +
                                   " --set sim.ring_flows=stream", dir_.string());
  EXPECT_EQ(ring.code, 0) << ring.err;
  EXPECT_EQ(ring.err.find("no effect"), std::string::npos) << ring.err;
  EXPECT_NE(ring.out.find("(ring flows: stream)"), std::string::npos) << ring.out;
}

// Case: cluster.mtu=1 was accepted and the run then cut every byte into a packet (it seemed to
// hang). Both MTUs are bounded to 256 B (the smallest RoCEv2/IB path MTU) .. 16 MiB
// (coarse-grained packets); the bounds themselves are accepted.
TEST_F(Cli, MtuOutsideItsBoundsIsRefused) {
  const std::string spec = fabricsim::testing::source_dir() + "/examples/zero3_16.yaml";
  for (const char* key : {"cluster.mtu", "cluster.nvlink_mtu"}) {
    for (const char* v : {"1", "255B", "16777217", "1GiB"}) {
      expect_bad("run " + spec + " --set " + key + "=" + v,
                 {std::string("<cli>: ") + key, std::string("'") + v + "' is outside 256 B .. 16 MiB"});
    }
    for (const char* v : {"256B", "9216B", "16MiB"}) {
      const Outcome o = run_fabricsim("validate " + spec + " --set " + key + "=" + v, dir_.string());
      EXPECT_EQ(o.code, 0) << key << "=" << v << ": " << o.err;
    }
  }
}

// Case: `regress --set` with an unknown key failed every case as a run error (exit 1, rebaseline
// advice); it is bad input like `run --set` (exit 2, one line). An unwritable --report is refused
// before the cases run (nothing on stdout: no case ran).
TEST_F(Cli, RegressRefusesUnknownSetKeyAndUnwritableReportUpFront) {
  const std::string suite = fabricsim::testing::source_dir() + "/tests/regress";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--set bogus.key=1", "<cli>: bogus.key: unknown key"},
      {"--set cluster.mtu=1", "<cli>: cluster.mtu: '1' is outside"},  // a known key, a bad value
      {"--set cluster.mtu", "--set cluster.mtu: expected key=value"},
      {"--report /proc/fabricsim_qa.csv", "--report /proc/fabricsim_qa.csv: cannot create a file in /proc"},
      {"--report " + (dir_ / "missing" / "r.csv").string(), "does not exist"},
      {"--report " + dir_.string(), "is a directory"},
      {"--report ''", "--report: the path is empty"}};
  for (const auto& [args, needle] : bad) {
    const Outcome o = run_fabricsim("regress " + suite + " " + args, dir_.string());
    EXPECT_EQ(o.code, 2) << args << ": " << o.err;
    EXPECT_EQ(count_lines(o.err), 1) << args << ": " << o.err;
    EXPECT_EQ(o.err.rfind("fabricsim: error: ", 0), 0u) << o.err;
    EXPECT_NE(o.err.find(needle), std::string::npos) << args << ": " << o.err;
    EXPECT_EQ(o.out, "") << args;
  }
}

// Case: `generate -o ''` printed the summary and exited 0 without writing anything; an unknown
// subcommand (and none at all) said only "A subcommand is required". Both are one line, exit 2;
// the second names the word and lists every subcommand.
TEST_F(Cli, EmptyGeneratePrefixAndUnknownSubcommandAreRefused) {
  const Outcome g = run_fabricsim("generate --set workload.generator.model=llama3-8b -o ''", dir_.string());
  EXPECT_EQ(g.code, 2) << g.err;
  EXPECT_EQ(g.out, "");
  EXPECT_EQ(g.err, "fabricsim: error: <cli>: -o: the output prefix is empty; give a prefix, e.g. -o /tmp/l8b "
                   "(writes /tmp/l8b.<rank>.et), or drop -o to only print\n");
  const std::string all = "run, validate, describe, sweep, regress, nccl-tests, plan, kernels, generate, report, "
                          "compare, ladder, topo";
  const Outcome n = run_fabricsim("nonsense", dir_.string());
  EXPECT_EQ(n.code, 2);
  EXPECT_EQ(n.err, "fabricsim: error: <cli>: 'nonsense' is not a subcommand; use one of " + all + " (fabricsim --help)\n");
  const Outcome none = run_fabricsim("", dir_.string());
  EXPECT_EQ(none.code, 2);
  EXPECT_EQ(none.err, "fabricsim: error: <cli>: a subcommand is required; use one of " + all + " (fabricsim --help)\n");
  // Options still reach the parser; a real subcommand still runs.
  EXPECT_EQ(run_fabricsim("--version", dir_.string()).code, 0);
  EXPECT_EQ(run_fabricsim("describe spec", dir_.string()).code, 0);
}

// `fabricsim describe nic [NAME]`: one profile with the key overriding each field and its
// sources, all profiles without a name; an unknown name is one error line, exit 2, no output.
TEST_F(Cli, DescribeNicPrintsProfilesAndRefusesUnknownNames) {
  const Outcome one = run_fabricsim("describe nic cx6_200g", dir_.string());
  EXPECT_EQ(one.code, 0);
  EXPECT_NE(one.out.find("nic profile cx6_200g:"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("200Gbps"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("nic.qp_cache"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("sources:"), std::string::npos) << one.out;
  EXPECT_EQ(one.out.find("nic profile cx7_400g:"), std::string::npos) << one.out;
  const Outcome all = run_fabricsim("describe nic", dir_.string());
  EXPECT_EQ(all.code, 0);
  for (const char* name : {"ideal", "cx7_400g", "cx6_200g"}) {
    EXPECT_NE(all.out.find(std::string("nic profile ") + name + ":"), std::string::npos) << name;
  }
  const Outcome bad = run_fabricsim("describe nic cx9", dir_.string());
  EXPECT_EQ(bad.code, 2);
  EXPECT_EQ(bad.out, "");
  EXPECT_EQ(bad.err, "fabricsim: error: <cli>: describe nic: 'cx9' is not a NIC profile; use one of ideal, cx7_400g, "
                     "cx6_200g\n");
}

// Huge pages (app/main.cpp): under the kernel's THP mode "madvise" fabricsim runs itself again
// with glibc.malloc.hugetlb=1; FABRICSIM_HUGEPAGES=0 keeps 4 KiB pages. The info line says which,
// and the results do not depend on it (same digest). A tunable the user gave is kept; with
// LD_PRELOAD set (valgrind, heaptrack) it does not run itself again.
TEST_F(Cli, HugePagesAreRequestedUnderThpMadviseAndNeverChangeResults) {
  const std::string spec = fabricsim::testing::source_dir() + "/examples/zero3_16.yaml";
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(mode, line);
  const bool madvise = line.find("[madvise]") != std::string::npos;
  auto digest_of = [](const std::string& out) {
    const auto at = out.find("results digest: ");
    return at == std::string::npos ? std::string() : out.substr(at + 16, 16);
  };
  const Outcome on = run_fabricsim("run " + spec + " --log-level info -o " + (dir_ / "on.h5").string(), dir_.string());
  ASSERT_EQ(on.code, 0) << on.err;
  const Outcome off = run_fabricsim("run " + spec + " --log-level info -o " + (dir_ / "off.h5").string(), dir_.string(),
                                    "FABRICSIM_HUGEPAGES=0");
  ASSERT_EQ(off.code, 0) << off.err;
  const Outcome user = run_fabricsim("run " + spec + " --log-level info -o " + (dir_ / "user.h5").string(), dir_.string(),
                                     "GLIBC_TUNABLES=glibc.malloc.hugetlb=0");
  ASSERT_EQ(user.code, 0) << user.err;
  // A preloaded library (valgrind, heaptrack, an allocator) is never run again.
  const Outcome preload = run_fabricsim("run " + spec + " --log-level info -o " + (dir_ / "pre.h5").string(), dir_.string(),
                                        "LD_PRELOAD=libc.so.6");
  ASSERT_EQ(preload.code, 0) << preload.err;
  EXPECT_EQ(digest_of(on.out), digest_of(preload.out));
  EXPECT_FALSE(digest_of(on.out).empty()) << on.out;
  EXPECT_EQ(digest_of(on.out), digest_of(off.out));
  EXPECT_EQ(digest_of(on.out), digest_of(user.out));
  if (madvise) {
    EXPECT_NE(on.err.find("heap pages: huge (THP madvise, glibc.malloc.hugetlb=1)"), std::string::npos) << on.err;
    EXPECT_NE(off.err.find("heap pages: 4 KiB"), std::string::npos) << off.err;
    for (const char* word : {"off", "FALSE", "no"}) {  // the other spellings of "off"
      const Outcome o = run_fabricsim("run " + spec + " --log-level info -o " + (dir_ / "off2.h5").string(), dir_.string(),
                                      std::string("FABRICSIM_HUGEPAGES=") + word);
      ASSERT_EQ(o.code, 0) << o.err;
      EXPECT_EQ(digest_of(o.out), digest_of(on.out));
      EXPECT_NE(o.err.find(std::string("heap pages: 4 KiB (THP madvise, FABRICSIM_HUGEPAGES=") + word + ")"), std::string::npos) << o.err;
    }
    EXPECT_NE(user.err.find("heap pages: 4 KiB"), std::string::npos) << user.err;  // the user's =0 is kept
    EXPECT_NE(preload.err.find("heap pages: not requested (THP madvise, LD_PRELOAD is set)"), std::string::npos) << preload.err;
  } else {
    EXPECT_NE(on.err.find("heap pages: "), std::string::npos) << on.err;
  }
}

// Huge pages, the ways the re-exec broke a run (engine/heap_pages.hpp). Each case must give
// the digest of a plain run with FABRICSIM_HUGEPAGES=0, and under THP "madvise" say why huge
// pages were not requested:
//  - started through the dynamic loader (`ld.so fabricsim ...`): /proc/self/exe is the loader,
//    and running it again loaded a program named "run" (exit 127) or printed the loader's version;
//  - set-group-ID (secure execution): glibc erased the tunable from the environment, so every new
//    image ran itself again, forever (`--version` never returned);
//  - heaptrack: its library takes itself out of LD_PRELOAD, so the re-exec ran without it and the
//    profile ended at main (3,367 allocations instead of 53,292);
//  - strace (any tracer; gdb stopped twice in main).
// And a re-executed run keeps its process name (it was "exe": pgrep -x / killall fabricsim found
// nothing) and does not leak the sysfs THP file as a descriptor.
TEST_F(Cli, HugePagesStepAsideForLoaderSecureExecProfilersTracersAndKeepTheProcessName) {
  EXPECT_EQ(fabricsim::engine::tunables_hugetlb_value(nullptr), std::nullopt);
  EXPECT_EQ(fabricsim::engine::tunables_hugetlb_value("glibc.malloc.arena_max=2"), std::nullopt);
  EXPECT_EQ(fabricsim::engine::tunables_hugetlb_value("a=1:glibc.malloc.hugetlb=1"), "1");
  EXPECT_EQ(fabricsim::engine::tunables_hugetlb_value("glibc.malloc.hugetlb=10"), "10");
  EXPECT_EQ(fabricsim::engine::tunables_hugetlb_value("glibc.malloc.hugetlb=1:glibc.malloc.hugetlb=0"), "0");
  EXPECT_EQ(fabricsim::engine::tunables_hugetlb_value("glibc.malloc.hugetlb"), std::nullopt);

  const std::string src = fabricsim::testing::source_dir();
  const std::string args = "run --workload " + src + "/tests/fidelity/data/allreduce_1MiB.txt --gpus 16 --log-level info";
  std::string line;
  {
    std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");  // closed before any child runs
    std::getline(mode, line);
  }
  const bool madvise = line.find("[madvise]") != std::string::npos;
  auto digest_of = [](const std::string& out) {
    const auto at = out.find("results digest: ");
    return at == std::string::npos ? std::string() : out.substr(at + 16, 16);
  };
  int n = 0;
  // Runs `PREFIX fabricsim ARGS` (PREFIX: a loader, a tool, `timeout`), its own output file.
  auto run_with = [&](const std::string& prefix, const std::string& bin, const std::string& env = "") {
    std::string name = "r";  // (not "r" + std::to_string(): GCC 12's -Wrestrict false positive)
    name += std::to_string(n++);
    name += ".h5";
    const std::string h5 = (dir_ / name).string();
    const std::string err = (dir_ / "stderr.txt").string();
    return run_shell("cd " + dir_.string() + " && " + (env.empty() ? "" : "env " + env + " ") + prefix + " " + bin + " " +
                         args + " -o " + h5 + " 2>" + err,
                     err);
  };
  const std::string bin = fabricsim::testing::fabricsim_binary();
  const Outcome off = run_with("", bin, "FABRICSIM_HUGEPAGES=0");
  ASSERT_EQ(off.code, 0) << off.err;
  const std::string digest = digest_of(off.out);
  ASSERT_FALSE(digest.empty()) << off.out;
  auto expect_skipped = [&](const Outcome& o, const std::string& why) {
    EXPECT_EQ(o.code, 0) << o.err;
    EXPECT_EQ(digest_of(o.out), digest) << o.out << o.err;
    if (madvise) {
      EXPECT_NE(o.err.find("heap pages: not requested (THP madvise, " + why + ")"), std::string::npos) << o.err;
    }
  };

  // The dynamic loader run by hand.
  const std::string loader = "/lib64/ld-linux-x86-64.so.2";
  if (fs::exists(loader)) expect_skipped(run_with("timeout 120 " + loader, bin), "started through the dynamic loader");

  // Set-group-ID copy (needs root to give it another group, and a file system without nosuid).
  struct statvfs vfs{};
  if (::getuid() == 0 && ::getegid() != 65534 && ::statvfs(dir_.c_str(), &vfs) == 0 && (vfs.f_flag & ST_NOSUID) == 0) {
    const fs::path copy = dir_ / "fabricsim_sgid";
    fs::copy_file(bin, copy);
    ASSERT_EQ(::chown(copy.c_str(), static_cast<uid_t>(-1), 65534), 0);
    ASSERT_EQ(::chmod(copy.c_str(), 02755), 0);
    const Outcome o = run_with("timeout 120", copy.string());
    EXPECT_NE(o.code, 124) << "the set-group-ID binary ran itself again without end";
    expect_skipped(o, "secure execution (set-user/group-ID or capabilities)");
  }

  // heaptrack (malloc interposed, LD_PRELOAD emptied by the tool) and strace, where installed.
  if (fs::exists("/usr/bin/heaptrack")) {
    expect_skipped(run_with("timeout 120 heaptrack --raw -o " + (dir_ / "ht").string(), bin), "malloc is not glibc's");
  }
  if (fs::exists("/usr/bin/strace")) expect_skipped(run_with("timeout 120 strace -f -o /dev/null", bin), "under a debugger or tracer");

  // A tunable value other than 1 is not reported as huge pages.
  const Outcome ten = run_with("", bin, "GLIBC_TUNABLES=glibc.malloc.hugetlb=10");
  EXPECT_EQ(digest_of(ten.out), digest);
  EXPECT_EQ(ten.err.find("heap pages: huge"), std::string::npos) << ten.err;

  // Process name and descriptors of a re-executed run (a 2 s run, looked at after its exec).
  if (madvise) {
    const std::string spec = src + "/examples/zero3_16.yaml";
    const fs::path script = dir_ / "watch.sh";
    {
      std::ofstream f(script);
      f << bin << " run " << spec << " -o " << (dir_ / "q.h5").string() << " >/dev/null 2>&1 &\n"
        << "p=$!\n"
        << "for i in $(seq 1 1000); do\n"
        << "  tr '\\0' '\\n' </proc/$p/environ 2>/dev/null | grep -q '^GLIBC_TUNABLES=.*hugetlb=1' && break\n"
        << "  sleep 0.01\n"
        << "done\n"
        << "sleep 0.3\n"
        << "echo \"comm=$(cat /proc/$p/comm)\"\n"
        << "echo \"thpfds=$(ls -l /proc/$p/fd 2>/dev/null | grep -c transparent_hugepage)\"\n"
        << "wait $p\n"
        << "echo \"rc=$?\"\n";
    }
    const std::string out = run_shell("bash " + script.string()).out;
    const std::string name = fs::path(bin).filename().string().substr(0, 15);
    EXPECT_NE(out.find("comm=" + name + "\n"), std::string::npos) << out;
    EXPECT_NE(out.find("thpfds=0\n"), std::string::npos) << out;
    EXPECT_NE(out.find("rc=0\n"), std::string::npos) << out;
  }
}

// The flow rung's route cache (models/flow/flow_model.cpp, route_of) seen through `--stats`: a ring
// AllReduce of n ranks at the flow rung, 1 MiB (every step 1 MiB / n: 64 KiB at n = 16, 16 KiB
// at n = 64, more than one packet, so every step's flow reaches the network LP) looks up one
// route per flow, n * 2(n - 1), and each rank always sends to the same peer over the same QP and
// size: one key per rank, so exactly n misses (the first flow of each rank) and none later.
TEST_F(Cli, FlowRouteCacheMissesOnlyEachRanksFirstRingFlow) {
  const std::string trace = fabricsim::testing::source_dir() + "/tests/fidelity/data/allreduce_1MiB.txt";
  for (const std::uint64_t n : {16u, 64u}) {
    const Outcome o = run_fabricsim("run --workload " + trace + " --gpus " + std::to_string(n) +
                                  " --fidelity flow --set simccl.planner=ring --stats -o " + (dir_ / "rc.h5").string(),
                                    dir_.string());
    ASSERT_EQ(o.code, 0) << o.err;
    const std::string want = "flow routes: " + std::to_string(n * 2 * (n - 1)) + " look-ups, " + std::to_string(n) + " misses";
    EXPECT_NE(o.out.find(want), std::string::npos) << "want '" << want << "' in:\n" << o.out;
  }
}

// `--stats` at the flow rung counts what the run did, summed over whoever did it: the flows the
// GPUs delivered themselves (models::FlowSource: single-packet flows) and those handed to the
// network LP add up to the summary's flow count, on one thread and two. A ring AllReduce of S
// bytes over n ranks sends n * 2(n - 1) flows of S / n: at S = 64 KiB, n = 16 each is one 4 KiB
// packet (the MTU), all delivered by their GPU, no re-solve; at S = 1 MiB each is 64 KiB, all
// through the network LP, one re-solve per ring step at least (the flows of a step start
// together and are solved once).
TEST_F(Cli, FlowStatsCountDirectAndNetworkFlows) {
  const std::string src = fabricsim::testing::source_dir() + "/tests/fidelity/data/allreduce_1MiB.txt";
  const std::string small = (dir_ / "ar64k.txt").string();
  {
    std::ifstream in(src);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    const std::size_t at = text.find("1048576");
    ASSERT_NE(at, std::string::npos);
    text.replace(at, 7, "65536");
    std::ofstream(small) << text;
  }
  const std::uint64_t n = 16, flows = n * 2 * (n - 1);
  const auto stats_line = [](const std::string& out) {
    const std::size_t a = out.find("flow solver: ");
    return a == std::string::npos ? std::string() : out.substr(a, out.find('\n', a) - a);
  };
  for (const bool one_packet : {true, false}) {
    std::string first;
    for (const int threads : {1, 2}) {
      const Outcome o = run_fabricsim("run --workload " + (one_packet ? small : src) + " --gpus " + std::to_string(n) +
                                          " --fidelity flow --set simccl.planner=ring --stats --threads " +
                                          std::to_string(threads) + " -o " + (dir_ / "fs.h5").string(),
                                      dir_.string());
      ASSERT_EQ(o.code, 0) << o.err;
      ASSERT_NE(o.out.find("flows: " + std::to_string(flows) + "\n"), std::string::npos) << o.out;
      const std::string line = stats_line(o.out);
      const std::string want = "flow solver: " + std::to_string(flows) + " flows (" +
                               std::to_string(one_packet ? flows : 0) + " delivered by their GPU, " +
                               std::to_string(one_packet ? 0 : flows) + " through the network LP), " +
                               std::to_string(one_packet ? 0 : flows) + " admitted by the network LP, ";
      EXPECT_EQ(line.rfind(want, 0), 0u) << "want '" << want << "' in:\n" << o.out;
      if (one_packet) {
        EXPECT_NE(line.find(", 0 re-solves, 0 flows re-solved"), std::string::npos) << line;
      } else {
        const std::size_t r = line.find(" re-solves");
        ASSERT_NE(r, std::string::npos) << line;
        const std::size_t b = line.rfind(' ', r - 1) + 1;
        EXPECT_GE(std::stoull(line.substr(b, r - b)), 2 * (n - 1)) << line;
      }
      if (first.empty()) first = line;
      EXPECT_EQ(line, first) << "--threads " << threads;
    }
  }
}

namespace {

// A Chakra trace whose control dependency names a node absent from the file (as Chakra's
// PyTorch converter leaves them): it runs with one warning giving the count, and
// workload.chakra.missing_deps: error refuses it in one line naming the first missing id.
TEST_F(Cli, ChakraMissingControlDependencies) {
  const std::string trace = (fabricsim::testing::data_dir() / "bad" / "unknown_dep").string();
  const Outcome ok = run_fabricsim("run --workload " + trace + " -o " + out_h5(), dir_.string());
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.err.find("dropped 1 control dependencies"), std::string::npos) << ok.err;
  EXPECT_NE(ok.err.find("-> id 42"), std::string::npos) << ok.err;
  fs::remove(out_h5());
  expect_bad("run --workload " + trace + " --set workload.chakra.missing_deps=error",
             {"unknown_dep.0.et", "ctrl_deps", "unknown node id 42"});
  expect_bad("run --workload " + trace + " --set workload.chakra.missing_deps=drop",
             {"workload.chakra.missing_deps", "use ignore or error"});
}

}  // namespace

// Issue 25, must-show 5: the bad inputs of several jobs, faults and stragglers each give one line
// naming the key and the fix, exit 2, and no output file. Two 8-GPU jobs on 4 hosts of 4 GPUs
// (2 leaves), one GPT-3 13B layer each; fault entries on a one-spine leaf-spine.
TEST_F(Cli, JobsFaultsAndStragglersBadInputNameTheKey) {
  const std::string spec = (dir_ / "spec.yaml").string();
  const auto jobs = [&](const std::string& hosts_a, const std::string& hosts_b, int hosts) {
    std::ofstream(spec) << "cluster: {hosts: " << hosts << ", gpus_per_host: 4, topology: leaf_spine, nics_per_leaf: 8}\n"
                        << "jobs:\n"
                        << "  - {name: a, placement: hosts, hosts: \"" << hosts_a << "\", workload: {generator: {model: gpt3-13b, "
                           "layers: 1, tp: 4, dp: 2, gpus: 8, global_batch: 2, micro_batch: 1, seq_len: 512}}}\n"
                        << "  - {name: b, placement: hosts, hosts: \"" << hosts_b << "\", workload: {generator: {model: gpt3-13b, "
                           "layers: 1, tp: 4, dp: 2, gpus: 8, global_batch: 2, micro_batch: 1, seq_len: 512}}}\n";
  };
  jobs("0-1", "1-2", 4);
  expect_bad("run " + spec, {"spec.yaml", "jobs[1].hosts", "overlap", "disjoint host lists"});
  jobs("0-1", "2-3", 3);
  expect_bad("run " + spec, {"spec.yaml", "jobs: the 2 jobs need 16 GPUs", "the cluster has 12 GPUs", "set cluster.hosts >= 4"});
  const std::string ar =
      fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/16npus_1MB/all_reduce");
  const std::string fab = " --workload " + ar +
                          " --set cluster.gpus_per_host=1 --set cluster.hosts=16 --set cluster.nics_per_leaf=8"
                          " --set cluster.spines=1 --set sim.fidelity=packet";
  expect_bad("run" + fab + " --set 'faults=[{time: 0us, target: leaf0-spine3, kind: ber, ber: 1e-5}]'",
             {"faults[0].target", "spine3", "fabricsim topo"});
  expect_bad("run" + fab + " --set 'faults=[{time: 0us, target: leaf0-leaf1, kind: link_down}]'",
             {"faults[0].target", "no link between leaf0 and leaf1"});
  // After the run's end (a 1 MiB AllReduce takes microseconds) and after the simulator's horizon.
  expect_bad("run" + fab + " --set 'faults=[{time: 2s, target: leaf0-spine0, kind: link_down}]'",
             {"faults[0].time", "after the end of the run", "set faults[0].time before"});
  expect_bad("run" + fab + " --set 'faults=[{time: 1200000s, target: leaf0-spine0, kind: link_down}]'",
             {"faults[0].time", "after the end"});
  expect_bad("run" + fab + " --set compute.stragglers=3:0", {"compute.stragglers", "(0, 1e6]", "3:1.2"});
  expect_bad("run" + fab + " --set compute.stragglers=3:-0.5", {"compute.stragglers", "(0, 1e6]"});
  expect_bad("run" + fab + " --set compute.straggler_p99=0", {"compute.straggler_p99"});
}
