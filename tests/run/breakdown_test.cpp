// The step breakdown of `fabricsim run`: exposed communication per group kind (TP, DP, EP, PP,
// CP, other), the bubble and compute, in the rank records, the summary JSON and the HDF5 file;
// and the per-GPU memory verdict (fits_memory).
//
// Closed forms (GpuRankLp semantics, gpu_rank.hpp): compute nodes run one at a time, a node
// starts when its deps finished, and a rank's communication is exposed while no compute runs.
// With communication of several kinds in flight the exposed time is split equally among them,
// the leftover picoseconds of each interval going to the first kinds in CommKind order.
#include <gtest/gtest.h>

#include <hdf5.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "jobs/run.hpp"
#include "models/core/workload.hpp"
#include "tests/support/mpi.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/run.hpp"
#include "tests/support/scratch.hpp"

namespace {

namespace m = fabricsim::models;
using fabricsim::engine::SimTime;
using fabricsim::jobs::RunResult;

constexpr std::size_t kTp = static_cast<std::size_t>(m::CommKind::kTp);
constexpr std::size_t kDp = static_cast<std::size_t>(m::CommKind::kDp);
constexpr std::size_t kPp = static_cast<std::size_t>(m::CommKind::kPp);
constexpr std::size_t kOther = static_cast<std::size_t>(m::CommKind::kOther);

/// 4 ranks on one host: TP groups {0,1} {2,3} (groups 1, 2), DP groups {0,2} {1,3} (3, 4).
m::Workload tp_dp_world() {
  m::Workload w;
  w.source = "<breakdown>";
  w.format = "simai";
  w.ranks = 4;
  w.programs.resize(4);
  w.groups.push_back(m::CommGroup{"world", {0, 1, 2, 3}});
  w.groups.push_back(m::CommGroup{"tp0", {0, 1}, m::CommKind::kTp});
  w.groups.push_back(m::CommGroup{"tp1", {2, 3}, m::CommKind::kTp});
  w.groups.push_back(m::CommGroup{"dp0", {0, 2}, m::CommKind::kDp});
  w.groups.push_back(m::CommGroup{"dp1", {1, 3}, m::CommKind::kDp});
  return w;
}
std::int32_t tp_group(std::uint32_t r) { return r < 2 ? 1 : 2; }
std::int32_t dp_group(std::uint32_t r) { return r % 2 == 0 ? 3 : 4; }

m::WorkNode compute(SimTime ps, std::vector<std::uint32_t> deps) {
  m::WorkNode n;
  n.name = "gemm";
  n.type = m::NodeType::kCompute;
  n.duration_ps = ps;
  n.deps = std::move(deps);
  return n;
}
m::WorkNode allreduce(std::int32_t group, std::uint64_t bytes, std::vector<std::uint32_t> deps) {
  m::WorkNode n;
  n.name = "allreduce";
  n.type = m::NodeType::kCollective;
  n.op = m::CollOp::kAllReduce;
  n.bytes = bytes;
  n.group = group;
  n.deps = std::move(deps);
  return n;
}

const fabricsim::io::CollectiveRecord& record(const RunResult& res, std::int32_t group) {
  for (const auto& c : res.collectives) {
    if (c.group == static_cast<std::uint32_t>(group)) return c;
  }
  throw std::runtime_error("no collective on group " + std::to_string(group));
}

const std::vector<std::string> kSets = {"simccl.planner=ring", "cluster.gpus_per_host=4"};

void expect_conserved(const RunResult& res) {
  for (const auto& r : res.ranks) {
    const SimTime sum = std::accumulate(r.exposed_kind_ps.begin(), r.exposed_kind_ps.end(), SimTime{0});
    EXPECT_EQ(sum, r.exposed_comm_ps) << "rank " << r.rank;
    // The bubble holds the waits on a neighbour stage, which are also exposed PP time.
    EXPECT_LE(r.pp_wait_ps, r.exposed_kind_ps[kPp]) << "rank " << r.rank;
    EXPECT_EQ(r.compute_ps + r.exposed_comm_ps - r.pp_wait_ps + r.bubble_ps, res.meta.simulated_time_ps)
        << "rank " << r.rank;
    EXPECT_GE(r.bubble_ps, r.pp_wait_ps) << "rank " << r.rank;
  }
}

// Compute A, then a TP all-reduce beside compute B (TP exposed beyond B), then a DP all-reduce
// with nothing beside it (all exposed), then compute C:
//   exposed TP = E_tp - (A + B), exposed DP = E_dp - E_tp, compute = A + B + C,
//   finish = E_dp + C, bubble = 0 (every rank is symmetric and ends together).
TEST(Breakdown, TpThenDpClosedForm) {
  const SimTime a = 10'000'000, b = 5'000'000, c = 3'000'000;
  m::Workload w = tp_dp_world();
  for (std::uint32_t r = 0; r < 4; ++r) {
    auto& p = w.programs[r];
    p.push_back(compute(a, {}));                        // 0
    p.push_back(allreduce(tp_group(r), 64 << 20, {0}));  // 1
    p.push_back(compute(b, {0}));                       // 2
    p.push_back(allreduce(dp_group(r), 16 << 20, {1, 2}));  // 3
    p.push_back(compute(c, {3}));                       // 4
  }
  const RunResult res = fabricsim::testing::run_quiet(&w, kSets);
  ASSERT_EQ(res.ranks.size(), 4u);
  const auto& tp = record(res, 1);
  const auto& dp = record(res, 3);
  ASSERT_EQ(tp.start_ps, a);
  ASSERT_GT(tp.end_ps, a + b) << "the TP all-reduce must outlast compute B for the closed form";
  ASSERT_EQ(dp.start_ps, tp.end_ps);
  for (const auto& r : res.ranks) {
    EXPECT_EQ(r.compute_ps, a + b + c);
    EXPECT_EQ(r.exposed_kind_ps[kTp], tp.end_ps - (a + b)) << r.rank;
    EXPECT_EQ(r.exposed_kind_ps[kDp], dp.end_ps - dp.start_ps) << r.rank;
    EXPECT_EQ(r.exposed_kind_ps[kOther], 0);
    EXPECT_EQ(r.finish_ps, dp.end_ps + c);
    EXPECT_EQ(r.bubble_ps, 0);
  }
  expect_conserved(res);
}

// A TP and a DP all-reduce in flight together with no compute: their common time is split
// equally, the rest goes to the one still running.
//   overlap O = min(E_tp, E_dp) - A: TP gets ceil(O/2), DP floor(O/2), the longer one its tail.
TEST(Breakdown, OverlappingKindsSplitEqually) {
  const SimTime a = 2'000'000, c = 1'000'000;
  m::Workload w = tp_dp_world();
  for (std::uint32_t r = 0; r < 4; ++r) {
    auto& p = w.programs[r];
    p.push_back(compute(a, {}));
    p.push_back(allreduce(tp_group(r), 8 << 20, {0}));
    p.push_back(allreduce(dp_group(r), 32 << 20, {0}));
    p.push_back(compute(c, {1, 2}));
  }
  const RunResult res = fabricsim::testing::run_quiet(&w, kSets);
  const auto& tp = record(res, 1);
  const auto& dp = record(res, 3);
  ASSERT_EQ(tp.start_ps, a);
  ASSERT_EQ(dp.start_ps, a);
  ASSERT_LT(tp.end_ps, dp.end_ps) << "the larger DP all-reduce ends last";
  const SimTime overlap = tp.end_ps - a;
  for (const auto& r : res.ranks) {
    EXPECT_EQ(r.exposed_kind_ps[kTp], overlap / 2 + overlap % 2) << r.rank;
    EXPECT_EQ(r.exposed_kind_ps[kDp], overlap / 2 + (dp.end_ps - tp.end_ps)) << r.rank;
    EXPECT_EQ(r.exposed_comm_ps, dp.end_ps - a);
  }
  expect_conserved(res);
}

// Point-to-point messages carry their own kind (WorkNode::kind); an untagged collective (the
// world group of a hand-built workload, or a Chakra process group) counts as "other".
TEST(Breakdown, SendRecvAndUntaggedGroups) {
  m::Workload w = tp_dp_world();
  m::WorkNode s;
  s.name = "send";
  s.type = m::NodeType::kSend;
  s.peer = 2;
  s.bytes = 4 << 20;
  s.tag = 7;
  s.kind = m::CommKind::kPp;
  m::WorkNode rcv = s;
  rcv.type = m::NodeType::kRecv;
  rcv.peer = 0;
  for (std::uint32_t r = 0; r < 4; ++r) w.programs[r].push_back(allreduce(0, 1 << 20, {}));
  w.programs[0].push_back(s);
  w.programs[0].back().deps = {0};
  w.programs[2].push_back(rcv);
  w.programs[2].back().deps = {0};
  const RunResult res = fabricsim::testing::run_quiet(&w, kSets);
  const auto& world = record(res, 0);
  for (const auto& r : res.ranks) {
    EXPECT_EQ(r.exposed_kind_ps[kOther], world.end_ps - world.start_ps) << r.rank;
    EXPECT_EQ(r.exposed_kind_ps[kPp] > 0, r.rank == 0 || r.rank == 2) << r.rank;
    EXPECT_EQ(r.exposed_kind_ps[kPp], r.exposed_comm_ps - r.exposed_kind_ps[kOther]) << r.rank;
    // Rank 2 only waits on its receive (a pipeline wait, in the bubble); rank 0's send is not one.
    EXPECT_EQ(r.pp_wait_ps, r.rank == 2 ? r.exposed_kind_ps[kPp] : 0) << r.rank;
  }
  expect_conserved(res);
}

// A SimAI/AICB file names its groups by column and suffix: plain collectives of the TP columns
// run on TP groups, `_EP` ones on EP groups (docs/hdf5_schema.md "/ranks"). The MoE prefill
// file (TP 4, EP 8, 32 GPUs) exposes TP all-reduces and EP all-to-alls and nothing else.
TEST(Breakdown, SimaiGroupsCarryTheirKind) {
  const auto w = fabricsim::jobs::load_workload(
      fabricsim::testing::source_dir() + "/examples/workloads/moe_prefill/moe_prefill_tp4ep8.txt", "", 0, "");
  std::size_t tp = 0, ep = 0;
  for (const auto& g : w.groups) {
    if (g.name.rfind("tp", 0) == 0) {
      EXPECT_EQ(g.kind, m::CommKind::kTp) << g.name;
      ++tp;
    }
    if (g.name.rfind("ep", 0) == 0) {
      EXPECT_EQ(g.kind, m::CommKind::kEp) << g.name;
      ++ep;
    }
  }
  EXPECT_EQ(tp, 8u);
  EXPECT_EQ(ep, 4u);
  const RunResult res = fabricsim::testing::run_quiet(&w, {"cluster.gpus_per_host=1", "simccl.planner=ring"});
  expect_conserved(res);
  for (const auto& r : res.ranks) {
    EXPECT_GT(r.exposed_kind_ps[kTp], 0) << r.rank;
    EXPECT_GT(r.exposed_kind_ps[static_cast<std::size_t>(m::CommKind::kEp)], 0) << r.rank;
    EXPECT_EQ(r.exposed_kind_ps[kTp] + r.exposed_kind_ps[static_cast<std::size_t>(m::CommKind::kEp)],
              r.exposed_comm_ps)
        << r.rank;
  }
}

/// A generated GPT-3 13B slice (4 layers) with TP 2, PP 2, DP 2 on one 8-GPU host.
std::vector<std::string> generated(const std::string& dir) {
  return {"workload.generator.model=gpt3-13b", "workload.generator.layers=4", "workload.generator.tp=2",
          "workload.generator.pp=2",           "workload.generator.dp=2",     "workload.generator.global_batch=8",
          "workload.generator.micro_batch=1",  "workload.generator.gpu=H100", "simccl.planner=ring",
          "output.summary_json=" + dir + "/summary.json", "output.h5=" + dir + "/run.h5"};
}

RunResult run_generated(const std::vector<std::string>& sets, unsigned threads, bool h5) {
  fabricsim::jobs::RunOptions o;
  o.sets = sets;
  o.write_h5 = h5;
  o.quiet = true;
  o.threads = threads;
  return fabricsim::jobs::run_simulation(o, MPI_COMM_WORLD, "test", "test");
}

/// /meta attribute `name` of the HDF5 file at `path` as an integer; false if absent.
bool meta_attr(const std::string& path, const char* name, long long& value) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) throw std::runtime_error("cannot open " + path);
  const hid_t g = H5Gopen2(f, "/meta", H5P_DEFAULT);
  const bool has = H5Aexists(g, name) > 0;
  if (has) {
    const hid_t a = H5Aopen(g, name, H5P_DEFAULT);
    H5Aread(a, H5T_NATIVE_LLONG, &value);
    H5Aclose(a);
  }
  H5Gclose(g);
  H5Fclose(f);
  return has;
}

struct RankRow {
  std::uint32_t rank;
  std::int64_t exposed_comm_ps, tp, dp, ep, pp, cp, other, wait, bubble;
};

std::vector<RankRow> rank_rows(const std::string& path) {
  const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t ds = H5Dopen2(f, "/ranks", H5P_DEFAULT);
  const hid_t sp = H5Dget_space(ds);
  std::vector<RankRow> rows(static_cast<std::size_t>(H5Sget_simple_extent_npoints(sp)));
  const hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(RankRow));
  H5Tinsert(t, "rank", HOFFSET(RankRow, rank), H5T_NATIVE_UINT32);
  H5Tinsert(t, "exposed_comm_ps", HOFFSET(RankRow, exposed_comm_ps), H5T_NATIVE_INT64);
  H5Tinsert(t, "exposed_tp_ps", HOFFSET(RankRow, tp), H5T_NATIVE_INT64);
  H5Tinsert(t, "exposed_dp_ps", HOFFSET(RankRow, dp), H5T_NATIVE_INT64);
  H5Tinsert(t, "exposed_ep_ps", HOFFSET(RankRow, ep), H5T_NATIVE_INT64);
  H5Tinsert(t, "exposed_pp_ps", HOFFSET(RankRow, pp), H5T_NATIVE_INT64);
  H5Tinsert(t, "exposed_cp_ps", HOFFSET(RankRow, cp), H5T_NATIVE_INT64);
  H5Tinsert(t, "exposed_other_ps", HOFFSET(RankRow, other), H5T_NATIVE_INT64);
  H5Tinsert(t, "pp_wait_ps", HOFFSET(RankRow, wait), H5T_NATIVE_INT64);
  H5Tinsert(t, "bubble_ps", HOFFSET(RankRow, bubble), H5T_NATIVE_INT64);
  EXPECT_GE(H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), 0);
  H5Tclose(t);
  H5Sclose(sp);
  H5Dclose(ds);
  H5Fclose(f);
  return rows;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// A generated TP/PP/DP job: TP, DP and PP are all exposed somewhere, the pipeline has a bubble,
// and the breakdown is conserved, equal across thread counts, and the same in the rank records,
// the summary JSON and the HDF5 file. The job fits an H100: fits_memory true.
TEST(Breakdown, GeneratedTpPpDpJob) {
  const fabricsim::testing::ScratchDir scratch("breakdown");
  const auto sets = generated(scratch.path());
  const RunResult res = run_generated(sets, 1, true);
  ASSERT_EQ(res.ranks.size(), 8u);
  expect_conserved(res);
  SimTime tp = 0, dp = 0, pp = 0, bubble = 0, other = 0, wait = 0;
  for (const auto& r : res.ranks) {
    tp += r.exposed_kind_ps[kTp];
    dp += r.exposed_kind_ps[kDp];
    pp += r.exposed_kind_ps[kPp];
    other += r.exposed_kind_ps[kOther];
    bubble += r.bubble_ps;
    wait += r.pp_wait_ps;
  }
  EXPECT_GT(tp, 0);
  EXPECT_GT(dp, 0);
  EXPECT_GT(pp, 0);
  EXPECT_GT(bubble, 0);
  EXPECT_GT(wait, 0) << "the later stages wait for the first micro-batch's activations";
  EXPECT_EQ(other, 0) << "every generated communicator and message has a kind";

  const RunResult two = run_generated(sets, 2, false);
  ASSERT_EQ(two.ranks.size(), res.ranks.size());
  EXPECT_EQ(two.digest, res.digest);
  for (std::size_t i = 0; i < res.ranks.size(); ++i) {
    EXPECT_EQ(two.ranks[i].exposed_kind_ps, res.ranks[i].exposed_kind_ps) << i;
    EXPECT_EQ(two.ranks[i].bubble_ps, res.ranks[i].bubble_ps) << i;
  }

  if (fabricsim::testing::world_rank() != 0) return;
  const nlohmann::json j = read_json(scratch.path() + "/summary.json");
  const double n = static_cast<double>(res.ranks.size());
  EXPECT_DOUBLE_EQ(j.at("exposed_tp_ps_mean").get<double>(), static_cast<double>(tp) / n);
  EXPECT_DOUBLE_EQ(j.at("exposed_pp_ps_mean").get<double>(), static_cast<double>(pp) / n);
  EXPECT_DOUBLE_EQ(j.at("bubble_ps_mean").get<double>(), static_cast<double>(bubble) / n);
  double sum = 0;
  for (const char* k : {"tp", "dp", "ep", "pp", "cp", "other"}) sum += j.at(std::string("exposed_") + k + "_ps_mean").get<double>();
  EXPECT_NEAR(sum, j.at("exposed_comm_ps_mean").get<double>(), 1e-6 * sum);
  EXPECT_GE(j.at("exposed_pp_ps_max").get<double>(), j.at("exposed_pp_ps_mean").get<double>());
  EXPECT_EQ(j.at("fits_memory"), true);

  const auto rows = rank_rows(scratch.path() + "/run.h5");
  ASSERT_EQ(rows.size(), res.ranks.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = res.ranks[i];
    EXPECT_EQ(rows[i].tp, r.exposed_kind_ps[kTp]);
    EXPECT_EQ(rows[i].dp, r.exposed_kind_ps[kDp]);
    EXPECT_EQ(rows[i].pp, r.exposed_kind_ps[kPp]);
    EXPECT_EQ(rows[i].tp + rows[i].dp + rows[i].ep + rows[i].pp + rows[i].cp + rows[i].other, rows[i].exposed_comm_ps);
    EXPECT_EQ(rows[i].wait, r.pp_wait_ps);
    EXPECT_EQ(rows[i].bubble, r.bubble_ps);
  }
  long long fits = -1;
  ASSERT_TRUE(meta_attr(scratch.path() + "/run.h5", "fits_memory", fits));
  EXPECT_EQ(fits, 1);
}

// GPT-3 175B on two GPUs (TP 2) needs ~1.4 TB per GPU of model states alone (16 B per parameter,
// ZeRO paper Sec. 3.1), far over an H100's 80 GB: fits_memory false in the JSON and the HDF5.
TEST(Breakdown, JobThatDoesNotFitIsFlagged) {
  const fabricsim::testing::ScratchDir scratch("nofit");
  std::vector<std::string> sets = {"workload.generator.model=gpt3-175b", "workload.generator.tp=2",
                                   "workload.generator.global_batch=1",
                                   "workload.generator.gpu=H100", "simccl.planner=ring",
                                   "output.summary_json=" + scratch.path() + "/summary.json",
                                   "output.h5=" + scratch.path() + "/run.h5"};
  const RunResult res = run_generated(sets, 1, true);
  EXPECT_EQ(res.meta.fits_memory, 0);
  EXPECT_NE(res.summary_text.find("exceeds the GPU's memory"), std::string::npos);
  if (fabricsim::testing::world_rank() != 0) return;
  EXPECT_EQ(read_json(scratch.path() + "/summary.json").at("fits_memory"), false);
  long long fits = -1;
  ASSERT_TRUE(meta_attr(scratch.path() + "/run.h5", "fits_memory", fits));
  EXPECT_EQ(fits, 0);
}

// A workload without a memory estimate (a trace file, or one built in memory): fits_memory is
// null in the JSON and absent from the HDF5 file's /meta.
TEST(Breakdown, NoEstimateMeansUnknown) {
  const fabricsim::testing::ScratchDir scratch("unknown");
  m::Workload w = tp_dp_world();
  for (std::uint32_t r = 0; r < 4; ++r) w.programs[r].push_back(allreduce(tp_group(r), 1 << 20, {}));
  fabricsim::jobs::RunOptions o;
  o.workload_data = &w;
  o.sets = kSets;
  o.sets.push_back("output.summary_json=" + scratch.path() + "/summary.json");
  o.sets.push_back("output.h5=" + scratch.path() + "/run.h5");
  o.write_h5 = true;
  o.quiet = true;
  const RunResult res = fabricsim::jobs::run_simulation(o, MPI_COMM_WORLD, "test", "test");
  EXPECT_EQ(res.meta.fits_memory, -1);
  if (fabricsim::testing::world_rank() != 0) return;
  const nlohmann::json j = read_json(scratch.path() + "/summary.json");
  ASSERT_TRUE(j.contains("fits_memory"));
  EXPECT_TRUE(j.at("fits_memory").is_null());
  long long fits = -1;
  EXPECT_FALSE(meta_attr(scratch.path() + "/run.h5", "fits_memory", fits));
}

}  // namespace
