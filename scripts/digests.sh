#!/usr/bin/env bash
# Prints one line "name digest" per scenario (results digest of `fabricsim run`, `digest` of
# bench_cluster's JSON, `checksum` of bench_phold's JSON) into OUT_FILE, so that two builds can be
# compared bit for bit with `diff`:
#   scripts/digests.sh BIN_DIR OUT_FILE
# BIN_DIR holds fabricsim, bench_cluster and bench_phold. Every run is sequential, one MPI process
# and one engine thread, except the quickstart, which also runs with sim.threads=2 and under
# `mpiexec -n 2` (its digest must not change). A scenario that cannot be run prints
# "name SKIPPED reason"; one that fails prints "name FAILED rc=N" (the script then exits 1).
#
# Scenarios:
#  * quickstart: examples/quickstart.yaml (1 thread, 2 threads, 2 processes; TP 8 x DP 8 on 64
#    GPUs, packet rung); zero3_16: examples/zero3_16.yaml (LLaMA-7B ZeRO-3 on 16 GPUs from an
#    AICB workload file).
#  * det_*: tests/run/determinism_test.cpp inputs (the same workload files and --set options).
#  * fab_*: tests/fabric/fabric_test.cpp DcqcnPfcAllReduce128 (bench_cluster's nccl-tests
#    AllReduce of 8 MiB on 128 GPUs: the test builds the same single-AllReduce workload in memory).
#  * fid_*: tests/fidelity/fidelity_test.cpp BitIdentical* (the 16-NPU Chakra trace on the flow and
#    analytical rungs with both planners; AllToAll then AllReduce of 256 KiB on 32 GPUs written as
#    a SimAI DATA file; the 9-rank incast as bench_cluster's incast: its receiver is the last rank
#    and every host has one GPU, where the test's receiver is rank 0 on hosts of 2 GPUs).
#  * ring_*: tests/fidelity/ring_stream_test.cpp (4 strided rings of 4 = the DP groups of a SimAI
#    DATA file with TP 4; a world AllReduce of 16).
#  * moe_*: tests/fidelity/moe_scale_test.cpp (the same generator settings).
#  * nccl_*: tests/simccl/nccl_e2e_test.cpp NcclDeterminism (AllReduce cases through bench_cluster,
#    whose workload is the test's nccl_tests_workload; AllToAll/AllGather as SimAI DATA files).
#  * nvls_*: tests/simccl/nvls_test.cpp Identical* (per-host AllReduce as a SimAI TP-group file).
#  * lazy_*: tests/simccl/lazy_plans_test.cpp (its four collectives as a SimAI DATA file; REDUCED:
#    without the test's per-rank start offsets, and only the default lazy plans, not the
#    materialized ones, which the test shows equal).
#  * phold_test: tests/engine/phold_test.cpp small_config through bench_phold.
#  * regress_*: the cases of tests/regress/suite.yaml as `fabricsim run` (the reference digest of
#    each is checked too; a mismatch is reported on stderr).
#  * bench_*: bench/run_all.sh scenarios at its QUICK=1 sizes (the smallest it uses), one process
#    (inflight_* keep their 1 MiB / 8 MiB: QUICK does not shrink them), plus the MoE ladder's
#    smallest step (moe_192_flow, MOE=1) and MEGA's AllReduce at its QUICK size (1,024 GPUs).
#    The opt-in runs beyond ~1 minute each (BIG, GPT3, MEGA/MOE's larger steps) print SKIPPED.
# About 6 minutes on the 2-core machine when it is quiet (quickstart x3 ~20 s of CPU each, gpt3s and
# moe_192 dominate).
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BIN_DIR OUT_FILE" >&2
  exit 2
fi
BIN=$(cd "$1" && pwd)
OUT=$(realpath -m "$2")
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# shellcheck disable=SC1091
source scripts/env.sh
export OMP_NUM_THREADS=1
FS="$BIN/fabricsim"
CL="$BIN/bench_cluster"
PH="$BIN/bench_phold"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
: >"$OUT"
STATUS=0
T1=(--set sim.threads=1)

emit() {
  echo "$1 $2" >>"$OUT"
  echo "$1 $2 (${3:-?} s)"
}

# fs NAME ARGS...: `fabricsim run ARGS` without an HDF5 file; the summary's results digest.
fs() {
  local name=$1 t0 rc d
  shift
  t0=$(date +%s.%N)
  "$FS" run -o /dev/null "$@" >"$TMP/out" 2>&1
  rc=$?
  d=$(sed -n 's/^results digest: \([0-9a-f]*\).*/\1/p' "$TMP/out" | head -1)
  if [ $rc -ne 0 ] || [ -z "$d" ]; then
    emit "$name" "FAILED rc=$rc"
    tail -3 "$TMP/out" >&2
    STATUS=1
  else
    emit "$name" "$d" "$(echo "$(date +%s.%N) - $t0" | bc)"
  fi
}

# json_run NAME KEY CMD...: runs CMD --json FILE and prints KEY from the JSON.
json_run() {
  local name=$1 key=$2 t0 rc d
  shift 2
  rm -f "$TMP/r.json"
  t0=$(date +%s.%N)
  "$@" --json "$TMP/r.json" >"$TMP/out" 2>&1
  rc=$?
  d=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$TMP/r.json" "$key" 2>/dev/null)
  if [ $rc -ne 0 ] || [ -z "$d" ]; then
    emit "$name" "FAILED rc=$rc"
    tail -3 "$TMP/out" >&2
    STATUS=1
  else
    emit "$name" "$d" "$(echo "$(date +%s.%N) - $t0" | bc)"
  fi
}
cl() { local n=$1; shift; json_run "$n" digest "$CL" --threads 1 "$@"; }
ph() { local n=$1; shift; json_run "$n" checksum "$PH" --threads 1 "$@"; }
skip() { emit "$1" "SKIPPED $2" 0; }

# simai FILE POLICY TP GPUS LAYER...: a SimAI workload; each LAYER is "fwd_type fwd_bytes wg_type
# wg_bytes" (no compute). DATA issues the wg collectives on the DP group (TP = 1: the world);
# HYBRID_TRANSFORMER issues the fwd collectives on the TP group.
simai() {
  local f=$1 policy=$2 tp=$3 gpus=$4 i=0
  shift 4
  {
    echo "$policy model_parallel_NPU_group: $tp ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: $gpus checkpoints: 0 checkpoint_initiates: 0"
    echo $#
    for l in "$@"; do
      read -r ft fb wt wb <<<"$l"
      echo "layer$i -1 0 $ft $fb 0 NONE 0 0 $wt $wb 0"
      i=$((i + 1))
    done
  } >"$TMP/$f"
  echo "$TMP/$f"
}

CH=tests/data/chakra/astra-sim/examples
AR16=$CH/workload/microbenchmarks/all_reduce/16npus_1MB/all_reduce
A2A8=$CH/workload/microbenchmarks/all_to_all/8npus_1MB/all_to_all
SR8=$CH/system/custom_collectives/custom_ring_allreduce_8npus_1MB/custom_allreduce
HYB=tests/data/synthetic/hybrid_tp8_dp4.txt

echo "== quickstart"
fs quickstart examples/quickstart.yaml
fs quickstart_t2 examples/quickstart.yaml --set sim.threads=2
name=quickstart_mpi2
t0=$(date +%s.%N)
mpiexec -n 2 "$FS" run -o /dev/null examples/quickstart.yaml >"$TMP/out" 2>&1
rc=$?
d=$(sed -n 's/^results digest: \([0-9a-f]*\).*/\1/p' "$TMP/out" | head -1)
if [ $rc -ne 0 ] || [ -z "$d" ]; then emit $name "FAILED rc=$rc"; STATUS=1; else emit $name "$d" "$(echo "$(date +%s.%N) - $t0" | bc)"; fi
fs zero3_16 examples/zero3_16.yaml

echo "== tests/run/determinism_test.cpp"
fs det_allreduce16 --workload "$AR16" "${T1[@]}"
fs det_alltoall8_two_hosts --workload "$A2A8" --set cluster.gpus_per_host=4 "${T1[@]}"
fs det_custom_sendrecv --workload "$SR8" --set cluster.gpus_per_host=2 "${T1[@]}"
fs det_hybrid_tp8_dp4 --workload "$HYB" --set cluster.nics_per_leaf=2 --set cluster.spines=2 "${T1[@]}"
skip det_metis_partition "MetisAndPartitionFileMatchTopologyPlacement places LPs over >1 partition; at 1 process x 1 thread it is det_allreduce16/det_hybrid_tp8_dp4"

echo "== tests/fabric/fabric_test.cpp"
cl fab_dcqcn_pfc_allreduce128 --scenario allreduce --gpus 128 --bytes 8MiB --set cluster.topology=leaf_spine \
  --set cluster.nics_per_leaf=16 --set cluster.spines=4 --set nic.cc=dcqcn --set switch.pfc=true \
  --set switch.buffer=2MiB --set switch.ecn_kmin=20KB --set switch.ecn_kmax=80KB

echo "== tests/fidelity/fidelity_test.cpp"
for rung in flow analytical; do
  for planner in ring nccl; do
    fs "fid_ar16_${rung}_${planner}" --workload "$AR16" --set simccl.planner=$planner --set sim.fidelity=$rung "${T1[@]}"
  done
  cl "fid_incast9_${rung}" --scenario incast --hosts 9 --bytes 1MiB --set sim.fidelity=$rung
done
CLOS=$(simai clos32.txt DATA 1 32 "NONE 0 ALLTOALL 262144" "NONE 0 ALLREDUCE 262144")
F1=(--set cluster.topology=leaf_spine --set cluster.nics_per_leaf=8 --set cluster.oversubscription=4:1)
F2=(--set cluster.topology=leaf_spine --set cluster.nics_per_leaf=8 --set cluster.tiers=3 --set cluster.pods=2
  --set cluster.oversubscription=2:1,2:1)
for rung in packet flow analytical; do
  for planner in ring nccl; do
    if [ $rung = packet ] && [ $planner = nccl ]; then continue; fi  # as the test
    fs "fid_clos32_2tier_${rung}_${planner}" --workload "$CLOS" "${F1[@]}" --set simccl.planner=$planner --set sim.fidelity=$rung "${T1[@]}"
    fs "fid_clos32_3tier_${rung}_${planner}" --workload "$CLOS" "${F2[@]}" --set simccl.planner=$planner --set sim.fidelity=$rung "${T1[@]}"
  done
done

echo "== tests/fidelity/ring_stream_test.cpp"
RINGS=$(simai rings4x4.txt DATA 4 16 "NONE 0 ALLREDUCE 1048576")
WORLD16=$(simai world16.txt DATA 1 16 "NONE 0 ALLREDUCE 1048576")
RF=(--set cluster.gpus_per_host=1 --set cluster.topology=leaf_spine --set cluster.nics_per_leaf=4 --set cluster.oversubscription=4:1)
for rung in flow analytical; do
  for mode in stream step; do
    fs "ring_rings_${rung}_${mode}" --workload "$RINGS" "${RF[@]}" --set simccl.planner=ring --set sim.fidelity=$rung --set sim.ring_flows=$mode "${T1[@]}"
  done
  fs "ring_world16_${rung}_stream" --workload "$WORLD16" --set simccl.planner=ring --set sim.fidelity=$rung --set sim.ring_flows=stream "${T1[@]}"
done

echo "== tests/fidelity/moe_scale_test.cpp"
g=workload.generator.
fs moe_scale --set ${g}model=custom --set ${g}layers=4 --set ${g}hidden=512 --set ${g}heads=8 --set ${g}kv_heads=8 \
  --set ${g}ffn=swiglu --set ${g}ffn_hidden=1024 --set ${g}experts=16 --set ${g}top_k=2 --set ${g}vocab=4096 \
  --set ${g}gpu=H100 --set ${g}tp=2 --set ${g}pp=2 --set ${g}vp=2 --set ${g}ep=16 --set ${g}dp=16 \
  --set ${g}micro_batch=1 --set ${g}global_batch=32 --set ${g}seq_len=256 --set ${g}zero=1 \
  --set simccl.planner=ring --set sim.fidelity=flow "${T1[@]}"

echo "== tests/simccl/nccl_e2e_test.cpp"
cl nccl_allreduce_2x8_ll128 --scenario allreduce --gpus 16 --bytes 4MiB --set cluster.gpus_per_host=8 --set cluster.hosts=2
cl nccl_allreduce_4x4_tree --scenario allreduce --gpus 16 --bytes 3MiB --set nccl.NCCL_ALGO=Tree \
  --set nccl.NCCL_PROTO=Simple --set cluster.gpus_per_host=4 --set cluster.hosts=4
A2A16=$(simai a2a16.txt DATA 1 16 "NONE 0 ALLTOALL 2097152")
fs nccl_alltoall_2x8_pxn --workload "$A2A16" --set cluster.nics_per_leaf=1 --set cluster.spines=2 \
  --set cluster.gpus_per_host=8 --set cluster.hosts=2 "${T1[@]}"
AG8=$(simai ag8.txt DATA 1 8 "NONE 0 ALLGATHER 65536")
fs nccl_allgather_2x4_ll --workload "$AG8" --set cluster.gpus_per_host=4 --set cluster.hosts=2 "${T1[@]}"
cl nccl_allreduce_2x4_launch_latency --scenario allreduce --gpus 8 --bytes 1MiB --set simccl.launch_latency=nccl \
  --set cluster.gpus_per_host=4 --set cluster.hosts=2
A2A8F=$(simai a2a8.txt DATA 1 8 "NONE 0 ALLTOALL 1048576")
fs nccl_alltoall_2x4_launch_latency --workload "$A2A8F" --set simccl.launch_latency=nccl \
  --set cluster.gpus_per_host=4 --set cluster.hosts=2 "${T1[@]}"
skip nccl_sendrecv_2x4_launch_latency "nccl-tests sendrecv workload is built in memory; no CLI input expresses it (point-to-point launch latency is in det_custom_sendrecv's path)"

echo "== tests/simccl/nvls_test.cpp"
PERHOST=$(simai perhost2x4.txt HYBRID_TRANSFORMER 4 8 "ALLREDUCE 5242892 NONE 0")
for rung in packet flow analytical; do
  cl "nvls_node8_3MiB_${rung}" --scenario allreduce --gpus 8 --bytes 3MiB --set nccl.NCCL_ALGO=NVLS \
    --set sim.fidelity=$rung --set cluster.gpus_per_host=8 --set cluster.hosts=1
  fs "nvls_two_nodes_of_4_5MiB_${rung}" --workload "$PERHOST" --set nccl.NCCL_ALGO=NVLS --set sim.fidelity=$rung \
    --set cluster.gpus_per_host=4 --set cluster.hosts=2 "${T1[@]}"
  cl "nvls_nvlstree_2x4_6MiB_${rung}" --scenario allreduce --gpus 8 --bytes 6MiB --set nccl.NCCL_ALGO=NVLSTree \
    --set sim.fidelity=$rung --set cluster.gpus_per_host=4 --set cluster.hosts=2
done

echo "== tests/simccl/lazy_plans_test.cpp (reduced: no start offsets, default lazy plans only)"
LAZY=$(simai lazy32.txt DATA 1 32 "NONE 0 ALLREDUCE 6291468" "NONE 0 ALLGATHER 2097155" \
  "NONE 0 REDUCESCATTER 3145728" "NONE 0 ALLREDUCE 24000")
LAZYT=$(simai lazy32t.txt DATA 1 32 "NONE 0 ALLREDUCE 6291468" "NONE 0 ALLREDUCE 2097155" \
  "NONE 0 ALLREDUCE 3145728" "NONE 0 ALLREDUCE 24000")
LAZY8=$(simai lazy8.txt DATA 1 8 "NONE 0 ALLREDUCE 6291468" "NONE 0 ALLGATHER 2097155" \
  "NONE 0 REDUCESCATTER 3145728" "NONE 0 ALLREDUCE 24000")
for rung in packet flow; do
  fs "lazy_ring_${rung}" --workload "$LAZY" --set sim.fidelity=$rung --set nccl.NCCL_ALGO=Ring "${T1[@]}"
  fs "lazy_tree_ll128_${rung}" --workload "$LAZYT" --set sim.fidelity=$rung --set nccl.NCCL_ALGO=Tree --set nccl.NCCL_PROTO=LL128 "${T1[@]}"
  fs "lazy_nvls_chunk4096_${rung}" --workload "$LAZY8" --set sim.fidelity=$rung --set nccl.NCCL_ALGO=NVLS --set nccl.NCCL_NVLS_CHUNKSIZE=4096 "${T1[@]}"
  fs "lazy_nvlstree_${rung}" --workload "$LAZYT" --set sim.fidelity=$rung --set nccl.NCCL_ALGO=NVLSTree "${T1[@]}"
done

echo "== tests/simccl/pxn_p2p_test.cpp"
skip pxn_p2p "its send/recv workload (1->8, 0->4, 2->10 with a dependent compute) is built in memory; SimAI files have no point-to-point nodes and Chakra ETs need a writer"

echo "== tests/engine/phold_test.cpp"
ph phold_test_small --lps 64 --population 4 --remote 0.5 --mean-ps 1000 --lookahead-ps 100 --end-time-ps 100000 --seed 12345

echo "== tests/regress/suite.yaml (as fabricsim run)"
R=tests/regress
refcheck() {
  local want
  want=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['digest'])" "$R/references/$1.json")
  local got
  got=$(awk -v n="regress_$1" '$1 == n {print $2}' "$OUT")
  if [ "$want" != "$got" ]; then echo "regress_$1: digest $got differs from the reference $want" >&2; fi
}
fs regress_chakra_allreduce_16npus_1MB --workload "$AR16"
refcheck chakra_allreduce_16npus_1MB
fs regress_chakra_alltoall_8npus_1MB --workload "$A2A8" --set cluster.gpus_per_host=1 --set cluster.topology=leaf_spine
refcheck chakra_alltoall_8npus_1MB
fs regress_synthetic_tp8_dp4_leaf_spine --workload "$HYB" --set cluster.topology=leaf_spine --set cluster.gpus_per_host=4 \
  --set cluster.nic_bandwidth=200Gbps
refcheck synthetic_tp8_dp4_leaf_spine
fs regress_moe_prefill_tp4ep8_32x1 examples/sweeps/moe_base.yaml \
  --set workload.path="$ROOT/examples/workloads/moe_prefill/moe_prefill_tp4ep8.txt" --set cluster.gpus_per_host=1
refcheck moe_prefill_tp4ep8_32x1

echo "== bench/run_all.sh (QUICK=1 sizes, one process)"
ph bench_phold_p1_t1 --end-time 5us
skip bench_phold_p1_t2 "2-thread variant of bench_phold_p1_t1 (run_all.sh checks equal checksums); single-thread runs only"
skip bench_phold_p2_t1 "2-process variant of bench_phold_p1_t1 (run_all.sh checks equal checksums); single-process runs only"
cl bench_perm_p1 --scenario permutation --hosts 16 --bytes 256KiB
skip bench_perm_p2 "2-process variant of bench_perm_p1 (run_all.sh checks equal digests); single-process runs only"
cl bench_gpt3s_p1 --scenario gpt3 --gpus 128 --set workload.generator.layers=8 --set workload.generator.global_batch=2
skip bench_gpt3s_p2 "2-process variant of bench_gpt3s_p1 (run_all.sh checks equal digests); single-process runs only"
cl bench_incast_p1 --scenario incast --hosts 33 --bytes 256KiB
INF=(--set switch.pfc=false --set nic.cc=none --set switch.buffer=1GiB)
cl bench_inflight_small --scenario incast --hosts 33 --bytes 1MiB "${INF[@]}"
cl bench_inflight_big --scenario incast --hosts 33 --bytes 8MiB "${INF[@]}"
cl bench_allreduce_p1 --scenario allreduce --gpus 64 --bytes 4MiB
cl bench_mem_ar_p1 --scenario allreduce --gpus 128 --bytes 16MiB
cl bench_mem_baseline --scenario allreduce --gpus 8 --bytes 16MiB
cl bench_allreduce_flow_p1 --scenario allreduce --gpus 64 --bytes 1MiB --set simccl.planner=ring --set sim.fidelity=flow
skip bench_allreduce_1g_p2 "BIG=1 only: 1 GiB on 1,024 GPUs under 2 processes (far beyond 10 minutes)"
cl bench_allreduce_100k_flow --scenario allreduce --gpus 1024 --bytes 256MiB --set sim.fidelity=flow \
  --set nccl.NCCL_ALGO=Tree --set nccl.NCCL_MAX_NCHANNELS=2 --set nccl.NCCL_BUFFSIZE=67108864 \
  --set cluster.tiers=3 --set cluster.pods=16
skip bench_moe_384_flow "MEGA=1 only: ~17 s of CPU per run_all.sh; the MoE path is in bench_moe_192_flow"
skip bench_moe_9216_flow "MEGA=full / MOE=full only: hours / ~15 min of CPU"
cl bench_moe_192_flow --scenario spec --spec examples/moe_9216.yaml --set workload.generator.dp=8 \
  --set workload.generator.global_batch=192 --set cluster.pods=1 --set cluster.nics_per_leaf=auto
skip bench_moe_768_flow "MOE=1 ladder's largest step; the MoE path is in bench_moe_192_flow"
skip bench_moe_2304_flow "MOE=large only (~2 min of CPU, 1.9 GB)"
skip bench_gpt3_128 "GPT3=1 only: full GPT-3 175B iteration on 128 GPUs (far beyond 10 minutes); gpt3 path is in bench_gpt3s_p1"
skip bench_gpt3_1024 "GPT3=full only: ~68 min of one core"
exit $STATUS
