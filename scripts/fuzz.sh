#!/usr/bin/env bash
# Short libFuzzer run of every parser target (tests/fuzz; docs/testing.md, "Sanitizers and
# fuzzing"), each from its seed corpus tests/data/bad/fuzz/<name>/ for SECONDS (default 20).
# Fails on the first crash, leak, undefined behaviour, timeout or out-of-memory; the input that
# did it is left in <build>/fuzz-artifacts/. New inputs found go to <build>/fuzz-corpus/<name>/,
# never into the source tree.
# Usage: scripts/fuzz.sh [SECONDS [NAME...]]   (FABRICSIM_FUZZ_DIR: build folder, default build-fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${FABRICSIM_FUZZ_DIR:-build-fuzz}
SECS=${1:-20}
shift || true
source scripts/fuzz_build.sh
mkdir -p "$B/fuzz-artifacts"
ran=0
while read -r name bin corpus; do
  [ -n "$name" ] || continue
  if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then continue; fi
  mkdir -p "$B/fuzz-corpus/$name"
  log="$B/fuzz-artifacts/$name.log"
  echo "fuzz: $name for ${SECS}s"
  # -timeout: one input may take at most 10 s; -rss_limit_mb: 2 GiB (a parser must refuse what
  # would need more); LSan, ASan and UBSan stop at the first report (fuzz_build.sh options).
  if ! "$bin" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$B/fuzz-artifacts/$name-" "$B/fuzz-corpus/$name" "$corpus" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz: $name FAILED (log $log; the input is the $B/fuzz-artifacts/$name-* file named above)" >&2
    exit 1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" | tr '\n' ' '
  grep -Eo "cov: [0-9]+ ft: [0-9]+" "$log" | tail -n 1
  ran=$((ran + 1))
done <"$B/fuzzers.txt"
if [ "$ran" -eq 0 ]; then
  echo "fuzz: no target ran (names: $(cut -d' ' -f1 "$B/fuzzers.txt" | tr '\n' ' '))" >&2
  exit 1
fi
echo "fuzz: $ran targets, ${SECS}s each, no finding"
