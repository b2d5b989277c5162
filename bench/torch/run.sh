#!/usr/bin/env bash
# run.sh: the torch benchmarks of issue 13 on the emulated cluster, side by side in one run.
#
#   bench/torch/run.sh [options]
#
#   DDP training throughput (samples/s, median of --windows windows) of a communication-bound model
#   (a ~50 M-parameter MLP) and a compute-bound one (a small conv net), each with the gloo backend,
#   the cohort backend (Reduction Server) and the cohort backend with bf16 wire compression; and
#   the all-reduce alone through the cohort backend (dist.all_reduce; the default, and whole calls
#   with COHORT_TORCH_OVERLAP=0) against cohort-bench's Reduction Server at the same sizes.
#
#   --what L          ddp,allreduce (default both)
#   --configs L       ddp configurations: gloo,cohort,cohort-bf16 (default); cohort-serial and
#                     cohort-bf16-serial (COHORT_TORCH_OVERLAP=0: each all-reduce runs whole, none
#                     starts while the one before it collects its results)
#   --models L        comm,compute (default both)
#   --workers N       worker hosts h0.. (default 4)   --reducers M   reducer hosts after them (default 4)
#   --rate R          link rate (default 1gbit)       --windows N, --steps N, --warmup N (5, 5, 3)
#   --latency L       the switch queues' depth in time (cluster.sh's tbf latency, default 20ms, which
#                     holds 2.5 MB at 1 Gbit/s). A run slowed down to stand for 1 Gbit/s on a machine
#                     short of cores keeps the queues' bytes: 100mbit with 200ms, 250mbit with 80ms.
#   --batch B         samples per rank and step (default 16)
#   --sizes SPEC      all-reduce sizes (default 1M:256M)   --iters N (default 20)
#   --allreduce-algo A  the all-reduce alone: the backend's COHORT_ALLREDUCE_ALGORITHM and
#                     cohort-bench's --algo (default reduction-server; auto: each one's own choice)
#   --allreduce-configs L  its backend runs: cohort (defaults), cohort-serial (COHORT_TORCH_OVERLAP=0),
#                     cohort-check (COHORT_TORCH_CHECK_CALLS=1: the debugging all-gather of each
#                     call's descriptor before it), gloo (torch's gloo backend, as a peer);
#                     default cohort,cohort-serial
#   --build-dir DIR   the build with python/ and cohort-bench (default build)
#   --python P        interpreter with torch (default /usr/bin/python3)
#   --out DIR         results (default /tmp/cohort-torch-bench-<time>)
#   --local           no network namespaces: every rank on 127.0.0.1 (a smoke test of the
#                     scripts, never figures)
#
# Needs root for the namespaces (bench/netns/cluster.sh); takes down a cluster already up, makes
# its own and removes it at the end. Writes DIR/*.jsonl (raw rows), DIR/commands.txt (every
# command, the load average), DIR/*.err, DIR/*.net0 and *.net1 (the cluster's TCP and drop
# counters before and after each run), and DIR/summary.md (bench/torch/summarize.py).
# Figures must come from a quiet machine: nothing else running.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CLUSTER=$ROOT/bench/netns/cluster.sh
BENCH=$ROOT/bench/torch/torch_bench.py
SUMMARIZE=$ROOT/bench/torch/summarize.py

what=ddp,allreduce configs=gloo,cohort,cohort-bf16 models=comm,compute workers=4 reducers=4
rate=1gbit latency=20ms windows=5 steps=5 warmup=3 batch=16 sizes=1M:256M iters=20 build_dir=$ROOT/build
python=/usr/bin/python3 out="" local=0 allreduce_algo=reduction-server allreduce_configs=cohort,cohort-serial
. "$ROOT/bench/common/flags.sh"
while [ $# -gt 0 ]; do
  if value_flag "what configs models workers reducers rate latency windows steps warmup batch sizes iters \
                 python out allreduce-algo allreduce-configs" "$@"; then
    shift 2
    continue
  fi
  case "$1" in
    --build-dir) build_dir=$(cd "$2" && pwd); shift 2 ;;
    --local) local=1; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown flag '$1'" >&2; exit 2 ;;
  esac
done
out=${out:-/tmp/cohort-torch-bench-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
log() { echo "torch-bench: $*" | tee -a "$out/log.txt" >&2; }
record() { printf '%s\n' "$*" >>"$out/commands.txt"; }
PYDIR=$build_dir/python
COHORT_BENCH=$build_dir/bench/cohort_bench/cohort-bench
[ -f "$PYDIR/cohort/torch/__init__.py" ] || { log "no cohort.torch under $PYDIR: build the cohort_python target"; exit 1; }
RUN_TIMEOUT=${TORCH_BENCH_TIMEOUT_S:-3600}

addr_of() { if [ "$local" = 1 ]; then echo 127.0.0.1; else echo "10.77.0.$(( $1 + 1 ))"; fi; }
in_host() {  # host index, command...
  local h=$1; shift
  if [ "$local" = 1 ]; then "$@"; else "$CLUSTER" exec "h$h" "$@"; fi
}
show_in_host() { if [ "$local" = 1 ]; then echo "$2"; else echo "$CLUSTER exec h$1 $2"; fi; }

cluster_made=0
cleanup() { if [ "$cluster_made" = 1 ]; then "$CLUSTER" down >&2 || true; fi; }
trap cleanup EXIT
{
  echo "# bench/torch/run.sh $(date -u +%FT%TZ) on $(hostname), $(nproc) CPUs, main at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null ||
  sed -n 's/.* from \([0-9a-f]*\) on .*/\1 (a torch kit)/p' "$ROOT/VERSION" 2>/dev/null)"
  echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/commands.txt"
if [ "$local" = 0 ]; then
  "$CLUSTER" down >/dev/null 2>&1 || true
  record "$CLUSTER up --hosts $(( workers + reducers )) --rate $rate --latency $latency"
  "$CLUSTER" up --hosts $(( workers + reducers )) --rate "$rate" --latency "$latency" 2>&1 | tee -a "$out/log.txt" >&2
  [ -f /run/cohort-netns/cluster.env ] || { log "the emulated cluster could not be set up"; exit 1; }
  cluster_made=1
fi

# The environment of every rank: UCX and Gloo over the shaped interface only.
net_env="UCX_TLS=tcp,self UCX_NET_DEVICES=eth0 GLOO_SOCKET_IFNAME=eth0"
[ "$local" = 1 ] && net_env="GLOO_SOCKET_IFNAME=lo"

# The cluster's counters of lost time (cluster.sh counters: TCP retransmissions and timeouts, the
# links' drops) into FILE, before and after each run: summarize.py prints what each run added.
net_counters() {  # FILE
  [ "$local" = 1 ] || "$CLUSTER" counters >"$1" 2>&1 || true
}

# One launch: $1 label, $2 backend, $3 extra env ("" or VAR=x ...), $4 reducers, rest: bench args.
launch() {
  local label=$1 backend=$2 extra=$3 m=$4; shift 4
  local port=$(( 20000 + RANDOM % 20000 )) master pids=() i
  master=$(addr_of 0)
  local base="env PYTHONPATH=$PYDIR MASTER_ADDR=$master MASTER_PORT=$port WORLD_SIZE=$workers $net_env $extra"
  [ "$backend" = cohort ] && base="$base COHORT_NUM_REDUCERS=$m"
  net_counters "$out/$label.net0"
  for ((i = 0; i < m; i++)); do
    local h=$(( workers + i ))
    local cmd="$base $python -m cohort.torch.reducer --store $master:$port --timeout 600 --rejoin 5"
    record "$(show_in_host "$h" "$cmd") &"
    in_host "$h" timeout "$RUN_TIMEOUT" $cmd >"$out/$label-r$i.log" 2>&1 &
  done
  for ((i = 0; i < workers; i++)); do
    local cmd="$base RANK=$i LOCAL_RANK=0 $python $BENCH $* --backend $backend --label $label"
    record "$(show_in_host "$i" "$cmd") &"
    in_host "$i" timeout "$RUN_TIMEOUT" $cmd >"$out/$label-w$i.jsonl" 2>"$out/$label-w$i.err" &
    pids+=($!)
  done
  local failed=0 p
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  wait  # the reducers leave once rank 0's store is gone
  net_counters "$out/$label.net1"
  cat "$out/$label-w0.jsonl" >>"$out/$label.jsonl"
  rm -f "$out/$label"-w[0-9]*.jsonl
  [ "$failed" = 0 ] && log "$label: done" || log "$label: a rank failed (see $out/$label-w*.err)"
}

config_env() {  # config -> backend, extra env
  case "$1" in
    gloo) echo "gloo|" ;;
    cohort) echo "cohort|" ;;
    cohort-bf16) echo "cohort|COHORT_WIRE_DTYPE=bf16" ;;
    cohort-serial) echo "cohort|COHORT_TORCH_OVERLAP=0" ;;  # what overlapping the all-reduces gains
    cohort-bf16-serial) echo "cohort|COHORT_WIRE_DTYPE=bf16 COHORT_TORCH_OVERLAP=0" ;;
    cohort-check) echo "cohort|COHORT_TORCH_CHECK_CALLS=1" ;;  # what the agreement all-gather costs
    *) log "unknown config $1"; echo "" ;;
  esac
}

if [[ ",$what," == *",ddp,"* ]]; then
  for model in ${models//,/ }; do
    for config in ${configs//,/ }; do
      spec=$(config_env "$config"); [ -n "$spec" ] || continue
      m=0; [ "${spec%%|*}" = cohort ] && m=$reducers
      launch "ddp-$model-$config" "${spec%%|*}" "${spec#*|}" "$m" \
        ddp --model "$model" --batch "$batch" --warmup "$warmup" --steps "$steps" --windows "$windows"
    done
  done
fi

if [[ ",$what," == *",allreduce,"* ]]; then
  flags="--sizes $sizes --iters $iters --check"
  for config in ${allreduce_configs//,/ }; do
    spec=$(config_env "$config"); [ -n "$spec" ] || continue
    m=0; [ "${spec%%|*}" = cohort ] && m=$reducers
    launch "allreduce-torch-$config" "${spec%%|*}" "COHORT_ALLREDUCE_ALGORITHM=$allreduce_algo ${spec#*|}" \
      "$m" allreduce $flags
  done
  if [ -x "$COHORT_BENCH" ]; then
    port=$(( 20000 + RANDOM % 20000 )) pids=()
    net_counters "$out/allreduce-cohort-bench.net0"
    bflags="--algo $allreduce_algo --workers $workers --reducers $reducers --transport ucx --sizes $sizes"
    bflags="$bflags --dtype f32 --iters $iters --warmup 5 --check --json --max-seconds-per-size 8"
    for ((i = 0; i < workers + reducers; i++)); do
      if [ "$i" -lt "$workers" ]; then role="--rank $i --role worker"; else role="--rank $(( i - workers )) --role reducer"; fi
      cmd="env $net_env $COHORT_BENCH allreduce $bflags $role --bootstrap $(addr_of 0):$port"
      record "$(show_in_host "$i" "$cmd") &"
      in_host "$i" timeout "$RUN_TIMEOUT" $cmd >"$out/allreduce-bench-$i.jsonl" 2>"$out/allreduce-bench-$i.err" &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    net_counters "$out/allreduce-cohort-bench.net1"
    mv "$out/allreduce-bench-0.jsonl" "$out/allreduce-cohort-bench.jsonl"
    rm -f "$out"/allreduce-bench-[0-9]*.jsonl
    log "cohort-bench: done"
  else
    log "cohort-bench: skipped ($COHORT_BENCH not built)"
  fi
fi

record "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
record "$python $SUMMARIZE $out"
"$python" "$SUMMARIZE" "$out" | tee "$out/summary.md"
log "results in $out"
