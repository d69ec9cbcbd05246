#!/bin/bash
# sim.fold: dp benchmark (not a test): folded vs unfolded wall time and peak memory at the flow rung
# for generated GPT-3 13B and 175B on 64/256/1024 H100s (rail-optimized, non-blocking).
# Usage: [EXTRA="key=value ..."] bench/fold/run.sh FABRICSIM OUTDIR "model:tp:pp:dp:layers:fold" ...
# Each point: one `fabricsim run` under /usr/bin/time -v; prints iteration time, events, wall, RSS.
set -u
fs=$1; out=$2; shift 2
mkdir -p "$out"
for p in "$@"; do
  IFS=: read -r model tp pp dp layers fold <<<"$p"
  name="${model}_tp${tp}pp${pp}dp${dp}_L${layers}_${fold}"
  sets=(--set workload.generator.model="$model" --set workload.generator.gpu=H100 --set workload.generator.tp="$tp"
        --set workload.generator.pp="$pp" --set workload.generator.dp="$dp" --set workload.generator.zero=1
        --set workload.generator.global_batch=$((4 * pp * dp)) --set sim.fidelity=flow --set sim.fold="$fold"
        --set output.h5=/dev/null)
  [ "$layers" != "all" ] && sets+=(--set workload.generator.layers="$layers")
  for e in ${EXTRA:-}; do sets+=(--set "$e"); done
  /usr/bin/time -v "$fs" run "${sets[@]}" >"$out/$name.out" 2>"$out/$name.time"
  it=$(grep -o "iteration time: [^(]*([0-9]* ps" "$out/$name.out" | grep -o "[0-9]* ps")
  ev=$(grep -o "engine: [0-9]* events" "$out/$name.out" | grep -o "[0-9]*")
  wall=$(grep "Elapsed (wall" "$out/$name.time" | awk '{print $NF}')
  rss=$(grep "Maximum resident" "$out/$name.time" | awk '{print $NF}')
  echo "$name gpus=$((tp * pp * dp)) iter=$it events=$ev wall=$wall maxrss_kB=$rss"
done
