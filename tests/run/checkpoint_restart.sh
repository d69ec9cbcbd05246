#!/usr/bin/env bash
# Packet-rung checkpoints (docs/checkpoint.md): a 128-GPU AllReduce at the packet rung,
# checkpointed at three simulated times and restarted from each checkpoint, gives the
# uninterrupted run's results digest and event count, on NP processes (1: fabricsim itself,
# else mpiexec -n NP). A restart under another process count is refused with one line, exit 2.
# Usage: checkpoint_restart.sh FABRICSIM_BINARY NP
set -uo pipefail
FABRICSIM=${1:?usage: checkpoint_restart.sh FABRICSIM_BINARY NP}
NP=${2:?usage: checkpoint_restart.sh FABRICSIM_BINARY NP}
W=$(mktemp -d "${TMPDIR:-/tmp}/fabricsim_ckpt_restart.XXXXXX")
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; for f in "$W"/*.err; do echo "== $f"; cat "$f"; done; exit 1; }
launch() { if [ "$NP" = 1 ]; then "$FABRICSIM" "$@"; else mpiexec -n "$NP" "$FABRICSIM" "$@"; fi; }
# The results digest and the engine's event count of a run's summary (stdout).
digest() { grep '^results digest: ' "$1" | sed 's/^results digest: //'; }
events() { grep -o '^engine: [0-9]* events' "$1" | grep -o '[0-9]*'; }

# 4 MiB AllReduce over 128 GPUs (16 nodes of 8) at the packet rung, on four fabrics: the
# default (DCQCN, PFC, ECMP), packet spraying with low ECN thresholds (out-of-order receive
# state, ECN marks, CNPs), a lossy fabric with a small buffer (drops, go-back-N, retransmits),
# and a NIC profile with a tiny QP-context cache and a message-rate limit.
printf '%s\n' "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 128 checkpoints: 0 checkpoint_initiates: 0" \
  1 "ar -1 0 NONE 0 0 NONE 0 0 ALLREDUCE 4194304 0" > "$W/ar128.txt"
printf 'workload:\n  path: %s\n' "$W/ar128.txt" > "$W/default.yaml"
printf 'workload:\n  path: %s\nswitch:\n  routing: spray\n  ecn_kmin: 2KiB\n  ecn_kmax: 8KiB\n' "$W/ar128.txt" > "$W/spray.yaml"
printf 'workload:\n  path: %s\nswitch:\n  pfc: false\n  buffer: 256KiB\n  ecn_kmin: 2KiB\n  ecn_kmax: 8KiB\n' "$W/ar128.txt" > "$W/lossy.yaml"
# A NIC profile with a QP-context cache smaller than a NIC's QPs and a message-rate limit
# (misses in flight, LRU order and the token bucket are in the checkpoint).
printf 'workload:\n  path: %s\ncluster:\n  nic_profile: cx6_200g\n  gpus_per_host: 1\nnic:\n  qp_cache: 1\n  msg_rate: 20e6\n' "$W/ar128.txt" > "$W/nicprof.yaml"

for fabric in default spray lossy nicprof; do
  launch run "$W/$fabric.yaml" --summary-json "$W/ref.json" > "$W/ref.out" 2> "$W/ref.err" || fail "uninterrupted run: exit $?"
  ref=$(digest "$W/ref.out")
  ref_events=$(events "$W/ref.out")
  [ -n "$ref" ] && [ -n "$ref_events" ] || fail "no digest or event count in the uninterrupted run's summary"
  # Three checkpoint times inside the run: a quarter, half and three quarters of its simulated end.
  span_ps=$(grep -o '"simulated_time_ps": *[0-9]*' "$W/ref.json" | grep -o '[0-9]*$')
  [ -n "$span_ps" ] && [ "$span_ps" -gt 4 ] || fail "no simulated_time_ps in the summary JSON"
  rm -f "$W/ref.json"
  at="$((span_ps / 4))ps,$((span_ps / 2))ps,$((3 * span_ps / 4))ps"

  launch run "$W/$fabric.yaml" --checkpoint-at "$at" --checkpoint-dir "$W/ck-$fabric" > "$W/ck.out" 2> "$W/ck.err" \
    || fail "checkpointing run: exit $?"
  [ "$(digest "$W/ck.out")" = "$ref" ] || fail "checkpointing run: digest $(digest "$W/ck.out"), expected $ref"
  [ "$(events "$W/ck.out")" = "$ref_events" ] || fail "checkpointing run: $(events "$W/ck.out") events, expected $ref_events"
  n=0
  for c in "$W"/ck-$fabric/ckpt-t*ps; do
    [ -f "$c/manifest.bin" ] || fail "$c has no manifest"
    n=$((n + 1))
    launch run "$W/$fabric.yaml" --restart "$c" > "$W/r$n.out" 2> "$W/r$n.err" || fail "restart from $c: exit $?"
    [ "$(digest "$W/r$n.out")" = "$ref" ] || fail "restart from $c: digest $(digest "$W/r$n.out"), expected $ref"
    [ "$(events "$W/r$n.out")" = "$ref_events" ] || fail "restart from $c: $(events "$W/r$n.out") events, expected $ref_events"
    echo "$fabric: restart from $(basename "$c"): results digest $ref, $ref_events events"
  done
  [ "$n" = 3 ] || fail "$n checkpoints written, expected 3"
done

# Another process count: refused with one line naming the processes, exit 2.
if [ "$NP" = 1 ]; then other=(mpiexec -n 2 "$FABRICSIM"); else other=("$FABRICSIM"); fi
"${other[@]}" run "$W/default.yaml" --restart "$W/ck-default" > "$W/np.out" 2> "$W/np.err"
rc=$?
[ "$rc" = 2 ] || fail "restart under another process count: exit $rc, expected 2"
lines=$(sort -u "$W/np.err" | grep -c '^fabricsim: error: ')
[ "$lines" = 1 ] && grep -q 'process' "$W/np.err" || fail "restart under another process count: expected one error line naming the processes"
echo "PASS ($NP process(es)): 4 fabrics x 3 restarts give the uninterrupted digests; other process count refused: $(grep -m1 '^fabricsim: error: ' "$W/np.err")"
