#!/usr/bin/env bash
# Installs what is missing (test extras included), builds, and runs the whole test suite.
# Tests that need the reference data in ../shared skip loudly when it is absent; set
# TINYLLM_REQUIRE_SHARED=1 to make its absence a failure (CI does).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh --test
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" "$@"

# The GGUF reader faces untrusted files: its suite (every truncation point, each malformation, a
# fixed-seed fuzz loop) runs again under AddressSanitizer + UndefinedBehaviorSanitizer. Only
# test_gguf is built in that tree. TINYLLM_ASAN=0 skips this step.
if [ "${TINYLLM_ASAN:-1}" != "0" ]; then
  ASAN_DIR=${ASAN_BUILD_DIR:-build-asan}
  cmake -S . -B "$ASAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTINYLLM_SANITIZE=ON >/dev/null
  cmake --build "$ASAN_DIR" -j"$(nproc)" --target test_gguf
  echo "[test] gguf suite under ASAN+UBSAN"
  "$ASAN_DIR/tests/test_gguf"
fi
