#!/usr/bin/env bash
# Set-up, build (Release, warnings are errors) and the whole test suite, MPI tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
bash scripts/build.sh
(cd build && ctest --output-on-failure -j 2 --timeout 900)
bash scripts/sanitize.sh
