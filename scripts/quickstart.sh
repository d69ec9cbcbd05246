#!/usr/bin/env bash
# Set-up, Release build, and one simulated training iteration of the bundled example
# (examples/quickstart.yaml: TP 8 x DP 8 on 64 GPUs over a 4:1 oversubscribed leaf-spine fabric,
# packet rung; about a minute on 2 cores). Prints the summary and the output path.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
bash scripts/build.sh fabricsim
mkdir -p out
./build/app/fabricsim run examples/quickstart.yaml -o out/quickstart.h5 \
  --summary-json out/quickstart.json "$@"
echo "summary JSON: $(pwd)/out/quickstart.json"
echo "plots: ./build/app/fabricsim report out/quickstart.h5   (PNGs + out/quickstart_report/index.html)"
