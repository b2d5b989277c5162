#!/bin/bash
# Before (2fe089b) and final (the ring's agreement, whole pieces, 8 KiB inline on one host):
# the ring on one host (UCX shared memory) and across the emulated cluster (4 workers, 1 Gbit/s).
cd /work/main
for i in 1 2 3; do
  for v in before final; do
    bench/compare_allreduce.sh --setting a --workers 4 --reducers 0 --mpi-algos none --gloo-algos none \
      --cohort-algos ring --sizes 32K:4M --iters 100 --warmup 10 --check \
      --cohort-bin /tmp/bins/cohort-bench-$v --out /tmp/agr3/fa-$v-$i > /tmp/agr3/fa-$v-$i.log 2>&1
  done
done
for i in 1 2 3; do
  for v in before final; do
    bench/compare_allreduce.sh --setting b --workers 4 --reducers 0 --mpi-algos none --gloo-algos none \
      --cohort-algos ring --sizes 4K:16M --iters 40 --warmup 5 --check \
      --cohort-bin /tmp/bins/cohort-bench-$v --out /tmp/agr3/fb-$v-$i > /tmp/agr3/fb-$v-$i.log 2>&1
  done
done
echo finished > /tmp/agr3/done3
