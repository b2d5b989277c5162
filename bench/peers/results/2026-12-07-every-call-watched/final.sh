#!/bin/bash
# before (921e07d) and after, alternating which runs first in each pair; 16 pairs
base=/tmp/wt-base/build/bench/cohort_bench/cohort-bench
new=/work/main/build/bench/cohort_bench/cohort-bench
run() { $2 allreduce --algo shared-memory --workers 4 --transport ucx --sizes 1K:64K --iters 2000 --warmup 200 --check --json > $1 2>/dev/null; }
for i in $(seq 1 16); do
  if [ $((i % 2)) = 1 ]; then run base-$i.json $base; run new-$i.json $new; else run new-$i.json $new; run base-$i.json $base; fi
done
