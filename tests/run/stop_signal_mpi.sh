#!/usr/bin/env bash
# SIGUSR1 to `mpiexec -n 2 fabricsim run` (docs/checkpoint.md): Open MPI forwards it to both
# processes, which agree on one window boundary to stop at; rank 0 prints the one status line,
# the exit code is 75 and no output file (HDF5, summary JSON) is left.
# Usage: stop_signal_mpi.sh FABRICSIM_BINARY
set -uo pipefail
FABRICSIM=${1:?usage: stop_signal_mpi.sh FABRICSIM_BINARY}
W=$(mktemp -d "${TMPDIR:-/tmp}/fabricsim_stop_mpi.XXXXXX")
trap 'rm -rf "$W"' EXIT
fail() { echo "FAIL: $*"; cat "$W/err.txt"; exit 1; }
# A 64 MiB AllReduce over 128 GPUs at the packet rung: ~12 s on 2 processes, signalled after 1 s.
printf '%s\n' "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 1 ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: 128 checkpoints: 0 checkpoint_initiates: 0" \
  1 "ar -1 0 NONE 0 0 NONE 0 0 ALLREDUCE 1073741824 0" > "$W/ar128.txt"
printf 'workload:\n  path: %s\n' "$W/ar128.txt" > "$W/spec.yaml"
mpiexec -n 2 "$FABRICSIM" run "$W/spec.yaml" --log-level info -o "$W/out.h5" --summary-json "$W/s.json" 2> "$W/err.txt" &
pid=$!
for _ in $(seq 1200); do grep -q 'simulating on' "$W/err.txt" && break; sleep 0.05; done
sleep 0.3
kill -USR1 "$pid"
wait "$pid"
rc=$?
[ "$rc" = 75 ] || fail "exit code $rc, expected 75"
n=$(grep -c '^fabricsim: stopped by a signal at simulated time .* after [0-9]* events; no checkpoint; no output written$' "$W/err.txt")
[ "$n" = 1 ] || fail "$n status lines, expected 1 (rank 0 only)"
[ ! -e "$W/out.h5" ] && [ ! -e "$W/s.json" ] || fail "an output file was left: $(ls "$W")"
ls "$W" | grep -v -E '^(ar128.txt|spec.yaml|err.txt)$' && fail "left behind in $W"
echo "PASS: $(grep '^fabricsim: stopped' "$W/err.txt")"
