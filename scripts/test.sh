#!/usr/bin/env bash
# Installs what is missing, builds everything with both cores, and runs the whole test suite.
# Usage: scripts/test.sh [extra ctest args]. BUILD_DIR (default build) picks the build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=${BUILD_DIR:-build}
jobs=$(nproc)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build" -j "$jobs"
scripts/check-layout.sh
scripts/check-format.sh
(cd "$build" && ctest --output-on-failure -j "$jobs" --timeout 600 "$@")
# A short libFuzzer run of each fuzz target (scripts/fuzz.sh; clang, ASan + UBSan);
# FUZZ_SECONDS=0 skips it.
if [ "${FUZZ_SECONDS:-15}" != 0 ]; then
  scripts/fuzz.sh "${FUZZ_SECONDS:-15}"
fi
