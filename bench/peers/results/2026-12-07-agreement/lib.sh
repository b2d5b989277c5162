#!/bin/bash
# before/after, interleaved: recursive doubling and halving-doubling, 4 workers, emulated cluster
cd /work/main
for i in 1 2 3; do
  for v in before after; do
    if [ $v = before ]; then bin=/tmp/before/bench/cohort_bench/cohort-bench; else bin=/work/main/build/bench/cohort_bench/cohort-bench; fi
    bench/compare_allreduce.sh --setting b --check --workers 4 --reducers 0 --sizes 1K:64K --iters 200 --warmup 20 \
      --cohort-algos recursive-doubling,halving-doubling --mpi-algos none --gloo-algos none \
      --build-dir build --cohort-bin $bin --out /tmp/agr/lib-$v-$i > /tmp/agr/lib-$v-$i.log 2>&1
  done
done
echo done
