#!/usr/bin/env bash
# debian_torch_check.sh: the `cohort` torch backend against another Debian's torch, in a chroot.
# CI and the README's tests build against Debian 12's torch 1.13; users have newer torch (Debian
# 13's python3-torch is 2.6, sid's 2.14). This builds the backend against one of them and runs
# every scenario of torch_backend_check.py there, with CPU tensors, the collective library's
# tests against that Debian's UCX (the library must work with the UCX a distro ships), and the
# stock DDP script under a local Cohort cluster (torch_ddp_test: node loss, preemption, the cohort
# backend on reducers, torn checkpoints set aside, Hugging Face's Trainer where the Debian has
# it) with that torch in every replica, the agent's torn-checkpoint pass on that torch's
# torch.distributed.checkpoint saves, and scripts/demo_torch.sh.
#
#   tests/torch/debian_torch_check.sh SUITE [SCENARIO...]     (as root; SUITE: trixie, sid, ...)
#
# Needs root (debootstrap, chroot, bind mounts) and deb.debian.org: not part of .ci/run. Build
# first: ninja -C BUILD cohort_torch_backend cohort_python cohort-reducer cohort-bench
# cohort_collective_tests torch_ddp_test agent_test cohort-coordinator cohort-agent cohort.
# Environment: BUILD (default build), CHROOT (default /var/tmp/cohort-torch-SUITE; made once with
# debootstrap, about 2 GiB, kept for the next run).
# Prints one line per scenario and a summary; exit status 0 when every one passed (cuda skips
# without a GPU: exit 77, counted as passed). Logs: CHROOT/tmp/scenario-NAME.log.
#
# The kit of bench/gpu/torch_kit.sh carries our libraries into the chroot, except UCX: Debian's
# torch links libmpi and so the distro's libucp, and a process has one libucp.so.0, so the ranks,
# the reducers and the tests all use the distro's UCX there.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
suite=${1:?usage: debian_torch_check.sh SUITE [SCENARIO...]}
shift
build=$(cd "${BUILD:-$root/build}" && pwd)
chroot_dir=${CHROOT:-/var/tmp/cohort-torch-$suite}
[ "$(id -u)" = 0 ] || { echo "debian_torch_check.sh: needs root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || apt-get install -y -q debootstrap >/dev/null

if ! [ -x "$chroot_dir/usr/bin/python3" ] || ! [ -d "$chroot_dir/usr/lib/python3/dist-packages/torch" ]; then
  echo "debian_torch_check.sh: debootstrap $suite into $chroot_dir (a few minutes)"
  rm -rf "$chroot_dir"
  debootstrap --variant=minbase \
    --include=python3,python3-dev,python3-torch,python3-numpy,python3-sklearn,libtorch-dev,pybind11-dev,g++,procps,iproute2 \
    "$suite" "$chroot_dir" http://deb.debian.org/debian >"$chroot_dir.debootstrap.log" 2>&1 ||
    { tail -n 20 "$chroot_dir.debootstrap.log" >&2; exit 1; }
fi

mounts=()
unmount() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[$i]}" 2>/dev/null || true; done
}
trap unmount EXIT
for m in proc sys dev dev/shm dev/pts; do
  if ! mountpoint -q "$chroot_dir/$m"; then
    mount --bind "/$m" "$chroot_dir/$m"
    mounts+=("$chroot_dir/$m")
  fi
done

in_chroot() { chroot "$chroot_dir" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }
# Packages beyond the debootstrap's, added to a chroot made before they were asked for:
# python3-sklearn (the digits set torch_ddp_test's stock script trains on) and, where this Debian
# has them, python3-transformers and python3-accelerate (the hf-trainer scenario).
wanted=(python3-sklearn)
for p in python3-transformers python3-accelerate; do
  in_chroot apt-cache policy "$p" 2>/dev/null | grep -q 'Candidate: [^(]' && wanted+=("$p")
done
missing=()
for p in "${wanted[@]}"; do in_chroot dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "debian_torch_check.sh: installing ${missing[*]} into $chroot_dir"
  # An older run of this script left the digits file alone in a sklearn folder that no package
  # owns, which libraries take for sklearn itself.
  in_chroot dpkg -s python3-sklearn >/dev/null 2>&1 || rm -rf "$chroot_dir/usr/lib/python3/dist-packages/sklearn"
  { in_chroot apt-get update -q && in_chroot env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
      --no-install-recommends "${missing[@]}"; } >"$chroot_dir.packages.log" 2>&1 ||
    { tail -n 20 "$chroot_dir.packages.log" >&2; exit 1; }
fi

rm -rf "$chroot_dir/kit" "$chroot_dir/kit-build"
"$root/bench/gpu/torch_kit.sh" "$build" "$chroot_dir/kit" >/dev/null
rm -rf "$chroot_dir"/kit/lib/libuc[pstm].so* "$chroot_dir/kit/lib/ucx"
cp "$build/tests/collective/cohort_collective_tests" "$chroot_dir/kit/bin/"
echo "debian_torch_check.sh: $suite: $(in_chroot python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)' 2>/dev/null),\
 UCX $(in_chroot sh -c 'dpkg-query -W -f="\${Version}" libucx0' 2>/dev/null)"
in_chroot /kit/build_ext.sh python3 /kit-build | tail -n 1

# USE_LIBUV=0: Debian builds torch without libuv, which torch 2.4 on asks for by default (env://
# reads this variable; the reducer falls back by itself).
env=(USE_LIBUV=0 GLOO_SOCKET_IFNAME=lo COHORT_LOG_LEVEL=warn)
failed=()
start=$(date +%s)
if in_chroot env "${env[@]}" LD_LIBRARY_PATH=/kit/lib /kit/bin/cohort_collective_tests \
     --gtest_brief=1 >"$chroot_dir/tmp/collective-tests.log" 2>&1; then
  echo "cohort_collective_tests (the distro's UCX): $(grep -h '^\[  PASSED' "$chroot_dir/tmp/collective-tests.log" | tail -n 1)"
else
  echo "cohort_collective_tests: FAILED (CHROOT/tmp/collective-tests.log)"
  failed+=(cohort_collective_tests)
fi
scenarios=("$@")
if [ "${#scenarios[@]}" = 0 ]; then
  mapfile -t scenarios < <(in_chroot sh -c 'cd /kit/tests/torch && python3 -c "
import torch_backend_check as t
print(\"\n\".join(sorted(t.SCENARIOS)))"')
fi
for s in "${scenarios[@]}"; do
  t0=$(date +%s)
  rc=0
  in_chroot env "${env[@]}" timeout 300 python3 /kit/tests/torch/torch_backend_check.py "$s" \
    --python-dir /kit-build/python --backend-built ON --reducer-bin /kit/bin/cohort-reducer.sh \
    >"$chroot_dir/tmp/scenario-$s.log" 2>&1 || rc=$?
  verdict=passed
  [ "$rc" = 77 ] && verdict="skipped: $(tail -n 1 "$chroot_dir/tmp/scenario-$s.log")"
  if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
    verdict="FAILED (exit $rc; CHROOT/tmp/scenario-$s.log)"
    failed+=("$s")
  fi
  echo "$s: $verdict, $(( $(date +%s) - t0 )) s"
done

# The stock DDP script under Cohort on this torch: torch_ddp_test's coordinator and agents are this
# build's, on the host; the replicas it launches run the chroot's python3 and the reducers the
# kit's cohort-reducer (the chroot's UCX), through two wrappers. The paths the test hands to
# replicas (the script in the source tree, the cluster's scratch under TMPDIR) are bind-mounted at
# the same path inside. USE_LIBUV=0 goes into the wrapper, as a user puts it into the job's env.
# Left out when scenarios are named or the test is not built.
stages=$(( ${#scenarios[@]} + 1 ))
ddp_test="$build/tests/integration/torch_ddp_test"
if [ "$#" = 0 ] && [ -x "$ddp_test" ]; then
  stages=$((stages + 1))
  t0=$(date +%s)
  host_dir=$(mktemp -d /var/tmp/cohort-torch-ddp.XXXXXX)
  mkdir -p "$host_dir/tmp" "$host_dir/builtin" "$chroot_dir$host_dir" "$chroot_dir$root"
  mount --bind "$host_dir" "$chroot_dir$host_dir"
  mounts+=("$chroot_dir$host_dir")
  mount --bind "$root" "$chroot_dir$root"
  mounts+=("$chroot_dir$root")
  printf '#!/bin/sh\nexec chroot %q /usr/bin/env USE_LIBUV=0 /bin/sh -c %s "$PWD" "$@"\n' \
    "$chroot_dir" "'cd \"\$0\" && exec /usr/bin/python3 \"\$@\"'" >"$host_dir/python3"
  printf '#!/bin/sh\nexec chroot %q /bin/sh -c %s "$PWD" "$@"\n' \
    "$chroot_dir" "'cd \"\$0\" && exec /kit/bin/cohort-reducer.sh \"\$@\"'" >"$host_dir/builtin/cohort-reducer"
  chmod +x "$host_dir/python3" "$host_dir/builtin/cohort-reducer"
  # torchrun's tests are left out: Debian builds torch 2.x without libuv, and torchrun's
  # rendezvous stores ask for it with nothing to say otherwise (USE_LIBUV is read by env:// only),
  # so Debian's torchrun cannot start.
  rc=0
  TMPDIR="$host_dir/tmp" COHORT_TEST_TORCH_PYTHON="$host_dir/python3" \
    COHORT_TEST_PYTHON_DIR=/kit-build/python COHORT_TEST_BUILTIN_DIR="$host_dir/builtin" \
    timeout 900 "$ddp_test" --gtest_filter='-*Torchrun*' >"$chroot_dir/tmp/torch-ddp-test.log" 2>&1 ||
    rc=$?
  if [ "$rc" = 0 ]; then
    echo "torch_ddp_test (the stock DDP script under Cohort; torchrun's left out):" \
      "$(grep -h '^\[  PASSED' "$chroot_dir/tmp/torch-ddp-test.log" | tail -n 1), $(( $(date +%s) - t0 )) s"
  else
    echo "torch_ddp_test: FAILED (exit $rc; CHROOT/tmp/torch-ddp-test.log)"
    failed+=(torch_ddp_test)
  fi
  # The agent's torn-checkpoint pass on real torch.distributed.checkpoint saves of this torch
  # (Debian 12's cannot import its checkpoint module): run here, a skip is a failure.
  agent_test="$build/tests/agent/agent_test"
  if [ -x "$agent_test" ]; then
    stages=$((stages + 1))
    rc=0
    (cd "$root" && TMPDIR="$host_dir/tmp" COHORT_TEST_TORCH_PYTHON="$host_dir/python3" \
      timeout 300 "$agent_test" --gtest_filter='TornCheckpointsTest.ARealDistributedCheckpoint*') \
      >"$chroot_dir/tmp/torn-dcp-test.log" 2>&1 || rc=$?
    if [ "$rc" = 0 ] && ! grep -q '^\[  SKIPPED' "$chroot_dir/tmp/torn-dcp-test.log"; then
      echo "agent_test (torn torch.distributed.checkpoint saves set aside): passed"
    else
      echo "agent_test (torn torch.distributed.checkpoint saves): FAILED or skipped (exit $rc; CHROOT/tmp/torn-dcp-test.log)"
      failed+=(agent_test)
    fi
  fi
  # scripts/demo_torch.sh with its replicas on this torch: the README's stock-script demo (gloo,
  # a node lost after epoch 3) as a user runs it.
  stages=$((stages + 1))
  rc=0
  (cd "$root" && BUILD_DIR="$build" DEMO_SKIP_BUILD=1 DEMO_PYTHON="$host_dir/python3" \
    DEMO_DIR="$host_dir/demo" timeout 400 scripts/demo_torch.sh) \
    >"$chroot_dir/tmp/demo-torch.log" 2>&1 || rc=$?
  if [ "$rc" = 0 ]; then
    echo "scripts/demo_torch.sh (a stock DDP script loses a node and finishes): passed"
  else
    echo "scripts/demo_torch.sh: FAILED (exit $rc; CHROOT/tmp/demo-torch.log)"
    failed+=(demo_torch)
  fi
  umount "$chroot_dir$root" "$chroot_dir$host_dir"
  unset 'mounts[-1]' 'mounts[-1]'
  rm -rf "$host_dir"
fi
echo "debian_torch_check.sh: $suite: $(( stages - ${#failed[@]} )) of $stages passed in $(( $(date +%s) - start )) s${failed[*]:+; failed: ${failed[*]}}"
[ "${#failed[@]}" = 0 ]
