// NVLink data rate, GPU presets, NVLS rate per generation and MNNVL (NVL72) planning
// (docs/simccl.md "GPU presets, the NVLink data rate, NVL72 domains").
//
// Expected values are derived here from NCCL 2.28's constants (src/graph/topo.h per-link NVLink
// bandwidth, src/graph/tuning.cc NVLS model; ../shared/reference/nccl.md §2.3, §2.8) and the
// datasheet link rates, never read back from a run.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/errors.hpp"
#include "jobs/nccl_tests.hpp"
#include "jobs/run.hpp"
#include "jobs/spec.hpp"
#include "simccl/nccl_tuner.hpp"

namespace {

using fabricsim::jobs::RunOptions;
using fabricsim::jobs::RunResult;

RunResult run(const std::string& coll, std::uint32_t ranks, std::uint64_t bytes, std::vector<std::string> sets) {
  static std::vector<fabricsim::models::Workload> keep;  // RunOptions holds a pointer
  keep.push_back(fabricsim::jobs::nccl_tests_workload(coll, ranks, bytes, 0));
  RunOptions o;
  o.workload_data = &keep.back();
  o.sets = std::move(sets);
  o.sets.push_back("sim.fidelity=flow");
  o.write_h5 = false;
  o.quiet = true;
  return fabricsim::jobs::run_simulation(o, MPI_COMM_SELF, "test", "test");
}

double seconds(const RunResult& r) { return static_cast<double>(r.meta.simulated_time_ps) * 1e-12; }

TEST(NvlinkData, EfficiencyIsNcclsPerLinkBandwidthOverTheLinkRate) {
  // topo.h SM80/SM90/SM100_NVLINK_BW over NVLink3/4 25 GB/s and NVLink5 50 GB/s per link.
  EXPECT_DOUBLE_EQ(fabricsim::simccl::nvlink_data_efficiency(80), 20.0 / 25.0);
  EXPECT_DOUBLE_EQ(fabricsim::simccl::nvlink_data_efficiency(90), 20.6 / 25.0);
  EXPECT_DOUBLE_EQ(fabricsim::simccl::nvlink_data_efficiency(100), 40.1 / 50.0);
}

TEST(NvlinkData, NvlsRateFollowsNcclsNvlsModelPerGeneration) {
  // 8 heads; bwIntra = largest ladder speed s with 9 s <= 18 x per-link bw (sm90: 40 <= 370.8/9,
  // sm100: 80 <= 721.8/9); busBw = 8 x min(s x nvlsEff x 7/8 x 2, ladder top); x 8/14 x 9/8.
  const double h100 = 8 * std::min(40 * 0.85 * 7.0 / 8 * 2, 60.0) * 8.0 / 14 * 9.0 / 8;
  const double b200 = 8 * std::min(80 * 0.74 * 7.0 / 8 * 2, 90.0) * 8.0 / 14 * 9.0 / 8;
  EXPECT_NEAR(fabricsim::simccl::nvls_port_GBps(90), h100, 1e-9);
  EXPECT_NEAR(h100, 306.0, 1e-9);
  EXPECT_NEAR(fabricsim::simccl::nvls_port_GBps(100), b200, 1e-9);
  EXPECT_EQ(fabricsim::simccl::nvls_port_GBps(80), 0.0);  // Ampere has no NVLS
}

TEST(NvlinkData, GpuPresetSetsRateSmAndNvls) {
  const auto a100 = fabricsim::jobs::load_spec("", {"cluster.gpu=A100"});
  EXPECT_EQ(a100.cluster.nvlink_bps, 2'400'000'000'000ull);  // 600 GB/s bidirectional / 2
  EXPECT_EQ(a100.gpu_sm, 80);
  EXPECT_DOUBLE_EQ(a100.cluster.nvlink_efficiency, 0.8);
  const auto gb200 = fabricsim::jobs::load_spec("", {"cluster.gpu=GB200"});
  EXPECT_EQ(gb200.cluster.nvlink_bps, 7'200'000'000'000ull);
  EXPECT_EQ(gb200.gpu_sm, 100);
  EXPECT_NEAR(static_cast<double>(gb200.cluster.nvls_bps) / 8e9, fabricsim::simccl::nvls_port_GBps(100), 0.01);
  // Explicit keys win over the preset.
  const auto mixed = fabricsim::jobs::load_spec("", {"cluster.gpu=A100", "cluster.nvlink_bandwidth=1000Gbps",
                                                     "cluster.nvlink_efficiency=1", "simccl.launch_latency=none",
                                            "simccl.step_latency=none"});
  EXPECT_EQ(mixed.cluster.nvlink_bps, 1'000'000'000'000ull);
  EXPECT_DOUBLE_EQ(mixed.cluster.nvlink_efficiency, 1.0);
}

TEST(NvlinkData, BadValuesAreOneLineErrors) {
  for (const char* bad : {"cluster.nvlink_efficiency=0", "cluster.nvlink_efficiency=1.5",
                          "cluster.nvlink_efficiency=fast", "cluster.gpu=MI300X", "cluster.gpu=Z9000"}) {
    SCOPED_TRACE(bad);
    try {
      (void)fabricsim::jobs::load_spec("", {bad});
      ADD_FAILURE() << "accepted";
    } catch (const fabricsim::engine::InputError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos);
      EXPECT_NE(what.find(std::string(bad).substr(0, std::string(bad).find('='))), std::string::npos) << what;
    }
  }
}

// An 8 x A100 ring AllGather of 1 GiB (Simple) is bound by each GPU's NVLink data rate:
// 12 x 20 GB/s = 240 GB/s per direction; busbw = (n-1)/n x S / t (NCCL's latencies off, so the
// time is bytes over the rate alone).
TEST(NvlinkData, RingPlateauIsTheDataRate) {
  const std::uint64_t S = 1ull << 30;
  const auto r = run("all_gather", 8, S, {"cluster.gpu=A100", "cluster.hosts=1", "nccl.NCCL_PROTO=Simple",
                                          "simccl.launch_latency=none", "simccl.step_latency=none"});
  const double busbw = 7.0 / 8 * static_cast<double>(S) / seconds(r) / 1e9;
  EXPECT_LT(busbw, 240.0);
  EXPECT_GT(busbw, 240.0 * 0.97);
  // With the raw link rate (efficiency 1) the same ring runs 25% faster: 300 / 240.
  const auto raw = run("all_gather", 8, S, {"cluster.gpu=A100", "cluster.hosts=1", "nccl.NCCL_PROTO=Simple",
                                            "cluster.nvlink_efficiency=1", "simccl.launch_latency=none",
                                            "simccl.step_latency=none"});
  EXPECT_NEAR(seconds(r) / seconds(raw), 1.25, 0.03);
}

// MNNVL: 4-GPU hosts in 16-GPU NVLink domains. A 64 MiB AllReduce over one domain is one NCCL
// node (planned per host before, it deadlocked). Over the NICs (50 GB/s each, 4 per host) a
// ring's busbw is at most 4 x 50 = 200 GB/s (every channel crosses each host boundary on one
// NIC); on NVLink it is far above.
TEST(Mnnvl, DomainIsOneNode) {
  const std::vector<std::string> sets = {"cluster.gpu=GB200", "cluster.gpus_per_host=4", "cluster.hosts=4",
                                         "cluster.nvlink_domain=16"};
  const std::uint64_t S = 64ull << 20;
  const auto r = run("all_reduce", 16, S, sets);
  ASSERT_EQ(r.collectives.size(), 1u);
  const double busbw = 2.0 * 15 / 16 * static_cast<double>(S) / seconds(r) / 1e9;
  EXPECT_GT(busbw, 250.0);
}

// AllToAll across two 16-GPU domains: each GPU sends half its data to the other domain over its
// own NIC (directly or through the PXN relay at the peer's domain position, which is on the
// peer's rail), so t >= (S/2) / NIC and, NVLink being 18x faster, t is within a few % of it.
TEST(Mnnvl, CrossDomainAllToAllIsNicBound) {
  const std::uint64_t S = 256ull << 20;
  const std::vector<std::string> sets = {"cluster.gpu=GB200", "cluster.gpus_per_host=4", "cluster.hosts=8",
                                         "cluster.nvlink_domain=16", "cluster.nic_bandwidth=400Gbps",
                                         "cluster.nics_per_leaf=8"};
  const auto r = run("alltoall", 32, S, sets);
  const double nic_Bps = 400e9 / 8;
  const double bound = static_cast<double>(S) / 2 / nic_Bps;
  EXPECT_GE(seconds(r), bound);
  EXPECT_LT(seconds(r), bound * 1.10);
}

}  // namespace
