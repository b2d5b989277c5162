#!/bin/bash
# 10 pairs, order alternating; before = /tmp/wt-base, after = /work/main
cmd="allreduce --algo shared-memory --workers 4 --transport ucx --sizes 1K:4K --iters 2000 --warmup 200 --check --json"
for i in $(seq 1 30); do
  if (( i % 2 )); then order="before after"; else order="after before"; fi
  for w in $order; do
    if [ $w = before ]; then b=/tmp/wt-base/build/bench/cohort_bench/cohort-bench; else b=/work/main/build/bench/cohort_bench/cohort-bench; fi
    UCX_WARN_UNUSED_ENV_VARS=n $b $cmd > /tmp/ab3/$w-$i.json 2>/tmp/ab3/$w-$i.err
  done
done
echo done
