#!/usr/bin/env bash
# Writes synthetic dense-transformer training workloads in SimAI/AICB text format
# (HYBRID_TRANSFORMER), one per tensor-parallel size on 32 GPUs (DP = 32 / TP), for the
# "NIC speed x TP size on a future host" sweep (examples/sweeps/future_host_nic_tp.yaml).
# Per layer: TP AllReduce of the activations in forward and input-gradient, DP AllReduce of the
# layer's weight-gradient shard. Sizes are hypothetical (hidden 4096, 1024 tokens per micro-batch,
# bf16, 2 layers); compute shrinks as 1/TP. Rerun to regenerate:
#   bash examples/workloads/dense_tp/make_dense_tp.sh
set -euo pipefail
cd "$(dirname "$0")"
GPUS=32 TOKENS=1024 HIDDEN=4096 LAYERS=2 BYTES=2
ACT=$((TOKENS * HIDDEN * BYTES))                 # activations of one micro-batch
PARAMS_PER_LAYER=$((12 * HIDDEN * HIDDEN))      # attention + MLP weights
for TP in 4 8 16 32; do
  FWD_NS=$((400000 / TP)) IG_NS=$((400000 / TP)) WG_NS=$((400000 / TP))
  GRAD=$((PARAMS_PER_LAYER / TP * BYTES))        # this rank's gradient shard
  f=dense_tp${TP}.txt
  {
    echo "HYBRID_TRANSFORMER model_parallel_NPU_group: $TP ep: 1 pp: 1 vpp: 1 ga: 1 all_gpus: $GPUS"
    echo "$LAYERS"
    for ((l = 0; l < LAYERS; ++l)); do
      echo "layer_$l -1 $FWD_NS ALLREDUCE $ACT $IG_NS ALLREDUCE $ACT $WG_NS ALLREDUCE $GRAD 1000"
    done
  } > "$f"
  echo "wrote $f (TP AllReduce $ACT B, DP AllReduce $GRAD B)"
done
