// sim.fold: dp (docs/folding.md): a folded run of identical DP replicas against the unfolded run
// of the same spec, at the flow and analytical rungs, on 64 and 256 GPUs of a non-blocking
// rail-optimized fabric; the folded run across processes and threads; the refusals.
#include <gtest/gtest.h>

#include <mpi.h>

#include <fstream>
#include <string>
#include <vector>

#include "engine/errors.hpp"
#include "jobs/run.hpp"

namespace fabricsim::jobs {
namespace {

/// GPT-3 13B's layer shape (Brown et al. 2020 Table 2.1) with 2 layers, TP 8 PP 2, 4 micro-batches
/// per replica, distributed optimizer (bucketed reduce-scatter / all-gather overlapped with the
/// backward), on 8-GPU H100 hosts of a rail-optimized fabric (non-blocking: every rail on one leaf
/// up to 32 hosts). NCCL rings for every collective (the shift maps a ring onto itself).
std::vector<std::string> job(std::uint32_t dp, const std::string& fidelity, const std::string& fold) {
  return {"workload.generator.model=gpt3-13b", "workload.generator.layers=2", "workload.generator.gpu=H100",
          "workload.generator.tp=8", "workload.generator.pp=2", "workload.generator.dp=" + std::to_string(dp),
          "workload.generator.global_batch=" + std::to_string(4 * dp), "workload.generator.zero=1",
          "nccl.NCCL_ALGO=Ring", "sim.fidelity=" + fidelity, "sim.fold=" + fold};
}

RunResult run(std::vector<std::string> sets, MPI_Comm comm = MPI_COMM_WORLD) {
  RunOptions o;
  o.sets = std::move(sets);
  o.write_h5 = false;
  o.quiet = true;
  return run_simulation(o, comm, "test", "test");
}

/// Folded and unfolded: the same iteration time, and every rank's record the same (the folded
/// run's replicas are copies of its representatives; by the shift symmetry so are the unfolded's).
void expect_same(const RunResult& folded, const RunResult& full) {
  EXPECT_EQ(folded.meta.simulated_time_ps, full.meta.simulated_time_ps);
  ASSERT_EQ(folded.ranks.size(), full.ranks.size());
  for (std::size_t r = 0; r < full.ranks.size(); ++r) {
    EXPECT_EQ(folded.ranks[r].finish_ps, full.ranks[r].finish_ps) << "rank " << r;
    EXPECT_EQ(folded.ranks[r].compute_ps, full.ranks[r].compute_ps) << "rank " << r;
    EXPECT_EQ(folded.ranks[r].comm_ps, full.ranks[r].comm_ps) << "rank " << r;
    EXPECT_EQ(folded.ranks[r].exposed_comm_ps, full.ranks[r].exposed_comm_ps) << "rank " << r;
  }
  EXPECT_LT(folded.flows, full.flows);  // only the representative's flows were simulated
  EXPECT_LT(folded.stats.events, full.stats.events);
}

TEST(Fold, FlowRung64GpusMatchesUnfolded) {
  const RunResult full = run(job(4, "flow", "none"));
  const RunResult folded = run(job(4, "flow", "dp"));
  expect_same(folded, full);
  EXPECT_NE(folded.summary_text.find("fold:      dp, 4 replicas of 16 ranks simulated as 1 (exact: every replica"), std::string::npos)
      << folded.summary_text;
}

TEST(Fold, FlowRung256GpusMatchesUnfolded) {
  const RunResult full = run(job(16, "flow", "none"));
  const RunResult folded = run(job(16, "flow", "dp"));
  expect_same(folded, full);
}

TEST(Fold, AnalyticalRung256GpusMatchesUnfolded) {
  expect_same(run(job(16, "analytical", "dp")), run(job(16, "analytical", "none")));
}

// The folded run is the same on this communicator's processes, on one process, and with 2
// threads (registered sequentially and on 2 MPI processes).
TEST(Fold, SameAcrossProcessesAndThreads) {
  const RunResult here = run(job(8, "flow", "dp"));
  const RunResult one = run(job(8, "flow", "dp"), MPI_COMM_SELF);
  auto sets = job(8, "flow", "dp");
  sets.push_back("sim.threads=2");
  const RunResult two = run(sets);
  for (const RunResult* r : {&one, &two}) {
    EXPECT_EQ(r->meta.simulated_time_ps, here.meta.simulated_time_ps);
    EXPECT_EQ(r->digest, here.digest);
    EXPECT_EQ(r->stats.events, here.stats.events);
  }
}

/// The folded images hold k > 1 DP replicas (docs/folding.md, "k replicas per image").
void expect_images(const RunResult& folded, std::uint32_t images, std::uint32_t k) {
  EXPECT_NE(folded.summary_text.find("fold:      dp, " + std::to_string(images) + " images of " + std::to_string(k) +
                                     " DP replicas"),
            std::string::npos)
      << folded.summary_text;
}

// TP 4 on 8-GPU hosts (MLPerf GPT-3's TP): one replica's stage fills half a host, so images of
// k = 4 replicas (2 hosts: NCCL's rings alternate direction from host to host, so the shift must
// move an even number of hosts) are simulated whole, their DP rings have 4 members per image.
TEST(Fold, Tp4ImagesOfFourReplicasMatchUnfolded) {
  for (const char* fid : {"flow", "analytical"}) {
    auto full = job(8, fid, "none"), folded = job(8, fid, "dp");
    for (auto* v : {&full, &folded}) v->push_back("workload.generator.tp=4");
    const RunResult f = run(folded);
    expect_same(f, run(full));
    expect_images(f, 2, 4);
  }
}

// CP 2 (TP 8 x CP 2, Llama 3 405B's layout): the DP·CP gradient communicator holds 2 ranks of
// each replica (one per host), simulated as the image's own ring edge; k = 1.
TEST(Fold, Cp2DpCpRingMatchesUnfolded) {
  for (const char* fid : {"flow", "analytical"}) {
    auto full = job(4, fid, "none"), folded = job(4, fid, "dp");
    for (auto* v : {&full, &folded}) {
      v->push_back("workload.generator.cp=2");
      v->push_back("workload.generator.attention=flash");
    }
    const RunResult f = run(folded);
    expect_same(f, run(full));
    EXPECT_NE(f.summary_text.find("fold:      dp, 4 replicas of 32 ranks simulated as 1"), std::string::npos)
        << f.summary_text;
  }
}

/// A small MoE (2 layers, 8 experts, top-2) with TP 2, PP 2, EP `ep` carved out of the stage's
/// TP·DP ranks, on 8-GPU hosts of a non-blocking rail-optimized fabric.
std::vector<std::string> moe(std::uint32_t dp, std::uint32_t ep, const std::string& fidelity, const std::string& fold) {
  return {"workload.generator.model=custom", "workload.generator.layers=2", "workload.generator.hidden=1024",
          "workload.generator.heads=8", "workload.generator.kv_heads=8", "workload.generator.ffn=swiglu",
          "workload.generator.ffn_hidden=2048", "workload.generator.experts=16", "workload.generator.top_k=2",
          "workload.generator.vocab=32768", "workload.generator.gpu=H100", "workload.generator.tp=2",
          "workload.generator.pp=2", "workload.generator.ep=" + std::to_string(ep),
          "workload.generator.dp=" + std::to_string(dp), "workload.generator.global_batch=" + std::to_string(2 * dp),
          "workload.generator.seq_len=2048", "workload.generator.zero=1", "nccl.NCCL_ALGO=Ring",
          "sim.fidelity=" + fidelity, "sim.fold=" + fold};
}

// EP 8 over TP 2: an expert group spans 4 DP replicas (one host per stage), which would close
// the expert groups, but the DP rings then have 4 members on one host per image, an odd host
// count for NCCL's alternating rings; so images of k = 8 replicas (2 hosts per stage), inside
// which the expert all-to-alls run whole; the expert-DP groups map onto themselves.
TEST(Fold, EpSpanningReplicasMatchesUnfolded) {
  for (const char* fid : {"flow", "analytical"}) {
    const RunResult f = run(moe(16, 8, fid, "dp"));
    expect_same(f, run(moe(16, 8, fid, "none")));
    expect_images(f, 2, 8);
  }
}

// A SimAI workload file with pp > 1 (SimAI's rank order tp-pp-dp, its EP groups 4 consecutive DP
// replicas of one (tp, stage) position, DP_EP groups every 4th): TP 2, PP 2, EP 4, GA 2 on 64
// GPUs, DP 16. Images of k = 4 replicas (2 hosts) close the EP groups; DP rings have 2 members
// on each of the image's 2 hosts.
TEST(Fold, SimaiPipelineFileMatchesUnfolded) {
  const std::string path = ::testing::TempDir() + "fold_simai_pp2_ep4.txt";
  {
    std::ofstream f(path);
    f << "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 4 pp: 2 vpp: 1 ga: 2 all_gpus: 64 "
         "checkpoints: 0 checkpoint_initiates: 0 pp_comm 1048576\n4\n"
         "embedding_layer\t-1\t600000\tALLREDUCE\t1048576\t1\tNONE\t0\t300000\tNONE\t0\t100\n"
         "attention_column\t-1\t1750840\tALLGATHER\t1048576\t875420\tREDUCESCATTER\t1048576\t875420\tNONE\t0\t100\n"
         "mlp_moelayer\t-1\t3000000\tALLTOALL_EP\t524288\t3000000\tALLTOALL_EP\t524288\t1\tREDUCESCATTER\t2097152\t100\n"
         "moe_grad\t-1\t1\tNONE\t0\t1\tNONE\t0\t1\tALLGATHER_DP_EP\t4194304\t100\n";
  }
  for (const char* fid : {"flow", "analytical"}) {
    auto sets = [&](const char* fold) {
      return std::vector<std::string>{"workload.path=" + path, "nccl.NCCL_ALGO=Ring", std::string("sim.fidelity=") + fid,
                                      std::string("sim.fold=") + fold};
    };
    const RunResult f = run(sets("dp"));
    expect_same(f, run(sets("none")));
    expect_images(f, 4, 4);
  }
}

/// The InputError message of a run that must be refused ("" if it ran).
std::string refusal(std::vector<std::string> sets) {
  try {
    run(std::move(sets));
  } catch (const engine::InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Fold, RefusedWhereReplicasShareOrDiffer) {
  auto over = job(4, "flow", "dp");
  over.push_back("cluster.oversubscription=4:1");
  const std::string m1 = refusal(over);
  EXPECT_NE(m1.find("sim.fold: dp: the fabric is oversubscribed"), std::string::npos) << m1;
  EXPECT_NE(m1.find("set sim.fold: none"), std::string::npos) << m1;
  EXPECT_EQ(m1.find('\n'), std::string::npos);

  // 1,024 GPUs: 128 hosts, rails of 32 hosts per leaf; DP 64 rings cross between leaf groups.
  const std::string m5 = refusal(job(64, "flow", "dp"));
  EXPECT_NE(m5.find("replicas sit under different leaves"), std::string::npos) << m5;

  const std::string m2 = refusal(job(4, "packet", "dp"));
  EXPECT_NE(m2.find("sim.fold: dp: the packet rung"), std::string::npos) << m2;

  // TP 4 on 8-GPU hosts with DP 3: no group of fewer than 3 replicas fills whole hosts.
  auto tp4 = job(3, "flow", "dp");
  tp4.push_back("workload.generator.tp=4");
  tp4.push_back("workload.generator.global_batch=12");
  const std::string m3 = refusal(tp4);
  EXPECT_NE(m3.find("no group of fewer than DP = 3 replicas (4 GPUs each) fills whole NVLink domains of 8 GPUs"),
            std::string::npos)
      << m3;

  // NCCL's Tree for the DP all-reduce (DDP, small buckets, many nodes) is not a ring: refused
  // when the collective starts.
  auto tree = job(4, "flow", "dp");
  tree.push_back("workload.generator.zero=0");
  tree.push_back("nccl.NCCL_ALGO=Ring;allreduce:Tree");
  const std::string m4 = refusal(tree);
  EXPECT_NE(m4.find("sim.fold"), std::string::npos) << m4;
  EXPECT_NE(m4.find("an NCCL Tree"), std::string::npos) << m4;

  // EP 16 = TP 2 x DP 8: every expert group spans all 8 replicas. Images of 2 or 4 replicas
  // split it (k = 2: not an image of itself), or, with 2 images, leave it mapped onto itself with
  // 4 members per image on one host, where NCCL's alternating rings do not commute with the shift.
  const std::string m6 = refusal(moe(8, 16, "analytical", "dp"));
  EXPECT_NE(m6.find("sim.fold: dp: no group of fewer than DP = 8 replicas is closed under the job's communicators: "),
            std::string::npos)
      << m6;
  EXPECT_NE(m6.find("or set sim.fold: none"), std::string::npos) << m6;
  EXPECT_EQ(m6.find('\n'), std::string::npos) << m6;
}

}  // namespace
}  // namespace fabricsim::jobs
