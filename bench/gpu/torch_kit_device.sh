#!/usr/bin/env bash
# device.sh (in a kit made by bench/gpu/torch_kit.sh): builds the `cohort` torch backend against
# this machine's torch and runs its checks, each step under a timeout (a failing step does not
# stop the next), the whole inside DEVICE_BUDGET_S (default 420 s; --quick: 3600 s). Writes into
# OUT (six files):
#   summary.txt     one line per step: name, exit status, seconds; the machine and torch
#   build.txt       build_ext.sh (g++ against torch.utils.cpp_extension's paths), import check
#   checks_cpu.txt  tests/torch/torch_backend_check.py with CPU tensors, 4 ranks on 127.0.0.1:
#                   ops (ring/auto, no reducers), ops-reducers (Reduction Server, 2 reducers:
#                   results identical bytes on every rank), ddp, wire-bf16, cohort-job
#                   (cohort-reducer processes), ddp-loops (no_sync, Join, a sparse embedding...),
#                   bad-use, fsdp (3 ranks: fully_shard and FSDP1 against gloo); side by side
#   checks_cuda.txt the cuda scenario (CUDA tensors staged through pinned host memory), 4 ranks on
#                   the GPU(s), without reducers and with 2 (then identical bytes on every rank);
#                   it skips, saying why, where torch sees no GPU
#   ddp_example.txt examples/torch/ddp_digits.py, 4 ranks (CUDA tensors where there is a GPU),
#                   synthetic data: gloo, then cohort on the Reduction Server (2 reducers); the
#                   final accuracy of each, and each run's 4 parameter digests must agree
#   bench.txt       bench/torch/run.sh --local: DDP of the comm model, gloo vs cohort vs
#                   cohort-bf16 (cohort pinned to the Reduction Server), 4 workers + 4 reducers
#                   all on 127.0.0.1, CPU tensors, one torch thread per rank: loopback, no link
#                   emulation (a smoke test of the scripts, not the figures of issue 13)
#
#   device.sh OUT [--quick]     --quick: fewer scenarios and steps, 4x the time limits (a dry run
#                               on a small machine)
# Environment: PYTHON (default python3), JOBS (parallel compiles), DEVICE_BUDGET_S, TORCHKIT_WORK
# (the build and the logs; default a new /tmp/cohort-torchkit.XXXXXX).
set -uo pipefail
kit=$(cd "$(dirname "$0")" && pwd)

# --- steps that are more than one command (run as `device.sh --step FUNCTION ARGS`) ----------
cpu_checks() {  # SCENARIO-ARGS...: each a quoted "scenario flags", all side by side
  local pids=() i=0 r failed=0 rc
  for r in "$@"; do
    # shellcheck disable=SC2086
    "$PY" "$CHECK" $r --python-dir "$WORK/python" --reducer-bin "$kit/bin/cohort-reducer.sh" \
      >"$WORK/cpu-$i.log" 2>&1 &
    pids+=($!)
    i=$((i + 1))
  done
  i=0
  for r in "$@"; do
    wait "${pids[$i]}"
    rc=$?
    echo "--- torch_backend_check.py $r: rc=$rc"
    cat "$WORK/cpu-$i.log"
    [ "$rc" = 0 ] || failed=1
    i=$((i + 1))
  done
  return $failed
}
ddp_example() {  # BACKEND REDUCERS EPOCHS: 4 ranks of examples/torch/ddp_digits.py
  local backend=$1 reducers=$2 epochs=$3 port i pids=() failed=0
  port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local env=(MASTER_ADDR=127.0.0.1 "MASTER_PORT=$port" WORLD_SIZE=4 LOCAL_WORLD_SIZE=4 "COHORT_NUM_REDUCERS=$reducers")
  # On one host auto would pick the shared-memory all-reduce; the reducers are what is tried here.
  [ "$reducers" -gt 0 ] && env+=(COHORT_ALLREDUCE_ALGORITHM=reduction-server)
  rm -rf "$WORK/ckpt-$backend" "$WORK/model-$backend"
  for ((i = 0; i < reducers; i++)); do
    env "${env[@]}" "$PY" -m cohort.torch.reducer --store "127.0.0.1:$port" --timeout 120 --rejoin 5 \
      >"$WORK/ddp-$backend-r$i.log" 2>&1 &
  done
  for ((i = 0; i < 4; i++)); do
    env "${env[@]}" RANK=$i LOCAL_RANK=$i AIP_CHECKPOINT_DIR="$WORK/ckpt-$backend" \
      AIP_MODEL_DIR="$WORK/model-$backend" "$PY" "$kit/examples/torch/ddp_digits.py" --backend "$backend" \
      --data synthetic --epochs "$epochs" --timeout 60 >"$WORK/ddp-$backend-$i.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  wait
  for ((i = 0; i < 4; i++)); do sed "s/^/[$backend rank $i] /" "$WORK/ddp-$backend-$i.log"; done
  for ((i = 0; i < reducers; i++)); do sed "s/^/[$backend reducer $i] /" "$WORK/ddp-$backend-r$i.log"; done
  local digests
  digests=$(grep -h 'parameters sha256' "$WORK"/ddp-"$backend"-[0-3].log | sort | uniq -c)
  echo "--- $backend: parameter digests of the 4 ranks (one line with count 4 when they agree):"
  echo "$digests"
  [ "$(echo "$digests" | grep -c sha256)" = 1 ] && [ "$(echo "$digests" | awk '{print $1}')" = 4 ] || failed=1
  return $failed
}
if [ "${1:-}" = --step ]; then
  shift
  "$@"
  exit $?
fi

out=${1:?usage: device.sh OUT [--quick]}
quick=0
[ "${2:-}" = --quick ] && quick=1
mkdir -p "$out"
out=$(cd "$out" && pwd)
py=${PYTHON:-python3}
py=$(command -v "$py")
# Build products and logs: outside the kit, which stays as torch_kit.sh made it.
work=${TORCHKIT_WORK:-$(mktemp -d /tmp/cohort-torchkit.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
start=$(date +%s)
budget=${DEVICE_BUDGET_S:-$([ "$quick" = 1 ] && echo 3600 || echo 420)}
export GLOO_SOCKET_IFNAME=lo UCX_MODULE_DIR=$kit/lib/ucx COHORT_LOG_LEVEL=warn
export PYTHONPATH=$work/python

# step NAME CAP LOG COMMAND...: runs COMMAND under min(CAP, what is left of the budget), appending
# its output to LOG; the summary gets one line.
step() {
  local name=$1 cap=$2 log=$3; shift 3
  [ "$quick" = 1 ] && cap=$(( cap * 4 ))  # a small, busy machine is slower
  local left=$(( budget - ($(date +%s) - start) - 5 ))
  local limit=$(( cap < left ? cap : left ))
  if [ "$limit" -lt 10 ]; then
    echo "$name: not run (the budget of ${budget}s is spent)" | tee -a "$out/summary.txt" >>"$log"
    return
  fi
  local t0 rc
  t0=$(date +%s)
  echo "=== $name (limit ${limit}s): $*" >>"$log"
  timeout -k 10 "$limit" "$@" >>"$log" 2>&1
  rc=$?
  local secs=$(( $(date +%s) - t0 ))
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && rc="$rc (timed out)"
  echo "=== $name: rc=$rc after ${secs}s" >>"$log"
  echo "$name: rc=$rc ${secs}s" >>"$out/summary.txt"
}

{
  echo "# device.sh $([ "$quick" = 1 ] && echo --quick) at $(date -u +%FT%TZ): $(nproc) cores, $(uname -r)"
  cat "$kit/VERSION" 2>/dev/null
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
  "$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())' 2>&1
  echo "g++: $(g++ --version | head -1); build and logs in $work"
} >"$out/summary.txt"

# --- the build ------------------------------------------------------------------------------
step build 200 "$out/build.txt" "$kit/build_ext.sh" "$py" "$work"
step import 30 "$out/build.txt" "$py" -c '
import torch, torch.distributed as dist, cohort.torch as ct
print("cohort.torch from", ct.__file__, "on torch", torch.__version__)
print("registered:", "COHORT" in dist.Backend._plugins, "devices:", getattr(dist.Backend, "backend_capability", {}).get("cohort"))'
if ! ls "$work"/python/cohort/torch/_C*.so >/dev/null 2>&1; then
  echo "no extension was built: the checks are not run" | tee -a "$out/summary.txt"
  exit 1
fi

export PY=$py WORK=$work CHECK=$kit/tests/torch/torch_backend_check.py
checkargs=(--python-dir "$work/python" --reducer-bin "$kit/bin/cohort-reducer.sh")

# --- (a) CUDA tensors ------------------------------------------------------------------------
step checks-cuda 60 "$out/checks_cuda.txt" "$py" "$CHECK" cuda --workers 4 --reducers 0 "${checkargs[@]}"
[ "$quick" = 1 ] ||
  step checks-cuda-reducers 60 "$out/checks_cuda.txt" "$py" "$CHECK" cuda --workers 4 --reducers 2 "${checkargs[@]}"

# --- (a) CPU tensors: scenarios side by side -------------------------------------------------
if [ "$quick" = 1 ]; then
  cpu_runs=("ops-reducers --workers 4" "bad-use")
else
  cpu_runs=("ops --workers 4" "ops-reducers --workers 4" "ddp --workers 4" "ddp-loops --workers 4"
            "wire-bf16 --workers 4" "cohort-job" "bad-use" "fsdp")
fi
step checks-cpu 150 "$out/checks_cpu.txt" "$0" --step cpu_checks "${cpu_runs[@]}"

# --- (b) the DDP example ---------------------------------------------------------------------
epochs=$([ "$quick" = 1 ] && echo 1 || echo 3)
step ddp-example-gloo 75 "$out/ddp_example.txt" "$0" --step ddp_example gloo 0 "$epochs"
step ddp-example-cohort 75 "$out/ddp_example.txt" "$0" --step ddp_example cohort 2 "$epochs"
for b in gloo cohort; do
  echo "$b rank 0: $(grep -h 'final test accuracy' "$work/ddp-$b-0.log" 2>/dev/null)" >>"$out/ddp_example.txt"
done

# --- (c) the torch benchmark on loopback -----------------------------------------------------
mkdir -p "$work/fakebuild"
ln -sfn "$work/python" "$work/fakebuild/python"
if [ "$quick" = 1 ]; then
  bench_flags=(--windows 1 --steps 1 --warmup 1 --workers 2 --reducers 2)
else
  bench_flags=(--windows 3 --steps 3 --warmup 2 --workers 4 --reducers 4)
fi
echo "# LOOPBACK, NO LINK EMULATION: every rank and reducer on 127.0.0.1 of one machine, CPU tensors, cohort pinned to the Reduction Server; a smoke test of bench/torch/run.sh, not the figures issue 13 asks for" >"$out/bench.txt"
export TORCH_BENCH_TIMEOUT_S=130
step bench-loopback 150 "$out/bench.txt" env COHORT_ALLREDUCE_ALGORITHM=reduction-server "$kit/bench/torch/run.sh" --local \
  --what ddp --models comm --configs gloo,cohort,cohort-bf16 "${bench_flags[@]}" --python "$py" \
  --build-dir "$work/fakebuild" --out "$work/bench"
[ -f "$work/bench/summary.md" ] && { echo "--- summary.md (loopback, no link emulation)"; cat "$work/bench/summary.md"; } >>"$out/bench.txt"
tail -n 5 "$work"/bench/*.err >>"$out/bench.txt" 2>/dev/null

echo "# total $(( $(date +%s) - start ))s of a ${budget}s budget" >>"$out/summary.txt"
cat "$out/summary.txt"
