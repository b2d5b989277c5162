#!/bin/sh
# Runs the recovery measurements reported in bench/RESULTS.md ("Recovery"), in order:
#   node loss (agent SIGKILLed) with the default heartbeat timeout (10 s) and a short one (1 s),
#   and a preempted node (agent SIGTERMed, default timeout), 5 runs each;
#   coordinator restart with 3 real agents and with 1,000 simulated agents, 5 runs each.
# Usage: bench/recovery/run.sh [BUILD_DIR]   (default: build; needs cohort-recovery-bench,
# cohort-coordinator and cohort-agent built there). Prints each run and the medians.
set -eu
build=${1:-build}
bench="$build/bench/recovery/cohort-recovery-bench"
daemons="--coordinator $build/coordinator/cohort-coordinator --agent $build/agent/cohort-agent"
runs=${RUNS:-5}
echo "# host: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
"$bench" node-loss $daemons --heartbeat-timeout 10s --runs "$runs"
"$bench" node-loss $daemons --heartbeat-timeout 1s --runs "$runs"
"$bench" node-loss $daemons --heartbeat-timeout 10s --signal TERM --runs "$runs"
"$bench" coordinator-restart $daemons --agents 3 --runs "$runs"
"$bench" coordinator-restart-sim $daemons --agents 1000 --jobs 1000 --runs "$runs"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
