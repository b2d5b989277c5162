#!/usr/bin/env bash
# hierarchical_hosts_test.sh SOURCE_DIR BUILD_DIR: all-reduces between real processes on two
# emulated hosts (network namespaces of bench/netns/cluster.sh): UCX over shared memory within a
# host and TCP between them, Python workers through the numpy binding
# (hierarchical_hosts_worker.py). With two workers on each host the hierarchical all-reduce sums
# exactly, and when one worker's count differs every worker of both hosts fails naming it; when
# the two hosts' sizes differ enough that the stage across hosts runs recursive doubling on one and
# the ring on the other, and with one worker a host when recursive doubling meets the ring, every
# worker fails naming one of the other host, well before the timeout. Root only; skips (77) saying
# why elsewhere.
set -euo pipefail
src=$1 build=$2
source "$src/tests/testing/emulated_hosts.sh"
/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip "/usr/bin/python3 cannot import numpy"
emulated_hosts "$src" hier
cluster up --hosts 2 --rate 1gbit --subnet 10.79.0 >/dev/null

# run_workers MODE WORKERS_PER_HOST: two hosts' workers run the worker in MODE; fails unless all
# exit 0.
run_workers() {
  local mode=$1 per_host=$2 n=$(($2 * 2)) port=$((20000 + RANDOM % 20000)) r failed=0
  pids=()
  for ((r = 0; r < n; r++)); do
    on "h$((r / per_host))" env RANK=$r WORLD_SIZE=$n COHORT_NUM_REDUCERS=0 \
      COHORT_BOOTSTRAP_ADDR=10.79.0.1:$port COHORT_COMM_TIMEOUT_MS=30000 \
      PYTHONPATH="$build/python" UCX_WARN_UNUSED_ENV_VARS=n \
      /usr/bin/python3 "$src/tests/collective/hierarchical_hosts_worker.py" "$mode" \
      >"$run/$mode-$r.log" 2>&1 &
    pids+=($!)
  done
  for ((r = 0; r < n; r++)); do
    if ! wait "${pids[$r]}"; then
      echo "$mode: worker $r FAILED:"
      failed=1
    fi
    cat "$run/$mode-$r.log"
  done
  [ "$failed" -eq 0 ] || exit 1
  echo "$mode: ok"
}

run_workers hierarchical 2
run_workers sizes-hosts 2
run_workers sizes-flat 1
