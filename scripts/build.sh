#!/usr/bin/env bash
# Configures and builds fabricsim (Release) into build/. Usage: scripts/build.sh [target...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${FABRICSIM_BUILD_DIR:-build}
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  # Optional developer speed-up (not installed by setup.sh): worktrees share one cache because
  # paths are rewritten relative to the build directory.
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFABRICSIM_WERROR=ON "${LAUNCHER[@]}" >/dev/null
if [ $# -gt 0 ]; then
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target "$@"
else
  cmake --build "$BUILD_DIR" -j "$(nproc)"
fi
