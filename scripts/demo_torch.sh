#!/usr/bin/env bash
# A stock PyTorch DDP script survives a lost node under Cohort, on one machine. Installs what is
# missing, builds what it needs, starts a coordinator and four agents on 127.0.0.1, and submits
# examples/torch/ddp_gloo.yaml: a chief and two workers running examples/torch/ddp_digits.py on
# torch's gloo backend (DEMO_BACKEND=cohort: on Cohort's Reduction Server), nothing
# Cohort-specific in the script, which checkpoints every epoch and resumes from its newest one.
# When the chief has logged epoch DEMO_LOSE_AFTER_EPOCH, the demo loses the node that runs
# worker-0 as a power cut would: its agent and the processes of every replica there are
# SIGKILLed (DEMO_FAULT=preemption: the agent is SIGTERMed). The other ranks then fail (gloo: the
# connection reset; cohort: the peer gone); the coordinator holds their verdicts until the silent
# node is declared lost (its --heartbeat-timeout, 5 s here), attributes their exits to that loss,
# and restarts the job on the three nodes left, spending one restart; the script resumes from its
# checkpoint. The demo follows it all with `cohort watch`, then shows the job's events and its
# checkpoints (`cohort checkpoint`), and checks the outcome.
#
# Usage: scripts/demo_torch.sh
# Environment (all optional):
#   BUILD_DIR     build folder (default: build)
#   DEMO_DIR      where the daemons keep state, logs and job output (default: a new /tmp dir)
#   DEMO_TIMEOUT  seconds the job may take before the demo cancels it (default 600)
#   DEMO_BACKEND  gloo (default: examples/torch/ddp_gloo.yaml) or cohort (ddp_cohort.yaml: the
#                 same script with --backend=cohort, its gradients summed by a Reduction Server of
#                 two cohort-reducer replicas; the backend from this build, <build>/python)
#   DEMO_LOSE_AFTER_EPOCH  the chief's epoch after which the node goes (default 3; 0: none)
#   DEMO_FAULT    node-loss (default) or preemption: the node's agent gets SIGTERM instead, as a
#                 spot VM's shutdown sends it; it stops its replicas (SIGTERM, then SIGKILL after
#                 its grace period), reports them PREEMPTED and exits
#   DEMO_STEP_DELAY  seconds the script sleeps per step, so there is time to watch (default 0.05)
#   DEMO_PYTHON   the interpreter that has torch (default /usr/bin/python3: Debian's)
#   DEMO_SKIP_BUILD=1  use the binaries already in BUILD_DIR (no install, no build)
# Exit status: 0 when the job SUCCEEDED, after the loss with one restart spent and resumed from a
# checkpoint, and every rank ended with the same parameters; 1 otherwise.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
lose_after="${DEMO_LOSE_AFTER_EPOCH:-3}"
step_delay="${DEMO_STEP_DELAY:-0.05}"
[[ "$lose_after" =~ ^[0-9]+$ ]] || { echo "demo: DEMO_LOSE_AFTER_EPOCH must be a whole number" >&2; exit 1; }
fault="${DEMO_FAULT:-node-loss}"
[[ "$fault" =~ ^(node-loss|preemption)$ ]] || { echo "demo: DEMO_FAULT must be node-loss or preemption" >&2; exit 1; }
[[ "$step_delay" =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "demo: DEMO_STEP_DELAY must be seconds" >&2; exit 1; }
backend="${DEMO_BACKEND:-gloo}"
case "$backend" in
  gloo|cohort) job_src="examples/torch/ddp_$backend.yaml" ;;
  *) echo "demo: DEMO_BACKEND must be gloo or cohort" >&2; exit 1 ;;
esac
script="$repo/examples/torch/ddp_digits.py"
python="${DEMO_PYTHON:-/usr/bin/python3}"

# shellcheck source=scripts/demo_lib.sh
. "$repo/scripts/demo_lib.sh"

targets=(cohort-coordinator cohort-agent cohort)
[ "$backend" = gloo ] || targets+=(cohort-reducer cohort_python cohort_torch_backend)
demo_build "${targets[@]}"
for b in "$coordinator_bin" "$agent_bin" "$cli_bin"; do
  [ -x "$b" ] || die "missing $b after the build"
done
"$python" -c 'import torch' 2>/dev/null ||
  die "$python cannot import torch: Debian's python3-torch is needed (scripts/install-deps.sh)"
if [ "$backend" = cohort ]; then
  [ -x "$build/collective/cohort-reducer" ] || die "missing $build/collective/cohort-reducer"
  why=$(PYTHONPATH="$build/python" "$python" -c 'import cohort.torch' 2>&1) ||
    die "the cohort backend does not load from $build/python: $(echo "$why" | tail -n 1)"
fi

demo_folder cohort-demo-torch

start_coordinator --heartbeat-timeout 5s
# One training replica a node (each asks for one CPU; with reducers, two CPUs a node), and a spare
# node for the restart.
if [ "$backend" = cohort ]; then start_agents 4 2 3072; else start_agents 4 1 2048; fi
wait_for_agents 4

# The job file with the script's absolute path, a fresh name, the step delay and USE_LIBUV=0
# (Debian 13's and sid's torch are built without libuv, which their env:// asks for; older torch
# ignores it); with the cohort backend, PYTHONPATH to this build's cohort package. Its output:
# $run/jobs/<job>.
job_name="torch_ddp_${backend}_$(date +%H%M%S)"
job_file="$run/$(basename "$job_src")"
edits=(-e "s|\[/usr/bin/python3, ddp_digits.py\]|[$python, $script]|"
       -e "s|^name: .*|name: $job_name|"
       -e "s|^\( *args: \[\)|\1--step-delay=$step_delay, |")
env_map='OMP_NUM_THREADS: "1", USE_LIBUV: "0"'
[ "$backend" = gloo ] || env_map+=", PYTHONPATH: \"$build/python\""
edits+=(-e "s|env: {OMP_NUM_THREADS: \"1\"}|env: {$env_map}|")
sed "${edits[@]}" "$job_src" >"$job_file"
[ "$(grep -c -e "$script" -e USE_LIBUV -e step-delay "$job_file")" -ge 6 ] ||
  die "could not adapt $job_src (its command, args or env lines changed?): see $job_file"

say "Submitting $job_file"
job=$(cohort submit "$job_file")
echo "job: $job"

# The process-group leaders of the job's replicas named (the agent makes one group a replica).
replica_groups() {
  "$python" - "$job" "$@" <<'EOF'
import os, sys
job = b"COHORT_JOB=" + sys.argv[1].encode()
replicas = {b"COHORT_REPLICA=" + r.encode() for r in sys.argv[2:]}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open("/proc/%s/environ" % pid, "rb") as f:
            env = set(f.read().split(b"\0"))
        if job in env and env & replicas and os.getpgid(int(pid)) == int(pid):
            print(pid)
    except OSError:
        pass
EOF
}

# Called while the job runs: once the chief has logged epoch $lose_after, loses worker-0's node,
# its agent and every replica of the job there; or, with DEMO_FAULT=preemption, SIGTERMs its
# agent.
lost_node=""
lose_node_when_due() {
  [ "$lose_after" -gt 0 ] && [ -z "$lost_node" ] || return 0
  local log node replicas groups index g
  # Read whole, then searched: `| grep -q` would stop reading early, and under pipefail the
  # writer's SIGPIPE would read as "not yet".
  log=$(cohort logs "$job" --replica chief-0 2>/dev/null || true)
  grep -q "^epoch $lose_after/" <<<"$log" || return 0
  # worker-0's node, then every replica of the job on it.
  read -r node replicas < <(cohort status "$job" --json | python3 -c '
import json, sys
replicas = json.load(sys.stdin)["replicas"]
node = next(r["node_id"] for r in replicas if r["replica"] == "worker-0")
print(node, " ".join(r["replica"] for r in replicas if r["node_id"] == node))' || true) || true
  [[ "${node:-}" =~ ^$node_prefix-([0-9]+)$ ]] || return 0
  index=$((BASH_REMATCH[1] - 1))
  # shellcheck disable=SC2086 # one argument a replica
  groups=$(replica_groups $replicas)
  [ -n "$groups" ] || return 0
  if [ "$fault" = preemption ]; then
    say "Preempting $node (worker-0's node) after epoch $lose_after: SIGTERM to its agent"
    kill -TERM "${agent_pids[$index]}"
    agent_pids[index]=stopped  # it stops its replicas and exits within its grace period
    lost_node=$node
    return 0
  fi
  say "Losing $node (worker-0's node) after epoch $lose_after: SIGKILL to its agent and to $replicas"
  kill -KILL "${agent_pids[$index]}"
  wait "${agent_pids[$index]}" 2>/dev/null || true
  agent_pids[index]=stopped
  for g in $groups; do kill -KILL -- "-$g" 2>/dev/null || true; done
  lost_node=$node
}

follow_job "$job" "$timeout_s" lose_node_when_due
state=$(job_field "$job" state)
restarts=$(job_field "$job" restarts)

say "Job $job: $state"
# The workers end on their own after the chief (scheduling.finish_grace): wait for their ends.
wait_replicas_ended "$job" 45 || echo "demo: replicas of $job still running 45 s after it ended"
cohort status "$job" || true
output_dir=$(job_field "$job" output_dir)
output_dir="${output_dir%/}"
say "Its checkpoints: cohort checkpoint --job $job"
cohort checkpoint --job "$job" || true

for replica in chief-0 worker-0 worker-1; do
  cohort logs "$job" --replica "$replica" >"$run/$replica.log" 2>/dev/null || true
done
[ "$state" = SUCCEEDED ] || {
  echo "---- chief-0 log (tail)"
  tail -n 30 "$run/chief-0.log" || true
  die "the job ended $state"
}
# Each rank's parameter digest, as its last attempt logged it: every rank ends on its own.
digests=() unreported=()
for replica in chief-0 worker-0 worker-1; do
  digest=$(grep -o 'parameters sha256 [0-9a-f]*' "$run/$replica.log" | tail -n 1 | awk '{print $3}')
  if [ -n "$digest" ]; then digests+=("$replica=$digest"); else unreported+=("$replica"); fi
done
accuracy=$(grep -o 'final test accuracy [0-9.]*' "$run/chief-0.log" | tail -n 1 | awk '{print $4}')
resumed=$(grep -o 'resumed from epoch [0-9]*' "$run/chief-0.log" | tail -n 1 || true)

echo
echo "Final test accuracy: ${accuracy:-unknown}"
echo "Fault:               $fault of ${lost_node:-no node} (after epoch $lose_after); restarts spent: $restarts"
echo "After the restart:   ${resumed:-no resume line}"
echo "Model:               $output_dir/model/model.pt"
echo "Replica logs:        $run/{chief-0,worker-0,worker-1}.log (cohort logs $job --replica R)"
echo "Daemon logs:         $run/coordinator.log $run/agent-{1,2,3,4}.log"
dashboard_line
if [ "$lose_after" -gt 0 ]; then
  [ -n "$lost_node" ] || die "no $fault: the job ended before epoch $lose_after was logged"
  [ "$restarts" = 1 ] || die "the loss spent $restarts restarts, not one"
  [ -n "$resumed" ] || die "the chief did not resume from a checkpoint after the restart"
fi
distinct=$(printf '%s\n' "${digests[@]}" | cut -d= -f2 | sort -u | wc -l)
if [ "${#unreported[@]}" != 0 ] || [ "$distinct" != 1 ]; then
  die "the ranks did not end with the same parameters: ${digests[*]}${unreported[*]:+; none from ${unreported[*]}}"
fi
first=${digests[0]#*=}
echo "Every rank ended with the same parameters (sha256 ${first:0:16}...)."
