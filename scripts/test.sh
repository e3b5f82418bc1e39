#!/usr/bin/env bash
# Installs what is missing (test extras included), builds, and runs the whole test suite.
# Tests that need the reference data in ../shared skip loudly when it is absent; set
# TINYLLM_REQUIRE_SHARED=1 to make its absence a failure (CI does).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh --test
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" "$@"
