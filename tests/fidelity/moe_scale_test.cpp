// Issue 9 must-show 3, scaled down: the parallel shape of SimAI's published 9,216-GPU MoE example
// (TP 2, EP 16, pipeline with interleaved virtual stages, EP all-to-all) on 64 GPUs (PP 2, VP 2,
// DP 16) at flow level. The full-size run (examples/moe_9216.yaml) is a benchmark
// (bench/run_all.sh MEGA=1, docs/benchmarks.md); this test checks what must hold at any size:
//  * conservation: the bytes of every collective's flows equal the ring planner's closed form
//    (AllGather/ReduceScatter/AllToAll: (N-1)·S, AllReduce: 2(N-1)·S, Broadcast/Reduce chains:
//    (N-1)·S, where S is the nccl-tests size and N the communicator size), and the point-to-point
//    flows carry exactly the pipeline's activations and gradients:
//    2·(PP·VP - 1)·M·DP·T·h·B bytes (T = s·b tokens, B = 2, SP shards them over TP);
//  * the EP all-to-all count and size from Megatron-Core's alltoall dispatcher:
//    4·L·M·(TP·DP/EP) calls of T/TP·top_k·h·B bytes (dispatch + combine, forward + backward);
//  * every rank finishes, the last one at the iteration time;
//  * bit-identical results for 1 and 2 MPI processes and 1 and 2 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "jobs/run.hpp"
#include "tests/support/mpi.hpp"

using fabricsim::testing::world_procs;

namespace {

using fabricsim::jobs::RunOptions;
using fabricsim::jobs::RunResult;

constexpr std::uint64_t kTp = 2, kPp = 2, kVp = 2, kEp = 16, kDp = 16, kLayers = 4;
constexpr std::uint64_t kMicro = 2, kSeq = 256, kHidden = 512, kTopK = 2, kBytes = 2;

RunResult run_moe(MPI_Comm comm, unsigned threads, bool keep_flows) {
  RunOptions opt;
  opt.write_h5 = false;
  opt.quiet = true;
  opt.threads = threads;
  opt.keep_flows = keep_flows;
  const std::string g = "workload.generator.";
  opt.sets = {g + "model=custom", g + "layers=" + std::to_string(kLayers), g + "hidden=" + std::to_string(kHidden),
              g + "heads=8", g + "kv_heads=8", g + "ffn=swiglu", g + "ffn_hidden=1024",
              g + "experts=16", g + "top_k=" + std::to_string(kTopK), g + "vocab=4096", g + "gpu=H100",
              g + "tp=" + std::to_string(kTp), g + "pp=" + std::to_string(kPp), g + "vp=" + std::to_string(kVp),
              g + "ep=" + std::to_string(kEp), g + "dp=" + std::to_string(kDp), g + "micro_batch=1",
              g + "global_batch=" + std::to_string(kMicro * kDp), g + "seq_len=" + std::to_string(kSeq),
              g + "zero=1", "simccl.planner=ring", "sim.fidelity=flow"};
  return fabricsim::jobs::run_simulation(opt, comm, "test", "test");
}

std::uint64_t ring_closed_form(const std::string& op, std::uint64_t n, std::uint64_t s) {
  if (op == "all_reduce") return 2 * (n - 1) * s;
  return (n - 1) * s;  // all_gather, reduce_scatter, alltoall, broadcast/reduce chains
}

TEST(MoeScale, ConservationAndEpAllToAllClosedForm) {
  const RunResult r = run_moe(MPI_COMM_SELF, 1, true);
  const std::uint64_t gpus = kTp * kPp * kDp;

  // Every rank finishes; the last one defines the iteration.
  ASSERT_EQ(r.ranks.size(), gpus);
  fabricsim::engine::SimTime last = 0;
  for (const auto& rr : r.ranks) {
    EXPECT_GT(rr.finish_ps, 0) << "rank " << rr.rank;
    last = std::max(last, rr.finish_ps);
  }
  EXPECT_EQ(last, r.meta.simulated_time_ps);

  // Flow bytes per (communicator, instance) and of point-to-point transfers.
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> coll_bytes;
  std::uint64_t p2p_bytes = 0;
  ASSERT_EQ(r.flow_records.size(), r.flows);
  for (const auto& f : r.flow_records) {
    if (f.group == 0xFFFFFFFFu) {
      p2p_bytes += f.bytes;
    } else {
      coll_bytes[{f.group, f.instance}] += f.bytes;
    }
  }
  const std::uint64_t tokens = kSeq;  // micro_batch 1
  EXPECT_EQ(p2p_bytes, 2 * (kPp * kVp - 1) * kMicro * kDp * tokens * kHidden * kBytes);

  std::uint64_t alltoalls = 0;
  for (const auto& c : r.collectives) {
    SCOPED_TRACE(c.op + " group " + std::to_string(c.group) + " instance " + std::to_string(c.instance));
    EXPECT_EQ((coll_bytes[{c.group, c.instance}]), ring_closed_form(c.op, c.ranks, c.bytes));
    if (c.op == "alltoall") {
      ++alltoalls;
      EXPECT_EQ(c.ranks, kEp);
      EXPECT_EQ(c.bytes, tokens / kTp * kTopK * kHidden * kBytes);
    }
  }
  EXPECT_EQ(alltoalls, 4 * kLayers * kMicro * (kTp * kDp / kEp));
  EXPECT_EQ(coll_bytes.size(), r.collectives.size());  // no flow outside a recorded collective
}

TEST(MoeScale, BitIdenticalAcrossProcessesAndThreads) {
  const int procs = world_procs();
  const RunResult ref = run_moe(MPI_COMM_SELF, 1, false);
  for (unsigned threads : {1u, 2u}) {
    SCOPED_TRACE("threads=" + std::to_string(threads) + " processes=" + std::to_string(procs));
    const RunResult got = run_moe(MPI_COMM_WORLD, threads, false);
    EXPECT_EQ(got.digest, ref.digest);
    EXPECT_EQ(got.meta.simulated_time_ps, ref.meta.simulated_time_ps);
    EXPECT_EQ(got.flows, ref.flows);
  }
}

}  // namespace
