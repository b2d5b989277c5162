#!/usr/bin/env bash
# compare_allreduce.sh: Cohort's all-reduce against OpenMPI and Gloo, measured in one run, joined
# by size into one table (bench/peers/join_results.py).
#
#   bench/compare_allreduce.sh --setting a|b [options]
#
#   --setting a      one host: MPI over shared memory (vader), Gloo over loopback TCP,
#                    cohort-bench with --transport ucx (UCX picks shared memory / tcp)
#   --setting b      emulated cluster (bench/netns/cluster.sh): one network namespace per worker
#                    and per reducer, every link shaped to --rate both ways; MPI with
#                    --mca btl tcp,self over the shaped links, Gloo TCP bound to each host's
#                    address, cohort-bench one process per rank. Needs root; takes down any
#                    cluster.sh cluster already up, makes its own and removes it at the end.
#   --workers N      ranks / workers (default 4)      --reducers M   reducers (default 4)
#   --sizes SPEC     default 1K:256M                  --iters N, --warmup N (default 20, 5)
#   --max-seconds-per-size S   cap the timed iterations per size (default: 0 for a, 8 for b)
#   --rate R         link rate for b (default 1gbit)  --check  count wrong elements
#   --mpi-algos L    comma list: default and/or OpenMPI coll_tuned allreduce algorithm numbers
#                    (4 ring, 5 segmented ring, 6 rabenseifner); best per size is kept
#                    (default: default,4; "none" to skip)
#   --gloo-algos L   default ring,ring_chunked,halving_doubling (best per size is kept; "none")
#   --cohort-algos L default reduction-server,ring ("none" to skip; also halving-doubling,
#                    recursive-doubling, shared-memory (setting a only), auto)
#   --build-dir DIR  where the binaries are (default: build-peers, then build, then the newest
#                    build-*/ that has the binary)
#   --cohort-bin P   the cohort-bench binary to use (default: found like the others)
#   --out DIR        results directory (default /tmp/cohort-compare-<setting>-<time>)
#   --keep-cluster   leave the emulated cluster up afterwards (b)
#
# Writes DIR/*.jsonl (raw rows), DIR/commands.txt (exact commands), DIR/table.txt and
# DIR/table.md. A program that is missing or fails is reported as skipped; the others still run.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLUSTER=$ROOT/bench/netns/cluster.sh
RSH=$ROOT/bench/netns/netns_rsh.sh
JOIN=$ROOT/bench/peers/join_results.py

setting="" workers=4 reducers=4 sizes=1K:256M iters=20 warmup=5 max_s="" rate=1gbit check=""
mpi_algos=default,4 gloo_algos=ring,ring_chunked,halving_doubling
cohort_algos=reduction-server,ring build_dir="" out="" keep_cluster=0 cohort_bin=""
. "$ROOT/bench/common/flags.sh"
while [ $# -gt 0 ]; do
  if value_flag "setting workers reducers sizes iters warmup rate mpi-algos gloo-algos \
                 cohort-algos build-dir cohort-bin out" "$@"; then
    shift 2
    continue
  fi
  case "$1" in
    --ranks) workers=$2; shift 2 ;;
    --max-seconds-per-size) max_s=$2; shift 2 ;;
    --check) check=--check; shift ;;
    --keep-cluster) keep_cluster=1; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare_allreduce.sh: unknown flag '$1'" >&2; exit 2 ;;
  esac
done
case "$setting" in
  a|b) ;;
  *) echo "compare_allreduce.sh: --setting a|b is required" >&2; exit 2 ;;
esac
[ -n "$max_s" ] || { [ "$setting" = b ] && max_s=8 || max_s=0; }
out=${out:-/tmp/cohort-compare-$setting-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
log() { echo "compare: $*" | tee -a "$out/log.txt" >&2; }
record() { printf '%s\n' "$*" >>"$out/commands.txt"; }
# wanted NAME ALGOS BIN WHY: whether NAME runs: not when its algorithms are "none"; not, logging
# "NAME: skipped (WHY)", when its program BIN was not found.
wanted() {
  [ "$2" = none ] && return 1
  [ -n "$3" ] && return 0
  log "$1: skipped ($4)"
  return 1
}

find_bin() {  # name, subdir
  local d
  for d in $build_dir "$ROOT/build-peers" "$ROOT/build"; do
    [ -n "$d" ] && [ -x "$d/$2/$1" ] && { echo "$d/$2/$1"; return 0; }
  done
  # shellcheck disable=SC2012
  d=$(ls -t "$ROOT"/build-*/"$2/$1" 2>/dev/null | head -1)
  [ -n "$d" ] && [ -x "$d" ] && { echo "$d"; return 0; }
  command -v "$1" 2>/dev/null
}
MPI_BIN=$(find_bin cohort-bench-mpi bench/peers || true)
GLOO_BIN=$(find_bin cohort-bench-gloo bench/peers || true)
COHORT_BIN=${cohort_bin:-$(find_bin cohort-bench bench/cohort_bench || true)}

common_flags="--sizes $sizes --dtype f32 --iters $iters --warmup $warmup $check --json"
[ "$max_s" = 0 ] || common_flags="$common_flags --max-seconds-per-size $max_s"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Per-process timeout: generous, a 256 MiB ring all-reduce at 1 Gbit/s takes ~3 s per call.
RUN_TIMEOUT=${COMPARE_TIMEOUT_S:-1800}

addr_of() { echo "10.77.0.$(( $1 + 1 ))"; }
in_host() {  # host index, command...: runs inside the namespace (b) or directly (a)
  local h=$1; shift
  if [ "$setting" = b ]; then "$CLUSTER" exec "h$h" "$@"; else "$@"; fi
}

cluster_made=0
cleanup() {
  if [ "$cluster_made" = 1 ] && [ "$keep_cluster" = 0 ]; then "$CLUSTER" down >&2 || true; fi
}
trap cleanup EXIT

{
  echo "# compare_allreduce.sh $(date -u +%FT%TZ) on $(hostname), $(nproc) CPUs, setting $setting"
  echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/commands.txt"

link_bps=""
if [ "$setting" = b ]; then
  hosts=$(( workers + reducers ))
  [ "$hosts" -ge 2 ] || hosts=2
  "$CLUSTER" down >/dev/null 2>&1 || true
  record "$CLUSTER up --hosts $hosts --rate $rate"
  if ! "$CLUSTER" up --hosts "$hosts" --rate "$rate" 2>&1 | tee -a "$out/log.txt" >&2 ||
     ! [ -f /run/cohort-netns/cluster.env ]; then
    log "the emulated cluster could not be set up (see above): setting b not measured"
    exit 1
  fi
  cluster_made=1
  # The shaped link's raw rate: one TCP stream h0 -> h1 (iperf3), then both ways at once.
  if command -v iperf3 >/dev/null; then
    record "$CLUSTER exec h1 iperf3 -s -1 -B $(addr_of 1) -D; $CLUSTER exec h0 iperf3 -c $(addr_of 1) -B $(addr_of 0) -t 5 -J"
    "$CLUSTER" exec h1 iperf3 -s -1 -B "$(addr_of 1)" -D
    for _ in $(seq 50); do "$CLUSTER" exec h1 ss -ltn 2>/dev/null | grep -q ":5201 " && break; sleep 0.1; done
    "$CLUSTER" exec h0 iperf3 -c "$(addr_of 1)" -B "$(addr_of 0)" -t 5 -J >"$out/iperf3.json" 2>>"$out/log.txt"
    link_bps=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"]))' "$out/iperf3.json" 2>/dev/null || true)
    "$CLUSTER" exec h1 iperf3 -s -1 -B "$(addr_of 1)" -D
    for _ in $(seq 50); do "$CLUSTER" exec h1 ss -ltn 2>/dev/null | grep -q ":5201 " && break; sleep 0.1; done
    "$CLUSTER" exec h0 iperf3 -c "$(addr_of 1)" -B "$(addr_of 0)" -t 5 --bidir -f m >"$out/iperf3-bidir.txt" 2>&1 || true
    log "link h0->h1: ${link_bps:-?} bit/s (one TCP stream); both ways at once:" \
        "$(grep receiver "$out/iperf3-bidir.txt" | awk '{print $(NF-2), $(NF-1)}' | tr '\n' ' ')"
  fi
  if [ -z "$link_bps" ]; then
    . /run/cohort-netns/cluster.env
    link_bps=$COHORT_NETNS_RATE_BPS
    log "iperf3 unavailable or failed: ratios use the nominal rate $link_bps bit/s"
  fi
  echo "$link_bps" >"$out/link_bps.txt"
fi

# ---- OpenMPI -------------------------------------------------------------------------------
run_mpi() {
  local algo extra label
  local bin=$MPI_BIN
  command -v mpirun >/dev/null || bin=""
  wanted mpi "$mpi_algos" "$bin" "cohort-bench-mpi or mpirun not found; build target cohort-bench-mpi" ||
    return
  local hostlist=""
  local i
  for ((i = 0; i < workers; i++)); do hostlist="${hostlist:+$hostlist,}h$i"; done
  for algo in ${mpi_algos//,/ }; do
    extra="" label=$algo
    [ "$algo" = default ] || extra="--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm $algo"
    local cmd
    if [ "$setting" = a ]; then
      # More ranks than cores here: ranks yield while they wait instead of spinning.
      cmd="mpirun -np $workers --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 $extra $MPI_BIN $common_flags"
      record "$cmd"
      timeout "$RUN_TIMEOUT" $cmd >"$out/mpi-$label.jsonl" 2>"$out/mpi-$label.err"
    else
      # One orted per namespace through the netns rsh agent; TCP only, so the shaped links
      # carry every byte; mpirun itself runs in h0.
      cmd="mpirun -np $workers --host $hostlist --mca plm_rsh_agent $RSH --mca plm_rsh_no_tree_spawn 1"
      cmd="$cmd --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24"
      cmd="$cmd --bind-to none --mca mpi_yield_when_idle 1 $extra $MPI_BIN $common_flags"
      record "$CLUSTER exec h0 $cmd"
      timeout "$RUN_TIMEOUT" "$CLUSTER" exec h0 $cmd >"$out/mpi-$label.jsonl" 2>"$out/mpi-$label.err"
    fi
    local rc=$?
    [ "$rc" = 0 ] && log "mpi ($label): done" || log "mpi ($label): failed rc=$rc (see $out/mpi-$label.err)"
  done
}

# ---- Gloo ----------------------------------------------------------------------------------
run_gloo() {
  wanted gloo "$gloo_algos" "$GLOO_BIN" "cohort-bench-gloo not found; build target cohort-bench-gloo" ||
    return
  local store
  store=$(mktemp -d /tmp/cohort-gloo-store.XXXXXX)
  local pids=() r addr
  for ((r = 0; r < workers; r++)); do
    if [ "$setting" = a ]; then addr=127.0.0.1; else addr=$(addr_of "$r"); fi
    local cmd="$GLOO_BIN --rank $r --size $workers --store $store --iface-addr $addr --algo $gloo_algos $common_flags"
    if [ "$setting" = b ]; then record "$CLUSTER exec h$r $cmd &"; else record "$cmd &"; fi
    in_host "$r" timeout "$RUN_TIMEOUT" $cmd >"$out/gloo-rank$r.jsonl" 2>"$out/gloo-rank$r.err" &
    pids+=($!)
  done
  local failed=0 p
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  rm -rf "$store"
  mv "$out/gloo-rank0.jsonl" "$out/gloo.jsonl"
  for ((r = 1; r < workers; r++)); do rm -f "$out/gloo-rank$r.jsonl"; done
  [ "$failed" = 0 ] && log "gloo: done" || log "gloo: a rank failed (see $out/gloo-rank*.err)"
}

# ---- Cohort (bench/cohort_bench, written separately) --------------------------------------
run_cohort() {
  wanted cohort "$cohort_algos" "$COHORT_BIN" "cohort-bench not built yet" || return
  local help
  help=$("$COHORT_BIN" allreduce --help 2>&1 || "$COHORT_BIN" --help 2>&1 || true)
  local algo label m
  for algo in ${cohort_algos//,/ }; do
    case "$algo" in
      ring) m=0; label=cohort-ring ;;
      halving-doubling) m=0; label=cohort-hd ;;
      recursive-doubling) m=0; label=cohort-rd ;;
      shared-memory) m=0; label=cohort-shm ;;
      hierarchical) m=0; label=cohort-hier ;;
      auto) m=$reducers; label=cohort-auto ;;
      *) m=$reducers; label=cohort-rs ;;
    esac
    local flags="--algo $algo --workers $workers --reducers $m --transport ucx $common_flags"
    if [ "$setting" = a ]; then
      local cmd="$COHORT_BIN allreduce $flags"
      record "$cmd"
      timeout "$RUN_TIMEOUT" $cmd >"$out/$label.jsonl" 2>"$out/$label.err"
      local rc=$?
      [ "$rc" = 0 ] && log "cohort ($algo): done" || log "cohort ($algo): failed rc=$rc (see $out/$label.err)"
      continue
    fi
    if ! grep -q -- "--bootstrap" <<<"$help" || ! grep -q -- "--role" <<<"$help"; then
      log "cohort ($algo): skipped (cohort-bench lacks --rank/--bootstrap/--role for one process per rank)"
      continue
    fi
    local port=$(( 20000 + RANDOM % 20000 )) pids=() i
    local boot="$(addr_of 0):$port"
    # UCX over TCP on the shaped interface only.
    local env="env UCX_TLS=tcp,self UCX_NET_DEVICES=eth0"
    for ((i = 0; i < workers; i++)); do
      local cmd="$COHORT_BIN allreduce $flags --rank $i --role worker --bootstrap $boot"
      record "$CLUSTER exec h$i $env $cmd &"
      in_host "$i" timeout "$RUN_TIMEOUT" $env $cmd >"$out/$label-w$i.jsonl" 2>"$out/$label-w$i.err" &
      pids+=($!)
    done
    for ((i = 0; i < m; i++)); do
      local h=$(( workers + i ))
      local cmd="$COHORT_BIN allreduce $flags --rank $i --role reducer --bootstrap $boot"
      record "$CLUSTER exec h$h $env $cmd &"
      in_host "$h" timeout "$RUN_TIMEOUT" $env $cmd >"$out/$label-r$i.jsonl" 2>"$out/$label-r$i.err" &
      pids+=($!)
    done
    local failed=0 p
    for p in "${pids[@]}"; do wait "$p" || failed=1; done
    mv "$out/$label-w0.jsonl" "$out/$label.jsonl"
    rm -f "$out/$label"-[wr][0-9]*.jsonl  # only worker 0 prints rows
    [ "$failed" = 0 ] && log "cohort ($algo): done" || log "cohort ($algo): a process failed (see $out/$label-*.err)"
  done
}

log "binaries: cohort-bench=${COHORT_BIN:-none} mpi=${MPI_BIN:-none} gloo=${GLOO_BIN:-none}"
run_cohort
run_mpi
run_gloo

title="all-reduce, setting $setting, $workers workers"
[ "$setting" = b ] && title="$title + $reducers reducers (Reduction Server), links $rate"
join_args=()
[ -n "$link_bps" ] && join_args+=(--link-bps "$link_bps")
files=()
for f in "$out"/cohort-rs.jsonl "$out"/cohort-ring.jsonl "$out"/cohort-hd.jsonl "$out"/cohort-rd.jsonl "$out"/cohort-shm.jsonl "$out"/cohort-hier.jsonl \
         "$out"/cohort-auto.jsonl \
         "$out"/mpi-*.jsonl "$out"/gloo.jsonl; do
  [ -s "$f" ] && files+=("$f")
done
record "python3 $JOIN ${join_args[*]} --markdown $out/table.md ${files[*]}"
python3 "$JOIN" --title "$title" "${join_args[@]}" --markdown "$out/table.md" "${files[@]}" \
  | tee "$out/table.txt"
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/commands.txt"
find "$out" -type f -empty -delete  # the other ranks' (empty) stdout, silent stderr
log "results in $out"
