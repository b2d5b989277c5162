#!/bin/bash
# 4 hosts x 2 workers: the hierarchical all-reduce before (2fe089b: no agreement) and after
# (979d450: the calls compared within hosts and across them), interleaved rounds; then the ring
# on one host (UCX shared memory), before and after (0e0795d), interleaved.
cd /work/main
C=bench/netns/cluster.sh
NEW=/tmp/bins/cohort-bench-hier
OLD=/tmp/bins/cohort-bench-before
OUT=/tmp/agr2/hier; rm -rf $OUT; mkdir -p $OUT
$C down >/dev/null 2>&1
$C up --hosts 4 --rate 1gbit > $OUT/cluster.txt 2>&1
uptime > $OUT/load.txt
for round in 1 2 3; do
for run in old-hierarchical new-hierarchical; do
  bin=$NEW; [ "${run%%-*}" = old ] && bin=$OLD
  algo=${run#*-}
  port=$((20000 + RANDOM % 20000))
  pids=()
  for r in 0 1 2 3 4 5 6 7; do
    h=$((r / 2))
    cmd="$bin allreduce --algo $algo --workers 8 --reducers 0 --rank $r --role worker --bootstrap 10.77.0.1:$port --sizes 1K:16M --iters 40 --warmup 5 --max-seconds-per-size 8 --check --json"
    [ $round = 1 ] && echo "$C exec h$h $cmd &" >> $OUT/commands.txt
    $C exec h$h $cmd > $OUT/$run-$round-$r.jsonl 2>$OUT/$run-$round-$r.err &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait $p || echo "$run round $round: a rank failed" >> $OUT/errors.txt; done
done
done
$C down >/dev/null 2>&1
for i in 1 2 3; do
  for v in before hier; do
    bench/compare_allreduce.sh --setting a --workers 4 --reducers 0 --mpi-algos none --gloo-algos none \
      --cohort-algos ring --sizes 64K:64M --iters 20 --warmup 5 --check \
      --cohort-bin /tmp/bins/cohort-bench-$v --out /tmp/agr2/a-$v-$i > /tmp/agr2/a-$v-$i.log 2>&1
  done
done
echo finished > /tmp/agr2/done
