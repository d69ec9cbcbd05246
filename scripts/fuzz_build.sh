# Sourced by scripts/sanitize.sh and scripts/fuzz.sh: checks for clang with libFuzzer, configures
# $B (clang, FABRICSIM_FUZZ=ON: ASan + UBSan without recovery, libFuzzer coverage) and builds the
# fuzz targets plus FABRICSIM_SAN_TARGETS; exports the sanitizer options. Needs B set.
CLANGXX=${CLANGXX:-clang++}
CLANGC=${CLANGC:-clang}
if ! command -v "$CLANGXX" >/dev/null 2>&1; then
  echo "sanitize/fuzz: $CLANGXX not found; run scripts/setup.sh (Debian 12: clang, libclang-rt-14-dev, llvm)" >&2
  exit 1
fi
probe_dir=$(mktemp -d)
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe_dir/p.cpp"
if ! "$CLANGXX" -fsanitize=fuzzer,address,undefined "$probe_dir/p.cpp" -o "$probe_dir/p" >"$probe_dir/log" 2>&1; then
  cat "$probe_dir/log" >&2
  rm -rf "$probe_dir"
  echo "sanitize/fuzz: $CLANGXX cannot link -fsanitize=fuzzer,address,undefined (libFuzzer missing); run scripts/setup.sh (Debian 12: libclang-rt-14-dev)" >&2
  exit 1
fi
rm -rf "$probe_dir"
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# -O1: sanitizer reports keep usable stacks and the fuzzers still run fast (Debug adds no -O).
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" -DCMAKE_C_FLAGS_DEBUG="-O1 -g" \
  -DCMAKE_CXX_COMPILER="$CLANGXX" -DCMAKE_C_COMPILER="$CLANGC" -DFABRICSIM_FUZZ=ON -DFABRICSIM_BUILD_PROFILER=OFF \
  "${LAUNCHER[@]}" >/dev/null
cmake --build "$B" -j "$(nproc)" --target fuzzers ${FABRICSIM_SAN_TARGETS:-}
# Stop at the first report of any sanitizer; leaks inside Open MPI's own start-up are not ours.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=0:detect_leaks=1:exitcode=66"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=67"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
