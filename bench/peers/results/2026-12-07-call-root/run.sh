#!/bin/bash
# pairs, order alternating; before = /tmp/wt-base (14d672d), after = /work/main (2d8b3fd); A/A: after against a copy of itself
cmd="allreduce --algo recursive-doubling --workers 4 --transport ucx --sizes 8:512 --iters 4000 --warmup 400 --check --json"
cp /work/main/build/bench/cohort_bench/cohort-bench /tmp/ab5/cohort-bench-copy
for i in $(seq 1 20); do
  if (( i % 2 )); then order="before after aa"; else order="aa after before"; fi
  for w in $order; do
    case $w in before) b=/tmp/wt-base/build/bench/cohort_bench/cohort-bench;; after) b=/work/main/build/bench/cohort_bench/cohort-bench;; aa) b=/tmp/ab5/cohort-bench-copy;; esac
    UCX_WARN_UNUSED_ENV_VARS=n $b $cmd > /tmp/ab5/$w-$i.json 2>/tmp/ab5/$w-$i.err
  done
done
echo done
