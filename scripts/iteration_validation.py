#!/usr/bin/python3
"""Issue 5 must-show 4: simulate the published training step times of
../shared/reference/iteration-times.csv with the workload generators and compare.

Usage:
  scripts/iteration_validation.py [--fabricsim build/app/fabricsim] [--out build/iteration_validation]
                                  [--rows ID,ID,...] [--fidelity analytical|flow|packet] [--jobs N]

For every row whose model and parallelism the generators cover, the script builds the
`workload.generator.*` settings from the row (shapes, TP/PP/DP/VP, micro/global batch, sequence,
precision) plus the framework rule of the row's family (FRAMEWORK_RULES below: sequence
parallelism, attention kernel, recomputation, DP overlap), simulates it with `fabricsim run`, and
writes <out>/iteration_validation.csv and .md (id, model, GPUs, published step time and TFLOP/s
per GPU, predicted, error %). Rows that are not covered are listed with the reason.

Reduction (so that the 40-row table runs in minutes on 2 cores; docs/validation_iterations.md):
 * The DP replicas of a Megatron job are identical and, on a rail-optimized fabric with one NIC
   per GPU (Selene, Eos, DGX), their DP collectives use disjoint NICs. One pipeline replica
   (TP x PP ranks, DP = 1) is simulated, its stages sharing hosts as in the job
   (replica_gpus_per_host).
 * 1F1B and interleaved 1F1B are periodic in the micro-batch count m: once the pipeline is full,
   every further micro-batch adds the same time. The replica is simulated at m1 and m2 = 2 m1
   micro-batches and T(m) = T(m2) + (m - m2) (T(m2) - T(m1)) / (m2 - m1); m1 = PP (interleaved:
   the schedule needs multiples of PP) or 4 for long pipelines (checked: docs). Rows with
   m <= 2 m1 are simulated at their real m.
 * DP gradient synchronisation is simulated separately as `fabricsim nccl-tests` on the DP group
   (DP hosts, one GPU each, the row's NIC, or one host over NVLink when TP x DP <= 8; with
   --dp-placement job 8/TP GPUs of the group per host; flow rung, NCCL planner with its launch
   latency):
   Megatron-LM 2021/2022 all-reduces the whole gradient buffer after the backward (exposed);
   Megatron-Core / NeMo overlap bucket reductions with the backward, so only the last bucket's
   reduce-scatter is exposed.
 * TP groups (inside the replica, analytical rung, ring planner): the NVLink rate is the measured
   8-GPU nccl-tests AllReduce busbw at the row's TP message size (A100, H100; tp_nvlink_rate).
   The NCCL planner is not used inside the replica: the analytical rung does not share a link
   between concurrent flows, so NCCL's 24 channels would each get the full link (an 8-rank
   32 MiB AllReduce at ~3.8 TB/s busbw).
No constant is fitted to any row: the rules below apply to every row of a family.
"""
import argparse
import csv
import re
import json
import math
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The shared folder: $FABRICSIM_SHARED_DIR, else ../shared next to the repository.
SHARED = os.environ.get("FABRICSIM_SHARED_DIR") or os.path.join(os.path.dirname(ROOT), "shared")
REF = os.path.join(SHARED, "reference", "iteration-times.csv")
# Exit status when the default reference table is missing (ctest SKIP_RETURN_CODE).
EXIT_SKIPPED = 77

# Cluster per GPU type (datasheets via ../shared/reference/gpu-specs.csv):
#   A100 (Selene, Narayanan et al. SC'21 Sec. 5.1): 8x 200 Gb/s HDR IB per node, NVLink3 600 GB/s
#   bidirectional = 2400 Gb/s per direction per GPU.
#   H100 (Eos / DGX H100): 8x 400 Gb/s NDR per node, NVLink4 900 GB/s bidir = 3600 Gb/s per dir.
#   B200 (DGX B200): 8x 400 Gb/s, NVLink5 1800 GB/s bidir = 7200 Gb/s per direction.
#   hbm: HBM bandwidth (B/s), gpu-specs.csv (A100 80GB 2.039 TB/s, H100 SXM 3.35, B200 HGX 7.7).
CLUSTERS = {
    "A100": {"gpu": "A100", "nic": "200Gbps", "nvlink": "2400Gbps", "hbm": 2.039e12, "sm": 80},
    "H100": {"gpu": "H100", "nic": "400Gbps", "nvlink": "3600Gbps", "hbm": 3.35e12, "sm": 90},
    "B200": {"gpu": "B200", "nic": "400Gbps", "nvlink": "7200Gbps", "hbm": 7.7e12, "sm": 100},
}

# Framework rules, by row family (the row's `framework` column and year):
#  megatron2021: Megatron-LM PTD-P as in Narayanan et al. SC'21: fp16, no sequence parallelism
#    (it came in 2022), full activation recomputation (Table 1 header), unfused attention
#    (QK^T/AV batched GEMMs + fused scale-mask-softmax + dropout; FlashAttention is 2022),
#    DP all-reduce of the fp16 gradient buffer after the backward (Megatron-LM v2 train_step:
#    forward_backward_func, then optimizer.reduce_model_grads).
#  megatron2022: Korthikanti et al. 2022: sequence parallelism + selective recomputation
#    (attention core only), unfused attention, DP = 1.
#  mcore: Megatron-Core / NeMo / Megatron-Bridge 2024+: SP, FlashAttention (TE fused attention:
#    on Hopper TE prefers cuDNN's fused attention, the FlashAttention-3 / cuDNN 9 class of
#    kernels), distributed optimizer with overlapped grad reduce, no recomputation.
#  mcore2023: the same stack in 2023 (MLPerf Training v3.1, NGC 23.09, TE 1.0 / cuDNN 8.9):
#    attention timed as the FlashAttention-2 class (35% of H100 peak, FlashAttention-3 paper).
FRAMEWORK_RULES = {
    "megatron2021": {"sequence_parallel": "false", "recompute": "full", "attention": "unfused", "zero": "0",
                     "overlap_grad_reduce": "false", "dtype": "fp16"},
    "megatron2022": {"sequence_parallel": "true", "recompute": "selective", "attention": "unfused", "zero": "0",
                     "overlap_grad_reduce": "false", "dtype": "fp16"},
    "mcore": {"sequence_parallel": "true", "recompute": "none", "attention": "flash", "zero": "1",
              "overlap_grad_reduce": "true", "dtype": "bf16"},
    "mcore2023": {"sequence_parallel": "true", "recompute": "none", "attention": "flash2", "zero": "1",
                  "overlap_grad_reduce": "true", "dtype": "bf16"},
}

# TP communication overlap (TransformerEngine userbuffers; NeMo user guide 24.12 "Communication
# Overlap", tensor-parallel section) is on for every TP > 1 row of these families:
#  * MCORE-WS (Megatron-Core r0.8 weak scaling): the CSV's framework column, from the Megatron-LM
#    README @d98e8a64, says "TP comm overlap";
#  * MLPT31 (MLPerf v3.1, NeMo 23.09): the CSV says "TP-comm overlap" (TP_COMM_OVERLAP=True in the
#    submission's config_common.sh);
#  * NEMO2407 GPT3 20B/175B: NeMo ships userbuffers presets for exactly these shapes
#    (userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048 "GPT3 20b", _h12288_tp4_mbs1_seqlen2048
#    "GPT3 175b", NVIDIA/NeMo @26005325 nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py)
#    and its gpt3_175b recipe's pretrain_performance_optimizations turns tp_comm_overlap on with it;
#  * MBRIDGE Llama 3 70B H100: Megatron-Bridge @55387ccb scripts/performance/configs/llama/
#    llama3_llm_pretrain.py llama3_70b_h100_config sets comm_overlap.tp_comm_overlap_cfg to
#    userbuffers_{bf16,fp8}_h100_h8192_tp4_mbs1_seqlen8192.
# The 2021/2022 Megatron-LM rows predate userbuffers (TransformerEngine, 2023): off.
TP_OVERLAP_FAMILIES = ("mcore", "mcore2023")
TP_OVERLAP = [True]

# Shapes of models that rows name without giving them (NeMo/HF configs, cited per entry).
NAMED_MODELS = {
    # NeMo examples/nlp/language_modeling/conf/megatron_gpt_config family (gpt3 5b/20b):
    "GPT3-5B": dict(layers=24, hidden=4096, heads=32, vocab=51200, ffn="gelu", seq_src="row"),
    "GPT3-20B": dict(layers=44, hidden=6144, heads=48, vocab=51200, ffn="gelu"),
    "GPT3-175B": dict(builtin="gpt3-175b", hidden=12288),
    # HF meta-llama/Llama-2-7b-hf and -13b-hf config.json (Touvron et al. 2023).
    "LLAMA2-7B": dict(layers=32, hidden=4096, heads=32, kv_heads=32, ffn_hidden=11008, vocab=32000, ffn="swiglu"),
    "LLAMA2-13B": dict(layers=40, hidden=5120, heads=40, kv_heads=40, ffn_hidden=13824, vocab=32000, ffn="swiglu"),
    # hidden of the built-in models: model-configs.csv (Llama 3 Herd Table 3).
    "LLAMA3_8B": dict(builtin="llama3-8b", hidden=4096),
    "LLAMA3_70B": dict(builtin="llama3-70b", hidden=8192),
}


# MLPerf Training v3.1 GPT-3 rows: the CSV's step time is GBS x 2048 / logged throughput, and that
# throughput is tokens / train_epoch_timing, the whole timed region, which includes the
# evaluations MLPerf runs every 24,576 sequences (custom.yaml val_check_interval; 22-25 evaluations
# of 1-13 s per run). The same logs record every training step (`tracked_stats`
# train_step_timing); the median of run 0 is the step time compared here. Source:
# mlcommons/training_results_v3.1 @f33f9444 NVIDIA/results/<dir>/gpt3/result_0.txt.
MLPERF_TRAIN_STEP_S = {
    "MLPT31-GPT3-512": (11.0453, "eos_n64_ngc23.09_nemo, 288 steps"),
    "MLPT31-GPT3-4096": (1.6084, "eos-dfw_n512_ngc23.09_nemo, 288 steps"),
    "MLPT31-GPT3-6144": (1.6159, "eos-dfw_n768_ngc23.09_nemo, 200 steps"),
    "MLPT31-GPT3-10240": (0.9256, "eos-dfw_n1280_ngc23.09_nemo, 230 steps"),
    "MLPT31-GPT3-10752": (0.9296, "eos-dfw_n1344_ngc23.09_nemo, 220 steps"),
}


def family(row):
    i = row["id"]
    if i.startswith("NAR21-T2-7") or i.startswith("NAR21-T2-9"):
        return None
    if i.startswith("NAR21"):
        return "megatron2021"
    if i.startswith("KOR22"):
        return "megatron2022"
    if i.startswith("MLPT31"):
        return "mcore2023"
    if i.startswith(("MCORE-WS", "NEMO2407", "MBRIDGE")):
        return "mcore"
    return None


def gpu_key(g):
    for k in CLUSTERS:
        if g.startswith(k):
            return k
    return None


def to_int(s):
    try:
        return int(str(s).strip().split()[0])
    except (ValueError, IndexError):
        return None


def plan_row(row):
    """Returns (settings dict, m, notes) or raises ValueError(reason) when not covered."""
    fam = family(row)
    if "405B" in row["model"]:
        raise ValueError("Llama 3 405B: the generator has its split (account_for_embedding/loss_in_pipeline_split) "
                         "and CP, but this replica driver does not place CP ranks or time the DP·CP term yet")
    if fam is None:
        if row["id"].startswith("NAR21-T2"):
            raise ValueError("DeepSpeed ZeRO-3 over 384-1536 ranks (config itself flagged uncertain in the CSV); "
                             "ZeRO-3 generation exists but a 1,536-rank DP ring per layer is beyond the 20-minute budget")
        raise ValueError("configuration not stated (parallelism / model)")
    g = gpu_key(row["gpu_type"])
    if g is None:
        raise ValueError(f"GPU {row['gpu_type']} not in the validation cluster table (NVL72 racks not modelled)")
    if "(tokendrop)" in row["model"] or "DeepSeek" in row["model"] or "Qwen" in row["model"] or "OSS" in row["model"]:
        raise ValueError("MoE model not among the covered configs (DeepSeek-V3 61 layers: uneven PP split; Qwen3/GPT-OSS: no config)")
    if "Nemotron" in row["model"]:
        raise ValueError("Nemotron shapes (squared-ReLU, GQA) not in model-configs.csv")
    tp, pp, dp = to_int(row["tp"]), to_int(row["pp"]), to_int(row["dp"])
    cp = to_int(row["cp"]) or 1
    if None in (tp, pp, dp):
        raise ValueError("parallel configuration not given")
    if cp != 1:
        # The generator models CP (workload.generator.cp); the simulated replica (DP 1) would
        # still hold TP·PP·CP ranks. No covered row has CP > 1 yet (the 405B rows need the
        # uneven pipeline split above).
        raise ValueError("CP > 1 rows are not in the replica driver yet")
    vp = to_int(row["vp"]) or 1
    mbs = to_int(row["mbs"]) or 1
    gbs = to_int(row["gbs"])
    seq = to_int(row["seq_len"])
    s = dict(FRAMEWORK_RULES[fam])
    notes = []
    if not row["mbs"].strip():
        notes.append("micro-batch not published: 1")
    if "FSDP=8" in row["notes"]:
        notes.append("FSDP modelled as distributed optimizer (ZeRO-1)")
    named = None
    for k, v in NAMED_MODELS.items():
        if row["model"].upper().startswith(k.upper()):
            named = v
    layers, hidden, heads = to_int(row["layers"]), to_int(row["hidden"]), to_int(row["heads"])
    if layers and hidden and heads:
        vocab = to_int(row["vocab"]) or 51200
        if "50257" in row["vocab"]:
            vocab = 51200  # Megatron pads GPT-2 BPE to a multiple of 128*TP (model-configs.csv)
            notes.append("vocab 50257 padded to 51200")
        s.update(model="custom", layers=layers, hidden=hidden, heads=heads, vocab=vocab, ffn="gelu")
    elif named and "builtin" in named:
        s["model"] = named["builtin"]
        hidden = named["hidden"]
    elif named:
        s["model"] = "custom"
        s.update({k: v for k, v in named.items() if k != "seq_src"})
    else:
        raise ValueError("model shape not given and not a known named model")
    prec = row["precision"].lower()
    if "fp8" in prec:
        s["dtype"] = "fp8"
    elif "bf16" in prec and fam.startswith("mcore"):
        s["dtype"] = "bf16"
    s.update(gpu=CLUSTERS[g]["gpu"], tp=tp, pp=pp, vp=vp, micro_batch=mbs, seq_len=seq)
    if tp == 1:
        s["sequence_parallel"] = "false"
    elif fam in TP_OVERLAP_FAMILIES and TP_OVERLAP[0]:
        # TransformerEngine userbuffers TP overlap (workload.generator.tp_comm_overlap), on where the
        # run's source says so (TP_OVERLAP_FAMILIES).
        s["tp_comm_overlap"] = "true"
    if gbs is None or gbs % (mbs * dp) != 0:
        raise ValueError("global batch not a multiple of micro-batch x DP")
    m = gbs // (mbs * dp)
    if vp > 1 and m % pp != 0:
        raise ValueError("interleaved schedule needs micro-batches divisible by PP")
    s["_hidden"] = hidden if hidden else s["hidden"]
    return s, m, dp, g, fam, notes


def run_json(cmd, env):
    p = subprocess.run(["nice"] + cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(" ".join(cmd) + "\n" + p.stderr[-2000:])
    return p.stdout


# Measured 8-GPU NVLink AllReduce (nccl-tests, in-place busbw) per GPU type: Azure
# AI-benchmarking-guide @8fd0c6e, NCCL 2.18.5, ND A100 v4 / ND H100 v5
# (../shared/reference/nccl-validation.csv). No published curve for B200: datasheet rate.
NCCL_TESTS_SYSTEMS = {"A100": "Azure ND A100 v4", "H100": "Azure ND H100 v5"}


def die(msg):
    """Bad input: one line on stderr, exit status 2 (project rule)."""
    print(msg, file=sys.stderr)
    sys.exit(2)


def _nvlink_curve(g, ref_dir):
    """[(bytes, busbw GB/s)] of the measured single-node 8-GPU AllReduce for GPU type g, or []."""
    sysname = NCCL_TESTS_SYSTEMS.get(g)
    path = os.path.join(ref_dir, "nccl-validation.csv")
    if sysname is None:
        return []
    if not os.path.exists(path):
        die(f"iteration_validation: {path} not found (needed for the measured {g} NVLink curve); "
                 "put it next to --ref or run with --nvlink datasheet")
    pts = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["system"].startswith(sysname) and r["collective"] == "AllReduce" and r["nodes"] == "1" \
                    and r["gpus_per_node"] == "8":
                pts[int(r["bytes"])] = float(r["busbw_GBps"])
    if not pts:
        die(f"iteration_validation: {path} has no single-node 8-GPU AllReduce rows of system "
                 f"'{sysname}' (field system); run with --nvlink datasheet")
    return sorted(pts.items())


def tp_nvlink_rate(g, nbytes, ref_dir):
    """NVLink rate (Gb/s) for a TP group whose collectives move nbytes each: the measured 8-GPU
    AllReduce busbw at that size (log-size interpolation), capped by the datasheet rate. A ring
    collective of the ring planner runs at the link rate (busbw = link rate), so this reproduces
    the measured collective time at the TP operating point (latency and protocol ramp included,
    which the analytical rung's single ring does not model). None: no measured curve."""
    pts = _nvlink_curve(g, ref_dir)
    if not pts or nbytes <= 0:
        return None
    cap = float(CLUSTERS[g]["nvlink"].replace("Gbps", "")) / 8.0
    if nbytes <= pts[0][0]:
        bw = pts[0][1]
    elif nbytes >= pts[-1][0]:
        bw = pts[-1][1]
    else:
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            if x0 <= nbytes <= x1:
                t = (math.log(nbytes) - math.log(x0)) / (math.log(x1) - math.log(x0))
                bw = y0 + t * (y1 - y0)
                break
    return min(bw, cap) * 8.0


def cluster_sets(g, nvlink_gbps=None, planner="ring"):
    """--set overrides of the validation cluster for GPU type g: NIC/fabric/NVLink rates (NVLink
    rate nvlink_gbps if given), 64 KiB MTUs, the collective planner (nccl: with the GPU's
    compute capability and NCCL's launch latency)."""
    c = CLUSTERS[g]
    # Flow rung: the MTU only sets the store-and-forward tail of the last packet; 64 KiB keeps it
    # negligible while flows cut through (a 16 MiB MTU would halve ring bandwidth).
    return [f"cluster.nic_bandwidth={c['nic']}", f"cluster.fabric_bandwidth={c['nic']}",
            "cluster.nvlink_bandwidth=" + (f"{nvlink_gbps:.1f}Gbps" if nvlink_gbps else c["nvlink"]), "cluster.mtu=64KiB", "cluster.nvlink_mtu=64KiB",
            f"simccl.planner={planner}"] + \
        ([f"simccl.gpu_sm={c['sm']}", "simccl.launch_latency=nccl"] if planner == "nccl" else [])


REF_USED = [REF]
_locks = {}
_locks_guard = threading.Lock()


def _lock(path):
    """One lock per result file: rows sharing a replica (same config, m) simulate it once."""
    with _locks_guard:
        return _locks.setdefault(path, threading.Lock())


def replica_gpus_per_host(tp, dp, host_gpus=8):
    """GPUs per host for the simulated replica (DP 1) so that its pipeline stages share hosts as
    they do in the whole job. Megatron orders ranks TP, then DP, then PP (rank = t + TP (d + DP p)),
    so a host of 8 GPUs holds 8 / (TP DP) whole stages when TP DP <= 8 and otherwise part of one
    stage: the replica keeps the TP ranks of 8 / (TP DP) stages per host (8 / DP GPUs), at least
    its TP group. Without this, a TP 4 replica would put two stages on one host and send the
    pipeline's activations over NVLink, where the job sends them over the NIC."""
    return max(tp, host_gpus // dp) if dp <= host_gpus else tp


def simulate(fabricsim, s, m, g, fidelity, out, tag, env, nvlink_gbps=None, dp=1):
    gph = replica_gpus_per_host(s["tp"], dp)
    sets = cluster_sets(g, nvlink_gbps) + [f"workload.generator.{k}={v}" for k, v in s.items()]
    sets += [f"cluster.gpus_per_host={gph}"]
    sets += ["workload.generator.dp=1", f"workload.generator.global_batch={m * s['micro_batch']}"]
    nv = (f"_nv{nvlink_gbps:.0f}" if nvlink_gbps else "") + f"_h{gph}"
    js = os.path.join(out, f"{tag}{nv}_m{m}.json")
    cmd = [fabricsim, "run", "-q", "--fidelity", fidelity, "-o", "/dev/null", "--summary-json", js]
    for x in sets:
        cmd += ["--set", x]
    with _lock(js):
        if not os.path.exists(js):
            run_json(cmd, env)
    with open(js) as f:
        d = json.load(f)
    return d["iteration_time_ps"] * 1e-12, d


def dp_sync_s(fabricsim, nbytes, dp, g, op, out, env, planner="nccl", per_host=1):
    """Simulated time (s) of one `op` of nbytes per rank over a DP group of dp GPUs placed
    per_host GPUs to a host (dp / per_host hosts, one NIC per GPU; flow rung). Hops inside a host
    use NVLink at the measured 8-GPU busbw of that size (tp_nvlink_rate).
    planner nccl: NCCL 2.28's algorithm/protocol/channel choice for the group and its latency
    (simccl.launch_latency nccl, docs/simccl.md); the flow rung shares links between channels.
    With several GPUs of the group in a host, NCCL's rings and trees leave the host through the
    NICs of all of them (channels spread over the NICs), so the group's inter-host bandwidth per
    rank is per_host NICs, not one."""
    if dp <= 1 or nbytes <= 0:
        return 0.0
    per_host = max(1, min(per_host, dp))
    if dp % per_host != 0:
        raise RuntimeError(f"DP {dp} not a multiple of {per_host} GPUs per host")
    nbytes = int(nbytes) // (4 * dp) * (4 * dp)
    g_n = ["-g", str(per_host), "--nodes", str(dp // per_host)]
    cmd = [fabricsim, "nccl-tests", op, "-b", str(nbytes), "-e", str(nbytes)] + g_n
    nv = tp_nvlink_rate(g, nbytes, os.path.dirname(REF_USED[0])) if per_host > 1 else None
    for x in cluster_sets(g, nv, planner=planner) + ["sim.fidelity=flow"]:
        cmd += ["--set", x]
    txt = run_json(cmd, env)
    for line in txt.splitlines():
        f = line.split()
        if f and f[0] == str(nbytes):
            return _time_us(f) * 1e-6
    raise RuntimeError("no nccl-tests row for size " + str(nbytes) + "\n" + txt)


def _isfloat(x):
    try:
        float(x)
        return True
    except ValueError:
        return False


def _time_us(f):
    # "size count type redop root time algbw busbw #wrong ..." (out-of-place first)
    vals = [x for x in f if _isfloat(x)]
    # vals: size, count, root, time, algbw, busbw, wrong, ...
    return float(vals[3])


def grad_bytes_per_rank(s, pp, tp):
    """fp16/bf16 gradient bytes of the largest stage (first stage holds the embedding)."""
    L, h = s.get("layers"), s.get("hidden")
    if L is None:
        return None
    V = s.get("vocab", 51200)
    ffn = s.get("ffn_hidden", 4 * h)
    mats = 3 if s.get("ffn") == "swiglu" else 2
    layer = 4 * h * h + mats * h * ffn
    return 2 * ((L / pp) * layer / tp + V * h / tp)


def dp_gpus_per_host(tp, dp, host_gpus=8):
    """GPUs of one DP group in one host. Megatron orders ranks TP, then DP (rank = t + TP d + ...),
    so an 8-GPU host holds min(DP, 8 / TP) consecutive DP ranks of every TP index."""
    return max(1, min(dp, host_gpus // tp))


def chunk0_bucket_bytes(s, pp, tp, vp):
    """16-bit gradient bytes of the first stage's chunk-0 bucket under NeMo 23.09's distributed
    Adam: the chunk's layers (one layer without VP) plus the word embedding and the LayerNorm
    weights (4h per layer: two LayerNorms, weight and bias), whose overlapped sync is disabled."""
    L, h = s["layers"], s["hidden"]
    V = s.get("vocab", 51200)
    ffn = s.get("ffn_hidden", 4 * h)
    mats = 3 if s.get("ffn") == "swiglu" else 2
    layer = (4 * h * h + mats * h * ffn) / tp
    per_chunk = L / (pp * vp) if vp > 1 else 1
    return 2 * (per_chunk * layer + V * h / tp + 4 * h * L / pp)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fabricsim", default=os.path.join(ROOT, "build", "app", "fabricsim"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "iteration_validation"))
    ap.add_argument("--rows", default="")
    ap.add_argument("--fidelity", default="analytical")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--ref", default=None,
                    help="reference table (default: $FABRICSIM_SHARED_DIR/reference/iteration-times.csv, "
                         "FABRICSIM_SHARED_DIR defaulting to ../shared; missing: exit 77, skipped)")
    ap.add_argument("--all", action="store_true",
                    help="also run the pipelines of 32+ stages (PP 35/64: ~10 min each on one core)")
    ap.add_argument("--flash-only", action="store_true",
                    help="time every row's attention as FlashAttention (binaries before the attention key; ablation)")
    ap.add_argument("--nvlink", choices=["measured", "datasheet"], default="measured",
                    help="TP groups' NVLink rate: the measured 8-GPU nccl-tests AllReduce busbw at the "
                         "row's TP message size (A100/H100), or the datasheet rate (ablation)")
    ap.add_argument("--mlperf-epoch-time", action="store_true",
                    help="compare MLPerf rows with the CSV's epoch-derived step time (includes evaluation) "
                         "instead of the logged median train step")
    ap.add_argument("--dp-placement", choices=["job", "one-per-host"], default="one-per-host",
                    help="DP groups as the job places them (8/TP GPUs of the group per host, their NICs "
                         "shared by NCCL's channels) or, as before, one GPU per host unless TP x DP <= 8 (ablation)")
    ap.add_argument("--tp-overlap", choices=["source", "off"], default="source",
                    help="TransformerEngine TP communication overlap where the row's source says the run used it "
                         "(default), or off everywhere (ablation: the TP collectives charged serially)")
    ap.add_argument("--fresh", action="store_true", help="ignore cached simulation results in --out")
    ap.add_argument("--check", type=float, default=0.0,
                    help="exit 1 if any simulated row's |error| exceeds this percentage (tests)")
    ap.add_argument("--memory", action="store_true",
                    help="only estimate each covered row's HBM per GPU at its full DP (fabricsim generate --memory); "
                         "writes <out>/iteration_memory.md")
    a = ap.parse_args()
    if a.ref is None:
        if not os.path.isfile(REF):
            print(f"SKIPPED: reference table {REF} not found (set FABRICSIM_SHARED_DIR to the shared folder)")
            return EXIT_SKIPPED
        a.ref = REF
    elif not os.path.isfile(a.ref):
        die(f"{a.ref}: --ref: no such file (give the iteration-times.csv reference table)")
    REF_USED[0] = a.ref
    TP_OVERLAP[0] = a.tp_overlap == "source"
    os.makedirs(a.out, exist_ok=True)
    if a.fresh:
        for f in os.listdir(a.out):
            if f.endswith(".json"):
                os.remove(os.path.join(a.out, f))
    env = dict(os.environ, FABRICSIM_SOURCE_DIR=ROOT)
    with open(a.ref) as f:
        rows = list(csv.DictReader(f))
    want = set(x for x in a.rows.split(",") if x)
    results, skipped = [], []
    tasks = []
    for row in rows:
        if want and row["id"] not in want:
            continue
        try:
            s, m, dp, g, fam, notes = plan_row(row)
        except ValueError as e:
            skipped.append((row["id"], row["model"], str(e)))
            continue
        if s["pp"] >= 32 and not a.all:
            skipped.append((row["id"], row["model"], f"covered, but PP {s['pp']} needs m >= {s['pp']} micro-batches "
                            "per simulated point (~10 min each): run with --all"))
            continue
        if a.flash_only:
            s.pop("attention", None)
        hidden = s.pop("_hidden")
        nv = None
        if s["tp"] > 1 and a.nvlink == "measured":
            # TP activations are 16-bit in every family (TE casts FP8 inside the GEMMs).
            nv = tp_nvlink_rate(g, s["seq_len"] * s["micro_batch"] * hidden * 2, os.path.dirname(a.ref))
        tasks.append((row, s, m, dp, g, fam, notes, nv))

    if a.memory:
        return memory_table(a, tasks, env)

    def one(t):
        row, s, m, dp, g, fam, notes, nv = t
        pp, vp = s["pp"], s["vp"]
        m1 = pp  # steady state of 1F1B needs m >= PP (below it the slope is the fill's, not the period's)
        tag = "_".join(f"{k}{v}" for k, v in sorted(s.items()) if k not in ("gpu",)) + "_" + g + "_" + a.fidelity
        tag = tag.replace("/", "").replace(" ", "")[:200]
        T1 = T2 = 0.0

        def split(dd, t):
            # Per-rank mean compute and exposed communication (s) of a simulated point; the rest
            # of its iteration time is idle time on the mean rank (pipeline bubble, waits).
            c = dd.get("compute_ps_mean", 0.0) * 1e-12
            e = dd.get("exposed_comm_ps_mean", 0.0) * 1e-12
            return c, e, t - c - e

        if m <= 2 * m1:
            T, d = simulate(a.fabricsim, s, m, g, a.fidelity, a.out, tag, env, nv, dp)
            parts = split(d, T)
            how = f"m={m} simulated"
        else:
            T1, d1 = simulate(a.fabricsim, s, m1, g, a.fidelity, a.out, tag, env, nv, dp)
            T2, d = simulate(a.fabricsim, s, 2 * m1, g, a.fidelity, a.out, tag, env, nv, dp)
            T = T2 + (m - 2 * m1) * (T2 - T1) / m1
            # The same linear extrapolation, part by part (the parts add up to T).
            parts = tuple(y + (m - 2 * m1) * (y - x) / m1 for x, y in zip(split(d1, T1), split(d, T2)))
            how = f"m={m} from m={m1},{2 * m1}"
        if nv:
            how += f", TP NVLink {nv / 8:.0f} GB/s (measured busbw)"
        if s.get("tp_comm_overlap") == "true":
            how += ", TP comm overlap"
        # DP gradient synchronisation. Megatron orders ranks TP, then DP (then PP): with
        # TP x DP <= 8 the DP group lies in one 8-GPU host and reduces over NVLink.
        # With TP x DP >= 8 a host holds 8 / TP ranks of each DP group (DP_PER_HOST_RULE).
        dp_host = dp_gpus_per_host(s["tp"], dp) if a.dp_placement == "job" else (dp if s["tp"] * dp <= 8 else 1)
        if dp > 1:
            how += ", DP over NVLink" if dp_host == dp else f", DP {dp_host} GPUs per host"
        gb = grad_bytes_per_rank(s, pp, s["tp"]) if s.get("model") == "custom" else None
        if gb is None:  # built-in model: matrix parameters from the simulated model FLOPs (6 P tokens)
            m_sim = m if m <= 2 * m1 else 2 * m1
            P = d["model_flops"] / (6.0 * m_sim * s["micro_batch"] * s["seq_len"])
            gb = 2 * P / (s["tp"] * pp)
        if s["overlap_grad_reduce"] == "false":
            tdp = dp_sync_s(a.fabricsim, gb, dp, g, "all_reduce", a.out, env, per_host=dp_host)
        else:
            # Megatron-Core DDP + distributed optimizer (overlap_grad_reduce, overlap_param_gather):
            # bucket reduce-scatters start during the last micro-batch's backward, bucket
            # all-gathers of the updated parameters run during the next forward. Exposed: the
            # last bucket's reduce-scatter, or the part of the whole reduce-scatter that does not
            # fit into the backward window; the same for the all-gather and the forward window.
            # Window per micro-batch of the stage: backward 2/3, forward 1/3 of its period (FLOP
            # ratio 2:1); with VP chunks the chunks finish at different ops of the cool-down /
            # warm-up phase, (VP-1)*PP chunk-ops on the last stage (Megatron interleaved schedule).
            bucket = 2 * max(40e6, 1e6 * dp)
            if fam == "mcore2023" and s.get("model") == "custom":
                # NeMo 23.09 (MLPerf v3.1, NeMo bd0b818 MegatronGPTModel.configure_optimizers) with
                # Apex DistributedFusedAdam: one bucket per virtual pipeline stage (per layer
                # without VP); parameters whose overlapped sync is disabled (the embedding shared
                # by the first and last stage, the sequence-parallel LayerNorm weights) go into
                # the last bucket, which is chunk 0's: reduced after the last backward, gathered
                # before the first forward. Megatron-Core sizes buckets by DP instead (above).
                bucket = chunk0_bucket_bytes(s, pp, s["tp"], vp)
            t_bucket_rs = dp_sync_s(a.fabricsim, min(bucket, gb), dp, g, "reduce_scatter", a.out, env, per_host=dp_host)
            t_bucket_ag = dp_sync_s(a.fabricsim, min(bucket, gb), dp, g, "all_gather", a.out, env, per_host=dp_host)
            t_rs = dp_sync_s(a.fabricsim, gb, dp, g, "reduce_scatter", a.out, env, per_host=dp_host)
            t_ag = dp_sync_s(a.fabricsim, gb, dp, g, "all_gather", a.out, env, per_host=dp_host)
            period = (T2 - T1) / m1 if m > 2 * m1 else T / m
            k = 1.0 if vp == 1 else min((vp - 1) * pp, m * vp) / vp
            tdp = max(t_bucket_rs, t_rs - 2.0 / 3.0 * period * k) + max(t_bucket_ag, t_ag - 1.0 / 3.0 * period * k)
        if s.get("zero", "0") != "0" and dp > 1:
            # The replica (DP 1) runs the distributed optimizer's Adam step over all its
            # parameters; with DP ranks each updates 1/DP of them. Remove the difference, timed as
            # the generator times `adam` (28 bytes per parameter at 80% of HBM bandwidth,
            # docs/kernels.md).
            params = gb / 2.0
            tdp -= 28.0 * params / (0.8 * CLUSTERS[g]["hbm"]) * (1.0 - 1.0 / dp)
        total = T + tdp
        pub_t = float(row["step_time_s"]) if row["step_time_s"] else None
        if row["id"] in MLPERF_TRAIN_STEP_S and not a.mlperf_epoch_time:
            pub_t = MLPERF_TRAIN_STEP_S[row["id"]][0]
            notes.append(f"published: median logged train step ({MLPERF_TRAIN_STEP_S[row['id']][1]}); "
                         f"CSV {row['step_time_s']} s includes evaluation")
        pub_f = float(row["tflops_per_gpu"]) if row["tflops_per_gpu"] else None
        # Predicted TFLOP/s per GPU on the row's own FLOP convention: published TFLOP/s x
        # published time / predicted time (same FLOPs per step).
        m_sim = m if m <= 2 * m1 else 2 * m1
        # Model FLOPs of the whole step: the simulated replica's per micro-batch x m x DP.
        step_flops = d["model_flops"] / m_sim * m * dp
        gpus = s["tp"] * pp * dp
        sim_tflops = step_flops / (total * gpus) / 1e12  # model FLOPs (no recompute) per GPU
        if pub_t:
            # Published TFLOP/s keep their own FLOP convention (eq. 3 counts recompute): same
            # FLOPs per step, so the predicted rate is the published one x published / predicted time.
            pred_f = pub_f * pub_t / total if pub_f else None
            err = 100 * (total / pub_t - 1)
        else:
            # Only TFLOP/s published (KOR22: MFU x 312, model FLOPs): compare simulated model
            # TFLOP/s; the error is given as the equivalent step-time error pub/pred - 1.
            pred_f = sim_tflops
            err = 100 * (pub_f / pred_f - 1) if pub_f else None
        return dict(id=row["id"], model=row["model"], gpus=row["num_gpus"], gpu=g, family=fam,
                    config=f"TP{s['tp']} PP{pp} DP{dp} VP{vp} mbs{s['micro_batch']} gbs{row['gbs']} seq{s['seq_len']} {s['dtype']}",
                    pub_step_s=pub_t, pub_tflops=pub_f, pred_step_s=total, pipe_s=T, dp_s=tdp,
                    compute_s=parts[0], comm_s=parts[1], idle_s=parts[2],
                    pred_tflops=pred_f, err_pct=err, how=how, notes="; ".join(notes))

    with ThreadPoolExecutor(max_workers=a.jobs) as ex:
        for r in ex.map(one, tasks):
            results.append(r)
            e = f"{r['err_pct']:+.1f}%" if r["err_pct"] is not None else "n/a"
            print(f"{r['id']:<40} published {r['pub_step_s']} s  predicted {r['pred_step_s']:.3f} s  {e}", flush=True)
    write(a.out, results, skipped)
    if a.check > 0:
        bad = [r for r in results if r["err_pct"] is not None and abs(r["err_pct"]) > a.check]
        for r in bad:
            print(f"FAIL {r['id']}: error {r['err_pct']:+.1f}% beyond {a.check}%", file=sys.stderr)
        if bad or not results:
            return 1
    return 0


def memory_table(a, tasks, env):
    """Estimated HBM per GPU of every covered row at its published DP (the job as it ran): a
    published run fitted, so an estimate above the GPU's HBM would be a defect of the estimate."""
    lines = ["| id | GPU | config | peak GB per GPU (pipeline rank) | HBM GB | fits |", "|---|---|---|---|---|---|"]
    over = 0
    for row, s, m, dp, g, fam, notes, nv in tasks:
        sets = [f"workload.generator.{k}={v}" for k, v in s.items()]
        sets += [f"workload.generator.dp={dp}", f"workload.generator.global_batch={m * s['micro_batch'] * dp}"]
        cmd = [a.fabricsim, "generate", "--memory"]
        for x in sets:
            cmd += ["--set", x]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise RuntimeError(" ".join(cmd) + "\n" + p.stderr[-2000:])
        hbm = float(re.search(r"\(([0-9.]+) GB HBM\)", p.stdout).group(1))
        peak = [ln.split() for ln in p.stdout.splitlines() if ln.endswith("<- peak")][0]
        total, rank = float(peak[7]), peak[0]
        fits = total <= hbm
        over += 0 if fits else 1
        lines.append(f"| {row['id']} | {s['gpu']} | TP{s['tp']} PP{s['pp']} DP{dp} VP{s['vp']} mbs{s['micro_batch']} "
                     f"seq{s['seq_len']} {s.get('dtype', 'bf16')} {s.get('recompute', 'none')} | {total:.1f} ({rank}) | "
                     f"{hbm:.0f} | {'yes' if fits else 'NO'} |")
    text = "\n".join(lines) + f"\n\nRows: {len(tasks)}, estimated above HBM: {over}.\n"
    with open(os.path.join(a.out, "iteration_memory.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


def write(out, results, skipped):
    cols = ["id", "model", "gpus", "gpu", "family", "config", "pub_step_s", "pred_step_s", "err_pct", "pub_tflops",
            "pred_tflops", "pipe_s", "compute_s", "comm_s", "idle_s", "dp_s", "how", "notes"]
    with open(os.path.join(out, "iteration_validation.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for r in results:
            w.writerow({k: r[k] for k in cols})
    errs = [abs(r["err_pct"]) for r in results if r["err_pct"] is not None]
    with open(os.path.join(out, "iteration_validation.md"), "w") as f:
        f.write("| id | model | GPUs | config | published step (s) | predicted (s) | error | published TFLOP/s/GPU | predicted |\n")
        f.write("|---|---|---|---|---|---|---|---|---|\n")
        for r in results:
            pf = f"{r['pub_tflops']:.1f}" if r["pub_tflops"] else ""
            qf = f"{r['pred_tflops']:.1f}" if r["pred_tflops"] else ""
            e = f"{r['err_pct']:+.1f}%" if r["err_pct"] is not None else ""
            f.write(f"| {r['id']} | {r['model']} | {r['gpus']} | {r['config']} | {r['pub_step_s']} | "
                    f"{r['pred_step_s']:.3f} | {e} | {pf} | {qf} |\n")
        if errs:
            f.write(f"\nRows: {len(errs)}; mean |error| {sum(errs) / len(errs):.1f}%, max {max(errs):.1f}%, "
                    f"within 10%: {sum(1 for x in errs if x <= 10)}.\n")
        f.write("\nNot covered:\n\n| id | model | reason |\n|---|---|---|\n")
        for i, mdl, why in skipped:
            f.write(f"| {i} | {mdl} | {why} |\n")
    print(open(os.path.join(out, "iteration_validation.md")).read())


if __name__ == "__main__":
    sys.exit(main())
