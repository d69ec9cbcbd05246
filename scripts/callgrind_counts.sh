#!/usr/bin/env bash
# Instruction counts (valgrind callgrind, "Collected" Ir total) of two benchmarks, so that two
# builds can be compared without wall-clock noise:
#   scripts/callgrind_counts.sh BIN_DIR OUT_FILE [CG_DIR (default: OUT_FILE's folder)]
# BIN_DIR holds bench_phold and bench_cluster. Writes CG_DIR/cg.<name>.out (callgrind's profile)
# and, per benchmark, the command, the checksum/digest of the run and the total into OUT_FILE.
#  * phold: bench_phold's defaults (16,384 LPs, 16 events per LP, remote 0.5) run to 5 us of
#    simulated time instead of 25 us (run_all.sh's QUICK end time), one thread.
#  * perm128: bench_cluster's permutation on 128 hosts with 4 MiB per host (run_all.sh's full
#    size), one thread.
# Each takes about 1 minute under callgrind on the 2-core machine (PHOLD is reduced for that).
# Two runs of the same build differ by a few hundred Ir (~3e-7: MPI start-up), not more.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 BIN_DIR OUT_FILE [CG_DIR]" >&2
  exit 2
fi
BIN=$(cd "$1" && pwd)
OUT=$(realpath -m "$2")
CG=$(realpath -m "${3:-$(dirname "$OUT")}")
mkdir -p "$CG"
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
source scripts/env.sh
export OMP_NUM_THREADS=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
: >"$OUT"

measure() {
  local name=$1 key=$2
  shift 2
  local cmd=(valgrind --tool=callgrind --callgrind-out-file="$CG/cg.$name.out" "$@" --json "$TMP/$name.json")
  local t0 t1 total result
  t0=$(date +%s)
  "${cmd[@]}" >"$TMP/$name.log" 2>&1
  t1=$(date +%s)
  total=$(callgrind_annotate "$CG/cg.$name.out" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)
  if [ -z "$total" ]; then total=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$CG/cg.$name.out"); fi
  result=$(/usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d[sys.argv[2]], d['events'])" "$TMP/$name.json" "$key")
  {
    echo "name: $name"
    echo "command: ${cmd[*]}"
    echo "$key events: $result"
    echo "Ir total: $total"
    echo "wall under callgrind: $((t1 - t0)) s"
    echo
  } | tee -a "$OUT"
}

measure phold checksum "$BIN/bench_phold" --threads 1 --end-time 5us
measure perm128 digest "$BIN/bench_cluster" --threads 1 --scenario permutation --hosts 128 --bytes 4MiB
