#!/bin/bash
# pairs, order alternating; before = /tmp/wt-before (298bf52), after = /work/main (0261be6: 63125ef's CallHistory); A/A: after against a copy of itself
rd="allreduce --algo recursive-doubling --workers 4 --transport ucx --sizes 8:512 --iters 4000 --warmup 400 --check --json"
sm="allreduce --algo shared-memory --workers 4 --transport ucx --sizes 1K:4K --iters 4000 --warmup 400 --check --json"
rs="allreduce --algo reduction-server --workers 4 --reducers 4 --transport ucx --sizes 1K:16K --iters 4000 --warmup 400 --check --json"
cp /work/main/build/bench/cohort_bench/cohort-bench /tmp/ab/cohort-bench-copy
for i in $(seq 1 20); do
  if (( i % 2 )); then order="before after aa"; else order="aa after before"; fi
  for w in $order; do
    case $w in before) b=/tmp/wt-before/build/bench/cohort_bench/cohort-bench;; after) b=/work/main/build/bench/cohort_bench/cohort-bench;; aa) b=/tmp/ab/cohort-bench-copy;; esac
    UCX_WARN_UNUSED_ENV_VARS=n $b $rd > /tmp/ab/rd-$w-$i.json 2>/tmp/ab/rd-$w-$i.err
    UCX_WARN_UNUSED_ENV_VARS=n $b $sm > /tmp/ab/sm-$w-$i.json 2>/tmp/ab/sm-$w-$i.err
    UCX_WARN_UNUSED_ENV_VARS=n $b $rs > /tmp/ab/rs-$w-$i.json 2>/tmp/ab/rs-$w-$i.err
  done
done
echo done
