#!/usr/bin/env bash
# Installs what is missing (test extras included), builds with warnings as errors, and runs the whole
# test suite; then the sanitizer passes and short fuzz runs. Each step says how long it took; each can
# be skipped (see below). Tests that need the reference data in ../shared skip loudly when it is absent;
# set TINYLLM_REQUIRE_SHARED=1 to make its absence a failure (CI does).
set -euo pipefail
cd "$(dirname "$0")/.."
stamp() { date +%s; }
took() { echo "[test] $1 took $(( $(stamp) - $2 )) s"; }
jobs=$(nproc)

# The main build (GCC) with -Werror (TINYLLM_WERROR=0: warnings stay warnings), and every test.
t0=$(stamp)
werror=ON
[ "${TINYLLM_WERROR:-1}" = "0" ] && werror=OFF
CMAKE_ARGS="${CMAKE_ARGS:-} -DTINYLLM_WERROR=$werror" ./scripts/build.sh --test
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$jobs" "$@"
took "build and tests" "$t0"

# AddressSanitizer + UndefinedBehaviorSanitizer, in build-asan. By default (TINYLLM_ASAN=1) the GGUF
# reader's suite under GCC (every truncation point, each malformation, a fixed-seed fuzz loop).
# TINYLLM_ASAN=all runs every unit test (the Node suites drive the uninstrumented build above) in a
# clang-19 build that also carries the fuzzing instrumentation, so the tree is proven to build with
# clang and the fuzz targets below come from the same build. It is not yet CI's default: one timed run
# of the whole layout on an idle machine is still to be done (estimated ~48 min with TSAN).
# TINYLLM_ASAN=0 skips it.
ASAN_MODE=${TINYLLM_ASAN:-1}
ASAN_DIR=${ASAN_BUILD_DIR:-build-asan}
if [ "$ASAN_MODE" = "all" ]; then
  t0=$(stamp)
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$ASAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTINYLLM_SANITIZE=ON \
    -DTINYLLM_FUZZ=ON ${CMAKE_ARGS:-} >/dev/null
  cmake --build "$ASAN_DIR" -j"$jobs"
  echo "[test] unit tests under ASAN+UBSAN (clang-19)"
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    ctest --test-dir "$ASAN_DIR" --output-on-failure -j"$jobs" -E '^node:'
  took "ASAN+UBSAN (clang-19 build and unit tests)" "$t0"
elif [ "$ASAN_MODE" != "0" ]; then
  t0=$(stamp)
  cmake -S . -B "$ASAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTINYLLM_SANITIZE=ON ${CMAKE_ARGS:-} >/dev/null
  cmake --build "$ASAN_DIR" -j"$jobs" --target test_gguf
  echo "[test] gguf suite under ASAN+UBSAN"
  "$ASAN_DIR/tests/test_gguf"
  took "ASAN+UBSAN (gguf suite)" "$t0"
fi

# ThreadSanitizer over the concurrent code: the server (acceptor, workers, request queue, prompt slots,
# streams) and the CPU thread pool, in build-tsan with only those test targets. Opt-in until timed in
# CI: TINYLLM_TSAN=1.
if [ "${TINYLLM_TSAN:-0}" != "0" ]; then
  t0=$(stamp)
  TSAN_DIR=${TSAN_BUILD_DIR:-build-tsan}
  cmake -S . -B "$TSAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTINYLLM_TSAN=ON -DTINYLLM_AMD=OFF ${CMAKE_ARGS:-} >/dev/null
  cmake --build "$TSAN_DIR" -j"$jobs" --target test_server test_devices
  echo "[test] server, queue and thread-pool tests under TSAN"
  TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
    ctest --test-dir "$TSAN_DIR" --output-on-failure -j"$jobs" -R '^server:|^devices:CPU (thread pool|device runs)'
  took "TSAN (build and tests)" "$t0"
fi

# Each libFuzzer target for a short fixed time (ASAN+UBSAN): a crash, leak, timeout or out-of-memory
# fails the run. TINYLLM_FUZZ_SECONDS=0 skips this step.
FUZZ_SECONDS=${TINYLLM_FUZZ_SECONDS:-30}
if [ "$FUZZ_SECONDS" != "0" ]; then
  t0=$(stamp)
  [ "$ASAN_MODE" = "all" ] && export FUZZ_BUILD_DIR=${FUZZ_BUILD_DIR:-$ASAN_DIR}
  # grammar is left out for now: it is new and found three bugs in its first few minutes (all fixed, with
  # regression tests); it joins this loop once it has run to 1 M executions clean. Run it by hand.
  for target in gguf jinja request tokenizer; do
    ./scripts/fuzz.sh "$target" "$FUZZ_SECONDS"
  done
  took "fuzzing" "$t0"
fi
