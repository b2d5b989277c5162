#!/usr/bin/env bash
# Interleaved before/after runs of kAuto (recursive doubling to 8 KiB, halving-doubling to 64 KiB),
# 4 workers, no reducers, 1 Gbit/s emulated links.
set -euo pipefail
cd /work/main
for i in ${RUNS:-1 2 3}; do
  for v in before after; do
    bench/compare_allreduce.sh --setting b --check --workers 4 --reducers 0 --sizes 1K:64K --iters 200 \
      --warmup 20 --cohort-algos auto --mpi-algos none --gloo-algos none \
      --build-dir build --cohort-bin /tmp/bins/$v/cohort-bench --out /tmp/stall/lib-$v-$i > /tmp/stall/lib-$v-$i.log 2>&1
  done
done
echo finished
