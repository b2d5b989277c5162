#!/bin/bash
# Job arrays against a real cohort-coordinator (--insecure, loopback, fresh state dir, no agents):
# forecast 1000 tasks at once (--dry-run), submit 1000 tasks 4 at once, list and show the array
# through the CLI and the HTTP API, cancel it; each step timed from this shell (a process start
# included). Usage: bench/control_plane/arrays.sh [BUILD_DIR]
# Uses ports 17400, 17401 and 17480 on 127.0.0.1.
B=${1:-build}
D=$(mktemp -d)
$B/coordinator/cohort-coordinator --insecure --state-dir $D/state --client-endpoint tcp://127.0.0.1:17400 \
  --agent-endpoint tcp://127.0.0.1:17401 --http-endpoint 127.0.0.1:17480 > $D/coord.log 2>&1 &
C=$!
sleep 1
export COHORT_COORDINATOR=tcp://127.0.0.1:17400 COHORT_INSECURE=1
printf 'name: big\nworker_pools:\n  - role: chief\n    resources: {cpus: 1}\n    process: {command: [/bin/true]}\n' > $D/j.yaml
t() { local s=$(date +%s.%N); "$@" > /dev/null; awk -v a="$s" -v b="$(date +%s.%N)" -v w="${*#$B/}" 'BEGIN { printf "%.3f s: %s\n", b - a, w }'; }
du -sk $D/state | awk '{print "state dir before: " $1 " KiB"}'
t $B/cli/cohort submit $D/j.yaml --array 0-999 --dry-run
t $B/cli/cohort submit $D/j.yaml --array 0-999%4
sleep 1
t $B/cli/cohort arrays
t $B/cli/cohort status big
t curl -s 127.0.0.1:17480/api/arrays
t curl -s 127.0.0.1:17480/api/arrays/big
echo "/api/arrays/big: $(curl -s 127.0.0.1:17480/api/arrays/big | wc -c) bytes"
t $B/cli/cohort cancel big
du -sk $D/state | awk '{print "state dir after: " $1 " KiB"}'
kill $C; wait $C 2>/dev/null; rm -rf $D
