#!/usr/bin/env bash
# ddp_across_hosts_test.sh SOURCE_DIR BUILD_DIR PYTHON: a stock PyTorch DDP script on torch's gloo
# backend (examples/torch/ddp_gloo.yaml, two epochs) across three hosts, each a network namespace
# of its own with an address of its own (bench/netns/cluster.sh): the coordinator and one agent on
# h0, an agent on h1 and on h2, one rank each. Here, as on a stock Debian host (127.0.1.1), the
# hostname resolves to a loopback address, where torch's gloo binds by default: no rank would
# reach another. The agents set GLOO_SOCKET_IFNAME to the interface of their advertise address,
# so the job succeeds with every rank ending on the same parameters; the same job with
# GLOO_SOCKET_IFNAME=lo in its env (a job's own value wins) fails to connect, which shows the
# variable is what decides. Where this build has the cohort backend, the same script with
# --backend=cohort (examples/torch/ddp_cohort.yaml: two reducers) runs across the hosts too.
# Root only (network namespaces); skips (77) saying why elsewhere.
set -euo pipefail
src=$1 build=$2 python=$3
skip() { echo "skipped: $*"; exit 77; }
fail() { echo "FAILED: $*"; exit 1; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
"$python" -c 'import torch' 2>/dev/null || skip "$python cannot import torch (python3-torch)"
export COHORT_NETNS_PREFIX="cohort-t$$"
cluster() { bash "$src/bench/netns/cluster.sh" "$@"; }
why=$(cluster check 2>&1) || skip "no emulated hosts here: $(tail -n 1 <<<"$why")"

run=$(mktemp -d /tmp/cohort-ddp-hosts.XXXXXX)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  cluster down >/dev/null 2>&1 || true
  rm -rf "$run"
}
trap cleanup EXIT
cluster up --hosts 3 --rate 1gbit --subnet 10.78.0 >/dev/null
on() { local host=$1; shift; cluster exec "$host" "$@"; }
on h0 "$build/coordinator/cohort-coordinator" --insecure --state-dir "$run/coordinator" \
  --client-endpoint tcp://10.78.0.1:7400 --agent-endpoint tcp://10.78.0.1:7401 \
  --http-endpoint none --output-root "$run/jobs" >"$run/coordinator.log" 2>&1 &
pids+=($!)
for i in 0 1 2; do
  on "h$i" "$build/agent/cohort-agent" --insecure --coordinator tcp://10.78.0.1:7401 \
    --node-id "host-$i" --gpus 0 --cpus 2 --memory-mb 4096 --work-dir "$run/agent-$i" \
    --builtin-dir "$build/collective" --http-endpoint none --grace-period 5s \
    >"$run/agent-$i.log" 2>&1 &
  pids+=($!)
done
export COHORT_COORDINATOR=tcp://10.78.0.1:7400 COHORT_INSECURE=1
cli() { on h0 "$build/cli/cohort" "$@"; }
nodes=0
for _ in $(seq 120); do
  nodes=$(cli nodes --json 2>/dev/null | "$python" -c 'import json,sys; print(len(json.load(sys.stdin)))' 2>/dev/null || echo 0)
  [ "$nodes" -ge 3 ] && break
  sleep 0.5
done
[ "$nodes" -ge 3 ] || fail "$nodes of 3 agents registered: $(tail -n 5 "$run"/agent-*.log)"
resolved=$(on h1 getent hosts "$(hostname)" | awk '{print $1}' | head -n 1)
echo "the hostname $(hostname) resolves to ${resolved:-nothing} on each host"

# The job file as a user writes it, with the script's path, two epochs, no restart, and
# USE_LIBUV=0 (Debian's newer torch has no libuv, which its env:// store asks for).
job() {  # job NAME EXTRA_ENV [JOB_FILE]
  sed -e "s|^name: .*|name: $1|" \
      -e "s|\[/usr/bin/python3, ddp_digits.py\]|[$python, $src/examples/torch/ddp_digits.py]|" \
      -e "s|--epochs=20|--epochs=2|" \
      -e "s|env: {OMP_NUM_THREADS: \"1\"}|env: {OMP_NUM_THREADS: \"1\", USE_LIBUV: \"0\"$2}|" \
      -e "s|timeout: 30m, max_restarts: 3|timeout: 120s, max_restarts: 0|" \
      "$src/examples/torch/${3:-ddp_gloo.yaml}" >"$run/$1.yaml"
  cli submit "$run/$1.yaml" --wait >"$run/$1.out" 2>&1
}
# Every rank of job $1 ended, on the same parameters; prints them.
same_parameters() {
  local logs sums
  logs=$(cli logs "$1" --all)
  sums=$(grep -o 'parameters sha256 [0-9a-f]*' <<<"$logs" | sort -u)
  [ "$(grep -c 'parameters sha256' <<<"$logs")" -eq 3 ] || fail "not every rank of $1 ended: $logs"
  [ "$(wc -l <<<"$sums")" -eq 1 ] || fail "the ranks of $1 ended on different parameters: $sums"
  echo "$sums"
}
job across_hosts "" || fail "the job across hosts did not succeed: $(cli status across_hosts)"
sums=$(same_parameters across_hosts)
for i in 0 1 2; do
  grep -q "replicas' gloo binds to eth0, the interface of 10.78.0.$((i + 1))" "$run/agent-$i.log" ||
    fail "agent $i does not name eth0: $(grep -i gloo "$run/agent-$i.log")"
done
echo "across_hosts: SUCCEEDED on 3 hosts, every rank on $sums"

if job bound_to_lo ', GLOO_SOCKET_IFNAME: "lo"'; then
  fail "with gloo bound to lo the ranks of three hosts connected: the test shows nothing"
fi
cli status bound_to_lo | grep -q 'gloo' || fail "bound_to_lo failed, not on gloo: $(cli status bound_to_lo)"
echo "bound_to_lo: FAILED as it must ($(cli status bound_to_lo | grep -m 1 -o 'RuntimeError: [^)]*'))"

if ls "$build"/python/cohort/torch/_C*.so >/dev/null 2>&1; then
  job on_reducers ", PYTHONPATH: \"$build/python\"" ddp_cohort.yaml ||
    fail "the job on the Reduction Server did not succeed: $(cli status on_reducers)"
  echo "on_reducers: SUCCEEDED across the hosts, every rank on $(same_parameters on_reducers)"
else
  echo "no cohort backend in $build/python: the Reduction Server job is not run"
fi
