#!/bin/bash
# 4 hosts x 2 workers: hierarchical (old binary: ring across hosts) vs hierarchical (new: recursive
# doubling across hosts up to 8 KiB) vs flat recursive doubling; interleaved rounds.
cd /work/main
C=bench/netns/cluster.sh
NEW=/work/main/build/bench/cohort_bench/cohort-bench
OLD=/work/wt/old/build/bench/cohort_bench/cohort-bench
OUT=/tmp/hier; rm -rf $OUT; mkdir -p $OUT
$C down >/dev/null 2>&1
$C up --hosts 4 --rate 1gbit > $OUT/cluster.txt 2>&1
uptime > $OUT/load.txt
for round in 1 2 3; do
for run in old-hierarchical new-hierarchical new-recursive-doubling; do
  bin=$NEW; [ "${run%%-*}" = old ] && bin=$OLD
  algo=${run#*-}
  port=$((20000 + RANDOM % 20000))
  pids=()
  for r in 0 1 2 3 4 5 6 7; do
    h=$((r / 2))
    cmd="$bin allreduce --algo $algo --workers 8 --reducers 0 --rank $r --role worker --bootstrap 10.77.0.1:$port --sizes 1K:32K --iters 100 --warmup 20 --check --json"
    [ $round = 1 ] && echo "$C exec h$h $cmd &" >> $OUT/commands.txt
    $C exec h$h $cmd > $OUT/$run-$round-$r.jsonl 2>$OUT/$run-$round-$r.err &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait $p || echo "$run round $round: a rank failed" >> $OUT/errors.txt; done
done
done
$C down >/dev/null 2>&1
python3 - <<'PY'
import json, statistics
runs = ["old-hierarchical", "new-hierarchical", "new-recursive-doubling"]
by = {}
for run in runs:
    for rnd in (1, 2, 3):
        for line in open(f"/tmp/hier/{run}-{rnd}-0.jsonl"):
            if line.startswith("{"):
                r = json.loads(line)
                by.setdefault((run, r["size"]), []).append((r["algbw_GBps"], r["wrong"]))
sizes = sorted({s for (_, s) in by}, key=lambda s: by[(runs[0], s)] and s)
print("| size | " + " | ".join(runs) + " | new/old hierarchical |")
for s in sorted({s for (_, s) in by}):
    med = {run: statistics.median(v for v, _ in by[(run, s)]) for run in runs}
    wrong = sum(w for run in runs for _, w in by[(run, s)])
    print(f"| {s} | " + " | ".join(f"{med[r]:.4f}" for r in runs) + f" | {med['new-hierarchical']/med['old-hierarchical']:.2f}x | wrong={wrong}")
PY
