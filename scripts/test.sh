#!/usr/bin/env bash
# Installs what is missing (test extras included), builds, and runs every test once; then TSAN over the
# concurrent code and short fuzz runs. Each step says how long it took; each can be skipped (see below).
# Tests that need the reference data in ../shared skip loudly when it is absent; set
# TINYLLM_REQUIRE_SHARED=1 to make its absence a failure (CI does). Extra arguments go to the unit tests'
# ctest (e.g. -R gguf).
#
# The layout CI runs (.ci/run); budget 60 min on 2 cores (CI's limit is 90):
#   0. the generated tables match their generator scripts (seconds);
#   1. GCC -Werror, build/: tinyllm and tinyllm_fake, and the Node suites against them;
#   2. clang-19 -Werror ASAN+UBSAN (+libFuzzer instrumentation), build-asan/: the whole tree (so it builds
#      with clang too) and every unit test, once;
#   2b. the golden tests again under TINYLLM_CPU_ISA=avx2 and scalar (the other kernel variants);
#   3. TSAN (GCC), build-tsan/: test_server and test_devices, the server's and the thread pool's tests;
#   4. each fuzz target for TINYLLM_FUZZ_SECONDS, from build-asan/.
# TINYLLM_ASAN=0 drops step 2 and runs every test in build/ instead (GCC, the whole tree: the quick local
# layout); TINYLLM_ASAN=gguf runs the whole tree in build/ and only the GGUF suite under ASAN (GCC);
# TINYLLM_VARIANTS=0 drops step 2b; TINYLLM_TSAN=0 drops step 3; TINYLLM_FUZZ_SECONDS=0 drops step 4; TINYLLM_WERROR=0 keeps warnings warnings.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp() { date +%s; }
took() { echo "[test] $1 took $(( $(stamp) - $2 )) s"; }
jobs=$(nproc)
werror=ON
[ "${TINYLLM_WERROR:-1}" = "0" ] && werror=OFF
ASAN_MODE=${TINYLLM_ASAN:-all}
ASAN_DIR=${ASAN_BUILD_DIR:-build-asan}
BUILD_DIR=${BUILD_DIR:-build}

# 0. The generated tables are what their generator scripts write today (a hand edit, or a generator
# changed without regenerating, fails here in seconds). The quant lattices come from ../shared's
# tables.json, the Unicode tables from Debian's unicode-data. (tests/tokenizer/data/pre_split_cases.json
# is not checked: its generator needs the `regex` package from PyPI, newer than Debian's python3-regex,
# which splits a few texts differently.)
t0=$(stamp)
./scripts/install-deps.sh --test
gen_check() {  # generator output vs the committed file
  local file=$1; shift
  if ! "$@" 2>/dev/null | cmp -s - "$file"; then echo "[test] $file differs from what '$*' writes: regenerate it"; exit 1; fi
}
if [ -f ../shared/golden/quants/tables.json ]; then
  gen_check gguf/quant_tables.cpp python3 scripts/gen_quant_tables.py
elif [ "${TINYLLM_REQUIRE_SHARED:-0}" != "0" ]; then
  echo "[test] ../shared is required (TINYLLM_REQUIRE_SHARED) but ../shared/golden/quants/tables.json is absent"; exit 1
else
  echo "[test] SKIPPED: gguf/quant_tables.cpp not checked: ../shared/golden/quants/tables.json is absent"
fi
gen_check tokenizer/unicode_tables.cpp python3 scripts/gen_unicode_tables.py
took "generated tables match their generators" "$t0"

# 1. GCC with -Werror: everything; with TINYLLM_ASAN=all only what the Node suites run.
t0=$(stamp)
if [ "$ASAN_MODE" = "all" ]; then
  CMAKE_ARGS="${CMAKE_ARGS:-} -DTINYLLM_WERROR=$werror" BUILD_TARGETS="tinyllm tinyllm_fake" ./scripts/build.sh --test
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$jobs" -R '^node:'
  took "GCC build and Node suites" "$t0"
else
  CMAKE_ARGS="${CMAKE_ARGS:-} -DTINYLLM_WERROR=$werror" ./scripts/build.sh --test
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$jobs" "$@"
  took "GCC build and all tests" "$t0"
fi

# 2. AddressSanitizer + UndefinedBehaviorSanitizer. By default (TINYLLM_ASAN=all) every unit test, in a clang-19
# build that also carries the fuzzing instrumentation (the fuzz targets below come from it). TINYLLM_ASAN=gguf:
# the GGUF reader's suite under GCC (every truncation point, each malformation, a fixed-seed fuzz loop).
if [ "$ASAN_MODE" = "all" ]; then
  t0=$(stamp)
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$ASAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTINYLLM_SANITIZE=ON \
    -DTINYLLM_FUZZ=ON -DTINYLLM_WERROR=$werror ${CMAKE_ARGS:-} >/dev/null
  cmake --build "$ASAN_DIR" -j"$jobs"
  took "clang-19 ASAN+UBSAN build" "$t0"
  t0=$(stamp)
  echo "[test] unit tests under ASAN+UBSAN (clang-19)"
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    ctest --test-dir "$ASAN_DIR" --output-on-failure -j"$jobs" -E '^node:' "$@"
  took "unit tests under ASAN+UBSAN" "$t0"
elif [ "$ASAN_MODE" != "0" ]; then
  t0=$(stamp)
  cmake -S . -B "$ASAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTINYLLM_SANITIZE=ON ${CMAKE_ARGS:-} >/dev/null
  cmake --build "$ASAN_DIR" -j"$jobs" --target test_gguf
  echo "[test] gguf suite under ASAN+UBSAN"
  "$ASAN_DIR/tests/test_gguf"
  took "ASAN+UBSAN (gguf suite)" "$t0"
fi

# 2b. The goldens again on the CPU kernels' other instruction-set variants (every run above takes the
# CPU's best): llama.cpp's outputs, the kernels' references and the CLI's golden runs under
# TINYLLM_CPU_ISA=avx2 (where the CPU has AVX2, FMA and F16C) and scalar, in the build that has the tests.
if [ "${TINYLLM_VARIANTS:-1}" != "0" ]; then
  t0=$(stamp)
  VARIANT_DIR=$BUILD_DIR
  [ "$ASAN_MODE" = "all" ] && VARIANT_DIR=$ASAN_DIR
  isas=scalar
  if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && grep -qw f16c /proc/cpuinfo; then isas="avx2 scalar"; fi
  for isa in $isas; do
    echo "[test] goldens on the $isa kernels"
    TINYLLM_CPU_ISA=$isa ctest --test-dir "$VARIANT_DIR" --output-on-failure -j"$jobs" -R golden -E '^node:'
  done
  took "goldens on the other variants ($isas)" "$t0"
fi

# 3. ThreadSanitizer over the concurrent code: the server (acceptor, workers, request queue, prompt slots,
# streams) and the CPU thread pool, in build-tsan with only those test targets.
if [ "${TINYLLM_TSAN:-1}" != "0" ]; then
  t0=$(stamp)
  TSAN_DIR=${TSAN_BUILD_DIR:-build-tsan}
  cmake -S . -B "$TSAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTINYLLM_TSAN=ON -DTINYLLM_AMD=OFF ${CMAKE_ARGS:-} >/dev/null
  cmake --build "$TSAN_DIR" -j"$jobs" --target test_server test_devices
  echo "[test] server, queue and thread-pool tests under TSAN"
  # Left out: the test with two templates rendering at once in two workers, where TSAN reports a write and a
  # read both inside Debian's cpp-httplib (a shared library built without TSAN, whose own synchronization
  # TSAN cannot see; suppressing by that module would also hide races in our handlers, which it calls).
  TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
    ctest --test-dir "$TSAN_DIR" --output-on-failure -j"$jobs" -R '^server:|^devices:CPU (thread pool|device runs)' \
      -E 'clients that leave during a long render'
  took "TSAN (build and tests)" "$t0"
fi

# 4. Each libFuzzer target for a short fixed time (ASAN+UBSAN): a crash, leak, timeout or out-of-memory
# fails the run.
FUZZ_SECONDS=${TINYLLM_FUZZ_SECONDS:-30}
if [ "$FUZZ_SECONDS" != "0" ]; then
  t0=$(stamp)
  [ "$ASAN_MODE" = "all" ] && export FUZZ_BUILD_DIR=${FUZZ_BUILD_DIR:-$ASAN_DIR}
  for target in gguf jinja request tokenizer grammar; do
    ./scripts/fuzz.sh "$target" "$FUZZ_SECONDS"
  done
  took "fuzzing" "$t0"
fi
