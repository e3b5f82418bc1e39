#!/usr/bin/env bash
# Installs what is missing (test extras included), builds, and runs the whole test suite; then the
# sanitizer passes and short fuzz runs (each can be skipped, see below).
# Tests that need the reference data in ../shared skip loudly when it is absent; set
# TINYLLM_REQUIRE_SHARED=1 to make its absence a failure (CI does).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh --test
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" "$@"

stamp() { date +%s; }
took() { echo "[test] $1 took $(( $(stamp) - $2 )) s"; }

# AddressSanitizer + UndefinedBehaviorSanitizer (build-asan). By default the GGUF reader's suite (every
# truncation point, each malformation, a fixed-seed fuzz loop); TINYLLM_ASAN=all runs every unit test
# there (not yet part of CI: its time and findings are still being measured); TINYLLM_ASAN=0 skips.
ASAN_MODE=${TINYLLM_ASAN:-1}
if [ "$ASAN_MODE" != "0" ]; then
  t0=$(stamp)
  ASAN_DIR=${ASAN_BUILD_DIR:-build-asan}
  cmake -S . -B "$ASAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTINYLLM_SANITIZE=ON ${CMAKE_ARGS:-} >/dev/null
  if [ "$ASAN_MODE" = "all" ]; then
    cmake --build "$ASAN_DIR" -j"$(nproc)"
    echo "[test] unit tests under ASAN+UBSAN"
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
      ctest --test-dir "$ASAN_DIR" --output-on-failure -j"$(nproc)" -E '^node:'
  else
    cmake --build "$ASAN_DIR" -j"$(nproc)" --target test_gguf
    echo "[test] gguf suite under ASAN+UBSAN"
    "$ASAN_DIR/tests/test_gguf"
  fi
  took "ASAN+UBSAN" "$t0"
fi

# ThreadSanitizer over the concurrent code: the server (HTTP threads, request queue, streams) and the
# CPU thread pool, in build-tsan with only those targets. Opt-in for now: TINYLLM_TSAN=1.
if [ "${TINYLLM_TSAN:-0}" != "0" ]; then
  t0=$(stamp)
  TSAN_DIR=${TSAN_BUILD_DIR:-build-tsan}
  cmake -S . -B "$TSAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTINYLLM_TSAN=ON ${CMAKE_ARGS:-} >/dev/null
  cmake --build "$TSAN_DIR" -j"$(nproc)" --target test_server test_devices
  echo "[test] server and thread-pool tests under TSAN"
  TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
    ctest --test-dir "$TSAN_DIR" --output-on-failure -j"$(nproc)" -R '^server:|^devices:CPU (thread pool|device runs)'
  took "TSAN" "$t0"
fi

# Each libFuzzer target for a short fixed time (clang-19, ASAN+UBSAN, build-fuzz): a crash, leak,
# timeout or out-of-memory fails the run. TINYLLM_FUZZ_SECONDS=0 skips this step.
FUZZ_SECONDS=${TINYLLM_FUZZ_SECONDS:-30}
if [ "$FUZZ_SECONDS" != "0" ]; then
  t0=$(stamp)
  for target in gguf jinja request tokenizer; do
    ./scripts/fuzz.sh "$target" "$FUZZ_SECONDS"
  done
  took "fuzzing" "$t0"
fi
