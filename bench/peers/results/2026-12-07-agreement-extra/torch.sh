#!/bin/bash
cd /work/main
for i in 1 2; do
  for v in before after; do
    if [ $v = before ]; then b=/tmp/before; else b=/work/main/build; fi
    bench/torch/run.sh --what allreduce --workers 4 --reducers 0 --allreduce-algo auto \
      --allreduce-configs cohort,cohort-nocheck,gloo --sizes 1K:64K --iters 200 \
      --build-dir $b --out /tmp/agr/torch-$v-$i > /tmp/agr/torch-$v-$i.log 2>&1
  done
done
echo done
