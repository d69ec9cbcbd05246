#!/usr/bin/env python3
"""Optional oracles report SKIPPED, not absent, when they cannot run.

1. The gate itself (tests/support/oracle_gate.sh): a missing --need program gives exit 77 and a
   "SKIPPED:" line naming it; a hidden oracle gives exit 77 naming FABRICSIM_HIDE_ORACLES; a hidden
   `shared` folder runs the command with FABRICSIM_SHARED_DIR pointing nowhere; otherwise the
   command's own exit status comes through.
2. Every optional-oracle test registered in this build (ns-3, SimGrid, Slurm and the published-
   figure gates on ../shared) is re-run as ctest would run it (its command, working directory and
   ENVIRONMENT from `ctest --show-only=json-v1`) with the oracle hidden, and must exit with its
   SKIP_RETURN_CODE (77, which ctest prints as "Skipped") and print a SKIPPED line.

Usage: oracle_skip_test.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import subprocess
import sys

# Each optional-oracle test and the oracle name that hides it. The list is fixed here so that a
# test that silently stops being registered (the failure this guards against) is caught too.
ORACLE_TESTS = {
    "ns3_chain_test": "ns3",
    "ns3_fabricsim_test": "ns3",
    "simgrid_crosscheck_test": "simgrid",
    "slurm_real": "slurm",
    "validate_nccl_subset": "shared",
    "generators_validate_steps": "shared",
}

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def gate_checks(gate):
    env = dict(os.environ)
    env.pop("FABRICSIM_HIDE_ORACLES", None)
    p = subprocess.run(["bash", gate, "ns3", "--need", "/nonexistent/ns3_chain", "--", "true"],
                       capture_output=True, text=True, env=env)
    check(p.returncode == 77 and "SKIPPED" in p.stdout and "/nonexistent/ns3_chain" in p.stdout,
          "gate: a missing --need program is SKIPPED naming it")
    p = subprocess.run(["bash", gate, "simgrid", "--", "true"], capture_output=True, text=True,
                       env=dict(env, FABRICSIM_HIDE_ORACLES="ns3,simgrid"))
    check(p.returncode == 77 and "FABRICSIM_HIDE_ORACLES" in p.stdout, "gate: a hidden oracle is SKIPPED")
    p = subprocess.run(["bash", gate, "shared", "--", "sh", "-c", "echo $FABRICSIM_SHARED_DIR"],
                       capture_output=True, text=True, env=dict(env, FABRICSIM_HIDE_ORACLES="all"))
    check(p.returncode == 0 and "nonexistent" in p.stdout, "gate: a hidden shared folder points nowhere")
    p = subprocess.run(["bash", gate, "ns3", "--", "sh", "-c", "exit 5"], capture_output=True, text=True, env=env)
    check(p.returncode == 5, "gate: the command's own exit status comes through")
    p = subprocess.run(["bash", gate, "ns3", "--bogus"], capture_output=True, text=True, env=env)
    check(p.returncode == 2 and "unknown option" in p.stderr, "gate: a bad option is refused (exit 2)")


def registered_tests(build):
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], capture_output=True,
                         text=True, check=True).stdout
    tests = {}
    for t in json.loads(out)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        tests[t["name"]] = (t.get("command", []), props)
    return tests


def hidden_run_checks(build):
    tests = registered_tests(build)
    for name, oracle in ORACLE_TESTS.items():
        if name not in tests:
            check(False, f"{name}: registered with ctest (an absent oracle must show as SKIPPED)")
            continue
        command, props = tests[name]
        skip = str(props.get("SKIP_RETURN_CODE", ""))
        check(skip == "77", f"{name}: SKIP_RETURN_CODE 77")
        env = dict(os.environ)
        for kv in props.get("ENVIRONMENT", []):
            k, _, v = kv.partition("=")
            env[k] = v
        env["FABRICSIM_HIDE_ORACLES"] = oracle
        try:
            p = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120,
                               cwd=props.get("WORKING_DIRECTORY", build))
        except subprocess.TimeoutExpired:
            check(False, f"{name}: with {oracle} hidden it returns at once (it ran past 120 s)")
            continue
        said = (p.stdout + p.stderr).strip().splitlines()
        check(p.returncode == 77 and any("SKIP" in line for line in said),
              f"{name}: with {oracle} hidden it exits 77 (ctest: Skipped) with a SKIPPED line "
              f"(got exit {p.returncode}: {said[-1] if said else ''})")


def main():
    build, source = sys.argv[1], sys.argv[2]
    gate_checks(os.path.join(source, "tests", "support", "oracle_gate.sh"))
    hidden_run_checks(build)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all optional oracles report SKIPPED when hidden")
    return 0


if __name__ == "__main__":
    sys.exit(main())
