#!/usr/bin/env bash
# ThreadSanitizer build of the engine and determinism tests (1 and 2 engine threads), run
# sequentially: the one-writer-per-LP design must have no data races. Usage: scripts/sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
B=${FABRICSIM_TSAN_DIR:-build-tsan}
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="-fsanitize=thread -O1" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
cmake --build "$B" -j "$(nproc)" --target engine_test determinism_test
export FABRICSIM_SOURCE_DIR="$(pwd)"
export TSAN_OPTIONS="halt_on_error=1 exitcode=66"
"$B/tests/engine/engine_test" --gtest_brief=1
"$B/tests/run/determinism_test" --gtest_brief=1
echo "sanitize: ThreadSanitizer found no data race"
