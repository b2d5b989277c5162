#!/usr/bin/env bash
# Builds the common, coordinator and agent unit tests with ThreadSanitizer (gcc, -O1) in
# build-tsan and runs them with the suppressions of scripts/tsan.supp (ZeroMQ and libsodium, which
# TSan cannot see into), each process's reports under build-tsan/tsan-reports. Exits non-zero on a
# failed test or any report. The flight recorder's tests fork from a threaded process, which TSan
# does not support; its concurrency has a ctest of its own under TSan (tests/common/CMakeLists.txt).
# Not part of scripts/test.sh: on 2 cores the build takes about 20 minutes cold.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${TSAN_BUILD_DIR:-build-tsan}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" \
  -DCOHORT_SANITIZE=thread -DCOHORT_CUDA=OFF -DCOHORT_TORCH=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target common_test coordinator_test agent_test
reports=$PWD/$build/tsan-reports
rm -rf "$reports" && mkdir -p "$reports"
export UCX_MEM_EVENTS=no
failed=0
run() {  # name, binary, gtest filter
  echo "tsan: $1"
  TSAN_OPTIONS="suppressions=$PWD/scripts/tsan.supp log_path=$reports/$1" "$2" --gtest_brief=1 \
    --gtest_filter="$3" || failed=1
}
run common_test "$build/tests/common/common_test" "-FlightRecorderTest.*"
run coordinator_test "$build/tests/coordinator/coordinator_test" "*"
run agent_test "$build/tests/agent/agent_test" "*"
if grep -l "WARNING: ThreadSanitizer" "$reports"/* 2>/dev/null; then
  echo "tsan: reports above, in $reports"
  exit 1
fi
if [ "$failed" = 0 ]; then echo "tsan: no report, every test passed"; fi
exit "$failed"
