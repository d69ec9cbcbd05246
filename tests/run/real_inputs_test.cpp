// Every Chakra ET trace set under tests/data/chakra (copied
// from ../shared/inputs, see tests/data/SOURCES.md) and real SimAI/AICB files run to completion,
// with values checked against what the input files say.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "jobs/run.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/scratch.hpp"

namespace {

namespace fs = std::filesystem;
using fabricsim::jobs::RunOptions;
using fabricsim::jobs::run_simulation;

// NCCL planner forced to one Ring/Simple channel with a buffer larger than any chunk here, so a
// ring step is one message and the closed forms below hold.
const std::vector<std::string> kOneRing = {"nccl.NCCL_ALGO=Ring", "nccl.NCCL_PROTO=Simple", "nccl.NCCL_MAX_NCHANNELS=1",
                                           "nccl.NCCL_BUFFSIZE=17179869184",
                                           // the closed forms have no NCCL latency
                                           "simccl.launch_latency=none", "simccl.step_latency=none"};

fabricsim::jobs::RunResult run(const std::string& workload, unsigned gpus = 0,
                               const std::vector<std::string>& sets = {}) {
  RunOptions opt;
  opt.workload = workload;
  opt.gpus = gpus;
  opt.sets = sets;
  opt.write_h5 = false;
  return run_simulation(opt, MPI_COMM_WORLD, "test", "test");
}

std::vector<std::string> chakra_prefixes() {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(fabricsim::testing::data("chakra"))) {
    const std::string p = e.path().string();
    if (p.size() > 5 && p.compare(p.size() - 5, 5, ".0.et") == 0) out.push_back(p.substr(0, p.size() - 5));
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RealInputs, EveryChakraTraceSetCompletes) {
  const auto prefixes = chakra_prefixes();
  ASSERT_GE(prefixes.size(), 6u);  // all_reduce 8/16, all_gather 16, all_to_all 8, reduce_scatter 4, custom
  for (const auto& prefix : prefixes) {
    SCOPED_TRACE(prefix);
    const auto res = run(prefix);
    EXPECT_GT(res.meta.simulated_time_ps, 0);
    EXPECT_GT(res.flows, 0u);
    for (const auto& r : res.ranks) EXPECT_GT(r.finish_ps, 0);
    for (const auto& c : res.collectives) {
      EXPECT_EQ(c.bytes, 1048576u);  // every microbenchmark is 1 MiB (see tests/data/SOURCES.md)
      EXPECT_GT(c.busbw_GBps, 0.0);
      // busbw cannot exceed the fastest link of the default cluster (NVLink, 450 GB/s) by more
      // than the direct AllToAll's parallelism allows; ring algorithms stay below it.
      if (c.op != "alltoall") {
        EXPECT_LT(c.busbw_GBps, 450.0);
      }
    }
  }
}

TEST(RealInputs, SimaiMicroAllReduceComputeAndCommunication) {
  // SimAI example/microAllReduce.txt: TP 8 on 8 GPUs, two layers with fwd compute 556,000 ns and
  // ig/wg/update 1 ns each, fwd AllReduce 16 MiB and 64 MiB over the TP group.
  const auto res = run(fabricsim::testing::data("simai/SimAI/example/microAllReduce.txt"), 0, kOneRing);
  ASSERT_EQ(res.ranks.size(), 8u);
  for (const auto& r : res.ranks) EXPECT_EQ(r.compute_ps, 2 * (556000 + 1 + 1 + 1) * 1000LL);
  ASSERT_EQ(res.collectives.size(), 2u);
  // Default NVLink (H100, 450 GB/s per direction) at NCCL's per-link data rate: 20.6 of 25 GB/s
  // per link (src/graph/topo.h SM90_NVLINK_BW), bytes/s.
  const double nv = 3600e9 / 8 * (20.6 / 25.0);
  for (const auto& c : res.collectives) {
    EXPECT_EQ(c.op, "all_reduce");
    EXPECT_EQ(c.ranks, 8u);
    // Ring on one NVSwitch: 2(N-1) steps of (C/B + MTU/B + 2 x 100 ns).
    const double expected = 14 * (static_cast<double>(c.bytes) / 8 / nv + 4096 / nv + 200e-9);
    EXPECT_NEAR(static_cast<double>(c.end_ps - c.start_ps) * 1e-12 / expected, 1.0, 0.01);
  }
  EXPECT_EQ(res.collectives[0].bytes, 16777216u);
  EXPECT_EQ(res.collectives[1].bytes, 67108864u);
}

TEST(RealInputs, SimaiPipelineBubbleMatchesSimaiFormula) {
  // A compute-only AICB-layout file: PP 4, GA 8 written-out micro-batches of 2 layers (fwd
  // 100 us, ig 150 us, wg 50 us each: f = 200 us, b = 400 us per micro-batch and stage), tiny
  // pp_comm. SimAI's analytical total (Layer.cc, Layer::report) is compute x (1 + (PP - 1) /
  // (GA x vpp)); Megatron's 1F1B and interleaved schedules reach exactly that bubble when chunk
  // times are equal, so fabricsim's makespan is that plus the sends on the critical path.
  fabricsim::testing::ScratchDir dir("pipe");
  constexpr double kCompute = 8 * 600e-6;  // s, per rank
  for (const int vpp : {1, 2}) {
    std::string body;
    for (int i = 0; i < 16; ++i) body += "layer -1 100000 NONE 0 150000 NONE 0 50000 NONE 0 0\n";
    const auto path = dir.file("bubble" + std::to_string(vpp) + ".txt",
                               "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 pp: 4 vpp: " +
                                   std::to_string(vpp) + " ga: 8 all_gpus: 4 pp_comm: 4096\n16\n" + body);
    for (const char* rung : {"analytical", "flow"}) {
      // NCCL's per-send latency off: the bound below is the sends' wire time only.
      const auto res = run(path, 0, {std::string("sim.fidelity=") + rung, "simccl.launch_latency=none",
                                     "simccl.step_latency=none"});
      ASSERT_EQ(res.ranks.size(), 4u);
      std::int64_t end = 0;
      for (const auto& r : res.ranks) {
        EXPECT_EQ(r.compute_ps, 4800000000LL);
        end = std::max<std::int64_t>(end, r.finish_ps);
      }
      const double simai = kCompute * (1.0 + 3.0 / (8.0 * vpp));
      // Each of the < 2 x (GA x vpp + PP) critical-path sends of 4 KiB over NVLink takes < 1 us.
      const double sends = 2.0 * (8 * vpp + 4) * 1e-6;
      EXPECT_GE(static_cast<double>(end) * 1e-12, simai) << rung << " vpp " << vpp;
      EXPECT_LE(static_cast<double>(end) * 1e-12, simai + sends) << rung << " vpp " << vpp;
    }
  }
}

TEST(RealInputs, AicbLlama7bZero3On16Gpus) {
  // AICB L7B-D1-C02 (DeepSpeed ZeRO-3, TP 1): the only multi-rank collective is the first layer's
  // wg REDUCESCATTER of 1,889,785,610 bytes over DP = 16 ranks; the fwd/ig AllGathers run on
  // single-rank TP groups.
  const auto res = run(fabricsim::testing::data("simai/aicb/workload/simAI/model_workload/L7B-D1-C02_Llama7B_deepspeed_zero3_A100.txt"), 16, kOneRing);
  ASSERT_EQ(res.ranks.size(), 16u);
  std::size_t multi = 0;
  for (const auto& c : res.collectives) {
    if (c.ranks > 1) {
      ++multi;
      EXPECT_EQ(c.op, "reduce_scatter");
      EXPECT_EQ(c.bytes, 1889785610u);
      EXPECT_EQ(c.ranks, 16u);
    }
  }
  EXPECT_EQ(multi, 1u);
  // Ring ReduceScatter sends (N-1)/N of the buffer per rank: 15 flows per rank.
  EXPECT_EQ(res.flows, 16u * 15u);
}

}  // namespace
