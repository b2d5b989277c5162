#!/usr/bin/env bash
# hierarchical_hosts_test.sh SOURCE_DIR BUILD_DIR: the hierarchical all-reduce between real
# processes on two emulated hosts (network namespaces of bench/netns/cluster.sh), two workers on
# each: UCX over shared memory within a host and TCP between them, Python workers through the
# numpy binding (hierarchical_hosts_worker.py). It sums exactly, and when one worker's count
# differs every worker of both hosts fails naming it. Root only; skips (77) saying why elsewhere.
set -euo pipefail
src=$1 build=$2
source "$src/tests/testing/emulated_hosts.sh"
/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip "/usr/bin/python3 cannot import numpy"
emulated_hosts "$src" hier
cluster up --hosts 2 --rate 1gbit --subnet 10.79.0 >/dev/null
port=$((20000 + RANDOM % 20000))
for r in 0 1 2 3; do
  on "h$((r / 2))" env RANK=$r WORLD_SIZE=4 COHORT_NUM_REDUCERS=0 \
    COHORT_BOOTSTRAP_ADDR=10.79.0.1:$port COHORT_COMM_TIMEOUT_MS=30000 \
    PYTHONPATH="$build/python" UCX_WARN_UNUSED_ENV_VARS=n \
    /usr/bin/python3 "$src/tests/collective/hierarchical_hosts_worker.py" >"$run/worker-$r.log" 2>&1 &
  pids+=($!)
done
failed=0
for r in 0 1 2 3; do
  if ! wait "${pids[$r]}"; then
    echo "worker $r FAILED:"
    failed=1
  fi
  cat "$run/worker-$r.log"
done
[ "$failed" -eq 0 ] || exit 1
echo "hierarchical all-reduce across two hosts: ok"
