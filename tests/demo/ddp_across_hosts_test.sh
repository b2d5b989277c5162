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
# A bare torchrun in each replica (its flags' defaults from Cohort's PET_* variables: one torchrun
# node a replica) runs the script across the hosts as well. Then, a partition as a cut cable or a dead switch port makes it: worker-1's host loses its link
# after the chief's epoch 2 (nothing is reset: the other ranks hang in gloo), the coordinator
# declares that node lost after its heartbeat timeout (5 s), restarts the whole job on the hosts
# left (a fourth is spare: its ranks are one group, so it restarts whole though its file says
# nothing of restart_job_on_worker_restart; restarted alone, worker-1 failed at once to connect to
# the hung group), and the script resumes from its checkpoint and succeeds, one restart spent. Root only (network namespaces); skips (77) saying why elsewhere.
set -euo pipefail
src=$1 build=$2 python=$3
source "$src/tests/testing/emulated_hosts.sh"
"$python" -c 'import torch' 2>/dev/null || skip "$python cannot import torch (python3-torch)"
emulated_hosts "$src" ddp
cluster up --hosts 4 --rate 1gbit --subnet 10.78.0 >/dev/null
on h0 "$build/coordinator/cohort-coordinator" --insecure --state-dir "$run/coordinator" \
  --client-endpoint tcp://10.78.0.1:7400 --agent-endpoint tcp://10.78.0.1:7401 \
  --http-endpoint none --output-root "$run/jobs" --heartbeat-timeout 5s \
  >"$run/coordinator.log" 2>&1 &
pids+=($!)
for i in 0 1 2 3; do
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
  [ "$nodes" -ge 4 ] && break
  sleep 0.5
done
[ "$nodes" -ge 4 ] || fail "$nodes of 4 agents registered: $(tail -n 5 "$run"/agent-*.log)"
resolved=$(on h1 getent hosts "$(hostname)" | awk '{print $1}' | head -n 1)
echo "the hostname $(hostname) resolves to ${resolved:-nothing} on each host"

# The job file as a user writes it, with the script's path, two epochs, no restart, no restart
# policy (restart_job_on_worker_restart left out, as a job file written from scratch leaves it), and
# USE_LIBUV=0 (Debian's newer torch has no libuv, which its env:// store asks for).
job() {  # job NAME EXTRA_ENV [JOB_FILE [EPOCHS_AND_DELAY [MAX_RESTARTS]]]
  sed -e "s|^name: .*|name: $1|" \
      -e "s|\[/usr/bin/python3, ddp_digits.py\]|[$python, $src/examples/torch/ddp_digits.py]|" \
      -e "s|--epochs=20|${4:---epochs=2}|" \
      -e "s|env: {OMP_NUM_THREADS: \"1\"}|env: {OMP_NUM_THREADS: \"1\", USE_LIBUV: \"0\"$2}|" \
      -e "s|timeout: 30m, max_restarts: 3, restart_job_on_worker_restart: true|timeout: 120s, max_restarts: ${5:-0}|" \
      "$src/examples/torch/${3:-ddp_gloo.yaml}" >"$run/$1.yaml"
  if grep -q restart_job_on_worker_restart "$run/$1.yaml"; then
    fail "the job file $1 still sets a restart policy: $(grep scheduling "$run/$1.yaml")"
  fi
  if [ -n "${4:-}" ]; then
    cli submit "$run/$1.yaml" >"$run/$1.out" 2>&1
  else
    cli submit "$run/$1.yaml" --wait >"$run/$1.out" 2>&1
  fi
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
for i in 0 1 2 3; do
  grep -q "replicas' gloo binds to eth0, the interface of 10.78.0.$((i + 1))" "$run/agent-$i.log" ||
    fail "agent $i does not name eth0: $(grep -i gloo "$run/agent-$i.log")"
done
echo "across_hosts: SUCCEEDED across the hosts, every rank on $sums"

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

# torchrun, with `--redirects 9:1 --tee 9:1`, which Debian 12's torch 1.13 needs to start under
# Python 3.11 (examples/torch/README.md) and any other takes.
torchrun="[$python, -m, torch.distributed.run, --redirects, '9:1', --tee, '9:1', $src/examples/torch/ddp_digits.py, --backend=gloo, --epochs=2]"
cat >"$run/torchrun.yaml" <<EOF
name: torchrun
worker_pools:
  - role: chief
    resources: {cpus: 1}
    process: {command: $torchrun, env: {OMP_NUM_THREADS: "1", USE_LIBUV: "0"}}
  - role: worker
    replicas: 2
    resources: {cpus: 1}
    process: {command: $torchrun, env: {OMP_NUM_THREADS: "1", USE_LIBUV: "0"}}
scheduling: {timeout: 120s, max_restarts: 0}
EOF
cli submit "$run/torchrun.yaml" --wait >"$run/torchrun.out" 2>&1 ||
  fail "bare torchrun in each replica did not succeed: $(cli status torchrun)"
echo "torchrun: SUCCEEDED across the hosts, every rank on $(same_parameters torchrun)"

# The partition: 8 epochs of about 2 s; worker-1's host is cut off once the chief logged epoch 2.
field() {  # field JOB PYTHON_EXPRESSION_OF_j
  cli status "$1" --json 2>/dev/null | "$python" -c "import json,sys; j=json.load(sys.stdin); print($2)" 2>/dev/null || true
}
job partition "" ddp_gloo.yaml "--epochs=8, --step-delay=0.06" 3 || fail "submit: $(cat "$run/partition.out")"
cut="" state=""
for _ in $(seq 240); do
  if [ -z "$cut" ] && cli logs partition --replica chief-0 2>/dev/null | grep -q '^epoch 2/'; then
    node=$(field partition 'next(r["node_id"] for r in j["replicas"] if r["replica"] == "worker-1")')
    [[ "$node" =~ ^host-([0-9])$ ]] || fail "worker-1 runs on no host: '$node'"
    cut="h${BASH_REMATCH[1]}"
    on "$cut" ip link set eth0 down
    echo "partition: $cut ($node, worker-1's) lost its link after the chief's epoch 2"
  fi
  state=$(field partition 'j["state"]')
  case "$state" in SUCCEEDED | FAILED | CANCELLED) break ;; esac
  sleep 0.5
done
[ -n "$cut" ] || fail "the chief never logged epoch 2: $(cli logs partition --all --tail 5)"
[ "$state" = SUCCEEDED ] || fail "the partitioned job ended $state: $(cli status partition)"
status=$(cli status partition)
grep -q "restart 1/3: the whole job (its ranks are one group: restart_job_on_worker_restart unset) because node $node lost" <<<"$status" ||
  fail "no restart names the lost node: $status"
grep -q "^Restarts: *1 of 3, each of the whole job (its ranks are one group: restart_job_on_worker_restart unset)$" <<<"$status" ||
  fail "the status does not say what a fall restarts: $status"
[ "$(field partition 'j["restarts"]')" = 1 ] || fail "not one restart spent: $status"
grep -q '^\[worker-1\] resumed from epoch' <<<"$(cli logs partition --all)" ||
  fail "worker-1 did not resume from a checkpoint: $(cli logs partition --all --tail 5)"
echo "partition: SUCCEEDED after one restart, resumed from a checkpoint, every rank on $(same_parameters partition)"
