#!/usr/bin/env python3
"""Runs scripts/validate_nccl on a small subset and checks that it exits 0 (or 77: reference data
missing, passed through for ctest's SKIP_RETURN_CODE) and writes a well-formed table: the summary
statistics, and per series a header and rows of four cells whose published busbw is a number and
whose simulated busbw is a number or "skipped" with a reason. Accuracy is not checked here.
Usage: check_validate_table.py SCRIPT FABRICSIM OUT [validate_nccl args...]"""
import re
import subprocess
import sys

script, exe, out = sys.argv[1:4]
p = subprocess.run([sys.executable, script, "--fabricsim", exe, "--out", out] + sys.argv[4:], capture_output=True,
                   text=True)
if p.returncode == 77:
    print(p.stdout.strip())
    sys.exit(77)
if p.returncode != 0:
    print("validate_nccl exited %d: %s" % (p.returncode, (p.stderr or p.stdout)[-2000:]))
    sys.exit(1)
text = open(out).read()
bad = []
for key in ("rows within 10%", "median \\|error\\| over 1 MiB..64 MiB", "worst series \\|error\\| at >= 64 KiB"):
    if key not in text:
        bad.append("summary lacks '%s'" % key)
rows = 0
for line in text.splitlines():
    if not line.startswith("| ") or line.startswith("| size") or line.startswith("| statistic"):
        continue
    cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
    if len(cells) == 3:  # summary table
        continue
    if len(cells) != 4:
        bad.append("row without 4 cells: " + line)
        continue
    size, pub, sim, err = cells
    if not re.fullmatch(r"\d+ (B|KiB|MiB|GiB)", size) or not re.fullmatch(r"\d+\.\d\d", pub):
        bad.append("bad size or published busbw: " + line)
    elif sim == "skipped":
        if not err:
            bad.append("skipped row without a reason: " + line)
    elif not re.fullmatch(r"\d+\.\d\d", sim) or not re.fullmatch(r"[+-]\d+\.\d", err):
        bad.append("bad simulated busbw or error: " + line)
    rows += 1
if rows == 0:
    bad.append("no table rows")
if bad:
    print("\n".join(bad))
    sys.exit(1)
print("validate_nccl wrote %d well-formed rows to %s" % (rows, out))
