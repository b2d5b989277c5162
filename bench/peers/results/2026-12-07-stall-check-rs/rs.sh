#!/usr/bin/env bash
# Interleaved before/after, kAuto with 4 reducers at 1-64 MiB (the Reduction Server; calls from
# about 10 ms to 600 ms, the larger ones past the stall check's 200 ms), 4 workers, 1 Gbit/s.
set -euo pipefail
cd /work/main
for i in ${RUNS:-1 2 3}; do
  for v in before after; do
    bench/compare_allreduce.sh --setting b --check --workers 4 --reducers 4 --sizes 1M:64M --iters 10 \
      --warmup 2 --cohort-algos auto --mpi-algos none --gloo-algos none \
      --build-dir build --cohort-bin /tmp/bins/$v/cohort-bench --out /tmp/stall/rs-$v-$i > /tmp/stall/rs-$v-$i.log 2>&1
  done
done
echo finished
