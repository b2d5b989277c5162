#!/usr/bin/env bash
# delayed_ack_ab.sh: the Reduction Server's all-reduce with idle gaps between calls, as DDP's
# buckets come between compute, with the UCX transport's ACK flusher on (the default) and off
# (COHORT_TCP_QUICKACK=0) in turns: bench/RESULTS.md, "Delayed ACKs". On an emulated cluster of
# W worker hosts and W reducer hosts (bench/netns/cluster.sh), one cohort-bench process per host.
# Prints the hosts' TCP congestion control, then one line per run and size: the mean call (the
# slowest worker's), and rank 0's median and slowest call, in ms.
#
#   delayed_ack_ab.sh [--bench PATH] [--workers 4] [--sizes 1M:2M] [--gap-ms 150] [--iters 30]
#                     [--pairs 2] [--rate 1gbit]
#
# --bench: the cohort-bench to run (default build/bench/cohort_bench/cohort-bench). Needs root;
# takes the cluster down at the end.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CLUSTER=$ROOT/bench/netns/cluster.sh
bench=$ROOT/build/bench/cohort_bench/cohort-bench workers=4 sizes=1M:2M gap_ms=150 iters=30
pairs=2 rate=1gbit
. "$ROOT/bench/common/flags.sh"
while [ $# -gt 0 ]; do
  if value_flag "bench workers sizes gap-ms iters pairs rate" "$@"; then
    shift 2
    continue
  fi
  case "$1" in
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "delayed_ack_ab.sh: unknown flag '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$bench" ] || { echo "delayed_ack_ab.sh: no cohort-bench at $bench (--bench)" >&2; exit 2; }
"$CLUSTER" up --hosts $((2 * workers)) --rate "$rate" >&2 || exit 1
work=$(mktemp -d /tmp/cohort-delack.XXXXXX) failed=0
# The runs' logs stay only when a run printed no rows (it names them).
trap '"$CLUSTER" down >/dev/null 2>&1; [ "$failed" = 1 ] || rm -rf "$work"' EXIT
echo "# congestion control: $("$CLUSTER" exec h0 sysctl -n net.ipv4.tcp_congestion_control)," \
     "kernel $(uname -r); $workers workers + $workers reducers, $rate, --gap-ms $gap_ms, $iters calls"

# run LABEL QUICKACK: one cohort-bench per host; prints rank 0's rows.
run() {
  local label=$1 quickack=$2 port=$((20000 + RANDOM % 20000)) pids=() r
  local args=(allreduce --algo reduction-server --workers "$workers" --reducers "$workers"
              --transport ucx --bootstrap "10.77.0.1:$port" --json --sizes "$sizes"
              --iters "$iters" --warmup 3 --gap-ms "$gap_ms")
  for ((r = 0; r < workers; r++)); do
    "$CLUSTER" exec "h$((workers + r))" env COHORT_TCP_QUICKACK="$quickack" UCX_TLS=tcp,self \
      UCX_NET_DEVICES=eth0 "$bench" "${args[@]}" --rank "$r" --role reducer \
      >"$work/$label-reducer$r.txt" 2>&1 &
    pids+=($!)
  done
  for ((r = workers - 1; r >= 0; r--)); do
    "$CLUSTER" exec "h$r" env COHORT_TCP_QUICKACK="$quickack" UCX_TLS=tcp,self \
      UCX_NET_DEVICES=eth0 "$bench" "${args[@]}" --rank "$r" --role worker \
      >"$work/$label-worker$r.txt" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  grep -h '"impl"' "$work/$label-worker0.txt" | python3 -c '
import json, sys
for line in sys.stdin:
    row = json.loads(line)
    print("%-8s %5d KiB  mean %7.1f ms  median %7.1f  slowest %7.1f" % (sys.argv[1],
          row["size"] >> 10, row["time_us"] / 1e3, row["call_us_median"] / 1e3,
          row["call_us_max"] / 1e3))' "$label" ||
    { failed=1; echo "$label: no rows (logs in $work)"; tail -3 "$work/$label-worker0.txt"; }
}
for ((p = 0; p < pairs; p++)); do
  run flush bbr
  run off 0
done
