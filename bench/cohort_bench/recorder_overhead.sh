#!/usr/bin/env bash
# recorder_overhead.sh: the flight recorder's cost on small all-reduces (issue 18: under 1%).
# Runs cohort-bench allreduce over 1-64 KiB with each worker recording into a shared-memory file
# of its own (--flight-recorder DIR, as in a job) and with recording off, alternating the two
# ROUNDS times so drift in the machine's load falls on both alike, then prints per size the median
# time_us of each and the overhead. Needs a quiet machine: check `uptime` first.
#
#   bench/cohort_bench/recorder_overhead.sh [BUILD_DIR] [ROUNDS] [extra cohort-bench flags]
#
# Default: 4 workers forked over UCX (UCX_TLS from the environment), the all-reduce Communicator
# picks (--algo auto: shared memory on one host, the fastest call and so the largest share for the
# recorder), 2000 calls per size after 200 warm-up calls.
set -uo pipefail
build=${1:-build}
rounds=${2:-5}
shift 2 || shift $# || true
bin=$build/bench/cohort_bench/cohort-bench
[ -x "$bin" ] || { echo "recorder_overhead.sh: $bin not built (ninja cohort-bench)" >&2; exit 2; }
dir=$(mktemp -d /dev/shm/cohort-recorder-bench.XXXXXX)
out=$(mktemp -d)
trap 'rm -rf "$dir" "$out"' EXIT
echo "# host: $(nproc) cores, $(uname -r), load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
common="allreduce --algo auto --workers 4 --sizes 1K:64K --dtype f32 --iters 2000 --warmup 200 --json"
echo "\$ $bin $common --flight-recorder off|$dir $*   (x$rounds, alternating)"
for ((i = 0; i < rounds; i++)); do
  "$bin" $common --flight-recorder off "$@" >> "$out/off.jsonl" || exit 1
  "$bin" $common --flight-recorder "$dir" "$@" >> "$out/on.jsonl" || exit 1
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out/off.jsonl" "$out/on.jsonl" <<'EOF'
import json, statistics, sys
def medians(path):
    by_size = {}
    for line in open(path):
        row = json.loads(line)
        by_size.setdefault(row["size"], []).append(row["time_us"])
    return {size: statistics.median(times) for size, times in by_size.items()}
off, on = medians(sys.argv[1]), medians(sys.argv[2])
print(f"{'size':>8} {'off_us':>10} {'recorded_us':>12} {'overhead':>9}")
for size in sorted(off):
    print(f"{size:>8} {off[size]:>10.2f} {on[size]:>12.2f} {100 * (on[size] - off[size]) / off[size]:>8.2f}%")
EOF
