#!/bin/bash
cd /work/main
for i in 1 2 3 4; do
  for v in before whole whole8; do
    bench/compare_allreduce.sh --setting a --workers 4 --reducers 0 --mpi-algos none --gloo-algos none \
      --cohort-algos ring --sizes 32K:1M --iters 100 --warmup 10 --check \
      --cohort-bin /tmp/bins/cohort-bench-$v --out /tmp/agr3/a2-$v-$i > /tmp/agr3/a2-$v-$i.log 2>&1
  done
done
echo finished > /tmp/agr3/done2
