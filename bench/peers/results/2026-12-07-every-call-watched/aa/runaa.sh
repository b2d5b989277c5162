#!/bin/bash
for i in $(seq 1 16); do
  for v in base new; do
    bin=/tmp/shmb/new-bin
    $bin allreduce --algo shared-memory --workers 4 --transport ucx --sizes 1K:64K --iters 2000 --warmup 200 --check --json > $v-$i.json 2>/dev/null
  done
done
