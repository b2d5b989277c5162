#!/bin/bash
cd /work/main
for i in 1 2 3; do
  for v in before after; do
    if [ $v = before ]; then b=/tmp/before; else b=/work/main/build; fi
    bench/torch/run.sh --what allreduce --workers 4 --reducers 0 --allreduce-algo auto \
      --allreduce-configs cohort --sizes 1K:64K --iters 300 \
      --build-dir $b --out /tmp/agr/t3-$v-$i > /tmp/agr/t3-$v-$i.log 2>&1
  done
done
echo done
