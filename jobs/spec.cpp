#include "jobs/spec.hpp"

#include "jobs/fabric_spec.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "engine/errors.hpp"
#include "engine/units.hpp"
#include "kernels/gpu_specs.hpp"
#include "models/core/nic_profile.hpp"
#include "models/topology/registry.hpp"
#include "simccl/nccl_tuner.hpp"

namespace fabricsim::jobs {

using engine::InputError;
namespace fs = std::filesystem;

namespace {

/// Fills the registry's part of the key table (models/topology/registry.hpp): the
/// cluster.topology help from the registered names, and each builder's own keys (once each,
/// in registry order) at the "@builders" placeholder.
std::vector<SpecKey> with_topology_keys(const std::vector<SpecKey>& table) {
  static const std::string topology_help = models::topology_names() + " (docs/topology.md)";
  static std::vector<std::string> helps;  // help + source of the builder keys that cite one
  std::vector<SpecKey> out;
  for (const SpecKey& key : table) {
    if (std::string(key.path) == "cluster.topology") {
      out.push_back({key.path, key.type, key.default_text, topology_help.c_str()});
      continue;
    }
    if (std::string(key.path) == "cluster.nic_profile") {
      static const std::string profile_help =
          "NIC profile: " + models::nic_profile_names() +
          "; sets cluster.nic_bandwidth, nic.qp_cache, nic.qp_miss_latency, nic.msg_rate, nic.cc and nic.flow_start "
          "where the spec does not (`fabricsim describe nic NAME`, docs/fabric.md)";
      out.push_back({key.path, key.type, key.default_text, profile_help.c_str()});
      continue;
    }
    if (std::string(key.path) != "@builders") {
      out.push_back(key);
      continue;
    }
    std::set<std::string> seen;
    std::size_t cited = 0;
    for (const models::TopologyBuilder* b : models::topology_builders()) {
      for (const models::ParamDecl& d : b->params) cited += *d.source != '\0';
    }
    helps.reserve(cited);  // stable c_str() pointers
    for (const models::TopologyBuilder* b : models::topology_builders()) {
      for (const models::ParamDecl& d : b->params) {
        if (!seen.insert(d.path).second) continue;
        const char* help = d.help;
        if (*d.source != '\0') {
          helps.push_back(std::string(d.help) + " (" + d.source + ")");
          help = helps.back().c_str();
        }
        out.push_back({d.path, d.type, d.default_text, help});
      }
    }
  }
  return out;
}

}  // namespace

const std::vector<SpecKey>& spec_keys() {
  static const std::vector<SpecKey> keys = [] {
  std::vector<SpecKey> k = {
      {"workload.path", "string", "", "Chakra ET prefix (PREFIX.<rank>.et) or SimAI/AICB workload file; relative to the spec file"},
      {"workload.format", "enum", "auto", "auto, chakra or simai (auto: detected from the content)"},
      {"workload.gpus", "int", "0", "world size for SimAI/AICB files without all_gpus (SimAI's -g); for a Chakra trace "
                                    "of rank 0 only, the ranks to replicate it to (default: its process-group metadata)"},
      {"workload.comm_groups", "string", "", "Chakra comm-group JSON {pg_name: [ranks]} (ASTRA-sim format)"},
      {"workload.chakra.missing_deps", "enum", "ignore", "Chakra ET control dependencies on node ids absent from the rank's file "
                                                         "(as Chakra's PyTorch converter leaves them): ignore (drop them, one warning with the count) "
                                                         "or error (refuse the trace); a missing data dependency is always an error"},
      {"workload.chakra.ctrl_deps", "bool", "true", "Chakra ET control dependencies order execution together with data dependencies "
                                                    "(Chakra feeder with both enabled); false: data dependencies only"},
      {"workload.chakra.cpu_ops", "enum", "host", "Chakra COMP_NODEs with is_cpu_op true: host (timed for their duration on the "
                                                  "rank's host thread, concurrently with GPU work, as ASTRA-sim replays them) or "
                                                  "skip (zero duration, kept for ordering)"},
      // Workload generator (jobs/generators.hpp, docs/generators.md): set model to generate
      // instead of reading workload.path.
      {"workload.generator.model", "string", "", "built-in model (gpt3-175b, llama3-70b, mixtral-8x7b, deepseek-v3, ...) or custom"},
      {"workload.generator.gpu", "string", "H100", "GPU type for kernel times (A100, H100, H200, H800, H20, B200, GB200, GB300, MI300X)"},
      {"workload.generator.tp", "int", "1", "tensor-parallel size"},
      {"workload.generator.pp", "int", "1", "pipeline-parallel stages"},
      {"workload.generator.dp", "int", "1", "data-parallel size"},
      {"workload.generator.ep", "int", "1", "expert-parallel size (MoE; folds into TP x DP)"},
      {"workload.generator.cp", "int", "1", "context-parallel size: p2p ring attention over CP ranks (docs/generators.md, \"Context parallelism\")"},
      {"workload.generator.vp", "int", "1", "virtual pipeline stages per rank (interleaved 1F1B)"},
      {"workload.generator.gpus", "int", "0", "world size to check against tp*pp*dp*cp (0 = no check)"},
      {"workload.generator.sequence_parallel", "bool", "true", "Megatron sequence parallelism with TP"},
      {"workload.generator.account_for_embedding_in_pipeline_split", "bool", "false", "Megatron-Core: the embedding counts as one layer in the pipeline split (the first virtual stage builds one transformer layer fewer)"},
      {"workload.generator.pipeline_layout", "string", "", "transformer layers per virtual pipeline stage in model order, comma-separated, N*K for K stages of N (Megatron-Core pipeline_model_parallel_layout, decoder layers only), e.g. \"4*15,1\" for 61 layers over 16 stages; empty = the even split"},
      {"workload.generator.account_for_loss_in_pipeline_split", "bool", "false", "Megatron-Core: the output layer + loss count as one layer in the pipeline split (the last virtual stage builds one transformer layer fewer)"},
      {"workload.generator.tp_comm_overlap", "bool", "false", "TransformerEngine userbuffers TP overlap (needs SP): SP all-gathers as TP-1 ring-exchange send/recv steps (one shard each, to TP rank t+1) under the chunked GEMM, reduce-scatters pipelined in 4 chunks"},
      {"workload.generator.tp_comm_overlap_rs_sms", "uint", "24", "with tp_comm_overlap: SMs the pipelined reduce-scatter takes from the proj/fc2 forward GEMMs (TE set_sm_margin; NeMo presets 8-24); must be below the GPU's SM count, 0 for GPUs without one (H20, GB300); an error when tp_comm_overlap is false"},
      {"workload.generator.micro_batch", "int", "1", "sequences per micro-batch"},
      {"workload.generator.global_batch", "int", "0", "sequences per iteration (0 = micro_batch * dp)"},
      {"workload.generator.seq_len", "int", "2048", "tokens per sequence"},
      {"workload.generator.dtype", "enum", "bf16", "GEMM dtype: bf16, fp16 or fp8"},
      {"workload.generator.zero", "int", "0", "0 DDP, 1 distributed optimizer, 2/3 DeepSpeed ZeRO stages"},
      {"workload.generator.recompute", "enum", "none", "activation recomputation: none, selective or full"},
      {"workload.generator.attention", "enum", "flash", "attention core kernels: flash (the GPU's native fused attention: FlashAttention-3/cuDNN 9 class on Hopper), flash2 (FlashAttention-2 class) or unfused (Megatron-LM 2021-22 bmm + softmax + dropout)"},
      {"workload.generator.overlap_grad_reduce", "bool", "true", "reduce gradient buckets during the last backward"},
      {"workload.generator.bucket_params", "int", "0", "parameters per DP bucket (0 = max(40M, 1M * dp), Megatron)"},
      {"workload.generator.grad_bytes", "int", "2", "bytes per gradient element in DP reductions (2 or 4)"},
      {"workload.generator.iterations", "int", "1", "training iterations to generate"},
      {"workload.generator.mode", "enum", "training", "training (one Megatron-style iteration) or inference (prefill + decode of a batch of requests per replica; docs/generators.md \"Inference\")"},
      {"workload.generator.batch", "int", "", "inference: concurrent requests per replica (TP x PP GPUs; dp replicas)"},
      {"workload.generator.prompt_tokens", "int", "", "inference: prompt (prefill) tokens per request"},
      {"workload.generator.output_tokens", "int", "", "inference: tokens generated per request, the one from prefill included (output_tokens - 1 decode steps)"},
      {"workload.generator.kernel_db", "string", "", "kernel database CSV (default kernels/data/kernels.csv)"},
      {"workload.generator.fallback", "enum", "roofline", "roofline (model kernels the data lacks) or none (error)"},
      {"workload.generator.clock", "enum", "sustained", "clock of the measured kernel tables' compute-bound times: sustained (divided by the GPU's sustained/burst matmul rate, all GPUs of a node power-saturated: Hopper 698.6/823.9, Blackwell 1426.4/1751.2, ml-engineering; A100 1305/1410 MHz) or burst (as measured, one GPU alone)"},
      {"workload.generator.kernels", "enum", "measured", "measured (GEMMs and fused attention from the GPU's measured tables, kernels/data/measured: H100, H200, B200, GB200, A100; the model where they do not reach) or model (database rows and the efficiency/roofline model only)"},
      {"workload.generator.kernel_model", "enum", "shape", "unmeasured GEMM/attention kernels: shape (published achievable throughput with tile/wave quantization, kernels/efficiency_model.hpp) or flat (compute_efficiency x peak)"},
      {"workload.generator.compute_efficiency", "double", "0.7", "analytic roofline: achieved / peak FLOP/s (kernel_model flat, or GPUs without published figures)"},
      {"workload.generator.memory_efficiency", "double", "0.8", "analytic roofline: achieved / peak HBM bandwidth"},
      {"workload.generator.layers", "int", "", "custom model (or override): transformer layers"},
      {"workload.generator.hidden", "int", "", "custom model: hidden size"},
      {"workload.generator.heads", "int", "", "custom model: attention heads"},
      {"workload.generator.kv_heads", "int", "", "custom model: KV heads (default = heads)"},
      {"workload.generator.head_dim", "int", "", "custom model (or override): q/k/v head dim (default hidden / heads; Qwen3 128)"},
      {"workload.generator.qk_norm", "bool", "", "custom model (or override): RMSNorm over each q and k head (Megatron --qk-layernorm; Qwen3)"},
      {"workload.generator.ffn_hidden", "int", "", "custom model: FFN inner size (default 4 * hidden)"},
      {"workload.generator.ffn", "enum", "", "custom model: gelu (GPT block), swiglu (LLaMA block: RMSNorm, rotary embeddings, untied output layer) or squared_relu (Nemotron block: two-matrix MLP with ReLU², LayerNorm)"},
      {"workload.generator.vocab", "int", "", "custom model: (padded) vocabulary"},
      {"workload.generator.experts", "int", "", "custom model: routed experts (0 = dense)"},
      {"workload.generator.top_k", "int", "", "custom model: experts per token"},
      {"workload.generator.expert_ffn_hidden", "int", "", "custom model: expert FFN inner size"},
      {"cluster.hosts", "auto-int", "auto", "number of hosts; auto = enough 8-GPU hosts for the workload's ranks"},
      {"cluster.gpus_per_host", "int", "8", "GPUs per host (one NIC each, all behind one NVSwitch)"},
      {"cluster.topology", "enum", "rail_optimized", "@topology"},
      {"cluster.nics_per_leaf", "auto-int", "auto", "leaf (torus/mesh: switch) NIC ports; auto = min(hosts, 32) for rail_optimized/rail_only, min(NICs, 32) for leaf_spine, NICs/switches for torus/mesh; a leaf has at most 4096 ports (NIC ports + one per spine)"},
      {"cluster.nvlink_domain", "auto-int", "auto", "GPUs per NVLink (scale-up) domain with one NVSwitch each, e.g. 72; a multiple of gpus_per_host (whole hosts) or a divisor of it; auto = gpus_per_host"},
      {"@builders", "", "", ""},
      {"cluster.nic_bandwidth", "rate", "400Gbps", "NIC <-> leaf link rate per direction"},
      {"cluster.nic_profile", "enum", "ideal", "@nic_profile"},
      {"cluster.nic_latency", "time", "500ns", "NIC <-> leaf propagation delay"},
      {"cluster.fabric_bandwidth", "rate", "400Gbps", "leaf <-> spine link rate per direction"},
      {"cluster.fabric_latency", "time", "500ns", "leaf <-> spine propagation delay"},
      {"cluster.nvlink_bandwidth", "rate", "3600Gbps", "GPU <-> NVSwitch rate per direction (H100: 450 GB/s); with workload.generator.gpu, that GPU's rate (A100 2400Gbps, B200 7200Gbps)"},
      {"cluster.nvls_bandwidth", "rate", "auto", "NVLink SHARP: rate of a GPU's multimem (NVLS) traffic to its NVSwitch per direction; auto = NCCL 2.28's NVLS model for simccl.gpu_sm: 306 GB/s (2448Gbps) on sm90, 463 GB/s on sm100 (docs/simccl.md)"},
      {"cluster.gpu", "string", "", "GPU model of every host (A100, H100, H200, H800, H20, B200, GB200, GB300, or a datasheet name): sets cluster.nvlink_bandwidth (half its bidirectional NVLink rate) and simccl.gpu_sm where those are not given"},
      {"cluster.nvlink_efficiency", "string", "auto", "share of cluster.nvlink_bandwidth that carries data, 0 < x <= 1; auto = NCCL's per-link NVLink bandwidth (src/graph/topo.h) over the link rate for simccl.gpu_sm: 0.80 sm80, 0.824 sm90, 0.802 sm100"},
      {"cluster.nvlink_latency", "time", "100ns", "GPU <-> NVSwitch latency"},
      {"cluster.mtu", "bytes", "4KiB", "network packet payload, 256B..16MiB (RoCEv2 path MTUs 256..4096 B, Ethernet jumbo frames ~9 KB; larger values coarse-grain the packet rung)"},
      {"cluster.nvlink_mtu", "bytes", "4KiB", "largest NVLink transfer unit, 256B..16MiB; a message is cut into >= 8 units of >= 4 KiB when this allows (docs/fabric.md)"},
      {"cluster.nvswitch_cut_through", "bool", "false", "NVSwitches forward cut-through, so the NVLink unit adds no per-hop delay (packet rung only; with it a 64KiB nvlink_mtu keeps NVLink timing and cuts events, docs/fabric.md)"},
      {"compute.scale", "double", "1.0", "multiplies every compute duration from the trace"},
      {"faults", "list", "", "faults in simulated time, packet rung only: a list of {time, target, kind: "
                             "link_down (target NODE-NODE, until, detect 100us, converge 1ms) | ber (ber, until) | degrade "
                             "(rate, until) | nic_down (target gpuN) | switch_down (target leafN/spineN/coreN)} "
                             "(docs/jobs_and_faults.md)"},
      {"compute.stragglers", "string", "", "slow GPUs: RANK:FACTOR[,RANK:FACTOR...]; the rank's GPU compute durations are "
                                         "multiplied by FACTOR (> 0; 1.2 = 20% slower)"},
      {"compute.straggler_dist", "enum", "none", "per-GPU compute slowdown drawn for every rank: none or lognormal "
                                                 "(median 1, 99th percentile compute.straggler_p99; seeded by sim.seed)"},
      {"compute.straggler_p99", "double", "1.0", "99th percentile of the lognormal slowdown factor (> 1)"},
      {"compute.throttle", "string", "", "thermal throttling windows: HOSTS:START:UNTIL:FACTOR[,...], HOSTS a host or "
                                        "LO-HI; the hosts' GPUs compute FACTOR (> 1) times slower in [START, UNTIL)"},
      {"cluster.degraded_nics", "string", "", "slow NICs: GPU:RATE[,GPU:RATE...]; the GPU's NIC links run at RATE (below "
                                             "their rate) for the whole run, both directions"},
      {"sim.seed", "int", "1", "seed of every random choice (ECMP hashes)"},
      {"sim.threads", "int", "1", "engine threads per MPI process"},
      {"sim.partition", "string", "topology", "LP placement: topology (hosts whole, each leaf with most of its hosts, spines and cores dealt round-robin), metis (LP graph weighted by link bandwidth) or a partition file"},
      {"sim.save_partition", "string", "", "write the placement used to this file (reuse it with sim.partition: FILE)"},
      {"sim.fidelity", "enum", "packet", "network rung: packet (MTU packets, FIFO switches), flow (max-min fair flows) or analytical (alpha-beta, no sharing)"},
      {"sim.ring_flows", "enum", "step", "ring planner's AllReduce/AllGather/ReduceScatter at the flow and analytical rungs: step (one flow per ring step, "
                         "each after the previous step's receive) or stream (one flow per rank with all steps' bytes; every rank completes at the "
                         "ring-wide step-wise instant, exact uncongested with equal links, approximate under congestion: docs/fidelity.md "
                         "\"Streamed rings\"); the packet rung ignores it"},
      {"sim.fold", "enum", "none", "none, or dp: simulate one image of the fewest data-parallel replicas that fill whole NVLink domains and "
                   "close every communicator (1 replica, or k with TP 4 or EP spanning replicas) of a generated job or SimAI "
                   "file with pp > 1 whose replicas are identical on a non-blocking fabric; its DP collectives still cross the "
                   "whole DP group's paths and the per-rank outputs stand for the whole job (flow and analytical rungs; "
                   "docs/folding.md)"},
      {"jobs", "list", "", "several jobs sharing the cluster, its switches, queues, PFC and ECN: a list of mappings with the "
                           "jobs[].* keys (docs/jobs_and_faults.md); with it, cluster.hosts must be given and there is no "
                           "top-level workload; without it the top-level workload is the one job"},
      {"jobs[].name", "string", "job<i>", "the job's name in the summary, the summary JSON and HDF5 (unique)"},
      {"jobs[].workload.*", "section", "", "the job's workload: every workload.* key (a file, a Chakra trace or the generator)"},
      {"jobs[].nccl.*", "string", "", "the job's NCCL_* settings, over the top-level nccl: section"},
      {"jobs[].start", "time", "0", "when the job's ranks begin, in simulated time"},
      {"jobs[].iterations", "int", "1", "the job's workload DAG run this many times back to back (each iteration after the previous one's last node)"},
      {"jobs[].placement", "enum", "packed", "which hosts the job gets: hosts (jobs[].hosts), packed (lowest free hosts), spread "
                                             "(round-robin over leaves), random (seeded by jobs[].seed), leaf (whole free leaves first), "
                                             "pod (whole free pods, then leaves, first); jobs are placed in list order"},
      {"jobs[].hosts", "string", "", "placement hosts: host indices, e.g. \"0-7,16\" or a YAML list; the job's ranks fill them in order, "
                                     "gpus_per_host GPUs each"},
      {"jobs[].seed", "int", "sim.seed + i", "seed of placement random"},
      {"output.h5", "string", "fabricsim_results.h5", "HDF5 results file (relative to the working directory)"},
      {"output.flows", "bool", "true", "write one /flows row per flow into the HDF5 file (false: an empty /flows table and no per-flow memory; the digest is unchanged)"},
      {"output.summary_json", "string", "", "summary JSON file (none if empty)"},
      {"output.sample_interval", "time", "10us", "bin width of the HDF5 link and queue time series (/links, /queues)"},
      {"output.trace", "string", "", "Perfetto / Chrome trace-event JSON file (none if empty)"},
      {"output.trace_ranks", "string", "0-15", "ranks traced: A-B, A, or all (keeps 1,024-rank traces small)"},
      {"nccl.*", "string", "", "any NCCL_* setting as NCCL reads it from the environment (e.g. nccl.NCCL_ALGO: Ring); "
                               "wins over the environment; an unknown name or one fabricsim does not model is an error (simccl/nccl_settings.cpp)"},
      {"simccl.planner", "enum", "nccl", "nccl (NCCL 2.28 cost model, channels, protocols) or ring (one ring, no channels)"},
      {"simccl.gpu_sm", "int", "90", "GPU compute capability x10 for the NCCL cost model (70 V100, 80 A100, 90 H100, 100 B200)"},
      {"simccl.schedule", "string", "", "custom schedules replayed as given: TE-CCL JSON / MSCCL-IR XML files, comma-separated, "
                                        "relative to the spec file; each plans the collectives of its op and rank count (docs/simccl.md)"},
      {"simccl.lazy_plans", "bool", "true", "NCCL ring AllReduce/AllGather/ReduceScatter, Tree AllReduce and NVLS/NVLSTree plans produced step by step as "
                                             "each rank reaches them (O(channels) memory per rank); false materializes every op up front "
                                             "(same results)"},
      {"simccl.launch_latency", "enum", "nccl", "nccl or none: each tuned collective (NCCL planner) starts after NCCL's launch "
                                                "latency: the base latency of its algorithm/protocol when step_latency charges its "
                                                "hops (Ring, Tree), else the cost model's whole latency (NVLS, NVLSTree); AllToAll "
                                                "and sends after one step of the Ring model (base + one hop); NCCL 2.28.9 "
                                                "src/graph/tuning.cc"},
      {"simccl.step_latency", "enum", "nccl", "nccl or none: NCCL's per-hop latency of the chosen protocol and its link class "
                                              "(NVLink, or NET across hosts; NCCL 2.28.9 src/graph/tuning.cc hwLatencies) on every "
                                              "step: a Ring plan's receive completes that long after its data arrived (a "
                                              "channel's sends go back to back), a Tree plan's send waits it after its "
                                              "dependencies"},
      {"simccl.proxy", "enum", "nccl", "nccl or none: every message leaving or entering a GPU's NVLink domain passes that "
                                       "GPU's one proxy thread, first come first served, for NCCL's network overhead per "
                                       "operation (NCCL_NET_OVERHEAD, else 1 us Intel / 2 us AMD CPU; src/graph/tuning.cc "
                                       "getNetOverhead, src/proxy.cc)"},
      {"simccl.topo_fallback", "bool", "false", "when NCCL_TOPO_FILE cannot be read, plan on NCCL's fallback (flat PCIe, no NVLink) "
                                               "instead of failing"},
  };
  const auto& fabric = fabric_spec_keys();
  k.insert(k.end(), fabric.begin(), fabric.end());
  return with_topology_keys(k);
  }();
  return keys;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {

const SpecKey* find_key(const std::string& path) {
  for (const auto& k : spec_keys()) {
    if (path == k.path) return &k;
    // "section.*" entries accept any single-level name under the section.
    const std::string kp = k.path;
    if (kp.size() > 2 && kp.compare(kp.size() - 2, 2, ".*") == 0 && path.size() > kp.size() - 1 &&
        path.compare(0, kp.size() - 1, kp, 0, kp.size() - 1) == 0 &&
        path.find('.', kp.size() - 1) == std::string::npos) {
      return &k;
    }
  }
  return nullptr;
}

std::string closest_key(const std::string& path) {
  // The distance is quadratic in the length: compare only the first 128 characters (twice the
  // longest key), so a megabyte-long --set key costs no more than a typo.
  const std::string probe = path.substr(0, 128);
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const auto& k : spec_keys()) {
    const std::size_t d = edit_distance(probe, k.path);
    if (d < best_d) {
      best_d = d;
      best = k.path;
    }
  }
  return best;
}

[[noreturn]] void unknown_key(const std::string& file, const std::string& path) {
  throw InputError(file, path, "unknown key",
                   "did you mean '" + closest_key(path) + "'? (fabricsim describe spec lists all keys)");
}

void check_keys(const YAML::Node& node, const std::string& prefix, const std::string& file);
void check_job_list(const YAML::Node& list, const std::string& file);

void check_keys(const YAML::Node& node, const std::string& prefix, const std::string& file) {
  if (!node.IsMap()) {
    if (prefix.empty() && node.IsNull()) return;
    if (prefix.empty()) throw InputError(file, "<top>", "the spec must be a YAML mapping", "see examples/quickstart.yaml");
    if (!find_key(prefix)) unknown_key(file, prefix);
    if (!node.IsScalar()) {
      throw InputError(file, prefix, "must be a single value", "write it as 'key: value'");
    }
    return;
  }
  std::set<std::string> seen;
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    if (!seen.insert(key).second) {
      throw InputError(file, path, "appears twice (line " + std::to_string(kv.first.Mark().line + 1) + ")",
                       "keep only one of them");
    }
    if (prefix.empty() && key == "jobs") {
      check_job_list(kv.second, file);
      continue;
    }
    if (path == "faults") continue;  // a list, checked entry by entry by parse_faults
    bool section = false;
    for (const auto& k : spec_keys()) {
      if (std::string(k.path).rfind(path + ".", 0) == 0) section = true;
    }
    if (kv.second.IsMap()) {
      if (!section && find_key(path)) {
        throw InputError(file, path, "must be a single value, not a mapping", "write it as 'key: value'");
      }
      if (!section) unknown_key(file, path);
      check_keys(kv.second, path, file);
    } else {
      if (section && !find_key(path)) {
        throw InputError(file, path, "is a section, not a value",
                         "put its keys on the following lines, indented (e.g. '" + path + ":' then '  <key>: <value>')");
      }
      if (!find_key(path)) unknown_key(file, path);
      if (!kv.second.IsScalar() && !kv.second.IsNull()) {
        throw InputError(file, path, "must be a single value", "write it as 'key: value'");
      }
      // 'key:' or 'key: ~' would otherwise silently mean the default (--set key= is an error too);
      // an empty NCCL variable stays allowed (NCCL reads an empty variable as unset).
      if (kv.second.IsNull() && path.rfind("nccl.", 0) != 0) {
        throw InputError(file, path, "has no value",
                         "give a value, or delete the line to use the default (fabricsim describe spec)");
      }
    }
  }
}

/// The keys a `jobs:` entry may hold (besides its workload: and nccl: sections).
constexpr const char* kJobScalarKeys[] = {"name", "start", "iterations", "placement", "hosts", "seed"};

/// `jobs:` must be a non-empty list of mappings with the jobs[].* keys; their workload: and
/// nccl: sections are checked as the top-level ones.
void check_job_list(const YAML::Node& list, const std::string& file) {
  if (!list.IsSequence() || list.size() == 0) {
    throw InputError(file, "jobs", "must be a non-empty list of jobs",
                     "write 'jobs:' then one '- name: ...' entry per job (docs/jobs_and_faults.md)");
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string key = "jobs[" + std::to_string(i) + "]";
    const YAML::Node job = list[i];
    if (!job.IsMap()) {
      throw InputError(file, key, "must be a mapping", "give the job's keys (name, workload, placement, ...) under '- '");
    }
    std::set<std::string> seen;
    for (const auto& kv : job) {
      const std::string k = kv.first.as<std::string>();
      if (!seen.insert(k).second) throw InputError(file, key + "." + k, "appears twice", "keep only one of them");
      if (k == "workload" || k == "nccl") {
        if (!kv.second.IsMap()) {
          throw InputError(file, key + "." + k, "must be a section", "put its keys on the following lines, indented");
        }
        YAML::Node wrap(YAML::NodeType::Map);
        wrap[k] = kv.second;
        try {
          check_keys(wrap, "", file);
        } catch (const InputError& e) {
          std::string m = e.what();
          const auto at = m.find(": " + e.field() + ":");
          if (at != std::string::npos) m.insert(at + 2, key + ".");
          throw InputError(InputError::Whole{}, m);
        }
        continue;
      }
      if (std::find(std::begin(kJobScalarKeys), std::end(kJobScalarKeys), k) == std::end(kJobScalarKeys)) {
        throw InputError(file, key + "." + k, "unknown key",
                         "a job takes name, workload, nccl, start, iterations, placement, hosts and seed");
      }
      if (k == "hosts" && kv.second.IsSequence()) continue;
      if (!kv.second.IsScalar()) throw InputError(file, key + "." + k, "must be a single value", "write it as 'key: value'");
    }
  }
}

std::optional<std::string> get(const YAML::Node& root, const std::string& path) {
  YAML::Node cur = YAML::Clone(root);
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '.')) {
    if (!cur.IsMap() || !cur[part]) return std::nullopt;
    cur = cur[part];
  }
  if (cur.IsNull()) return std::nullopt;
  return cur.as<std::string>();
}

/// A whole number in [min_value, max_value] (default: what a 32-bit field holds, so a value
/// beyond it is an error instead of wrapping modulo 2^32).
std::uint64_t parse_uint(const std::string& text, const std::string& file, const std::string& key,
                         std::uint64_t min_value, std::uint64_t max_value = 0xFFFFFFFFull) {
  std::size_t pos = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &pos);
  } catch (const std::out_of_range&) {
    throw InputError(file, key, "'" + text + "' is out of range", "give a value <= " + std::to_string(max_value));
  } catch (...) {
    pos = 0;
  }
  if (pos != text.size() || text.empty()) {
    throw InputError(file, key, "'" + text + "' is not an integer", "give a whole number");
  }
  if (v < static_cast<long long>(min_value)) {
    throw InputError(file, key, "'" + text + "' must be >= " + std::to_string(min_value),
                     "give a value >= " + std::to_string(min_value));
  }
  if (static_cast<std::uint64_t>(v) > max_value) {
    throw InputError(file, key, "'" + text + "' is above " + std::to_string(max_value),
                     "give a value <= " + std::to_string(max_value));
  }
  return static_cast<std::uint64_t>(v);
}

}  // namespace

std::string Spec::file_of(const std::string& key) const {
  return std::find(cli_keys.begin(), cli_keys.end(), key) != cli_keys.end() ? std::string("<cli>") : file;
}

std::string Spec::file_of_any(std::initializer_list<const char*> keys) const {
  for (const char* k : keys) {
    if (file_of(k) == "<cli>") return "<cli>";
  }
  return file;
}

void check_set_keys(const std::vector<std::string>& sets) {
  for (const std::string& kv : sets) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw InputError("<cli>", "--set " + kv, "expected key=value", "write e.g. --set cluster.hosts=4");
    }
    if (!find_key(kv.substr(0, eq))) unknown_key("<cli>", kv.substr(0, eq));
  }
}

std::string spec_text_with_env_nccl(const std::string& text,
                                    const std::vector<std::pair<std::string, std::string>>& entries) {
  if (entries.empty()) return text;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError("<spec>", "spec_text", "not YAML: " + e.msg, "report this as a bug");
  }
  if (!root || !root.IsMap()) root = YAML::Node(YAML::NodeType::Map);
  if (!root["nccl"] || !root["nccl"].IsMap()) root["nccl"] = YAML::Node(YAML::NodeType::Map);
  std::string names;
  for (const auto& [name, value] : entries) {
    root["nccl"][name] = value;
    names += (names.empty() ? "" : ", ") + name;
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n# nccl: " + names + " taken from the environment (<env>)\n";
}

namespace {

/// The spec as YAML after --set, and how its keys are read: where each came from, and the
/// directory spec-relative paths resolve against.
struct SpecReader {
  YAML::Node root;
  fs::path base = fs::current_path();
  const Spec* spec = nullptr;

  std::string file_of(const std::string& key) const { return spec->file_of(key); }
  std::optional<std::string> str(const std::string& key) const { return get(root, key); }
  /// A path value: relative to the spec file, or as given when it came from --set.
  std::string resolve(const std::string& p, const std::string& key) const {
    if (p.empty()) return p;
    if (file_of(key) == "<cli>") return p;  // --set paths are relative to the working directory
    return fs::path(p).is_absolute() ? p : (base / p).lexically_normal().string();
  }
};

/// Step 1: reads the YAML file (if any), checks its keys, applies --set, and records the
/// effective text and the keys set on the command line.
/// `text` (not null): the file's content, already read.
SpecReader read_spec_yaml(const std::string& path, const std::vector<std::string>& sets, Spec& s,
                          const std::string* text) {
  SpecReader r;
  r.spec = &s;
  if (!path.empty()) {
    s.file = path;
    std::ifstream in;
    if (text == nullptr) {
      in.open(path);
      if (!in) throw InputError(path, "<file>", "cannot open the spec", "check the path");
    }
    try {
      r.root = text != nullptr ? YAML::Load(*text) : YAML::Load(in);
    } catch (const YAML::Exception& e) {
      throw InputError(path, "line " + std::to_string(e.mark.line + 1), "YAML syntax error: " + e.msg,
                       "fix the YAML syntax");
    }
    r.base = fs::absolute(path).parent_path();
  }
  if (!r.root || r.root.IsNull()) r.root = YAML::Node(YAML::NodeType::Map);
  check_keys(r.root, "", s.file);
  std::vector<std::string> set_keys;
  check_set_keys(sets);
  for (const std::string& kv : sets) {
    const auto eq = kv.find('=');
    const std::string key = kv.substr(0, eq);
    const std::string value = kv.substr(eq + 1);
    std::stringstream ss(key);
    std::string part;
    std::vector<std::string> parts;
    while (std::getline(ss, part, '.')) parts.push_back(part);
    YAML::Node cur = r.root;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
      if (!cur[parts[i]] || !cur[parts[i]].IsMap()) cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
      cur.reset(cur[parts[i]]);
    }
    if (key == "faults") {
      // --set faults=[{time: 1us, ...}]: the list in YAML flow style.
      try {
        cur[parts.back()] = YAML::Load(value);
      } catch (const YAML::Exception& e) {
        throw InputError("<cli>", "faults", "is not a YAML list: " + e.msg, "e.g. faults=[{time: 100us, target: leaf0-spine1, kind: link_down}]");
      }
    } else {
      cur[parts.back()] = value;
    }
    set_keys.push_back(key);
  }
  {
    YAML::Emitter out;
    out << r.root;
    s.text = out.c_str();
  }
  s.cli_keys = set_keys;
  return r;
}

/// Step 2: workload.* (the generator keys are kept as text for jobs/generators).
void load_workload_keys(const SpecReader& r, Spec& s) {
  if (auto v = r.str("workload.path")) s.workload_path = r.resolve(*v, "workload.path");
  if (auto v = r.str("workload.format")) {
    if (*v != "auto" && *v != "chakra" && *v != "simai") {
      throw InputError(r.file_of("workload.format"), "workload.format", "'" + *v + "' is not a format",
                       "use auto, chakra or simai");
    }
    s.workload_format = *v;
  }
  if (auto v = r.str("workload.gpus")) {
    s.workload_gpus = static_cast<std::uint32_t>(parse_uint(*v, r.file_of("workload.gpus"), "workload.gpus", 1));
  }
  if (auto v = r.str("workload.comm_groups")) s.comm_groups = r.resolve(*v, "workload.comm_groups");
  if (auto v = r.str("workload.chakra.missing_deps")) {
    s.chakra.missing_ctrl_deps =
        io::parse_missing_deps(*v, r.file_of("workload.chakra.missing_deps"), "workload.chakra.missing_deps");
  }
  if (auto v = r.str("workload.chakra.cpu_ops")) {
    s.chakra.cpu_ops = io::parse_cpu_ops(*v, r.file_of("workload.chakra.cpu_ops"), "workload.chakra.cpu_ops");
  }
  if (auto v = r.str("workload.chakra.ctrl_deps")) {
    s.chakra.ctrl_deps = engine::parse_bool(*v, r.file_of("workload.chakra.ctrl_deps"), "workload.chakra.ctrl_deps");
  }
  for (const auto& k : spec_keys()) {  // generator keys are parsed by jobs/generators
    const std::string key = k.path;
    if (key.rfind("workload.generator.", 0) != 0) continue;
    if (auto v = r.str(key)) {
      s.generator[key.substr(19)] = key == "workload.generator.kernel_db" ? r.resolve(*v, key) : *v;
      s.generator_file[key.substr(19)] = r.file_of(key);
    }
  }
}

/// cluster.oversubscription: "down:up[,down:up]" -> leaf (and spine) ratios.
void load_oversubscription(const SpecReader& r, models::ClusterSpec& c) {
  const std::string key = "cluster.oversubscription";
  const auto v = r.str(key);
  if (!v) return;
  std::vector<double> ratios;
  std::stringstream ss(*v);
  std::string part;
  while (std::getline(ss, part, ',')) {
    const auto colon = part.find(':');
    char* end = nullptr;
    const std::string num = part.substr(0, colon);
    const double down = std::strtod(num.c_str(), &end);
    bool ok = !num.empty() && *end == '\0' && down > 0 && down < 1e6;
    double up = 1;
    if (ok && colon != std::string::npos) {
      const std::string den = part.substr(colon + 1);
      up = std::strtod(den.c_str(), &end);
      ok = !den.empty() && *end == '\0' && up > 0 && up < 1e6;
    }
    if (!ok) {
      throw InputError(r.file_of(key), key, "'" + *v + "' is not a list of ratios",
                       "write down:up per tier, leaf first, e.g. \"3:1\" or \"1:1,4:1\"");
    }
    ratios.push_back(down / up);
  }
  if (ratios.empty() || ratios.size() > 2) {
    throw InputError(r.file_of(key), key, "'" + *v + "' needs 1 or 2 ratios", "e.g. \"3:1\" or \"1:1,4:1\"");
  }
  c.oversub_leaf = ratios[0];
  if (ratios.size() > 1) c.oversub_spine = ratios[1];
  if (ratios.size() > 1 && c.tiers != 3) {
    throw InputError(r.file_of(key), key, "gives a spine ratio but cluster.tiers is 2", "set cluster.tiers: 3 or give one ratio");
  }
}

/// Step 3a: cluster sizes (hosts, GPUs, NIC ports per leaf, spines).
void load_cluster_sizes(const SpecReader& r, Spec& s) {
  models::ClusterSpec& c = s.cluster;
  auto auto_int = [&](const std::string& key, std::uint32_t& field, bool& is_auto) {
    if (auto v = r.str(key)) {
      if (*v == "auto") return;
      field = static_cast<std::uint32_t>(parse_uint(*v, r.file_of(key), key, 1));
      is_auto = false;
    }
  };
  auto_int("cluster.hosts", c.hosts, s.hosts_auto);
  auto_int("cluster.nics_per_leaf", c.nics_per_leaf, s.nics_per_leaf_auto);
  if (auto v = r.str("cluster.spines"); v && *v != "auto") {
    c.spines = static_cast<std::uint32_t>(parse_uint(*v, r.file_of("cluster.spines"), "cluster.spines", 0));
    s.spines_auto = false;
  }
  if (auto v = r.str("cluster.gpus_per_host")) {
    c.gpus_per_host = static_cast<std::uint32_t>(
        parse_uint(*v, r.file_of("cluster.gpus_per_host"), "cluster.gpus_per_host", 1));
    if (c.gpus_per_host > 1024) {
      throw InputError(r.file_of("cluster.gpus_per_host"), "cluster.gpus_per_host", "'" + *v + "' is more than 1024",
                       "give the GPUs of one host (scale-up domain), e.g. 8");
    }
  }
  if (!s.hosts_auto && static_cast<std::uint64_t>(c.hosts) * c.gpus_per_host > (1u << 20)) {
    throw InputError(r.file_of("cluster.hosts"), "cluster.hosts", "hosts x gpus_per_host is more than 1,048,576 GPUs",
                     "the packet level is built for up to ~1M GPUs per run; use fewer hosts");
  }
}

/// Step 3b: the topology kind and its keys; the registered builder's own keys (cluster.<kind>.*)
/// are kept as text for the builder, after a check of their declared type, and the kind's
/// load-time check runs last.
void load_topology_keys(const SpecReader& r, Spec& s) {
  models::ClusterSpec& c = s.cluster;
  if (auto v = r.str("cluster.topology")) {
    const models::TopologyBuilder* b = models::find_topology(*v);
    if (!b) {
      throw InputError(r.file_of("cluster.topology"), "cluster.topology", "'" + *v + "' is not a topology",
                       "use " + models::topology_names());
    }
    c.fabric = b->kind;
  }
  if (auto v = r.str("cluster.topology_file")) {
    if (v->empty()) {
      throw InputError(r.file_of("cluster.topology_file"), "cluster.topology_file", "is empty", "give a topology file path");
    }
    if (r.str("cluster.topology") && c.fabric != models::FabricKind::kFile) {
      throw InputError(r.file_of("cluster.topology_file"), "cluster.topology_file",
                       std::string("is set but cluster.topology is ") + models::fabric_kind_name(c.fabric),
                       "drop cluster.topology or set it to file");
    }
    c.topology_file = r.resolve(*v, "cluster.topology_file");
    c.fabric = models::FabricKind::kFile;
  }
  if (auto v = r.str("cluster.tiers")) c.tiers = static_cast<std::uint32_t>(parse_uint(*v, r.file_of("cluster.tiers"), "cluster.tiers", 2));
  if (c.tiers > 3) throw InputError(r.file_of("cluster.tiers"), "cluster.tiers", "must be 2 or 3", "use 2 or 3");
  if (auto v = r.str("cluster.pods")) c.pods = static_cast<std::uint32_t>(parse_uint(*v, r.file_of("cluster.pods"), "cluster.pods", 1));
  load_oversubscription(r, c);
  if (auto v = r.str("cluster.dual_plane")) {
    c.dual_plane = engine::parse_bool(*v, r.file_of("cluster.dual_plane"), "cluster.dual_plane");
  }
  if (auto v = r.str("cluster.nvswitch_cut_through")) {
    c.nvswitch_cut_through = engine::parse_bool(*v, r.file_of("cluster.nvswitch_cut_through"), "cluster.nvswitch_cut_through");
  }
  if (auto v = r.str("cluster.nvlink_domain"); v && *v != "auto") {
    c.nvlink_domain = static_cast<std::uint32_t>(parse_uint(*v, r.file_of("cluster.nvlink_domain"), "cluster.nvlink_domain", 1));
    if (c.nvlink_domain > 1024) {
      throw InputError(r.file_of("cluster.nvlink_domain"), "cluster.nvlink_domain", "'" + *v + "' is more than 1024",
                       "give the GPUs of one NVLink domain, e.g. 72");
    }
  }
  if (auto v = r.str("cluster.dims")) {
    const std::string key = "cluster.dims";
    std::stringstream ss(*v);
    std::string part;
    while (std::getline(ss, part, 'x')) c.dims.push_back(static_cast<std::uint32_t>(parse_uint(part, r.file_of(key), key, 1)));
    if (c.dims.empty() || c.dims.size() > 3) {
      throw InputError(r.file_of(key), key, "'" + *v + "' needs 1 to 3 sizes", "write e.g. \"4x4\" or \"4x4x2\"");
    }
  }
  for (const models::TopologyBuilder* b : models::topology_builders()) {
    const std::string prefix = std::string("cluster.") + b->name + ".";
    for (const models::ParamDecl& d : b->params) {
      const std::string key = d.path;
      const auto v = key.rfind(prefix, 0) == 0 ? r.str(key) : std::nullopt;
      if (!v) continue;
      const std::string type = d.type;
      if (type == "auto-int" && *v != "auto") parse_uint(*v, r.file_of(key), key, 1);
      if (type == "int" || type == "uint") parse_uint(*v, r.file_of(key), key, 0);
      if (type == "bool") engine::parse_bool(*v, r.file_of(key), key);
      c.topology_params[key] = *v;
    }
  }
  if (const auto& b = models::topology_builder(c.fabric); b.check) b.check(c, r.file_of("cluster.topology"));
  if (c.oversub_leaf > 0 && r.str("cluster.spines") && *r.str("cluster.spines") != "auto") {
    throw InputError(r.file_of("cluster.oversubscription"), "cluster.oversubscription",
                     "and cluster.spines both set the spine count", "give only one of them");
  }
}

/// Step 3c: link rates, latencies and MTUs (the same for every topology kind).
void load_link_keys(const SpecReader& r, Spec& s) {
  models::ClusterSpec& c = s.cluster;
  // Physical ranges: a link between 1 Mb/s and 100 Tb/s, a latency of at most 1 s. Outside them
  // the run would only overflow simulated time or stall, so they are input errors.
  auto rate = [&](const std::string& key, std::uint64_t& field) {
    if (auto v = r.str(key)) {
      field = engine::parse_rate_bps(*v, r.file_of(key), key);
      if (field < 1'000'000 || field > 100'000'000'000'000ull) {
        throw InputError(r.file_of(key), key, "'" + *v + "' is outside 1 Mbps .. 100 Tbps", "give a rate like \"400Gbps\"");
      }
    }
  };
  auto time = [&](const std::string& key, engine::SimTime& field) {
    if (auto v = r.str(key)) {
      field = engine::parse_time_ps(*v, r.file_of(key), key);
      if (field < 1) {
        throw InputError(r.file_of(key), key, "latency must be > 0 (it is the simulator's lookahead)",
                         "give at least 1ps, e.g. \"500ns\"");
      }
      if (field > engine::kPsPerS) {
        throw InputError(r.file_of(key), key, "'" + *v + "' is longer than 1 s", "give a link latency like \"500ns\"");
      }
    }
  };
  // MTUs: 256 B (smallest RoCEv2/IB path MTU) .. 16 MiB (coarse-grained packets); see
  // models::ClusterSpec::kMinMtuBytes / kMaxMtuBytes for the sources.
  auto mtu = [&](const std::string& key, std::uint32_t& field) {
    if (auto v = r.str(key)) {
      const std::uint64_t b = engine::parse_bytes(*v, r.file_of(key), key);
      if (b < models::ClusterSpec::kMinMtuBytes || b > models::ClusterSpec::kMaxMtuBytes) {
        throw InputError(r.file_of(key), key,
                         "'" + *v + "' is outside 256 B .. 16 MiB (RoCEv2 path MTUs are 256..4096 B, Ethernet "
                         "jumbo frames about 9 KB; larger units only coarse-grain the packet rung)",
                         "use e.g. 4KiB, or sim.fidelity: flow for coarser runs");
      }
      field = static_cast<std::uint32_t>(b);
    }
  };
  // cluster.nic_profile: its line rate, unless cluster.nic_bandwidth is given (read next).
  if (auto v = r.str("cluster.nic_profile")) {
    c.nic_bps = models::find_nic_profile(*v, r.file_of("cluster.nic_profile"), "cluster.nic_profile").line_bps;
  }
  rate("cluster.nic_bandwidth", c.nic_bps);
  time("cluster.nic_latency", c.nic_latency_ps);
  rate("cluster.fabric_bandwidth", c.fabric_bps);
  time("cluster.fabric_latency", c.fabric_latency_ps);
  rate("cluster.core_bandwidth", c.core_bps);
  time("cluster.core_latency", c.core_latency_ps);
  rate("cluster.nvlink_bandwidth", c.nvlink_bps);
  // Without cluster.nvlink_bandwidth, a generated job's GPUs get their own NVLink rate (half the
  // bidirectional scale-up figure of kernels/gpu_specs, e.g. A100 600 GB/s -> 2400 Gb/s per
  // direction) instead of the H100 default.
  if (!r.str("cluster.nvlink_bandwidth")) {
    if (const auto g = s.generator.find("gpu"); g != s.generator.end()) {
      const kernels::GpuSpec& gpu = kernels::find_gpu(g->second, s.generator_file["gpu"], "workload.generator.gpu");
      if (gpu.scaleup_gbps_bidir > 0) c.nvlink_bps = static_cast<std::uint64_t>(std::llround(gpu.scaleup_gbps_bidir / 2 * 8e9));
    }
  }
  if (auto v = r.str("cluster.nvls_bandwidth"); !v || *v != "auto") rate("cluster.nvls_bandwidth", c.nvls_bps);
  time("cluster.nvlink_latency", c.nvlink_latency_ps);
  mtu("cluster.mtu", c.mtu_bytes);
  mtu("cluster.nvlink_mtu", c.nvlink_mtu_bytes);
}

/// compute.stragglers, compute.straggler_dist and compute.straggler_p99 (docs/config.md).
void load_straggler_keys(const SpecReader& r, Spec& s) {
  if (auto v = r.str("compute.stragglers")) {
    const std::string file = r.file_of("compute.stragglers");
    const std::string fix = "write RANK:FACTOR pairs separated by commas, e.g. 3:1.2,17:1.5";
    std::set<std::uint32_t> seen;
    std::size_t pos = 0;
    while (!v->empty() && pos <= v->size()) {
      const std::size_t comma = std::min(v->find(',', pos), v->size());
      const std::string item = v->substr(pos, comma - pos);
      const std::size_t colon = item.find(':');
      if (colon == std::string::npos) {
        throw InputError(file, "compute.stragglers", "'" + engine::printable(item) + "' is not RANK:FACTOR", fix);
      }
      const auto rank = static_cast<std::uint32_t>(
          parse_uint(item.substr(0, colon), file, "compute.stragglers", 0, (1u << 24) - 1));
      char* end = nullptr;
      const std::string f = item.substr(colon + 1);
      const double factor = std::strtod(f.c_str(), &end);
      if (f.empty() || *end != '\0' || !(factor > 0) || factor > 1e6) {
        throw InputError(file, "compute.stragglers",
                         "factor '" + engine::printable(f) + "' of rank " + std::to_string(rank) +
                             " must be a number in (0, 1e6]",
                         "e.g. " + std::to_string(rank) + ":1.2 for a GPU 20% slower");
      }
      if (!seen.insert(rank).second) {
        throw InputError(file, "compute.stragglers", "rank " + std::to_string(rank) + " is listed twice",
                         "give each rank one factor");
      }
      s.stragglers.emplace_back(rank, factor);
      pos = comma + 1;
    }
  }
  if (auto v = r.str("compute.straggler_dist")) {
    if (*v != "none" && *v != "lognormal") {
      throw InputError(r.file_of("compute.straggler_dist"), "compute.straggler_dist",
                       "unknown distribution '" + engine::printable(*v) + "'", "use none or lognormal");
    }
    s.straggler_dist = *v;
  }
  if (auto v = r.str("compute.straggler_p99")) {
    char* end = nullptr;
    s.straggler_p99 = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(s.straggler_p99 > 0) || s.straggler_p99 > 1e3) {
      throw InputError(r.file_of("compute.straggler_p99"), "compute.straggler_p99",
                       "'" + engine::printable(*v) + "' must be a number in (0, 1000]", "e.g. 1.2");
    }
  }
  if (auto v = r.str("compute.throttle")) {
    const std::string file = r.file_of("compute.throttle");
    const std::string key = "compute.throttle";
    const std::string fix = "write HOSTS:START:UNTIL:FACTOR entries separated by commas, e.g. 3:2ms:6ms:1.5,0-1:0s:10ms:1.2";
    std::size_t pos = 0;
    while (!v->empty() && pos <= v->size()) {
      const std::size_t comma = std::min(v->find(',', pos), v->size());
      const std::string item = v->substr(pos, comma - pos);
      std::vector<std::string> f;
      for (std::size_t a = 0;;) {
        const std::size_t b = item.find(':', a);
        f.push_back(item.substr(a, b == std::string::npos ? std::string::npos : b - a));
        if (b == std::string::npos) break;
        a = b + 1;
      }
      if (f.size() != 4) throw InputError(file, key, "'" + engine::printable(item) + "' is not HOSTS:START:UNTIL:FACTOR", fix);
      Spec::Throttle t;
      const std::size_t dash = f[0].find('-');
      t.host_lo = static_cast<std::uint32_t>(parse_uint(f[0].substr(0, dash), file, key, 0, (1u << 24) - 1));
      t.host_hi = dash == std::string::npos ? t.host_lo
                                            : static_cast<std::uint32_t>(parse_uint(f[0].substr(dash + 1), file, key, 0, (1u << 24) - 1));
      if (t.host_hi < t.host_lo) throw InputError(file, key, "host range '" + engine::printable(f[0]) + "' is empty", "write LO-HI with LO <= HI");
      if (!f[1].empty() && f[1][0] == '-') throw InputError(file, key, "start '" + engine::printable(f[1]) + "' is negative", "give a time >= 0, e.g. 2ms");
      t.at_ps = engine::parse_time_ps(f[1], file, key);
      t.until_ps = engine::parse_time_ps(f[2], file, key);
      if (t.at_ps < 0 || t.until_ps <= t.at_ps || t.until_ps >= engine::kMaxSimTime) {
        throw InputError(file, key, "window '" + engine::printable(f[1]) + ":" + engine::printable(f[2]) + "' is not START < UNTIL within the simulated horizon",
                         "give START before UNTIL, e.g. 2ms:6ms");
      }
      char* end = nullptr;
      t.factor = std::strtod(f[3].c_str(), &end);
      if (f[3].empty() || *end != '\0' || !(t.factor > 1) || t.factor > 1e6) {
        throw InputError(file, key, "factor '" + engine::printable(f[3]) + "' must be a number in (1, 1e6]",
                         "e.g. 1.5 for compute 50% slower (a factor <= 1 is no throttling)");
      }
      for (const Spec::Throttle& o : s.throttles) {
        if (o.host_lo <= t.host_hi && t.host_lo <= o.host_hi && o.at_ps < t.until_ps && t.at_ps < o.until_ps) {
          throw InputError(file, key, "'" + engine::printable(item) + "' overlaps an earlier window on the same hosts",
                           "merge the two windows or give them disjoint times");
        }
      }
      s.throttles.push_back(t);
      pos = comma + 1;
    }
  }
  if (auto v = r.str("cluster.degraded_nics")) {
    const std::string file = r.file_of("cluster.degraded_nics");
    const std::string key = "cluster.degraded_nics";
    std::set<std::uint32_t> seen;
    std::size_t pos = 0;
    while (!v->empty() && pos <= v->size()) {
      const std::size_t comma = std::min(v->find(',', pos), v->size());
      const std::string item = v->substr(pos, comma - pos);
      const std::size_t colon = item.find(':');
      if (colon == std::string::npos) {
        throw InputError(file, key, "'" + engine::printable(item) + "' is not GPU:RATE", "write GPU:RATE pairs separated by commas, e.g. 3:200Gbps");
      }
      const auto gpu = static_cast<std::uint32_t>(parse_uint(item.substr(0, colon), file, key, 0, (1u << 24) - 1));
      const std::uint64_t rate = engine::parse_rate_bps(item.substr(colon + 1), file, key);
      if (!seen.insert(gpu).second) throw InputError(file, key, "GPU " + std::to_string(gpu) + " is listed twice", "give each GPU one rate");
      s.cluster.degraded_nics.emplace_back(gpu, rate);
      pos = comma + 1;
    }
    s.cluster.degraded_nics_file = file;
  }
  if (s.straggler_dist == "lognormal" && !(s.straggler_p99 > 1)) {
    throw InputError(r.file_of("compute.straggler_dist"), "compute.straggler_p99",
                     "must be above 1 with compute.straggler_dist: lognormal (the median factor is 1)",
                     "set compute.straggler_p99, e.g. 1.2");
  }
}

/// Step 4: compute.scale, the switch:/nic:/cc: sections (jobs/fabric_spec.hpp) and sim.*.
void load_sim_keys(const SpecReader& r, Spec& s) {
  if (auto v = r.str("compute.scale")) {
    char* end = nullptr;
    s.compute_scale = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !(s.compute_scale > 0) || s.compute_scale > 1e6) {
      throw InputError(r.file_of("compute.scale"), "compute.scale", "'" + *v + "' must be a number in (0, 1e6]",
                       "e.g. 1.0");
    }
  }
  load_straggler_keys(r, s);
  s.fabric.source = s.file;
  auto str = [&](const std::string& key) { return r.str(key); };
  auto file_of = [&](const std::string& key) { return r.file_of(key); };
  parse_fabric_keys(str, file_of, s.fabric);
  if (auto v = r.str("sim.seed")) s.seed = parse_uint(*v, r.file_of("sim.seed"), "sim.seed", 0, ~0ull);
  s.cluster.seed = s.seed;
  s.cluster.source = s.file;
  if (auto v = r.str("sim.threads")) {
    s.threads = static_cast<std::uint32_t>(parse_uint(*v, r.file_of("sim.threads"), "sim.threads", 1));
    if (s.threads > 256) throw InputError(r.file_of("sim.threads"), "sim.threads", "more than 256 threads", "use <= 256");
  }
  if (auto v = r.str("sim.partition")) {
    if (v->empty()) throw InputError(r.file_of("sim.partition"), "sim.partition", "is empty", "use topology, metis or a partition file");
    s.partition = *v;
  }
  if (auto v = r.str("sim.save_partition")) s.save_partition = *v;
  if (auto v = r.str("sim.fidelity")) {
    if (*v != "packet" && *v != "flow" && *v != "analytical") {
      throw InputError(r.file_of("sim.fidelity"), "sim.fidelity", "'" + *v + "' is not a fidelity", "use packet, flow or analytical");
    }
    s.fidelity = *v;
  }
  if (auto v = r.str("sim.ring_flows")) {
    if (*v != "step" && *v != "stream") {
      throw InputError(r.file_of("sim.ring_flows"), "sim.ring_flows", "'" + *v + "' is not a ring flow mode", "use step or stream");
    }
    s.ring_flows = *v;
  }
  if (auto v = r.str("sim.fold")) {
    if (*v != "none" && *v != "dp") {
      throw InputError(r.file_of("sim.fold"), "sim.fold", "'" + *v + "' is not a fold mode", "use none or dp");
    }
    s.fold = *v;
  }
}

/// Step 5: the nccl: section and simccl.*.
void load_collective_keys(const SpecReader& r, Spec& s) {
  if (r.root["nccl"] && r.root["nccl"].IsMap()) {
    for (const auto& kv : r.root["nccl"]) {
      const std::string name = kv.first.as<std::string>();
      if (name.rfind("NCCL_", 0) != 0) {
        throw InputError(r.file_of("nccl." + name), "nccl." + name, "not an NCCL setting name",
                         "use the environment variable's name, e.g. nccl.NCCL_ALGO");
      }
      s.nccl.emplace_back(name, kv.second.IsNull() ? std::string() : kv.second.as<std::string>());
      s.simccl_extras.nccl_origin[name] = r.file_of("nccl." + name);
    }
  }
  if (auto v = r.str("simccl.planner")) {
    if (*v != "nccl" && *v != "ring") {
      throw InputError(r.file_of("simccl.planner"), "simccl.planner", "'" + *v + "' is not a planner", "use nccl or ring");
    }
    s.planner = *v;
  }
  if (auto v = r.str("simccl.gpu_sm")) {
    s.gpu_sm = static_cast<int>(parse_uint(*v, r.file_of("simccl.gpu_sm"), "simccl.gpu_sm", 60, 1000));
    if (s.gpu_sm > 120) throw InputError(r.file_of("simccl.gpu_sm"), "simccl.gpu_sm", "'" + *v + "' is above 120", "use 70, 80, 90 or 100");
  }
  if (auto v = r.str("simccl.schedule")) {
    std::stringstream list(*v);
    std::string item;
    while (std::getline(list, item, ',')) {
      const auto a = item.find_first_not_of(" \t");
      const auto b = item.find_last_not_of(" \t");
      if (a == std::string::npos) continue;
      s.simccl_extras.schedules.push_back(r.resolve(item.substr(a, b - a + 1), "simccl.schedule"));
    }
  }
  if (auto v = r.str("simccl.launch_latency")) {
    if (*v != "none" && *v != "nccl") {
      throw InputError(r.file_of("simccl.launch_latency"), "simccl.launch_latency", "'" + *v + "' is not a latency model",
                       "use none or nccl");
    }
    s.simccl_extras.launch_latency = *v == "nccl";
  }
  if (auto v = r.str("simccl.step_latency")) {
    if (*v != "none" && *v != "nccl") {
      throw InputError(r.file_of("simccl.step_latency"), "simccl.step_latency", "'" + *v + "' is not a step latency model",
                       "use none or nccl");
    }
    s.simccl_extras.step_latency = *v == "nccl";
  }
  if (auto v = r.str("simccl.proxy")) {
    if (*v != "none" && *v != "nccl") {
      throw InputError(r.file_of("simccl.proxy"), "simccl.proxy", "'" + *v + "' is not a proxy model", "use none or nccl");
    }
    s.simccl_extras.proxy = *v == "nccl";
  }
  if (auto v = r.str("simccl.topo_fallback")) {
    s.simccl_extras.topo_fallback = engine::parse_bool(*v, r.file_of("simccl.topo_fallback"), "simccl.topo_fallback");
  }
  if (auto v = r.str("simccl.lazy_plans")) {
    s.simccl_extras.lazy_plans = engine::parse_bool(*v, r.file_of("simccl.lazy_plans"), "simccl.lazy_plans");
  }
}

/// Step 6: output.*.
/// NCCL compute capability x10 of a GPU model for the cost model (A100 80; H100, H200, H800, H20
/// 90; Blackwell B200, GB200, B300, GB300 100: NCCL 2.28's tables stop at sm100); 0 = not an
/// NVIDIA GPU with NCCL tables (MI300X).
int sm_of_gpu(const kernels::GpuSpec& g) {
  const std::string n = g.name;
  if (n.rfind("A100", 0) == 0) return 80;
  if (n.rfind("H", 0) == 0) return 90;
  if (n.rfind("B", 0) == 0 || n.rfind("GB", 0) == 0) return 100;
  return 0;
}

/// cluster.gpu, cluster.nvlink_efficiency and the auto cluster.nvls_bandwidth, after the link and
/// simccl keys (they default from the GPU and its compute capability).
void load_gpu_keys(const SpecReader& r, Spec& s) {
  models::ClusterSpec& c = s.cluster;
  if (auto v = r.str("cluster.gpu")) {
    const kernels::GpuSpec& g = kernels::find_gpu(*v, r.file_of("cluster.gpu"), "cluster.gpu");
    const int sm = sm_of_gpu(g);
    if (sm == 0) {
      throw InputError(r.file_of("cluster.gpu"), "cluster.gpu", "'" + *v + "' has no NCCL cost model (not an NVIDIA GPU)",
                       "use an NVIDIA GPU (A100, H100, H200, H800, B200, GB200, GB300)");
    }
    if (!r.str("cluster.nvlink_bandwidth") && g.scaleup_gbps_bidir > 0) {
      c.nvlink_bps = static_cast<std::uint64_t>(std::llround(g.scaleup_gbps_bidir / 2 * 8e9));
    }
    if (!r.str("simccl.gpu_sm")) s.gpu_sm = sm;
  } else if (!r.str("simccl.gpu_sm")) {
    // A generated job's GPU sets the cost model's generation too (its NVLink rate: load_link_keys).
    if (const auto g = s.generator.find("gpu"); g != s.generator.end()) {
      const int sm = sm_of_gpu(kernels::find_gpu(g->second, s.generator_file["gpu"], "workload.generator.gpu"));
      if (sm != 0) s.gpu_sm = sm;
    }
  }
  c.nvlink_efficiency = simccl::nvlink_data_efficiency(s.gpu_sm);
  if (auto v = r.str("cluster.nvlink_efficiency"); v && *v != "auto") {
    char* end = nullptr;
    const double x = std::strtod(v->c_str(), &end);
    if (v->empty() || *end != '\0' || !(x > 0) || x > 1) {
      throw InputError(r.file_of("cluster.nvlink_efficiency"), "cluster.nvlink_efficiency",
                       "'" + engine::printable(*v) + "' is not a fraction in (0, 1]",
                       "give e.g. 0.8, 1 for the raw link rate, or auto for NCCL's per-link bandwidth");
    }
    c.nvlink_efficiency = x;
  }
  if (!r.str("cluster.nvls_bandwidth") || *r.str("cluster.nvls_bandwidth") == "auto") {
    const double GBps = simccl::nvls_port_GBps(s.gpu_sm);
    if (GBps > 0) c.nvls_bps = static_cast<std::uint64_t>(std::llround(GBps * 1e3)) * 8'000'000ull;
  }
}

void load_output_keys(const SpecReader& r, Spec& s) {
  s.output_h5 = "fabricsim_results.h5";
  if (auto v = r.str("output.h5")) s.output_h5 = *v;
  if (auto v = r.str("output.flows")) {
    s.output_flows = engine::parse_bool(*v, r.file_of("output.flows"), "output.flows");
  }
  if (auto v = r.str("output.summary_json")) s.summary_json = *v;
  if (auto v = r.str("output.sample_interval")) {
    s.sample_interval_ps = engine::parse_time_ps(*v, r.file_of("output.sample_interval"), "output.sample_interval");
    if (s.sample_interval_ps < 1000 || s.sample_interval_ps > engine::kPsPerS) {
      throw InputError(r.file_of("output.sample_interval"), "output.sample_interval", "'" + *v + "' is outside 1ns .. 1s",
                       "give a bin width like \"10us\"");
    }
  }
  if (auto v = r.str("output.trace")) s.trace_path = *v;
  if (auto v = r.str("output.trace_ranks")) {
    const std::string t = *v;
    auto bad = [&] {
      return InputError(r.file_of("output.trace_ranks"), "output.trace_ranks", "'" + t + "' is not a rank range",
                        "give A-B (e.g. 0-15), one rank, or all");
    };
    if (t == "all") {
      s.trace_rank_lo = 0;
      s.trace_rank_hi = 0xFFFFFFFFu;
    } else {
      const auto dash = t.find('-');
      const std::string a = t.substr(0, dash), b = dash == std::string::npos ? a : t.substr(dash + 1);
      if (a.empty() || b.empty() || a.find_first_not_of("0123456789") != std::string::npos ||
          b.find_first_not_of("0123456789") != std::string::npos || a.size() > 9 || b.size() > 9) {
        throw bad();
      }
      s.trace_rank_lo = static_cast<std::uint32_t>(std::stoul(a));
      s.trace_rank_hi = static_cast<std::uint32_t>(std::stoul(b));
      if (s.trace_rank_lo > s.trace_rank_hi) throw bad();
    }
  }
}

/// The common loader: `*text` is the content of `path` when not null, else `path` is read.
Spec load_spec_text(const std::string& path, const std::vector<std::string>& sets, const std::string* text);

/// "0-7,16" -> {0..7, 16}; @throws InputError(file, key) on anything else.
std::vector<std::uint32_t> parse_host_list(const YAML::Node& node, const std::string& file, const std::string& key) {
  std::vector<std::uint32_t> out;
  auto add_range = [&](const std::string& part) {
    const auto dash = part.find('-');
    const std::uint64_t lo = parse_uint(part.substr(0, dash), file, key, 0, 1u << 20);
    const std::uint64_t hi = dash == std::string::npos ? lo : parse_uint(part.substr(dash + 1), file, key, 0, 1u << 20);
    if (hi < lo) throw InputError(file, key, "range '" + part + "' ends before it starts", "write A-B with A <= B");
    for (std::uint64_t h = lo; h <= hi; ++h) out.push_back(static_cast<std::uint32_t>(h));
  };
  if (node.IsSequence()) {
    for (const auto& e : node) {
      if (!e.IsScalar()) throw InputError(file, key, "must list host indices", "e.g. [0, 1, 2] or \"0-2\"");
      add_range(e.as<std::string>());
    }
  } else {
    std::stringstream ss(node.as<std::string>());
    std::string part;
    while (std::getline(ss, part, ',')) {
      part.erase(std::remove(part.begin(), part.end(), ' '), part.end());
      if (!part.empty()) add_range(part);
    }
  }
  if (out.empty()) throw InputError(file, key, "lists no host", "give host indices, e.g. \"0-7\"");
  std::vector<std::uint32_t> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) {
    throw InputError(file, key, "lists host " + std::to_string(*dup) + " twice", "list each host once");
  }
  return out;
}

/// Step 4: the `jobs:` list. Each job's spec is the top-level spec without `jobs:`, with the
/// job's workload: section and its nccl: settings over the top-level ones.
void load_jobs(const SpecReader& r, Spec& s, const std::string& path) {
  const YAML::Node list = r.root["jobs"];
  if (!list) return;
  const std::string& file = s.file_of("jobs");
  if (r.root["workload"]) {
    throw InputError(s.file_of("workload"), "workload", "is set next to jobs:, which give each job its own workload",
                     "move it into the jobs[].workload sections and delete the top-level one");
  }
  if (s.hosts_auto) {
    throw InputError(file, "cluster.hosts", "must be given with jobs: (the jobs are placed on a fixed cluster)",
                     "set cluster.hosts (and cluster.gpus_per_host) to the cluster's size");
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node job = list[i];
    JobSpec j;
    j.key = "jobs[" + std::to_string(i) + "]";
    j.name = job["name"] ? job["name"].as<std::string>() : "job" + std::to_string(i);
    if (j.name.empty() || !names.insert(j.name).second) {
      throw InputError(file, j.key + ".name", "'" + j.name + "' is empty or names another job too", "give each job its own name");
    }
    if (job["start"]) j.start_ps = engine::parse_time_ps(job["start"].as<std::string>(), file, j.key + ".start");
    if (job["iterations"]) {
      j.iterations = static_cast<std::uint32_t>(parse_uint(job["iterations"].as<std::string>(), file, j.key + ".iterations", 1, 1u << 20));
    }
    if (job["placement"]) j.placement = job["placement"].as<std::string>();
    static const std::set<std::string> kPlacements = {"hosts", "packed", "spread", "random", "leaf", "pod"};
    if (kPlacements.count(j.placement) == 0) {
      throw InputError(file, j.key + ".placement", "'" + j.placement + "' is not a placement",
                       "use hosts, packed, spread, random, leaf or pod");
    }
    if (job["hosts"]) {
      if (!job["placement"]) j.placement = "hosts";
      if (j.placement != "hosts") {
        throw InputError(file, j.key + ".hosts", "is given but the placement is " + j.placement,
                         "drop jobs[].hosts or set placement: hosts");
      }
      j.hosts = parse_host_list(job["hosts"], file, j.key + ".hosts");
    } else if (j.placement == "hosts") {
      throw InputError(file, j.key + ".hosts", "is missing for placement hosts", "list the job's hosts, e.g. hosts: \"0-7\"");
    }
    j.seed = job["seed"] ? parse_uint(job["seed"].as<std::string>(), file, j.key + ".seed", 0, ~0ull) : s.seed + i;
    if (!job["workload"]) {
      throw InputError(file, j.key + ".workload", "is missing", "give the job's workload (workload.path or workload.generator.*)");
    }
    YAML::Node sub = YAML::Clone(r.root);
    sub.remove("jobs");
    sub["workload"] = YAML::Clone(job["workload"]);
    if (job["nccl"]) {
      if (!sub["nccl"] || !sub["nccl"].IsMap()) sub["nccl"] = YAML::Node(YAML::NodeType::Map);
      for (const auto& kv : job["nccl"]) sub["nccl"][kv.first.as<std::string>()] = YAML::Clone(kv.second);
    }
    YAML::Emitter out;
    out << sub;
    const std::string text = out.c_str();
    try {
      auto js = std::make_shared<Spec>(load_spec_text(path, {}, &text));
      js->file = s.file;
      j.spec = std::move(js);
    } catch (const InputError& e) {
      // The job's own keys: name them as jobs[i].<key>.
      std::string m = e.what();
      const std::string f = e.field();
      if (f.rfind("workload", 0) == 0 || f.rfind("nccl", 0) == 0) {
        const auto at = m.find(": " + f);
        if (at != std::string::npos) m.insert(at + 2, j.key + ".");
      }
      throw InputError(InputError::Whole{}, m);
    }
    s.jobs.push_back(std::move(j));
  }
}

Spec load_spec_text(const std::string& path, const std::vector<std::string>& sets, const std::string* text) {
  Spec s;
  const SpecReader r = read_spec_yaml(path, sets, s, text);
  load_workload_keys(r, s);
  s.cluster_given = static_cast<bool>(r.root["cluster"]);
  load_cluster_sizes(r, s);
  load_topology_keys(r, s);
  load_link_keys(r, s);
  load_sim_keys(r, s);
  load_collective_keys(r, s);
  load_gpu_keys(r, s);
  load_output_keys(r, s);
  load_jobs(r, s, path);
  s.faults = parse_faults(r.root["faults"], r.file_of("faults"));
  return s;
}

}  // namespace

Spec load_spec(const std::string& path, const std::vector<std::string>& sets) {
  return load_spec_text(path, sets, nullptr);
}

Spec parse_spec(const std::string& text, const std::string& path, const std::vector<std::string>& sets) {
  return load_spec_text(path, sets, &text);
}

models::ClusterSpec resolve_cluster(const Spec& spec, std::uint32_t ranks) {
  models::ClusterSpec c = spec.cluster;
  // The topology builders' cross-key checks (pods vs leaves, dual plane vs torus, ...) name
  // c.source: the command line when it set one of the structural keys (the general ones and
  // every builder key but rates and latencies), or when there is no file.
  bool cli = spec.file == "<spec>" ||
             spec.file_of_any({"cluster.topology", "cluster.hosts", "cluster.gpus_per_host", "cluster.nics_per_leaf",
                               "cluster.nvlink_domain"}) == "<cli>";
  for (const models::TopologyBuilder* b : models::topology_builders()) {
    for (const models::ParamDecl& d : b->params) {
      const std::string type = d.type;
      if (type != "rate" && type != "time" && spec.file_of(d.path) == "<cli>") cli = true;
    }
  }
  if (cli) c.source = "<cli>";
  const models::TopologyBuilder& builder = models::topology_builder(c.fabric);
  models::TopologyResolve how;
  how.ranks = ranks;
  how.nics_per_leaf_auto = spec.nics_per_leaf_auto;
  how.sizing_file = spec.file_of_any({"cluster.nics_per_leaf", "cluster.hosts"});
  if (builder.fixes_gpus) {
    builder.resolve(c, how);
    return c;
  }
  if (spec.hosts_auto) c.hosts = std::max<std::uint32_t>(1, (ranks + c.gpus_per_host - 1) / c.gpus_per_host);
  if (spec.nics_per_leaf_auto) c.nics_per_leaf = std::min<std::uint32_t>(c.hosts, 32);
  if (builder.resolve) builder.resolve(c, how);
  if (spec.spines_auto) c.spines = c.nics_per_leaf;
  if (static_cast<std::uint64_t>(c.hosts) * c.gpus_per_host < ranks) {
    throw InputError(spec.file_of_any({"cluster.hosts", "cluster.gpus_per_host", "workload.gpus", "workload.path",
                                       "workload.generator.tp", "workload.generator.pp", "workload.generator.dp",
                                       "workload.generator.cp", "workload.generator.gpus"}),
                     "cluster.hosts",
                     "the workload has " + std::to_string(ranks) + " ranks but the cluster has " +
                         std::to_string(c.hosts) + " hosts x " + std::to_string(c.gpus_per_host) +
                         " GPUs = " + std::to_string(c.hosts * c.gpus_per_host) + " GPUs",
                     "set cluster.hosts >= " +
                         std::to_string((ranks + c.gpus_per_host - 1) / c.gpus_per_host) + " or use auto");
  }
  return c;
}

}  // namespace fabricsim::jobs
