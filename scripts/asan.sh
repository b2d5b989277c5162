#!/usr/bin/env bash
# Builds the daemons, the CLI and the tests that drive them with AddressSanitizer (gcc, -O1) in
# build-asan, then runs the common, coordinator and agent unit tests with LeakSanitizer on, and the
# integration tests that start real coordinators and agents (those daemons built with ASan too),
# collecting every process's report under build-asan/asan-reports. Exits non-zero on a failed test
# or any report. Not part of scripts/test.sh: on 2 cores the build takes about 40 minutes cold.
# Usage: scripts/asan.sh [integration test ...] (default: hardening_test failure_cause_test
# integration_test chaos_test).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ASAN_BUILD_DIR:-build-asan}
integration=("$@")
[ ${#integration[@]} -gt 0 ] || integration=(hardening_test failure_cause_test integration_test chaos_test)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" \
  -DCOHORT_SANITIZE=address -DCOHORT_CUDA=OFF -DCOHORT_TORCH=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target cohort-coordinator cohort-agent cohort \
  cohort-replica-init common_test agent_test coordinator_test "${integration[@]}"
reports=$PWD/$build/asan-reports
rm -rf "$reports" && mkdir -p "$reports"
export UCX_MEM_EVENTS=no  # UCX's memory hooks and ASan's interceptors do not mix
failed=0
run() {  # name, options, binary
  echo "asan: $1"
  ASAN_OPTIONS="$2:log_path=$reports/$1" "$3" --gtest_brief=1 || failed=1
}
run common_test detect_leaks=1 "$build/tests/common/common_test"
run coordinator_test detect_leaks=1 "$build/tests/coordinator/coordinator_test"
run agent_test detect_leaks=1 "$build/tests/agent/agent_test"
# Daemons a test kills are not leak-checked (a SIGKILL leaves no report; a SIGTERM mid-job can).
for test in "${integration[@]}"; do
  run "$test" detect_leaks=0 "$build/tests/integration/$test"
done
# One file per reporting process (by pid); ASan's warning that it ignores a stack switch (in
# cohort-replica-init) is no error.
if grep -l "ERROR: AddressSanitizer\|ERROR: LeakSanitizer" "$reports"/* 2>/dev/null; then
  echo "asan: reports above, in $reports"
  exit 1
fi
if [ "$failed" = 0 ]; then echo "asan: no report, every test passed"; fi
exit "$failed"
