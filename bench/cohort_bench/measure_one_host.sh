#!/usr/bin/env bash
# measure_one_host.sh: a one-host check of both UCX paths. Runs cohort-bench allreduce with 4
# workers over UCX shared memory and UCX tcp, Reduction Server with 4 reducers and ring, 1-256 MiB,
# and prints each command before its output and the load average after it.
#
#   bench/cohort_bench/measure_one_host.sh [BUILD_DIR] [extra cohort-bench flags]
set -uo pipefail
build=${1:-build}
shift || true
bin=$build/bench/cohort_bench/cohort-bench
[ -x "$bin" ] || { echo "measure_one_host.sh: $bin not built (ninja cohort-bench)" >&2; exit 2; }
echo "# host: $(nproc) cores, $(uname -r), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for tls in sm tcp; do
  for algo in reduction-server ring; do
    cmd="env UCX_TLS=$tls $bin allreduce --algo $algo --workers 4 --reducers 4 --sizes 1M:256M --dtype f32 --iters 5 --warmup 2 --check $*"
    echo "\$ $cmd"
    $cmd
    echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
