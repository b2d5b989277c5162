#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for SECONDS (default 30),
# starting from the seed corpus in tests/fuzz/corpus. New interesting inputs go to a scratch
# corpus, not the repository. Exits non-zero on the first crash, leaving the crashing input.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
build=${FUZZ_BUILD_DIR:-build-fuzz}
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCOHORT_FUZZ=ON -DCOHORT_CUDA=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target wire_fuzzer job_spec_fuzzer stack_where_fuzzer \
  replica_output_fuzzer state_file_fuzzer coordinator_fuzzer agent_fuzzer
# libFuzzer's per-input timeout sits above the harnesses' own bounds (the agent scene waits up to
# 20 s for a real replica process to run), so a slow machine reports the harness's message.
for target in wire job_spec stack_where replica_output state_file coordinator agent; do
  scratch=$(mktemp -d)
  echo "fuzz: $target for ${seconds}s"
  "$build/tests/fuzz/${target}_fuzzer" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 \
    -artifact_prefix="$build/${target}-" -print_final_stats=1 "$scratch" "tests/fuzz/corpus/$target"
  rm -rf "$scratch"
done
