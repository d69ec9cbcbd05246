#!/usr/bin/env python3
"""`fabricsim run|generate` with mode: inference through the command line: bad inference configs
exit 2 with one line on stderr naming the key and write no output file; the example spec
examples/inference_llama3_70b.yaml runs (one replica of Llama 3 70B, TP 8, 127 decode steps)
and its summary JSON holds TTFT < end-to-end, TPOT = mean decode step, throughput.
Usage: inference_cli_test.py FABRICSIM SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile

FAB, SRC = sys.argv[1], sys.argv[2]
failed = 0


def check(cond, what):
    global failed
    if not cond:
        failed += 1
        print("FAIL:", what)


def run(args):
    return subprocess.run([FAB] + args, capture_output=True, text=True, timeout=600)


G = "workload.generator."
BASE = ["--set", G + "model=llama3-70b", "--set", G + "mode=inference", "--set", G + "tp=8", "--set", G + "batch=16",
        "--set", G + "prompt_tokens=2048", "--set", G + "output_tokens=128"]


def with_sets(base, **kv):
    out = list(base)
    for k, v in kv.items():
        out += ["--set", G + k + "=" + str(v)]
    return out


tmp = tempfile.mkdtemp(prefix="fabricsim_infer_cli_")
bad = [
    (dict(tp=5), "workload.generator.tp: 64 attention heads are not divisible by TP 5"),
    (dict(pp=3), "80 layers are not divisible by PP 3"),
    (dict(gpus=16), "workload.generator.gpus: world size 16"),
    (dict(batch=0), "workload.generator.batch: '0' is not a whole number >= 1"),
    (dict(seq_len=4096), "workload.generator.seq_len: is a training key but mode is inference"),
    (dict(mode="serve"), "workload.generator.mode: 'serve' is not a mode"),
    (dict(model="deepseek-v3", ep=8), "workload.generator.model: inference of multi-head latent attention"),
    (dict(model="mixtral-8x7b", ep=16, dp=2), "workload.generator.ep: EP 16 is above the model's 8 experts"),
    (dict(model="mixtral-8x7b", ep=8, batch=4), "workload.generator.batch: batch 4 is not divisible by TP 8"),
    (dict(attention="unfused"), "workload.generator.attention: inference is modelled with FlashAttention"),
]
for i, (kv, msg) in enumerate(bad):
    for cmd in ("run", "generate"):
        out = os.path.join(tmp, f"bad{i}_{cmd}")
        args = [cmd] + with_sets(BASE, **kv) + ["-o", out + (".h5" if cmd == "run" else "")]
        if cmd == "run":
            args += ["--summary-json", out + ".json"]
        r = run(args)
        err = r.stderr.strip()
        check(r.returncode == 2, f"{cmd} {kv}: exit {r.returncode}, want 2 ({err!r})")
        check(err.count("\n") == 0 and msg in err, f"{cmd} {kv}: want one line containing {msg!r}, got {err!r}")
        check(not any(f.startswith(f"bad{i}_{cmd}") for f in os.listdir(tmp)), f"{cmd} {kv}: partial output left")
r = run(["run"] + with_sets(["--set", G + "model=llama3-70b"], batch=4) + ["-o", os.path.join(tmp, "t.h5")])
check(r.returncode == 2 and "is an inference key but mode is training" in r.stderr, f"batch without mode: {r.stderr!r}")

# The example spec: well under a minute on one core.
js = os.path.join(tmp, "ex.json")
r = run(["run", os.path.join(SRC, "examples/inference_llama3_70b.yaml"), "-q", "-o", os.path.join(tmp, "ex.h5"),
         "--summary-json", js])
check(r.returncode == 0, f"example: exit {r.returncode} {r.stderr!r}")
if r.returncode == 0:
    j = json.load(open(js))
    inf = j["inference"]
    steps = inf["decode_step_ps"]
    check(len(steps) == 127 and inf["decode_steps"] == 127, f"example: {len(steps)} decode steps")
    check(0 < inf["ttft_ps"] < inf["total_ps"] == j["simulated_time_ps"], f"example: ttft {inf['ttft_ps']} total {inf['total_ps']}")
    check(all(b >= a for a, b in zip(steps, steps[1:])) and steps[-1] > steps[0], "example: decode steps not growing")
    check(inf["tpot_ps"] == sum(steps) // len(steps), "example: tpot is not the mean decode step")
    check(abs(inf["output_tokens_per_s"] - 16 * 128 / (inf["total_ps"] * 1e-12)) < 1e-6 * inf["output_tokens_per_s"],
          "example: throughput")
    check(j["wall_s"] < 60, f"example: wall {j['wall_s']} s")
print("inference CLI:", "FAILED %d checks" % failed if failed else "all passed")
sys.exit(1 if failed else 0)
