#!/usr/bin/env bash
# checks.sh: the GPU checks of bench/RESULTS.md's "GPU (H100)" section, run from a bundle that
# bench/gpu/bundle.sh made (this file is copied into it). Writes into OUT_DIR:
#   device.txt       nvidia-smi, kernel, cores, /dev/shm, libraries the bundle cannot resolve
#   tests.txt        the CUDA kernel and staging tests, and the agent's NVML inventory probe
#   bench.txt        cohort-bench allreduce, 4 workers on this host, ring and shared-memory,
#                    host buffers then device buffers, 1-256 MiB f32 with --check
#   staging.txt      the staging copies alone (one worker: the all-reduce itself is a no-op),
#                    device buffers with workers as threads of one process, and the GPU memory
#                    that workers with host buffers hold
#   collective.txt   the rest of cohort_collective_tests with a GPU present (host buffers)
#
#   .gpu/checks.sh OUT_DIR [PART...]    PART: device tests bench staging collective (default: all)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: checks.sh OUT_DIR [PART...]}
shift
parts=${*:-device tests bench staging collective}
run=$here/run.sh
want() { [[ " $parts " == *" $1 "* ]]; }

want device && {
  nvidia-smi
  nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv
  echo "# kernel $(uname -r), $(nproc) cores, $(awk '/MemTotal/ {print $2 / 1048576 " GiB"}' /proc/meminfo)"
  df -h /dev/shm
  for b in cohort_collective_tests agent_test cohort-bench cohort-reducer; do
    LD_LIBRARY_PATH=$here/lib ldd "$here/$b" | grep 'not found' | sed "s|^|$b: |"
  done
  echo "# libraries taken from the machine:"
  LD_LIBRARY_PATH=$here/lib ldd "$here/cohort-bench" | grep -v "$here" | awk '{print $1, $3}'
} >"$out/device.txt" 2>&1

want tests && {
  echo "\$ cohort_collective_tests --gtest_filter='*Cuda*'"
  "$run" cohort_collective_tests --gtest_filter='*Cuda*'
  echo "rc=$?"
  echo "\$ agent_test --gtest_filter=InventoryTest.NvmlProbe"
  "$run" agent_test --gtest_filter=InventoryTest.NvmlProbe
  echo "rc=$?"
} >"$out/tests.txt" 2>&1

want bench && {
  echo "# $(nvidia-smi --query-gpu=name --format=csv,noheader), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  for algo in ring shared-memory; do
    for device in cpu cuda; do
      cmd="cohort-bench allreduce --algo $algo --workers 4 --sizes 1M:256M --dtype f32 --iters 10 --warmup 3 --check --device $device"
      echo "\$ UCX_TLS=sm $cmd"
      UCX_TLS=sm timeout 120 "$run" $cmd
      echo "rc=$?"
    done
  done
} >"$out/bench.txt" 2>&1

want staging && {
  cmd="cohort-bench allreduce --algo ring --workers 1 --sizes 1M:256M --dtype f32 --iters 10 --warmup 3 --device cuda"
  echo "\$ $cmd"
  timeout 60 "$run" $cmd
  echo "rc=$?"
  cmd="cohort-bench allreduce --algo ring --workers 4 --transport inproc --sizes 1M:64M --dtype f32 --iters 10 --warmup 3 --check --device cuda"
  echo "\$ $cmd"
  timeout 60 "$run" $cmd
  echo "rc=$?"
  cmd="cohort-bench allreduce --algo ring --workers 4 --sizes 64M --dtype f32 --iters 300 --warmup 3 --device cpu"
  echo "\$ UCX_TLS=sm $cmd &   # GPU memory held while it runs:"
  UCX_TLS=sm timeout 60 "$run" $cmd &
  sleep 5
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
  wait
  echo "rc=$?"
} >"$out/staging.txt" 2>&1

want collective && {
  echo "\$ cohort_collective_tests --gtest_filter='-*Cuda*' --gtest_brief=1"
  timeout "${COLLECTIVE_TIMEOUT:-200}" "$run" cohort_collective_tests --gtest_filter='-*Cuda*' --gtest_brief=1
  echo "rc=$?"
} >"$out/collective.txt" 2>&1
