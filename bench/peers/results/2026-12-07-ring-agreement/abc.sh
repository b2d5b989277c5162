#!/bin/bash
# The ring on one host (UCX shared memory) and the hierarchical all-reduce on the emulated cluster
# (4 hosts x 2 workers): before (2fe089b), split (979d450: 32 KiB of a step's first piece inline,
# its rest as a message of its own) and whole (the first piece inline only when it fits, else
# none), interleaved.
cd /work/main
for i in 1 2 3; do
  for v in before hier whole; do
    bench/compare_allreduce.sh --setting a --workers 4 --reducers 0 --mpi-algos none --gloo-algos none \
      --cohort-algos ring --sizes 64K:4M --iters 30 --warmup 5 --check \
      --cohort-bin /tmp/bins/cohort-bench-$v --out /tmp/agr3/a-$v-$i > /tmp/agr3/a-$v-$i.log 2>&1
  done
done
C=bench/netns/cluster.sh
OUT=/tmp/agr3/hier; rm -rf $OUT; mkdir -p $OUT
$C down >/dev/null 2>&1
$C up --hosts 4 --rate 1gbit > $OUT/cluster.txt 2>&1
uptime > $OUT/load.txt
for round in 1 2 3; do
for v in before hier whole; do
  bin=/tmp/bins/cohort-bench-$v
  port=$((20000 + RANDOM % 20000))
  pids=()
  for r in 0 1 2 3 4 5 6 7; do
    h=$((r / 2))
    cmd="$bin allreduce --algo hierarchical --workers 8 --reducers 0 --rank $r --role worker --bootstrap 10.77.0.1:$port --sizes 4K:256K --iters 100 --warmup 10 --max-seconds-per-size 8 --check --json"
    [ $round = 1 ] && echo "$C exec h$h $cmd &" >> $OUT/commands.txt
    $C exec h$h $cmd > $OUT/$v-$round-$r.jsonl 2>$OUT/$v-$round-$r.err &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait $p || echo "$v round $round: a rank failed" >> $OUT/errors.txt; done
done
done
$C down >/dev/null 2>&1
echo finished > /tmp/agr3/done
