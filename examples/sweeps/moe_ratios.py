#!/usr/bin/python3
"""Ratios between configurations of a MoE-study sweep aggregate (moe_study*.yaml):
TP16EP2/TP2EP16 per topology and algorithm, Tree/Ring, topology vs T6, exposed-comm share.
    /usr/bin/python3 examples/sweeps/moe_ratios.py sweeps/moe_study_reduced/aggregate.csv"""
import csv
import sys

rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["status"] == "ok"]
t = {(r["axis_topo"], r["axis_tpep"], r.get("axis_algo", "-")): int(r["iteration_time_ps"]) for r in rows}
share = [float(r["exposed_comm_ps_mean"]) / int(r["iteration_time_ps"]) for r in rows]
topos = sorted({k[0] for k in t})
algos = sorted({k[2] for k in t})
tps = [p for p in ["tp2ep16", "tp4ep8", "tp8ep4", "tp16ep2"] if any(k[1] == p for k in t)]
print("iteration time (us):  " + "  ".join(f"{to}[{'|'.join(algos)}]" for to in topos))
for tp in tps:
    print(f"  {tp:<8} " + "  ".join(" | ".join(f"{t[(to, tp, a)] / 1e6:8.1f}" for a in algos) for to in topos))
for a in algos:
    print(f"TP16EP2/TP2EP16 ({a}): " + "  ".join(f"{to} {t[(to, 'tp16ep2', a)] / t[(to, 'tp2ep16', a)]:.2f}" for to in topos))
if "Ring" in algos and "Tree" in algos:
    for to in topos:
        print(f"Tree/Ring {to}: " + "  ".join(f"{tp} {t[(to, tp, 'Tree')] / t[(to, tp, 'Ring')]:.3f}" for tp in tps))
print(f"exposed communication share of iteration time: {min(share):.1%} .. {max(share):.1%}")
