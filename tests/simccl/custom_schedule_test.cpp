// Custom schedules replayed as given.
//  * TE-CCL's 4x4 mesh AllGather schedule (microsoft/TE-CCL teccl/examples/schedules/mesh_4.json)
//    parses into 16 x 15 transfers and, on TE-CCL's Mesh topology (GPU i linked to i+-1 and
//    i+-4, teccl/topologies/mesh.py) with 50 GB/s links and 1 MB chunks, finishes in the 8 epochs
//    the solver reports, an epoch being one chunk time on a link (1e6 B / 50e9 B/s = 20 us);
//  * a ring AllGather on the same mesh in rank order takes 15 steps x 2 chunk times = 600 us: the
//    ring's 15 -> 0 hop has three shortest paths (5 links: four -4 moves and one +1 move, the +1
//    at 11->12, 7->8 or 3->4) and each uses one of the ring's own i -> i+1 links, so that link
//    carries two flows at 25 GB/s each in every step, and every step waits for it; a ring that
//    follows the mesh's links (a Hamiltonian cycle, as NCCL's graph search builds rings along
//    NVLinks) needs no shared link and takes the N-1 = 15 chunk times (300 us);
//  * the MSCCL-IR XML ring AllReduce (astra-sim custom collective) parses into the ring's
//    2(N-1) sends per rank and, on one 8-GPU NVSwitch host, runs in the ring closed form
//    2(N-1)/N x S / B_nvlink;
//  * bad schedules are input errors naming the file.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/paths.hpp"
#include "tests/support/scratch.hpp"
#include "engine/errors.hpp"
#include "jobs/nccl_tests.hpp"
#include "jobs/run.hpp"
#include "simccl/custom_planner.hpp"
#include "simccl/custom_schedule.hpp"
#include "tests/support/mpi.hpp"

namespace {

using fabricsim::engine::InputError;
using fabricsim::testing::data;
using fabricsim::testing::ScratchDir;
namespace simccl = fabricsim::simccl;
namespace models = fabricsim::models;

const std::string kMesh4 = "teccl/TE-CCL/teccl/examples/schedules/mesh_4.json";
const std::string kMscclRing = "msccl/astra-sim/examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB/custom_allreduce.xml";

// TE-CCL's Mesh (teccl/topologies/mesh.py): GPU i linked to i-1, i+1, i-side, i+side. Each GPU
// behind its own switch (fabricsim has no GPU-GPU links); the GPU-switch link carries the up to
// 4 links a GPU drives at once, so it is 4 x the mesh link rate.
std::string mesh_topology(const std::string& dir, const std::string& latency) {
  const int side = 4, n = side * side;
  const std::string path = dir + "/mesh_" + latency + ".topo";
  std::ofstream f(path);
  f << "fabricsim-topology 1\n";
  for (int i = 0; i < n; ++i) f << "node gpu" << i << " gpu\n";
  for (int i = 0; i < n; ++i) f << "node sw" << i << " switch 1\n";
  for (int i = 0; i < n; ++i) f << "link gpu" << i << " sw" << i << " 1600Gbps " << latency << "\n";
  for (int i = 0; i < n; ++i) {
    for (int j : {i + 1, i + side}) {
      if (j < n) f << "link sw" << i << " sw" << j << " 400Gbps " << latency << "\n";
    }
  }
  return path;
}

double all_gather_us(const std::string& topo, const std::vector<std::string>& extra) {
  fabricsim::jobs::NcclTestsOptions o;
  o.collective = "all_gather";
  o.min_bytes = o.max_bytes = 16'000'000;  // 16 GPUs x 1 MB chunks
  o.gpus_per_node = 1;
  o.nodes = 16;
  // Line-rate NICs (no DCQCN): the GPU port is 4x a mesh link, which DCQCN would read as
  // congestion whenever a GPU drives fewer than 4 links.
  o.sets = {"cluster.topology_file=" + topo, "nic.cc=none"};
  o.sets.insert(o.sets.end(), extra.begin(), extra.end());
  std::vector<fabricsim::jobs::NcclTestsRow> rows;
  fabricsim::jobs::run_nccl_tests(o, MPI_COMM_SELF, "test", "test", &rows);
  EXPECT_EQ(rows.size(), 1u);
  return rows.empty() ? 0 : rows[0].time_us;
}

// Ring AllGather (simccl.planner=ring) over a communicator in the order of a Hamiltonian cycle
// of the 4x4 mesh: 0-1-2-3-7-11-15-14-13-12-8-9-10-6-5-4-(0); each consecutive pair is a mesh
// link (i+-1 inside a row, i+-4 between rows).
double hamiltonian_ring_us(const std::string& topo) {
  const std::vector<std::uint32_t> order = {0, 1, 2, 3, 7, 11, 15, 14, 13, 12, 8, 9, 10, 6, 5, 4};
  for (std::size_t k = 0; k < order.size(); ++k) {
    const int a = static_cast<int>(order[k]), b = static_cast<int>(order[(k + 1) % order.size()]);
    const int d = std::abs(a - b);
    EXPECT_TRUE(d == 4 || (d == 1 && std::min(a, b) / 4 == std::max(a, b) / 4)) << a << "-" << b;
  }
  fabricsim::models::Workload w = fabricsim::jobs::nccl_tests_workload("all_gather", 16, 16'000'000, 0);
  w.groups.push_back({"mesh_ring", order});
  for (auto& prog : w.programs) prog[0].group = 1;
  fabricsim::jobs::RunOptions o;
  o.workload_data = &w;
  o.sets = {"cluster.topology_file=" + topo, "nic.cc=none", "simccl.planner=ring", "cluster.gpus_per_host=1",
            "cluster.hosts=16"};
  o.write_h5 = false;
  o.quiet = true;
  const auto res = fabricsim::jobs::run_simulation(o, MPI_COMM_SELF, "test", "test");
  EXPECT_EQ(res.collectives.size(), 1u);
  return res.collectives.empty() ? 0 : static_cast<double>(res.collectives[0].end_ps - res.collectives[0].start_ps) * 1e-6;
}

TEST(CustomSchedule, TecclMesh4Parses) {
  const simccl::CustomSchedule s = simccl::load_custom_schedule(data(kMesh4));
  EXPECT_EQ(s.format, "te-ccl");
  EXPECT_EQ(s.op, models::CollOp::kAllGather);
  EXPECT_EQ(s.n_ranks, 16u);
  EXPECT_EQ(s.chunks_per_buffer, 16u);  // 1 chunk per GPU
  EXPECT_EQ(s.epochs, 8u);
  // An AllGather delivers each of the 16 chunks to the 15 other GPUs exactly once.
  EXPECT_EQ(s.transfers, 16u * 15u);
  std::size_t recvs = 0;
  for (const auto& ops : s.ranks) {
    std::size_t r = 0;
    for (const auto& o : ops) r += o.is_send ? 0 : 1;
    EXPECT_EQ(r, 15u);
    recvs += r;
  }
  EXPECT_EQ(recvs, s.transfers);
}

TEST(CustomSchedule, MscclRingAllReduceParses) {
  const simccl::CustomSchedule s = simccl::load_custom_schedule(data(kMscclRing));
  EXPECT_EQ(s.format, "msccl");
  EXPECT_EQ(s.op, models::CollOp::kAllReduce);
  EXPECT_EQ(s.n_ranks, 8u);
  EXPECT_EQ(s.chunks_per_buffer, 8u);
  // Ring AllReduce: 2(N-1) = 14 sends and receives per rank, to the next / from the previous.
  for (std::uint32_t g = 0; g < 8; ++g) {
    std::size_t sends = 0, recvs = 0;
    for (const auto& o : s.ranks[g]) {
      if (o.is_send) {
        ++sends;
        EXPECT_EQ(o.peer, (g + 1) % 8);
      } else {
        ++recvs;
        EXPECT_EQ(o.peer, (g + 7) % 8);
      }
    }
    EXPECT_EQ(sends, 14u);
    EXPECT_EQ(recvs, 14u);
  }
  // Scaled to a 1 MiB AllReduce, each send carries one of 8 chunks.
  std::vector<std::uint32_t> world{0, 1, 2, 3, 4, 5, 6, 7};
  const models::RankPlan p = simccl::expand_schedule(s, 1 << 20, world, 3);
  for (const auto& o : p.ops) {
    if (o.is_send) {
      EXPECT_EQ(o.bytes, (1u << 20) / 8);
    }
  }
}

TEST(CustomSchedule, MscclGpuCountIsBoundedBeforeAllocating) {
  // A 2-GPU AllGather (each GPU sends its chunk to the other), read from text.
  const auto algo = [](const std::string& ngpus) {
    return R"(<algo name="ag2" nchannels="1" nchunksperloop="2" ngpus=")" + ngpus +
           R"(" coll="allgather" inplace="1">
  <gpu id="0"><tb id="0" send="1" recv="1" chan="0">
    <step s="0" type="s" cnt="1" depid="-1" deps="-1"/><step s="1" type="r" cnt="1" depid="-1" deps="-1"/>
  </tb></gpu>
  <gpu id="1"><tb id="0" send="0" recv="0" chan="0">
    <step s="0" type="s" cnt="1" depid="-1" deps="-1"/><step s="1" type="r" cnt="1" depid="-1" deps="-1"/>
  </tb></gpu>
</algo>)";
  };
  const simccl::CustomSchedule ok = simccl::parse_msccl_schedule(algo("2"), "ag2.xml");
  EXPECT_EQ(ok.n_ranks, 2u);
  EXPECT_EQ(ok.transfers, 2u);
  // 2^31 - 1 (as_int's saturation of the fuzzer's long number) and one above the bound: one
  // error line, no 51 GB allocation (tests/data/bad/fuzz/msccl/bad-ngpus-2pow31-out-of-memory.xml).
  for (const std::string ngpus : {"84444444444444444444", "65537"}) {
    try {
      (void)simccl::parse_msccl_schedule(algo(ngpus), "ag2.xml");
      ADD_FAILURE() << ngpus;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("ag2.xml: algo.ngpus: "), std::string::npos) << e.what();
    }
  }
}

TEST(CustomSchedule, BadSchedulesAreInputErrors) {
  const ScratchDir scratch("bad_schedule");
  const std::string dir = scratch.path();
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  auto expect_error = [](const std::string& path, const std::string& needle) {
    try {
      (void)simccl::load_custom_schedule(path);
      ADD_FAILURE() << "no error for " << path;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(path), std::string::npos) << what;
      EXPECT_NE(what.find(needle), std::string::npos) << what;
    }
  };
  expect_error(dir + "/missing.json", "cannot open");
  // Two GPUs, chunk of 0 forwarded by 1 before it has it.
  const std::string demand = R"("6-Demand_Met": {"GPU 0": {}, "GPU 1": {}, "GPU 2": {}})";
  expect_error(write("early.json", "{" + demand + R"(, "7-Flows": ["Chunk 0 from 0 traveled over 1->2 in epoch 0"]})"),
               "before it has it");
  expect_error(write("switch.json", "{" + demand + R"(, "7-Flows": ["Chunk 0 from 0 traveled over 0->5 in epoch 0"]})"),
               "switch");
  expect_error(write("partial.json", "{" + demand + R"(, "7-Flows": ["Chunk 0 from 0 traveled over 0->1 in epoch 0"]})"),
               "not a complete AllGather");
  expect_error(write("garbage.txt", "hello"), "neither");
  expect_error(write("unmatched.xml", R"(<algo name="x" coll="allgather" ngpus="2" nchunksperloop="2">
    <gpu id="0"><tb id="0" send="1" recv="-1" chan="0"><step s="0" type="s" cnt="1"/></tb></gpu>
    <gpu id="1"><tb id="0" send="-1" recv="0" chan="0"></tb></gpu></algo>)"),
               "1 sends but 0 receives");
  expect_error(write("badtype.xml", R"(<algo name="x" coll="allgather" ngpus="2" nchunksperloop="2">
    <gpu id="0"><tb id="0" send="1" recv="-1" chan="0"><step s="0" type="zz" cnt="1"/></tb></gpu></algo>)"),
               "unknown step type");
}

TEST(CustomSchedule, TecclMesh4ReplaysInEightEpochs) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential only");
  const ScratchDir scratch("teccl_mesh");
  const std::string dir = scratch.path();
  const double epoch_us = 1e6 / 50e9 * 1e6;  // 1 MB chunk on a 50 GB/s link = 20 us
  // "No latency": 1 ps links (the engine needs a positive lookahead).
  const double teccl = all_gather_us(mesh_topology(dir, "1ps"), {"simccl.schedule=" + data(kMesh4)});
  EXPECT_GE(teccl, 8 * epoch_us * 0.999);
  EXPECT_LE(teccl, 8 * epoch_us * 1.02) << teccl;
  // Rank-order ring: every step one ring link also carries the 15 -> 0 hop (see the file
  // comment), so each step takes 2 chunk times: 15 x 2 x 20 us = 600 us.
  const double ring = all_gather_us(mesh_topology(dir, "1ps"), {"simccl.planner=ring"});
  EXPECT_GE(ring, 15 * 2 * epoch_us * 0.999);
  EXPECT_LE(ring, 15 * 2 * epoch_us * 1.01) << ring;
  EXPECT_LT(teccl, ring);
  // The same ring along a Hamiltonian cycle of the mesh (every hop one mesh link, no link used
  // twice): the closed form N-1 = 15 chunk times, 300 us.
  const double ham = hamiltonian_ring_us(mesh_topology(dir, "1ps"));
  EXPECT_GE(ham, 15 * epoch_us * 0.999);
  EXPECT_LE(ham, 15 * epoch_us * 1.01) << ham;
  EXPECT_LT(teccl, ham);
  // With 500 ns links a transfer crosses 3 links (GPU-switch-switch-GPU, 1.5 us): the replay
  // pays that at least once and at most twice per epoch (path latency plus the last packet's
  // store-and-forward), 8 epochs.
  const double teccl_lat = all_gather_us(mesh_topology(dir, "500ns"), {"simccl.schedule=" + data(kMesh4)});
  EXPECT_GE(teccl_lat, teccl + 1.5 * 0.999);
  EXPECT_LE(teccl_lat, teccl + 8 * 3.0) << teccl_lat;
  const double ring_lat = all_gather_us(mesh_topology(dir, "500ns"), {"simccl.planner=ring"});
  EXPECT_GE(ring_lat, ring);
  const double ham_lat = hamiltonian_ring_us(mesh_topology(dir, "500ns"));
  EXPECT_GE(ham_lat, ham);
  EXPECT_LT(ham_lat, ring_lat);
  std::printf("TE-CCL mesh_4 AllGather: %.2f us (1 ps links), %.2f us (500 ns); rank-order ring: %.2f us, %.2f us; "
              "Hamiltonian ring: %.2f us, %.2f us\n",
              teccl, teccl_lat, ring, ring_lat, ham, ham_lat);
}

TEST(CustomSchedule, MscclRingAllReduceMatchesTheRingClosedForm) {
  FABRICSIM_SEQUENTIAL_ONLY("sequential only");
  fabricsim::jobs::NcclTestsOptions o;
  o.collective = "all_reduce";
  o.min_bytes = o.max_bytes = 64ull << 20;
  o.gpus_per_node = 8;
  o.sets = {"simccl.schedule=" + data(kMscclRing)};
  std::vector<fabricsim::jobs::NcclTestsRow> rows;
  fabricsim::jobs::run_nccl_tests(o, MPI_COMM_SELF, "test", "test", &rows);
  ASSERT_EQ(rows.size(), 1u);
  // Default node: NVLink 450 GB/s per direction carrying data at 20.6 of 25 GB/s per link (NCCL
  // SM90, topo.h) = 370.8 GB/s. The one-channel ring moves 2(N-1)/N x S per GPU, each chunk
  // store-and-forward: busbw = 2(N-1)/N x S / t -> 370.8 GB/s.
  EXPECT_NEAR(rows[0].busbw_GBps / 370.8, 1.0, 0.02) << rows[0].busbw_GBps;
  EXPECT_NE(rows[0].choice.find("msccl"), std::string::npos) << rows[0].choice;
}

}  // namespace
