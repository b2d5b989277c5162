#!/usr/bin/env bash
# Interleaved before/after, kAuto at 1-8 KiB (recursive doubling), 4 workers, 1 Gbit/s.
set -euo pipefail
cd /work/main
for i in ${RUNS:-1 2 3 4 5 6}; do
  for v in before after; do
    bench/compare_allreduce.sh --setting b --check --workers 4 --reducers 0 --sizes 1K:8K --iters 1000 \
      --warmup 50 --cohort-algos auto --mpi-algos none --gloo-algos none \
      --build-dir build --cohort-bin /tmp/bins/$v/cohort-bench --out /tmp/stall/small-$v-$i > /tmp/stall/small-$v-$i.log 2>&1
  done
done
echo finished
