// Bad NCCL_ALGO / NCCL_PROTO strings, an NCCL topology XML without
// GPUs, a missing NCCL_TOPO_FILE and a communicator naming ranks that do not exist give one line
// on stderr and exit 2.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/cli.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/scratch.hpp"

namespace {

using Outcome = fabricsim::testing::CliOutcome;
using fabricsim::testing::expect_bad_input;
using fabricsim::testing::run_fabricsim;

/// Each test's own scratch directory in dir_.
class SimcclCli : public fabricsim::testing::ScratchDirTest {};

TEST_F(SimcclCli, BadInputsGiveOneLineAndExit2) {
  const std::string nogpu = write("nogpu.xml", R"(<system version="1"><cpu numaid="0"></cpu></system>)");
  const std::string base = "nccl-tests all_reduce -b 1M -e 1M --set ";
  const std::pair<std::string, std::string> cases[] = {
      {"nccl.NCCL_ALGO=Foo", "<cli>: NCCL_ALGO: 'Foo'"},
      {"nccl.NCCL_PROTO=LL256", "NCCL_PROTO: 'LL256'"},
      {"nccl.NCCL_ALGO=allreduce:Ring,Banana", "Banana"},
      {"nccl.NCCL_TOPO_FILE=" + nogpu, nogpu + ": NCCL_TOPO_FILE: describes no GPU"},
      {"nccl.NCCL_TOPO_FILE=" + (dir_ / "missing.xml").string(), "missing.xml: NCCL_TOPO_FILE: cannot read"},
  };
  for (const auto& [set, needle] : cases) {
    const Outcome o = run_fabricsim(base + set, dir_.string());
    expect_bad_input(o, {needle}, set);
  }
  // A combination NCCL refuses (topoGetAlgoInfo, src/enqueue.cc, NCCL 2.28.9: ncclInvalidUsage
  // when no algorithm/protocol is left; NVLS runs only Simple, nccl.md §1.1), from each source:
  // --set (<cli>), the spec file and the environment (<env>, after its "taken from the
  // environment" warnings).
  const std::string combo_fix = "add Simple to NCCL_PROTO";
  expect_bad_input(run_fabricsim(base + "nccl.NCCL_ALGO=NVLS --set nccl.NCCL_PROTO=LL -g 8", dir_.string()),
                   {"<cli>: NCCL_ALGO/NCCL_PROTO AllReduce: ", "NVLS: disabled by NCCL_PROTO", combo_fix}, "combo cli");
  const std::string spec = write("combo.yaml", "nccl:\n  NCCL_ALGO: NVLS\n  NCCL_PROTO: LL\n");
  expect_bad_input(run_fabricsim("nccl-tests all_reduce " + spec + " -b 1M -e 1M -g 8", dir_.string()),
                   {spec + ": NCCL_ALGO/NCCL_PROTO AllReduce: ", combo_fix}, "combo spec");
  const Outcome env = run_fabricsim("nccl-tests all_reduce -b 1M -e 1M -g 8", dir_.string(), "NCCL_ALGO=NVLS NCCL_PROTO=LL");
  EXPECT_EQ(env.code, 2) << env.err;
  const auto last = env.err.rfind("fabricsim: error: ");
  ASSERT_NE(last, std::string::npos) << env.err;
  EXPECT_EQ(env.err.find("fabricsim: error: "), last) << env.err;  // one error line
  EXPECT_EQ(env.err.find('\n', last), env.err.size() - 1) << env.err;
  EXPECT_NE(env.err.find("<env>: NCCL_ALGO/NCCL_PROTO AllReduce: ", last), std::string::npos) << env.err;
  EXPECT_NE(env.err.find(combo_fix, last), std::string::npos) << env.err;
  // --compare: a truncated log (no footer) and a foreign one (no table header) are one line each.
  for (const auto& [log, needle] : std::vector<std::pair<std::string, std::string>>{
           {"truncated.log", "truncated.log: line 15: the table ends without nccl-tests' '# Avg bus bandwidth' footer"},
           {"foreign.log", "foreign.log: line 5: no nccl-tests table header"}}) {
    expect_bad_input(run_fabricsim("nccl-tests --compare " + fabricsim::testing::data("nccl/" + log), dir_.string()),
                     {needle}, log);
  }
  // Sizes: 0 would never grow under -f (an endless loop), decimals and sizes past 64 GiB are refused.
  const std::pair<std::string, std::string> sizes[] = {
      {"nccl-tests all_reduce -b 0 -e 1M -g 8", "-b 0: a size of 0 bytes"},
      {"nccl-tests all_reduce -b 1.5M -e 2M -g 8", "decimal sizes are not supported"},
      {"plan all_reduce 1000000G -g 8 -n 2", "above 64G"},
      {"plan all_reduce 99999999999999999999999 -g 8", "above 64G"},
  };
  for (const auto& [args, needle] : sizes) {
    const Outcome o = run_fabricsim(args, dir_.string());
    expect_bad_input(o, {needle}, args);
  }
  // The fallback turns the missing file into a warning and a run.
  const Outcome ok = run_fabricsim(base + "nccl.NCCL_TOPO_FILE=" + (dir_ / "missing.xml").string() +
                                 " --set simccl.topo_fallback=true",
                                   dir_.string());
  EXPECT_EQ(ok.code, 0) << ok.err;
}

TEST_F(SimcclCli, GroupsNamingMissingRanksGiveOneLineAndExit2) {
  // An 8-rank Chakra trace (ASTRA-sim microbenchmark, tests/data/SOURCES.md).
  const std::string trace =
      fabricsim::testing::data("chakra/astra-sim/examples/workload/microbenchmarks/all_reduce/8npus_1MB/all_reduce");
  const std::string beyond = write("beyond.json", R"({"tp0": [0, 1, 2, 8]})");
  const std::string negative = write("negative.json", R"({"dp": [0, -1]})");
  const std::string twice = write("twice.json", R"({"dp": [3, 3]})");
  const std::pair<std::string, std::string> cases[] = {
      {beyond, beyond + ": tp0: rank 8 is not an integer in 0..7"},
      {negative, negative + ": dp: rank -1 is not an integer in 0..7"},
      {twice, twice + ": dp: rank 3 listed twice"},
  };
  for (const auto& [file, needle] : cases) {
    for (const std::string cmd : {"run", "validate"}) {
      const std::string out = cmd == "run" ? " -o " + (dir_ / "out.h5").string() : "";
      const Outcome o = run_fabricsim(cmd + " --workload " + trace + " --set workload.comm_groups=" + file + out, dir_.string());
      expect_bad_input(o, {needle}, cmd + " " + file);
      EXPECT_FALSE(std::filesystem::exists(dir_ / "out.h5"));  // no partial output
    }
  }
}

/// Runs `fabricsim ARGS`, stdout into *out.
Outcome run_stdout(const std::string& args, const std::string& dir, std::string* out) {
  Outcome o = run_fabricsim(args, dir);
  *out = o.out;
  return o;
}

/// `fabricsim plan ARGS`, stdout into *out.
Outcome run_plan(const std::string& args, const std::string& dir, std::string* out) {
  return run_stdout("plan " + args, dir, out);
}

struct CostRow {
  std::string algo, proto, status;
  double time_us = -1;
};

// Rows of the printed cost table: "  <algo> <proto> <lat> <bw> <time>  <status>".
std::vector<CostRow> cost_rows(const std::string& text) {
  std::vector<CostRow> rows;
  std::istringstream in(text);
  std::string line;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.rfind("  algorithm", 0) == 0) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (line.rfind("  ", 0) != 0) break;
    std::istringstream l(line);
    CostRow r;
    std::string lat, bw, t;
    l >> r.algo >> r.proto >> lat >> bw >> t;
    std::getline(l, r.status);
    r.status.erase(0, r.status.find_first_not_of(' '));
    r.time_us = t == "-" ? -1 : std::stod(t);
    rows.push_back(r);
  }
  return rows;
}

std::uint64_t number_after(const std::string& text, const std::string& key) {
  const auto p = text.find(key);
  if (p == std::string::npos) return ~0ull;
  return std::stoull(text.substr(p + key.size()));
}

TEST_F(SimcclCli, PlanPrintsTheCostTableAndTheChoice) {
  std::string out;
  // 1 GiB AllReduce on one node of 8: the chosen row is the fastest enabled one.
  Outcome o = run_plan("all_reduce 1G -g 8", dir_.string(), &out);
  ASSERT_EQ(o.code, 0) << o.err;
  auto rows = cost_rows(out);
  ASSERT_EQ(rows.size(), 21u) << out;  // 7 algorithms x 3 protocols
  double best = 1e300;
  const CostRow* chosen = nullptr;
  for (const auto& r : rows) {
    if (r.status.rfind("enabled", 0) == 0) best = std::min(best, r.time_us);
    if (r.status.find("chosen") != std::string::npos) chosen = &r;
    if ((r.algo == "NVLS" && r.proto != "Simple") || r.algo == "NVLSTree" || r.algo == "PAT" ||
        r.algo == "CollNetDirect") {
      EXPECT_EQ(r.status.rfind("disabled", 0), 0u) << r.algo;
    }
  }
  ASSERT_NE(chosen, nullptr) << out;
  EXPECT_EQ(chosen->time_us, best);
  EXPECT_NE(out.find("choice: " + chosen->algo + "/" + chosen->proto), std::string::npos) << out;
  // Bytes conserved: a ring AllReduce sends 2(n-1)/n x S per rank, 2(n-1) x S in all, all on NVLink.
  if (chosen->algo == "Ring" && chosen->proto == "Simple") {
    EXPECT_EQ(number_after(out, "; payload "), 14ull << 30) << out;
    EXPECT_NE(out.find("0 B on the network"), std::string::npos) << out;
  }
  // On 8 H100 (sm90, NVSwitch) NVLS wins at 1 GiB; an NVLS AllReduce sends (1 + 1/n) x S per
  // rank into the NVSwitch: 8 x 9/8 x 1 GiB = 9 GiB, all on NVLink.
  EXPECT_EQ(chosen->algo, "NVLS");
  EXPECT_EQ(number_after(out, "; payload "), 9ull << 30) << out;
  EXPECT_NE(out.find("0 B on the network"), std::string::npos) << out;
  // NCCL_NVLS_ENABLE=0 takes NVLS away (with the reason in the table); so does a GPU without it.
  for (const char* extra : {"--set nccl.NCCL_NVLS_ENABLE=0", "--set simccl.gpu_sm=80"}) {
    o = run_plan(std::string("all_reduce 1G -g 8 ") + extra, dir_.string(), &out);
    ASSERT_EQ(o.code, 0) << o.err;
    for (const auto& r : cost_rows(out)) {
      if (r.algo == "NVLS") {
        EXPECT_EQ(r.status.rfind("disabled", 0), 0u) << extra << ": " << r.status;
      }
    }
    EXPECT_EQ(out.find("choice: NVLS"), std::string::npos) << out;
  }
  // NCCL_ALGO=Tree: every Ring row is disabled and Tree is chosen.
  o = run_plan("all_reduce 64M -g 8 -n 2 --set nccl.NCCL_ALGO=Tree", dir_.string(), &out);
  ASSERT_EQ(o.code, 0) << o.err;
  rows = cost_rows(out);
  for (const auto& r : rows) {
    if (r.algo == "Ring") {
      EXPECT_EQ(r.status.rfind("disabled", 0), 0u) << r.status;
    }
  }
  EXPECT_NE(out.find("choice: Tree/"), std::string::npos) << out;
  EXPECT_NE(out.find("NCCL_ALGO=Tree"), std::string::npos) << out;  // settings in effect are listed
  // sendrecv across 2 nodes: rank r -> r+1; ranks 7 -> 8 and 15 -> 0 cross hosts on different
  // rails (7 -> 0 local index), so both are relayed: 2 x 8 MiB / 128 KiB chunk messages forwarded.
  o = run_plan("sendrecv 8M -g 8 -n 2", dir_.string(), &out);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(number_after(out, "PXN: "), 2u * 64u) << out;
  o = run_plan("sendrecv 8M -g 8 -n 2 --set nccl.NCCL_PXN_DISABLE=1", dir_.string(), &out);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(out.find("PXN: "), std::string::npos) << out;
  EXPECT_EQ(number_after(out, "\nplan: "), 16u) << out;  // one message per rank
  // Bad input: one line, exit 2.
  for (const char* bad : {"all_reduce 12Q -g 8", "allreduce 1M", "all_reduce 1M --set nccl.NCCL_PROTO=LL256"}) {
    o = run_plan(std::string(bad), dir_.string(), &out);
    expect_bad_input(o, {}, bad);
    EXPECT_TRUE(out.empty()) << out;
  }
}

/// The table rows of an nccl-tests output (lines not starting with '#').
std::string data_rows(const std::string& table) {
  std::istringstream in(table);
  std::string line, rows;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#') rows += line + "\n";
  }
  return rows;
}

}  // namespace

// `nccl-tests --fidelity X` is `--set sim.fidelity=X` (as for `run`), the header names the rung,
// and a bad rung is one line with exit 2 (before, `--fidelity flow` was read as a missing spec
// file "flow").
TEST_F(SimcclCli, NcclTestsFidelityOptionIsTheSpecKeyAndNamedInTheHeader) {
  const std::string base = "nccl-tests all_reduce -b 64M -e 64M -g 8 ";
  std::string def, rows_flow;
  ASSERT_EQ(run_stdout(base, dir_.string(), &def).code, 0);
  EXPECT_NE(def.find("simulated at fidelity packet"), std::string::npos) << def;
  for (const std::string fid : {"flow", "analytical"}) {
    std::string by_option, by_set;
    const Outcome a = run_stdout(base + "--fidelity " + fid, dir_.string(), &by_option);
    ASSERT_EQ(a.code, 0) << a.err;
    ASSERT_EQ(run_stdout(base + "--set sim.fidelity=" + fid, dir_.string(), &by_set).code, 0);
    EXPECT_EQ(by_option, by_set);
    EXPECT_NE(by_option.find("simulated at fidelity " + fid), std::string::npos) << by_option;
    ASSERT_FALSE(data_rows(by_option).empty()) << by_option;
    if (fid == "flow") rows_flow = data_rows(by_option);
    else EXPECT_NE(data_rows(by_option), rows_flow) << "the rung did not reach the simulation";
  }
  std::string ignored;
  const Outcome bad = run_stdout(base + "--fidelity bogus", dir_.string(), &ignored);
  expect_bad_input(bad, {"sim.fidelity: 'bogus'"}, "--fidelity bogus");
  EXPECT_TRUE(ignored.empty()) << ignored;
}

// One GPU: nothing crosses a link, so every row is 0 and the header says why (NCCL settings such
// as a forced NVLS have nothing to act on).
TEST_F(SimcclCli, NcclTestsOneRankSaysNothingIsPlanned) {
  std::string out;
  const Outcome o = run_stdout("nccl-tests all_reduce -b 1M -e 1M -g 1 --set nccl.NCCL_ALGO=NVLS", dir_.string(), &out);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(out.find("# one rank: nothing crosses a link and nothing is planned"), std::string::npos) << out;
  std::string two;
  ASSERT_EQ(run_stdout("nccl-tests all_reduce -b 1M -e 1M -g 2", dir_.string(), &two).code, 0);
  EXPECT_EQ(two.find("# one rank"), std::string::npos) << two;
}

// Sizes below one whole element per rank round down to 0 bytes as nccl-tests rounds them; the
// plan says so and names the smallest size that plans something (4 B for AllReduce, 4 B x ranks
// for ReduceScatter, whose count is per rank).
TEST_F(SimcclCli, PlanBelowOneElementSaysWhy) {
  std::string out;
  ASSERT_EQ(run_stdout("plan all_reduce 3 -g 8 -n 2", dir_.string(), &out).code, 0);
  EXPECT_NE(out.find("3 B rounds down to 0 whole 4-byte float elements"), std::string::npos) << out;
  EXPECT_NE(out.find("give at least 4 B"), std::string::npos) << out;
  ASSERT_EQ(run_stdout("plan reduce_scatter 40 -g 8 -n 2", dir_.string(), &out).code, 0);
  EXPECT_NE(out.find("give at least 64 B"), std::string::npos) << out;
  ASSERT_EQ(run_stdout("plan all_reduce 4 -g 8 -n 2", dir_.string(), &out).code, 0);
  EXPECT_EQ(out.find("nothing to plan"), std::string::npos) << out;
}

namespace {

// Case: the nccl-tests "count" column is the count the NCCL call takes (nccl-tests common.cu prints
// paramcount): per rank for all_gather, reduce_scatter and alltoall (size / 4 B / ranks), the whole
// buffer for all_reduce, broadcast, reduce and sendrecv (size / 4 B). It showed size / 4 for all.
TEST_F(SimcclCli, NcclTestsCountColumnIsTheCountOfTheNcclCall) {
  const unsigned ranks = 8;
  const std::pair<std::string, unsigned> colls[] = {{"all_gather", ranks}, {"reduce_scatter", ranks}, {"alltoall", ranks},
                                                    {"all_reduce", 1},     {"broadcast", 1},        {"reduce", 1},
                                                    {"sendrecv", 1}};
  for (const auto& [coll, per_rank_divisor] : colls) {
    std::string out;
    const Outcome o = run_stdout("nccl-tests " + coll + " -b 1K -e 64K -f 8 -g 8 --fidelity analytical", dir_.string(), &out);
    ASSERT_EQ(o.code, 0) << coll << ": " << o.err;
    std::istringstream lines(out);
    std::string line;
    int rows = 0;
    while (std::getline(lines, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream f(line);
      unsigned long long size = 0, count = 0;
      std::string type;
      ASSERT_TRUE(f >> size >> count >> type) << line;
      EXPECT_EQ(type, "float") << line;
      EXPECT_EQ(count, size / 4 / per_rank_divisor) << coll << ": " << line;
      ++rows;
    }
    EXPECT_EQ(rows, 3) << coll << ":\n" << out;  // 1K, 8K, 64K
  }
}

}  // namespace
