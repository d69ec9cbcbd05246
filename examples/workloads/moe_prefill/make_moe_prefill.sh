#!/usr/bin/env bash
# Writes synthetic MoE prefill workloads in SimAI/AICB text format (DISTRIBUTED_INFERENCE), one per
# TP/EP partition of 32 GPUs (TP x EP = 32, DP = PP = 1), with the structure of the MoE inference
# study in shared/reference/seed-studies.md section 1: per layer a TP AllReduce after attention and
# an EP all-to-all dispatch + combine around the experts. Sizes are hypothetical (the study's model
# configs are not reachable); change the parameters below and rerun to regenerate.
#   bash examples/workloads/moe_prefill/make_moe_prefill.sh
set -euo pipefail
cd "$(dirname "$0")"
GPUS=32 TOKENS=4096 HIDDEN=4096 TOPK=4 LAYERS=2 BYTES_PER_ELEM=2
ATTN_NS=40000 GATE_NS=5000 EXPERT_NS=60000   # per-GPU compute per layer (ns), same for every partition
for TP in 2 4 8 16; do
  EP=$((GPUS / TP))
  # A TP group holds TOKENS*TP/GPUS tokens; its AllReduce carries their activations.
  AR=$((TOKENS * TP / GPUS * HIDDEN * BYTES_PER_ELEM))
  # Each GPU dispatches its TOKENS/GPUS tokens to TOPK experts (and gets them back in the combine).
  A2A=$((TOKENS / GPUS * TOPK * HIDDEN * BYTES_PER_ELEM))
  f=moe_prefill_tp${TP}ep${EP}.txt
  {
    echo "DISTRIBUTED_INFERENCE model_parallel_NPU_group: $TP ep: $EP pp: 1 vpp: 1 ga: 1 all_gpus: $GPUS"
    echo $((3 * LAYERS))
    for ((l = 0; l < LAYERS; ++l)); do
      echo "attention_$l -1 $ATTN_NS ALLREDUCE $AR 0 NONE 0 0 NONE 0 0"
      echo "moe_dispatch_$l -1 $GATE_NS ALLTOALL_EP $A2A 0 NONE 0 0 NONE 0 0"
      echo "moe_combine_$l -1 $EXPERT_NS ALLTOALL_EP $A2A 0 NONE 0 0 NONE 0 0"
    done
  } > "$f"
  echo "wrote $f (TP AllReduce $AR B, EP all-to-all $A2A B per GPU)"
done
