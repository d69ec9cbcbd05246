#!/usr/bin/env bash
# Runs an optional-oracle test, or reports it SKIPPED (exit 77, ctest SKIP_RETURN_CODE) with the
# reason on stdout when the oracle cannot run.
#
# Usage: oracle_gate.sh ORACLE [--need PATH]... -- COMMAND [ARG...]
#   ORACLE  ns3 | simgrid | slurm | shared: the name FABRICSIM_HIDE_ORACLES uses.
#   --need  a program the oracle needs: it must exist, be executable and have every shared library
#           its loader asks for (`ldd` reports none "not found"); otherwise the test is SKIPPED.
# FABRICSIM_HIDE_ORACLES (comma-separated oracle names, or "all") hides oracles on purpose, to test
# the skip path: a hidden ns3/simgrid/slurm oracle is SKIPPED here; a hidden `shared` folder runs
# COMMAND with FABRICSIM_SHARED_DIR pointing at a folder that does not exist, so the test's own
# missing-reference path (exit 77) is what reports it.
set -uo pipefail
oracle=${1:?usage: oracle_gate.sh ORACLE [--need PATH]... -- COMMAND [ARG...]}
shift
needs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    --need) needs+=("${2:?--need takes a path}"); shift 2 ;;
    *) echo "oracle_gate.sh: unknown option '$1' (use --need PATH or --)" >&2; exit 2 ;;
  esac
done
[ "${1:-}" = "--" ] || { echo "oracle_gate.sh: missing '--' before the command" >&2; exit 2; }
shift
hidden=0
IFS=',' read -r -a hide <<<"${FABRICSIM_HIDE_ORACLES:-}"
for h in "${hide[@]}"; do
  if [ "$h" = "$oracle" ] || [ "$h" = "all" ]; then hidden=1; fi
done
if [ "$hidden" = 1 ]; then
  if [ "$oracle" = "shared" ]; then
    export FABRICSIM_SHARED_DIR=/nonexistent/fabricsim-hidden-shared
  else
    echo "SKIPPED: oracle '$oracle' hidden by FABRICSIM_HIDE_ORACLES=$FABRICSIM_HIDE_ORACLES"
    exit 77
  fi
fi
for p in "${needs[@]}"; do
  if [ ! -x "$p" ]; then
    echo "SKIPPED: oracle '$oracle' needs $p, which is missing or not executable"
    exit 77
  fi
  if command -v ldd >/dev/null 2>&1; then
    missing=$(ldd "$p" 2>/dev/null | grep 'not found' | head -3 | tr -s ' \t\n' ' ')
    if [ -n "$missing" ]; then
      echo "SKIPPED: oracle '$oracle': $p cannot load its libraries ($missing)"
      exit 77
    fi
  fi
done
exec "$@"
