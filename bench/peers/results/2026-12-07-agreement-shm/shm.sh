#!/bin/bash
# one host, 4 workers: the shared-memory all-reduce (library) and the torch backend (kAuto = shared memory), before/after interleaved
cd /work/main
for i in 1 2 3; do
  for v in before after; do
    if [ $v = before ]; then b=/tmp/before; else b=/work/main/build; fi
    bench/compare_allreduce.sh --setting a --check --workers 4 --reducers 0 --sizes 1K:64K --iters 500 --warmup 50 \
      --cohort-algos shared-memory --mpi-algos none --gloo-algos none --build-dir build \
      --cohort-bin $b/bench/cohort_bench/cohort-bench --out /tmp/agr/shm-lib-$v-$i > /tmp/agr/shm-lib-$v-$i.log 2>&1
    bench/torch/run.sh --local --what allreduce --workers 4 --reducers 0 --allreduce-algo auto \
      --allreduce-configs cohort --sizes 1K:64K --iters 500 \
      --build-dir $b --out /tmp/agr/shm-t-$v-$i > /tmp/agr/shm-t-$v-$i.log 2>&1
  done
done
echo done
