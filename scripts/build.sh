#!/usr/bin/env bash
# Configures and builds fabricsim (Release) into build/. Usage: scripts/build.sh [target...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FABRICSIM_BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFABRICSIM_WERROR=ON >/dev/null
if [ $# -gt 0 ]; then
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target "$@"
else
  cmake --build "$BUILD_DIR" -j "$(nproc)"
fi
