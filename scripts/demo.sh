#!/usr/bin/env bash
# Cohort end to end on one machine: installs what is missing, builds the five binaries the demo
# needs, starts a coordinator and two agents on 127.0.0.1, submits examples/jobs/digits_ddp.yaml
# (a chief and two workers training the digits classifier data-parallel, gradients averaged by a
# Reduction Server of two reducers) and follows it live with `cohort watch` (elapsed time, replica
# states, events, and the chief's lines: loss and accuracy per epoch), then prints the final
# accuracy, checks that every training replica ended with the same model, says where the logs and
# the model are, and stops everything it started. The trainers pause after each epoch
# (DEMO_EPOCH_PAUSE_MS) so that the run lasts long enough to watch: about 40 s here. Where the
# coordinator has an HTTP endpoint (--http-endpoint), the demo prints the dashboard's address.
#
# Usage: scripts/demo.sh
# Environment (all optional):
#   BUILD_DIR     build folder (default: build)
#   DEMO_DIR      where the daemons keep state, logs and job output (default: a new /tmp dir)
#   DEMO_TIMEOUT  seconds the job may take before the demo cancels it (default 600)
#   DEMO_EPOCH_PAUSE_MS  the trainers' pause after each epoch (default 1000; 0: full speed, about
#                 1 s for the whole run). It does not change the model.
#   DEMO_SKIP_BUILD=1  use the binaries already in BUILD_DIR (no install, no build)
#   DEMO_JOB      the job file to run (default examples/jobs/digits_ddp.yaml); its
#                 `[digits-trainer]` commands are pointed at the freshly built binary
# Exit status: 0 when the job SUCCEEDED and every training replica ended with the same model,
# 1 otherwise (failed, cancelled, timed out, a daemon died, models differ).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
build="${BUILD_DIR:-build}"
[[ "$build" = /* ]] || build="$repo/$build"
timeout_s="${DEMO_TIMEOUT:-600}"
pause_ms="${DEMO_EPOCH_PAUSE_MS:-1000}"
[[ "$pause_ms" =~ ^[0-9]+$ ]] || { echo "demo: DEMO_EPOCH_PAUSE_MS must be a whole number of ms" >&2; exit 1; }
job_src="${DEMO_JOB:-examples/jobs/digits_ddp.yaml}"
[ -f "$job_src" ] || { echo "demo: no job file $job_src" >&2; exit 1; }

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold="" plain=""; fi
say() { printf '\n%s==> %s%s\n' "$bold" "$*" "$plain"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

if [ "${DEMO_SKIP_BUILD:-0}" != 1 ]; then
  say "Installing missing packages (scripts/install-deps.sh)"
  scripts/install-deps.sh

  say "Building into $build"
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  fi
  cmake --build "$build" -j "$(nproc)" \
    --target cohort-coordinator cohort-agent cohort cohort-reducer digits-trainer
fi

coordinator_bin="$build/coordinator/cohort-coordinator"
agent_bin="$build/agent/cohort-agent"
cli_bin="$build/cli/cohort"
trainer_bin="$build/examples/digits-trainer"
for b in "$coordinator_bin" "$agent_bin" "$cli_bin" "$build/collective/cohort-reducer" \
         "$trainer_bin"; do
  [ -x "$b" ] || die "missing $b after the build"
done

run="${DEMO_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/cohort-demo.XXXXXX")}"
mkdir -p "$run"
run="$(cd "$run" && pwd)"

# --- daemons, stopped on any exit --------------------------------------------------------------
coordinator_pid=""
agent_pids=()

alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

# Sends SIGTERM to each pid, waits up to $1 seconds for all of them, then SIGKILLs the rest.
stop_pids() {
  local grace=$1; shift
  local pid deadline=$((SECONDS + grace))
  for pid in "$@"; do
    if alive "$pid"; then kill -TERM "$pid" 2>/dev/null || true; fi
  done
  for pid in "$@"; do
    while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
    wait "$pid" 2>/dev/null || true
  done
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$coordinator_pid" ] || [ ${#agent_pids[@]} -gt 0 ]; then
    say "Stopping the daemons this demo started"
    # Agents first: on SIGTERM they stop their replicas and report to the coordinator.
    [ ${#agent_pids[@]} -gt 0 ] && stop_pids 20 "${agent_pids[@]}"
    [ -n "$coordinator_pid" ] && stop_pids 10 "$coordinator_pid"
  fi
  echo "Demo files: $run"
  exit "$rc"
}
trap cleanup EXIT
trap 'echo; echo "demo: interrupted"; exit 130' INT
trap 'exit 143' TERM

# Two free TCP ports for the coordinator, and a window of free ports it hands to replicas.
read -r client_port agent_port http_port port_lo port_hi < <(python3 - <<'EOF'
import random, socket

def free(port):
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()

socks = []
for _ in range(3):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
ports = [s.getsockname()[1] for s in socks]
for s in socks:
    s.close()
for _ in range(50):
    lo = random.randrange(30000, 59000)
    window = range(lo, lo + 100)
    if not set(window) & set(ports) and all(free(p) for p in window):
        break
print(ports[0], ports[1], ports[2], lo, lo + 99)
EOF
)

# Whether every daemon is still running.
check_daemons_quietly() {
  local pid
  alive "$coordinator_pid" || return 1
  for pid in "${agent_pids[@]}"; do alive "$pid" || return 1; done
}

# Fails the demo when a daemon is gone, with the end of its log.
check_daemons() {
  local i
  if ! alive "$coordinator_pid"; then
    tail -n 30 "$run/coordinator.log" >&2 || true
    die "the coordinator exited (log: $run/coordinator.log)"
  fi
  for i in "${!agent_pids[@]}"; do
    if ! alive "${agent_pids[$i]}"; then
      tail -n 30 "$run/agent-$((i + 1)).log" >&2 || true
      die "agent $((i + 1)) exited (log: $run/agent-$((i + 1)).log)"
    fi
  done
}

# The dashboard: only where this coordinator has an HTTP endpoint.
http_args=()
dashboard=""
if "$coordinator_bin" --help 2>/dev/null | grep -q -- '--http-endpoint'; then
  http_args=(--http-endpoint "127.0.0.1:$http_port")
  dashboard="http://127.0.0.1:$http_port/"
fi

say "Starting a coordinator on 127.0.0.1:$client_port (clients) and :$agent_port (agents)"
"$coordinator_bin" --insecure --state-dir "$run/coordinator" \
  --client-endpoint "tcp://127.0.0.1:$client_port" \
  --agent-endpoint "tcp://127.0.0.1:$agent_port" \
  "${http_args[@]}" \
  --port-range "$port_lo-$port_hi" >"$run/coordinator.log" 2>&1 &
coordinator_pid=$!

for i in 1 2; do
  "$agent_bin" --insecure --coordinator "tcp://127.0.0.1:$agent_port" \
    --node-id "demo-node-$i" --gpus 0 --cpus 4 --memory-mb 4096 \
    --work-dir "$run/agent-$i" --builtin-dir "$build/collective" \
    --advertise-address 127.0.0.1 --grace-period 10s \
    >"$run/agent-$i.log" 2>&1 &
  agent_pids+=($!)
done
echo "coordinator pid $coordinator_pid, agents ${agent_pids[*]}; logs in $run"

export COHORT_COORDINATOR="tcp://127.0.0.1:$client_port"
export COHORT_INSECURE=1
cohort() { "$cli_bin" "$@"; }

say "Waiting for both agents to register"
deadline=$((SECONDS + 60))
while :; do
  check_daemons
  nodes=$(cohort nodes --json 2>/dev/null |
          python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' 2>/dev/null || echo 0)
  [ "$nodes" -ge 2 ] && break
  [ $SECONDS -lt $deadline ] || die "only $nodes of 2 agents registered within 60 s"
  sleep 0.5
done
cohort nodes

# The job file with the trainer's absolute path, a fresh name and its output under $run.
base_name=$(sed -n 's/^name: *\([A-Za-z0-9_]*\).*/\1/p' "$job_src" | head -n 1)
job_name="${base_name:-demo}_$(date +%H%M%S)"
job_file="$run/$(basename "$job_src")"
# The digits trainers' args get --epoch-pause-ms (their only `args: [` lines: reducers are builtin).
pause_expr="s|^\( *args: \[\)|\1--epoch-pause-ms=$pause_ms, |"
grep -q '\[digits-trainer\]' "$job_src" || pause_expr=""
sed -e "s|\[digits-trainer\]|[$trainer_bin]|g" \
    -e "s|^name: .*|name: $job_name|" \
    ${pause_expr:+-e "$pause_expr"} \
    "$job_src" >"$job_file"
echo "output_dir: $run/jobs/$job_name" >>"$job_file"

# Where to look while it runs: the coordinator's dashboard, when it has one.
dashboard_line() {
  if [ -z "$dashboard" ]; then
    echo "Dashboard: none (this coordinator has no --http-endpoint yet; cohort watch/logs/status instead)"
  elif python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
         "$dashboard" >/dev/null 2>&1; then
    echo "Dashboard: ${bold}$dashboard${plain}  (the coordinator's HTTP endpoint; open it in a browser)"
  else
    echo "Dashboard: $dashboard did not answer (see $run/coordinator.log)"
  fi
}

say "Submitting $job_file"
job=$(cohort submit "$job_file")
echo "job: $job"

job_field() {  # job_field KEY: a top-level field of `cohort status --json`
  cohort status "$job" --json 2>/dev/null |
    python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])" 2>/dev/null || true
}

say "Training: cohort watch $job (Ctrl-C stops the demo and its daemons)"
dashboard_line
# `watch` prints the job's state, its replicas, events and the chief's lines until the job ends.
# It runs in the background so that the demo can stop it when a daemon dies or time runs out.
cohort watch "$job" &
watch_pid=$!
deadline=$((SECONDS + timeout_s))
while alive "$watch_pid"; do
  if ! check_daemons_quietly; then
    kill -TERM "$watch_pid" 2>/dev/null || true
    wait "$watch_pid" 2>/dev/null || true
    check_daemons
  fi
  if [ $SECONDS -ge $deadline ]; then
    kill -TERM "$watch_pid" 2>/dev/null || true
    wait "$watch_pid" 2>/dev/null || true
    echo "demo: the job did not finish within $timeout_s s; cancelling it" >&2
    cohort cancel "$job" || true
    exit 1
  fi
  sleep 0.5
done
wait "$watch_pid" 2>/dev/null || true
state=$(job_field state)

say "Job $job: $state"
cohort status "$job" || true
output_dir=$(job_field output_dir)
output_dir="${output_dir%/}"
cohort logs "$job" --replica chief-0 >"$run/chief-0.log" 2>/dev/null || true

if [ "$state" != SUCCEEDED ]; then
  echo "---- chief-0 log (tail)"
  tail -n 30 "$run/chief-0.log" || true
  echo "Replica logs: $run/agent-*/$job/<replica>/attempt-<n>.log (or: cohort logs $job --replica ROLE-INDEX)"
  exit 1
fi

accuracy=$(grep -o 'final test accuracy: [0-9.]*' "$run/chief-0.log" | tail -n 1 | awk '{print $4}')
if [ -z "$accuracy" ] && [ -f "$output_dir/model/metrics.json" ]; then
  accuracy=$(python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["test_accuracy"])' \
             "$output_dir/model/metrics.json")
fi
# Data parallelism check: every training replica logs the CRC-32 of its final model.
models=""
crcs=()
training_replicas=$(cohort status "$job" --json | python3 -c '
import json, sys
print(" ".join(r["replica"] for r in json.load(sys.stdin)["replicas"] if r["role"] in ("chief", "worker")))')
for replica in $training_replicas; do
  crc=$(cohort logs "$job" --replica "$replica" 2>/dev/null | grep -o 'model crc32 [0-9a-f]*' |
        tail -n 1 | awk '{print $3}')
  models+="$replica=${crc:-?} "
  crcs+=("${crc:-?}")
done

echo
echo "Final test accuracy: ${accuracy:-unknown}"
echo "Final models:        $models"
echo "Model:               $output_dir/model/model.bin (metrics in $output_dir/model/metrics.json)"
echo "Checkpoints:         $output_dir/checkpoints/"
echo "Chief log:           $run/chief-0.log   (cohort logs $job --replica chief-0)"
echo "Replica logs:        $run/agent-*/$job/<replica>/attempt-<n>.log"
echo "Daemon logs:         $run/coordinator.log $run/agent-1.log $run/agent-2.log"
dashboard_line
if [ ${#crcs[@]} -eq 0 ] || [ "$(printf '%s\n' "${crcs[@]}" | sort -u | wc -l)" != 1 ] ||
   [ "${crcs[0]}" = "?" ]; then
  die "the training replicas did not end with one model: $models"
fi
echo "Every training replica ended with the same model (crc32 ${crcs[0]})."
