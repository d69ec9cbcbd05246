#!/usr/bin/env bash
# Runs the benchmark set that fits on a 2-core machine in under 30 minutes and writes one JSON file
# per run into OUT (default bench-results/<UTC timestamp>), then a summary.json with parallel
# efficiencies and the bit-identity checks (exit 1 if a checksum/digest differs).
#   bench/run_all.sh [BUILD_DIR (default build)] [OUT]
# Environment: QUICK=1 shrinks every run (smoke test); GPT3=1 adds the GPT-3 175B 128-GPU iteration
# on 1 and 2 processes (GPT3=full also the 1,024-GPU iteration: ~70 min of one core)
# (long: see docs/benchmarks.md); BIG=1 adds the 1 GiB 1,024-GPU AllReduce; MEGA=1 adds issue 9's
# must-show 3 at flow level: the 102,400-GPU multi-pod AllReduce (2-10 min, ~2 GB) and the MoE
# iteration in SimAI's 9,216-GPU shape scaled to 384 GPUs (~17 s of CPU); MEGA=full also runs the
# full 9,216-GPU MoE iteration (see docs/benchmarks.md for its time and memory). MOE=1 adds only
# the MoE iteration's scaling ladder in SimAI's 9,216-GPU shape at flow level: DP 8, 16 and 32
# (192, 384, 768 GPUs, every rank simulated; ~1-2 min of CPU together), JSON moe_<gpus>_flow.json
# with events, wall, CPU and peak RSS; MOE=large adds 2,304 GPUs (DP 96, 9 pods; ~2 min of CPU,
# ~1.9 GB); MOE=full adds the 9,216-GPU iteration instead (~15 min of CPU, ~6.6 GB: measured
# 2026-12-01, docs/fidelity.md "Scale").
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-bench-results/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
# shellcheck disable=SC1091
source scripts/env.sh
PH="$BUILD/bench/bench_phold"
CL="$BUILD/bench/bench_cluster"
PH_ARGS=()
PERM_ARGS=(--hosts 128 --bytes 4MiB)
AR_ARGS=(--gpus 1024 --bytes 64MiB)
# GPT-3 175B scaled to 8 layers x 2 micro-batches per pipeline at 128 GPUs (TP 8, PP 8, DP 2):
# ~93 M events, ~160 k windows of 500 ns at 2 processes, so it measures the window exchange.
G3S_ARGS=(--scenario gpt3 --gpus 128 --set workload.generator.layers=8 --set workload.generator.global_batch=4)
if [ "${QUICK:-0}" = 1 ]; then
  PH_ARGS=(--end-time 5us)
  PERM_ARGS=(--hosts 16 --bytes 256KiB)
  INCAST_BYTES=256KiB
  AR_ARGS=(--gpus 64 --bytes 4MiB)
  G3S_ARGS=(--scenario gpt3 --gpus 128 --set workload.generator.layers=8 --set workload.generator.global_batch=2)
  export FLOW_GPUS=64
  MEM_GPUS=128
  MEGA_AR_GPUS=1024
fi
rss() { /usr/bin/time -f '%M' -o "$OUT/$1.time" "${@:2}"; }
echo "== PHOLD strong scaling (1 vs 2 processes, 1 vs 2 threads) -> $OUT"
rss phold_p1_t1 "$PH" "${PH_ARGS[@]}" --json "$OUT/phold_p1_t1.json"
rss phold_p1_t2 "$PH" "${PH_ARGS[@]}" --threads 2 --json "$OUT/phold_p1_t2.json"
rss phold_p2_t1 mpiexec -n 2 "$PH" "${PH_ARGS[@]}" --json "$OUT/phold_p2_t1.json"
echo "== packet permutation, 128 hosts"
rss perm_p1 "$CL" --scenario permutation "${PERM_ARGS[@]}" --json "$OUT/perm_p1.json"
rss perm_p2 mpiexec -n 2 "$CL" --scenario permutation "${PERM_ARGS[@]}" --json "$OUT/perm_p2.json"
echo "== GPT-3 175B scaled (8 layers), 128 GPUs, packet level: 1 vs 2 processes (window-bound)"
rss gpt3s_p1 "$CL" "${G3S_ARGS[@]}" --json "$OUT/gpt3s_p1.json"
rss gpt3s_p2 mpiexec -n 2 "$CL" "${G3S_ARGS[@]}" --json "$OUT/gpt3s_p2.json"
echo "== packet incast, 32 -> 1 (PFC + ECN + DCQCN)"
rss incast_p1 "$CL" --scenario incast --hosts 33 --bytes "${INCAST_BYTES:-4MiB}" --json "$OUT/incast_p1.json"
echo "== memory per in-flight packet: the same lossless-by-size incast (no PFC, no CC, 1 GiB buffers)"
echo "   with 1 MiB and 8 MiB per sender; (peak RSS difference) / (difference in queued packets)"
INF_SETS=(--set switch.pfc=false --set nic.cc=none --set switch.buffer=1GiB)
rss inflight_small "$CL" --scenario incast --hosts 33 --bytes "${INF_SMALL:-1MiB}" "${INF_SETS[@]}" --json "$OUT/inflight_small.json"
rss inflight_big "$CL" --scenario incast --hosts 33 --bytes "${INF_BIG:-8MiB}" "${INF_SETS[@]}" --json "$OUT/inflight_big.json"
echo "== AllReduce, 1,024 GPUs"
rss allreduce_p1 "$CL" --scenario allreduce "${AR_ARGS[@]}" --json "$OUT/allreduce_p1.json"
echo "== memory per simulated GPU: 1,024-GPU 16 MiB AllReduce (NCCL's choice: Tree/LL128, the most"
echo "   per-rank state) and the process's fixed memory from the same run on 8 GPUs (one host)"
rss mem_ar_p1 "$CL" --scenario allreduce --gpus "${MEM_GPUS:-1024}" --bytes 16MiB --json "$OUT/mem_ar_p1.json"
rss mem_baseline "$CL" --scenario allreduce --gpus 8 --bytes 16MiB --json "$OUT/mem_baseline.json"
echo "== AllReduce, 1,024 ranks x 1 MiB, flow level, ring planner (issue 9 must-show 1)"
rss allreduce_flow_p1 "$CL" --scenario allreduce --gpus "${FLOW_GPUS:-1024}" --bytes 1MiB \
  --set simccl.planner=ring --set sim.fidelity=flow --json "$OUT/allreduce_flow_p1.json"
if [ "${BIG:-0}" = 1 ]; then
  rss allreduce_1g_p2 mpiexec -n 2 "$CL" --scenario allreduce --gpus 1024 --bytes 1GiB --json "$OUT/allreduce_1g_p2.json"
fi
if [ "${MEGA:-0}" != 0 ]; then
  echo "== AllReduce, ${MEGA_AR_GPUS:-102400} GPUs x 256 MiB, 3-tier multi-pod Clos, flow level, NCCL Tree (issue 9 must-show 3)"
  rss allreduce_100k_flow "$CL" --scenario allreduce --gpus "${MEGA_AR_GPUS:-102400}" --bytes 256MiB \
    --set sim.fidelity=flow --set nccl.NCCL_ALGO=Tree --set nccl.NCCL_MAX_NCHANNELS=2 \
    --set nccl.NCCL_BUFFSIZE=67108864 --set cluster.tiers=3 --set cluster.pods=16 \
    --json "$OUT/allreduce_100k_flow.json"
  echo "== MoE iteration, SimAI's 9,216-GPU shape (TP 2, EP 16, PP 12, VP 8, 24 micro-batches) at DP 16 = 384 GPUs, flow level"
  rss moe_384_flow "$CL" --scenario spec --spec examples/moe_9216.yaml --set workload.generator.dp=16 \
    --set workload.generator.global_batch=384 --set cluster.pods=2 --set cluster.nics_per_leaf=16 \
    --json "$OUT/moe_384_flow.json"
  if [ "${MEGA}" = full ]; then
    echo "== MoE iteration, 9,216 GPUs, flow level (hours)"
    rss moe_9216_flow "$CL" --scenario spec --spec examples/moe_9216.yaml --json "$OUT/moe_9216_flow.json"
  fi
fi
if [ "${MOE:-0}" != 0 ]; then
  # Same spec and shape (TP 2, EP 16, PP 12, VP 8, 24 micro-batches per pipeline), DP scaled;
  # pods divide the rail-optimized leaves (rail groups of 32 hosts).
  LADDER=(8:1:auto 16:2:16 32:3:auto)
  if [ "${MOE}" = large ]; then LADDER+=(96:9:auto); fi
  for m in "${LADDER[@]}"; do
    IFS=: read -r dp pods npl <<<"$m"
    g=$((dp * 24))
    echo "== MoE iteration, SimAI's 9,216-GPU shape at DP $dp = $g GPUs, flow level"
    rss "moe_${g}_flow" "$CL" --scenario spec --spec examples/moe_9216.yaml --set workload.generator.dp="$dp" \
      --set workload.generator.global_batch=$((dp * 24)) --set cluster.pods="$pods" \
      --set cluster.nics_per_leaf="$npl" --json "$OUT/moe_${g}_flow.json"
  done
  if [ "${MOE}" = full ]; then
    echo "== MoE iteration, 9,216 GPUs, flow level (issue 9 must-show 3)"
    rss moe_9216_flow "$CL" --scenario spec --spec examples/moe_9216.yaml --json "$OUT/moe_9216_flow.json"
  fi
fi
if [ "${GPT3:-0}" != 0 ]; then
  echo "== GPT-3 175B iteration, 128 GPUs (1 and 2 processes)"
  rss gpt3_128_p1 "$CL" --scenario gpt3 --gpus 128 --json "$OUT/gpt3_128_p1.json"
  rss gpt3_128_p2 mpiexec -n 2 "$CL" --scenario gpt3 --gpus 128 --json "$OUT/gpt3_128_p2.json"
  if [ "${GPT3}" = full ]; then
    # ~21.6 G events: 68 min of one core (docs/benchmarks.md), the 90-minute target's run.
    echo "== GPT-3 175B iteration, 1,024 GPUs (TP 8, PP 8, DP 16)"
    rss gpt3_1024_p1 "$CL" --scenario gpt3 --gpus 1024 --json "$OUT/gpt3_1024_p1.json"
  fi
fi
/usr/bin/python3 - "$OUT" <<'PY'
import json, sys, glob, os
out = sys.argv[1]
r = {os.path.basename(f)[:-5]: json.load(open(f)) for f in glob.glob(out + "/*.json") if not f.endswith("summary.json")}
s = {"runs": sorted(r), "checks": {}, "efficiency": {}}
ok = True
def same(a, b, key):
    global ok
    if a in r and b in r:
        eq = r[a][key] == r[b][key] and r[a]["events"] == r[b]["events"]
        s["checks"][f"{a} == {b}"] = eq
        ok &= eq
def eff(a, b, n):
    if a in r and b in r:
        s["efficiency"][f"{b} vs {a}"] = round(r[a]["wall_s"] / (n * r[b]["wall_s"]), 3)
same("phold_p1_t1", "phold_p1_t2", "checksum"); same("phold_p1_t1", "phold_p2_t1", "checksum")
same("perm_p1", "perm_p2", "digest"); same("gpt3s_p1", "gpt3s_p2", "digest")
eff("phold_p1_t1", "phold_p1_t2", 2); eff("phold_p1_t1", "phold_p2_t1", 2); eff("perm_p1", "perm_p2", 2)
eff("gpt3s_p1", "gpt3s_p2", 2)
same("gpt3_128_p1", "gpt3_128_p2", "digest"); eff("gpt3_128_p1", "gpt3_128_p2", 2)
# Load-independent evidence of the synchronization cost: windows, exchange traffic and the
# time in the exchange per window (it includes waiting for the slower process).
s["exchange"] = {k: {"windows": v["windows"], "sync_s": v["sync_s"],
                     "sync_us_per_window": round(1e6 * v["sync_s"] / v["windows"], 2) if v["windows"] else None,
                     "remote_events": v.get("remote_events"), "exchange_messages": v.get("exchange_messages"),
                     "exchange_bytes": v.get("exchange_bytes")}
                 for k, v in r.items() if v.get("processes", 1) > 1 and "windows" in v}
for k, v in r.items():
    t = os.path.join(out, k + ".time")
    if os.path.exists(t):
        v["peak_rss_kb_time"] = int(open(t).read().split()[-1])
if "allreduce_p1" in r:
    a = r["allreduce_p1"]
    # The default AllReduce set (64 MiB: NCCL picks NVLSTree on H100 hosts). Its NVLS/NVLSTree plans are
    # materialized (only Ring and Tree are lazy), so per GPU it holds ~4x the Tree run below.
    s["allreduce_rss_per_gpu"] = {"bytes": a["bytes"], "gpus": a["gpus"],
                                  "kb_per_gpu_incl_baseline": round(a["peak_rss_kb"] * 1.024 / a["gpus"], 1),
                                  "note": "NVLSTree on H100 hosts: NCCL_STEPS chunks per connection in flight"}
    if "mem_baseline" in r:
        b = r["mem_baseline"]
        s["allreduce_rss_per_gpu"]["kb_per_gpu_above_baseline"] = round(
            (a["peak_rss_kb"] - b["peak_rss_kb"]) * 1.024 / max(1, a["gpus"] - b["gpus"]), 1)
if "mem_ar_p1" in r and "mem_baseline" in r:
    # Issue 7: <= 100 KB per simulated GPU. Reported two ways: peak RSS / GPUs (includes the
    # process's fixed memory: libraries, MPI, HDF5) and (peak - fixed) / (GPUs - 8), the fixed part
    # measured by the same scenario on 8 GPUs (one host), whose own 8 GPUs are left out.
    a, b = r["mem_ar_p1"], r["mem_baseline"]
    s["memory_per_gpu"] = {"gpus": a["gpus"], "peak_rss_kb": a["peak_rss_kb"], "baseline_rss_kb": b["peak_rss_kb"],
                           "kb_per_gpu_incl_baseline": round(a["peak_rss_kb"] * 1.024 / a["gpus"], 1),
                           "kb_per_gpu_above_baseline": round((a["peak_rss_kb"] - b["peak_rss_kb"]) * 1.024 /
                                                              max(1, a["gpus"] - b["gpus"]), 1),
                           "target": "<= 100 KB per simulated GPU (issue 7); KB = 1000 B"}
if "allreduce_flow_p1" in r:
    a = r["allreduce_flow_p1"]
    s["flow_allreduce_1MiB"] = {"gpus": a["gpus"], "wall_s": a["wall_s"], "peak_rss_kb": a["peak_rss_kb"],
                                "target": "wall <= 0.47 s, peak <= 50 MB at 1,024 ranks (issue 9)"}
if "inflight_small" in r and "inflight_big" in r:
    a, b = r["inflight_small"], r["inflight_big"]
    frame = 4096  # buffer bytes per queued packet: cluster.mtu payload + nic.header_bytes (default 0)
    dq = (b["fabric"]["max_buffer_bytes"] - a["fabric"]["max_buffer_bytes"]) / frame
    drss = (b["peak_rss_kb_time"] - a["peak_rss_kb_time"]) * 1024
    s["memory_per_inflight_packet_b"] = {"queued_packets_delta": round(dq), "rss_delta_b": drss,
                                         "bytes_per_packet": round(drss / dq, 1) if dq > 0 else None,
                                         "target": "<= 256 B per in-flight packet (issue 7)"}
for k, target in (("allreduce_100k_flow", "peak <= 24 GiB (issue 9 must-show 3)"),
                  ("moe_192_flow", "scaled-down MoE; the 9,216-GPU run's target is wall <= 60 s"),
                  ("moe_384_flow", "scaled-down MoE; the 9,216-GPU run's target is wall <= 60 s"),
                  ("moe_768_flow", "scaled-down MoE; the 9,216-GPU run's target is wall <= 60 s"),
                  ("moe_9216_flow", "wall <= 60 s (issue 9 must-show 3)")):
    if k in r:
        a = r[k]
        s[k] = {"gpus": a["gpus"], "events": a["events"], "wall_s": a["wall_s"],
                "cpu_user_s": a.get("cpu_user_s"), "peak_rss_kb": a["peak_rss_kb"], "target": target}
s["events_per_s"] = {k: v["events_per_s"] for k, v in r.items()}
s["ok"] = ok
json.dump(s, open(out + "/summary.json", "w"), indent=2)
print(json.dumps(s, indent=2))
sys.exit(0 if ok else 1)
PY
