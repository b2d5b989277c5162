#!/usr/bin/env bash
# ab_allreduce.sh: two cohort-bench binaries (a change and what it changed) on the emulated cluster,
# run in turns so that both see the same machine, for "did this change cost anything?".
#
#   bench/netns/ab_allreduce.sh --before BIN --after BIN [options]
#
#   --before BIN, --after BIN   cohort-bench binaries (e.g. a worktree at the parent commit and this one)
#   --algo A          all-reduce algorithm (default reduction-server)
#   --workers N       worker hosts h0.. (default 4)    --reducers M   reducer hosts after them (default 4)
#   --rate R          link rate (default 1gbit)        --sizes SPEC   (default 1M:64M)
#   --iters N         timed calls per size (default 20) --rounds N    before/after pairs (default 2)
#   --out DIR         raw JSON lines (default /tmp/cohort-ab-<time>)
#
# Prints one line per run: its label and algbw (GB/s) per size, from worker 0's JSON lines. Needs
# root (bench/netns/cluster.sh); takes down a cluster already up, makes its own, removes it at the
# end. Figures must come from a quiet machine.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CLUSTER=$ROOT/bench/netns/cluster.sh
before="" after="" algo=reduction-server workers=4 reducers=4 rate=1gbit sizes=1M:64M iters=20
rounds=2 out=""
. "$ROOT/bench/common/flags.sh"
while [ $# -gt 0 ]; do
  if value_flag "before after algo workers reducers rate sizes iters rounds out" "$@"; then
    shift 2
    continue
  fi
  case "$1" in
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ab_allreduce.sh: unknown flag '$1'" >&2; exit 2 ;;
  esac
done
for bin in "$before" "$after"; do
  [ -x "$bin" ] || { echo "ab_allreduce.sh: --before and --after must be cohort-bench binaries ('$bin')" >&2; exit 2; }
done
out=${out:-/tmp/cohort-ab-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
hosts=$((workers + reducers))
"$CLUSTER" down >/dev/null 2>&1
"$CLUSTER" up --hosts "$hosts" --rate "$rate" >/dev/null || exit 1
trap '"$CLUSTER" down >/dev/null 2>&1' EXIT
echo "# $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg); $algo, $workers workers + $reducers reducers, $rate" | tee "$out/commands.txt"

run() {  # LABEL BIN
  local label=$1 bin=$2 port=$((20000 + RANDOM % 20000)) pids=() i role
  for ((i = 0; i < hosts; i++)); do
    if [ "$i" -lt "$workers" ]; then role="--rank $i --role worker"; else role="--rank $((i - workers)) --role reducer"; fi
    local cmd="env UCX_TLS=tcp,self UCX_NET_DEVICES=eth0 $bin allreduce --algo $algo --workers $workers"
    cmd="$cmd --reducers $reducers --transport ucx --sizes $sizes --dtype f32 --iters $iters --warmup 5"
    cmd="$cmd --check --json --max-seconds-per-size 8 $role --bootstrap $("$CLUSTER" addr h0):$port"
    echo "$CLUSTER exec h$i $cmd &" >>"$out/commands.txt"
    "$CLUSTER" exec "h$i" $cmd >"$out/$label-$i.jsonl" 2>"$out/$label-$i.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  printf '%-8s' "$label"
  grep '^{' "$out/$label-0.jsonl" | python3 -c '
import json, sys
size = lambda b: "%dM" % (b >> 20) if b >= 1 << 20 else "%dK" % (b >> 10)
print(" ".join("%s:%.4f" % (size(r["size"]), r["algbw_GBps"]) for r in map(json.loads, sys.stdin)))'
}

for ((r = 1; r <= rounds; r++)); do
  run "before$r" "$before"
  run "after$r" "$after"
done
