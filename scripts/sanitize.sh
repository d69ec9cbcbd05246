#!/usr/bin/env bash
# Sanitizer passes, run by scripts/test.sh (docs/testing.md, "Sanitizers and fuzzing"):
#  1. ThreadSanitizer build of the engine and determinism tests (1 and 2 engine threads), run
#     sequentially: the one-writer-per-LP design must have no data races.
#  2. AddressSanitizer + UndefinedBehaviorSanitizer (clang, no recovery, halt on the first report)
#     build of the parser and engine tests, run sequentially, then scripts/fuzz.sh: a short
#     libFuzzer run of every parser from its seed corpus.
# Usage: scripts/sanitize.sh [tsan|asan|fuzz]... (default: all three)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
passes=("$@")
[ ${#passes[@]} -gt 0 ] || passes=(tsan asan fuzz)
export FABRICSIM_SOURCE_DIR="$(pwd)"
for pass in "${passes[@]}"; do
  case "$pass" in
    tsan)
      B=${FABRICSIM_TSAN_DIR:-build-tsan}
      cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="-fsanitize=thread -O1" \
        -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
      cmake --build "$B" -j "$(nproc)" --target engine_test determinism_test
      (
        export TSAN_OPTIONS="halt_on_error=1 exitcode=66"
        "$B/tests/engine/engine_test" --gtest_brief=1
        "$B/tests/run/determinism_test" --gtest_brief=1
      )
      echo "sanitize: ThreadSanitizer found no data race"
      ;;
    asan)
      # The parsers (io/, jobs/spec, topology files, simccl XML/JSON, kernel CSV, partition
      # files) and the engine; nothing of jobs/run or app/ is built.
      TESTS=(engine_test io_readers_test kernel_db_test topology_test nccl_topo_test nccl_settings_test
             fuzz_regress_test)
      B=${FABRICSIM_FUZZ_DIR:-build-fuzz}
      (
        FABRICSIM_SAN_TARGETS="${TESTS[*]}"
        source scripts/fuzz_build.sh
        # Full (slow) unwinding at malloc: Open MPI's libraries have no frame pointers, and only a
        # full stack names the library that scripts/lsan.supp suppresses.
        export ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
        for t in "${TESTS[@]}"; do
          bin=$(find "$B/tests" -type f -name "$t" -perm -u+x | head -n 1)
          # A wall-clock bound (topology build under 2 s) does not hold under ASan's slowdown.
          filter="*"
          [ "$t" != topology_test ] || filter="-Topology.ThousandGpuFabricsBuildFast"
          echo "sanitize: ASan+UBSan $t"
          log=$(mktemp)
          if ! "$bin" --gtest_brief=1 --gtest_filter="$filter" >"$log" 2>&1; then
            cat "$log"
            # LeakSanitizer's tracer thread (it stops the process with ptrace to scan for leaks)
            # can itself crash at exit ("Tracer caught signal 11", "LeakSanitizer has
            # encountered a fatal error") after every test passed, on some machines every time.
            # That is the tool failing, not the test: run it again with ASan and UBSan but without
            # the leak scan (said on stdout), and fail on anything else.
            if grep -q "LeakSanitizer has encountered a fatal error" "$log"; then
              echo "sanitize: LeakSanitizer's tracer failed in $t; running it again without the leak scan"
              ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" "$bin" --gtest_brief=1 --gtest_filter="$filter"
            else
              rm -f "$log"
              exit 1
            fi
          else
            cat "$log"
          fi
          rm -f "$log"
        done
      )
      echo "sanitize: AddressSanitizer and UndefinedBehaviorSanitizer found nothing"
      ;;
    fuzz)
      bash scripts/fuzz.sh "${FABRICSIM_FUZZ_SECONDS:-20}"
      ;;
    *)
      echo "sanitize: unknown pass '$pass' (tsan, asan or fuzz)" >&2
      exit 2
      ;;
  esac
done
