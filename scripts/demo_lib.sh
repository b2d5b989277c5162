# shellcheck shell=bash
# Shared by scripts/demo.sh and scripts/demo_torch.sh (sourced, not run): the build step, the
# demo's folder, a coordinator and agents on 127.0.0.1 stopped on any exit, and the job's
# follow-up. The caller sets `repo` (the source tree) before sourcing it, which sets `build`
# (BUILD_DIR, default build, under `repo` unless absolute) and `timeout_s` (DEMO_TIMEOUT, default
# 600), and `run` (demo_folder) before starting daemons; `set -euo pipefail` is its own.

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold="" plain=""; fi
say() { printf '\n%s==> %s%s\n' "$bold" "$*" "$plain"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }

: "${repo:?demo_lib.sh needs repo set}"
build="${BUILD_DIR:-build}"
[[ "$build" = /* ]] || build="$repo/$build"
timeout_s="${DEMO_TIMEOUT:-600}"
[[ "$timeout_s" =~ ^[0-9]+$ ]] || die "DEMO_TIMEOUT must be a whole number of seconds"
coordinator_bin="$build/coordinator/cohort-coordinator"
agent_bin="$build/agent/cohort-agent"
cli_bin="$build/cli/cohort"

# demo_build TARGET...: unless DEMO_SKIP_BUILD=1, installs the missing Debian packages and builds
# these targets into $build (configuring it first where needed).
demo_build() {
  [ "${DEMO_SKIP_BUILD:-0}" != 1 ] || return 0
  say "Installing missing packages (scripts/install-deps.sh)"
  "$repo/scripts/install-deps.sh"
  say "Building into $build"
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  fi
  cmake --build "$build" -j "$(nproc)" --target "$@"
}

# demo_folder PREFIX: sets `run` to DEMO_DIR (made if missing) or a new /tmp/PREFIX.XXXXXX.
demo_folder() {
  run="${DEMO_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")}"
  mkdir -p "$run"
  run="$(cd "$run" && pwd)"
}

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

# Removes the levels of replica cgroups this demo's agents left (agent/cgroup.h, each agent's log
# names its level): an agent stopped cleanly removes its own, one the demo killed on purpose (a
# lost node) leaves its replicas' cgroups, empty (their processes died with it). A cgroup that
# still holds a process stays.
remove_agent_cgroups() {
  local log level
  for log in "$run"/agent-*.log; do
    [ -f "$log" ] || continue
    level=$(sed -n 's/.*replica cgroups under \(.*\)$/\1/p' "$log" | head -n 1)
    [ -n "$level" ] && [ -d "$level" ] || continue
    find "$level" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null || true
    rmdir "$level" 2>/dev/null || true
  done
}

demo_cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$coordinator_pid" ] || [ ${#agent_pids[@]} -gt 0 ]; then
    say "Stopping the daemons this demo started"
    # Agents first: on SIGTERM they stop their replicas and report to the coordinator.
    [ ${#agent_pids[@]} -gt 0 ] && stop_pids 20 "${agent_pids[@]}"
    [ -n "$coordinator_pid" ] && stop_pids 10 "$coordinator_pid"
  fi
  [ -n "${run:-}" ] && remove_agent_cgroups
  [ -n "${run:-}" ] && echo "Demo files: $run"
  exit "$rc"
}
trap demo_cleanup EXIT
trap 'echo; echo "demo: interrupted"; exit 130' INT
trap 'exit 143' TERM

# Whether every daemon still running is alive (an agent the demo stopped on purpose has its pid
# removed from agent_pids).
check_daemons_quietly() {
  local pid
  alive "$coordinator_pid" || return 1
  for pid in "${agent_pids[@]}"; do
    [ "$pid" = stopped ] || alive "$pid" || return 1
  done
}

# Fails the demo when a daemon is gone, with the end of its log.
check_daemons() {
  local i
  if ! alive "$coordinator_pid"; then
    tail -n 30 "$run/coordinator.log" >&2 || true
    die "the coordinator exited (log: $run/coordinator.log)"
  fi
  for i in "${!agent_pids[@]}"; do
    [ "${agent_pids[$i]}" = stopped ] && continue
    if ! alive "${agent_pids[$i]}"; then
      tail -n 30 "$run/agent-$((i + 1)).log" >&2 || true
      die "agent $((i + 1)) exited (log: $run/agent-$((i + 1)).log)"
    fi
  done
}

# Three free TCP ports for the coordinator, and a window of free ports it hands to replicas.
pick_ports() {
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
}

# start_coordinator [FLAG...]: the coordinator, with these flags too, its dashboard on a free port.
# Jobs write under $run/jobs/<job>, the output root every agent here sees.
start_coordinator() {
  pick_ports
  dashboard="http://127.0.0.1:$http_port/"
  export COHORT_COORDINATOR="tcp://127.0.0.1:$client_port"
  export COHORT_INSECURE=1
  say "Starting a coordinator on 127.0.0.1:$client_port (clients) and :$agent_port (agents)"
  "$coordinator_bin" --insecure --state-dir "$run/coordinator" \
    --client-endpoint "tcp://127.0.0.1:$client_port" \
    --agent-endpoint "tcp://127.0.0.1:$agent_port" \
    --http-endpoint "127.0.0.1:$http_port" \
    --output-root "$run/jobs" --port-range "$port_lo-$port_hi" "$@" \
    >"$run/coordinator.log" 2>&1 &
  coordinator_pid=$!
}

# Agents' node ids: <node_prefix>-1 .. N. The prefix carries this demo's pid, so that the agents
# of two demos at once on one machine (ctest runs them side by side) are told apart by node id.
node_prefix="demo$$-node"
# start_agents N CPUS MEMORY_MB: N agents, each with no GPUs and no /metrics endpoint (its
# default port, 127.0.0.1:7481, is left to an agent installed on this machine).
start_agents() {
  local i
  for ((i = 1; i <= $1; i++)); do
    "$agent_bin" --insecure --coordinator "tcp://127.0.0.1:$agent_port" \
      --node-id "$node_prefix-$i" --gpus 0 --cpus "$2" --memory-mb "$3" \
      --work-dir "$run/agent-$i" --builtin-dir "$build/collective" \
      --advertise-address 127.0.0.1 --grace-period 10s --http-endpoint none \
      >"$run/agent-$i.log" 2>&1 &
    agent_pids+=($!)
  done
  echo "coordinator pid $coordinator_pid, agents ${agent_pids[*]}; logs in $run"
}

cohort() { "$cli_bin" "$@"; }

# wait_for_agents N: until N agents have registered (60 s at most).
wait_for_agents() {
  local nodes deadline=$((SECONDS + 60))
  say "Waiting for $1 agents to register"
  while :; do
    check_daemons
    nodes=$(cohort nodes --json 2>/dev/null |
            python3 -c 'import json,sys; print(len(json.load(sys.stdin)))' 2>/dev/null || echo 0)
    [ "$nodes" -ge "$1" ] && break
    [ $SECONDS -lt $deadline ] || die "only $nodes of $1 agents registered within 60 s"
    sleep 0.5
  done
  cohort nodes
}

# Where to look while it runs: the coordinator's dashboard (after start_coordinator).
dashboard_line() {
  if python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
         "$dashboard" >/dev/null 2>&1; then
    echo "Dashboard: ${bold}$dashboard${plain}  (the coordinator's HTTP endpoint; open it in a browser)"
  else
    echo "Dashboard: $dashboard did not answer (see $run/coordinator.log)"
  fi
}

job_field() {  # job_field JOB KEY: a top-level field of `cohort status --json`
  cohort status "$1" --json 2>/dev/null |
    python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])" 2>/dev/null || true
}

# wait_replicas_ended JOB TIMEOUT_S: until no replica of JOB is PENDING, STARTING or RUNNING (after
# the chief's exit 0 the others have the job's finish_grace to end on their own); 1 after TIMEOUT_S.
wait_replicas_ended() {
  local job=$1 deadline=$((SECONDS + $2))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if cohort status "$job" --json 2>/dev/null | python3 -c '
import json, sys
states = [r["state"] for r in json.load(sys.stdin)["replicas"]]
sys.exit(any(s in ("PENDING", "STARTING", "RUNNING") for s in states))'; then
      return 0
    fi
    sleep 0.5
  done
  return 1
}

# follow_job JOB TIMEOUT_S [HOOK]: `cohort watch JOB` until the job ends, calling HOOK (a shell
# function) every half second meanwhile; cancels the job and fails the demo after TIMEOUT_S, or
# when a daemon dies.
follow_job() {
  local job=$1 timeout_s=$2 hook=${3:-} watch_pid deadline
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
    [ -n "$hook" ] && "$hook"
    sleep 0.5
  done
  wait "$watch_pid" 2>/dev/null || true
}
