#!/bin/bash
# Ring before (2fe089b) / after (0e0795d) on the emulated cluster, interleaved.
cd /work/main
for i in 1 2 3; do
  for v in before after; do
    bench/compare_allreduce.sh --setting b --workers 4 --reducers 0 --mpi-algos none --gloo-algos none \
      --cohort-algos ring --sizes 4K:16M --iters 20 --warmup 5 --check \
      --cohort-bin /tmp/bins/cohort-bench-$v --out /tmp/ringab/b-$v-$i > /tmp/ringab/b-$v-$i.log 2>&1
  done
done
echo finished > /tmp/ringab/done
