#!/bin/sh
# The control plane on the SQLite state store against the journal it replaced (issue 15): the
# same bench (cohort-control-plane-bench, this tree's) on the same machine, the two coordinators
# in alternating runs. Each run reports submit throughput (N jobs, 256 in flight), submit->RUNNING
# latency, scheduling rounds, and the restart time with all N jobs in the state (SIGKILL, then
# time to the first answer and to a full ListJobs, --restart-runs times).
# The journal's coordinator is built from JOURNAL_COMMIT (default 5ac0bd4, main just before the
# store landed) in a worktree of its own (JOURNAL_DIR), once. JOURNAL_ARGS adds flags to it, e.g.
# "--snapshot-every 100000" as in the earlier figures of bench/RESULTS.md (default: none, i.e.
# its default compaction every 10,000 records, as it ran in production).
# Usage: bench/control_plane/store_vs_journal.sh [BUILD_DIR]
#        (RUNS=3 AGENTS=1000 JOBS=10000 RESTARTS=5; needs a quiet machine: figures are wall times)
set -eu
build=${1:-build}
commit=${JOURNAL_COMMIT:-5ac0bd4}
jdir=${JOURNAL_DIR:-/tmp/cohort-journal-$commit}
if [ ! -x "$jdir/build/coordinator/cohort-coordinator" ]; then
  [ -d "$jdir" ] || git worktree add --detach "$jdir" "$commit"
  cmake -S "$jdir" -B "$jdir/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$jdir/build" --target cohort-coordinator
fi
cmake --build "$build" --target cohort-coordinator cohort-control-plane-bench
bench="$build/bench/control_plane/cohort-control-plane-bench"
set -- --agents "${AGENTS:-1000}" --jobs "${JOBS:-10000}" --latency-runs 20 --idle-seconds 10 \
  --restart-runs "${RESTARTS:-5}"
echo "# host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
for run in $(seq "${RUNS:-3}"); do
  echo "## run $run: journal ($commit) ${JOURNAL_ARGS:-}"
  "$bench" --coordinator "$jdir/build/coordinator/cohort-coordinator" "$@" \
    --coordinator-args "${JOURNAL_ARGS:-}"
  echo "## run $run: SQLite state store ($(git rev-parse --short HEAD))"
  "$bench" --coordinator "$build/coordinator/cohort-coordinator" "$@"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
