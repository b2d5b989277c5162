#!/bin/bash
# torch backend, one host and emulated cluster: completion inline (after) vs on the completion pool (mid)
cd /work/main
for i in 1 2 3; do
  for v in before after; do
    if [ $v = before ]; then b=/tmp/mid; else b=/work/main/build; fi
    bench/torch/run.sh --local --what allreduce --workers 4 --reducers 0 --allreduce-algo auto \
      --allreduce-configs cohort --sizes 1K:64K --iters 500 \
      --build-dir $b --out /tmp/agr/inl-t-$v-$i > /tmp/agr/inl-t-$v-$i.log 2>&1
    bench/torch/run.sh --what allreduce --workers 4 --reducers 0 --allreduce-algo auto \
      --allreduce-configs cohort --sizes 1K:64K --iters 300 \
      --build-dir $b --out /tmp/agr/inl-c-$v-$i > /tmp/agr/inl-c-$v-$i.log 2>&1
  done
done
echo done
