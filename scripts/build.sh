#!/usr/bin/env bash
# Installs what is missing, then configures and builds tinyllm into build/ (or $BUILD_DIR); BUILD_TARGETS
# (space-separated) builds only those targets.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh "$@"
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
