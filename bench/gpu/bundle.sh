#!/usr/bin/env bash
# bundle.sh: a self-contained folder of Cohort's GPU-facing binaries for a machine that has the
# NVIDIA driver but none of our Debian libraries (UCX, spdlog, fmt, zmq, yaml-cpp, gtest, ...):
# the binaries stripped of debug info, every shared library they load except glibc's and the
# driver's (libcuda, libnvidia-ml come from the machine), UCX's transport modules, and run.sh,
# which runs a command with the bundle's libraries in front.
#
#   bench/gpu/bundle.sh [BUILD_DIR] [DEST]        (defaults: build, .gpu)
#   DEST/run.sh cohort_collective_tests --gtest_filter="*Cuda*"
#   DEST/checks.sh OUT_DIR        (what bench/RESULTS.md reports; see checks.sh)
#
# Build first: cmake --build BUILD_DIR --target cohort_collective_tests agent_test cohort-bench cohort-reducer
# (configured with the CUDA toolkit present: "Cohort CUDA kernels: ON").
set -euo pipefail
build=${1:-build}
dest=${2:-.gpu}
bins=(tests/collective/cohort_collective_tests tests/agent/agent_test bench/cohort_bench/cohort-bench
      collective/cohort-reducer)
ucx_modules=/usr/lib/x86_64-linux-gnu/ucx
# Left to the machine: glibc (its ABI is backward compatible) and the NVIDIA driver's libraries
# (they must match the kernel module).
skip='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libresolv|libcuda|libnvidia-ml)\.so'

for b in "${bins[@]}"; do
  [ -x "$build/$b" ] || { echo "bundle.sh: $build/$b is not built" >&2; exit 2; }
done
rm -rf "$dest"
mkdir -p "$dest/lib/ucx"

# shellcheck source=bench/gpu/bundle_lib.sh
source "$(dirname "$0")/bundle_lib.sh"

for b in "${bins[@]}"; do
  cp "$build/$b" "$dest/"
  strip --strip-debug "$dest/$(basename "$b")"
  copy_deps "$build/$b" "$dest/lib" "$skip" bundle.sh
done
# UCX loads its transport modules from UCX_MODULE_DIR; cma (cross-memory attach for shared
# memory) is the one these machines use (ib and rdmacm need an RDMA device).
cp -L "$ucx_modules/libuct_cma.so.0" "$dest/lib/ucx/"
strip --strip-debug "$dest/lib/ucx/libuct_cma.so.0"
copy_deps "$ucx_modules/libuct_cma.so.0" "$dest/lib" "$skip" bundle.sh

cp "$(dirname "$0")/checks.sh" "$dest/"
cat >"$dest/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs a bundled binary (by name) or any command with the bundle's libraries in front.
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export UCX_MODULE_DIR=$here/lib/ucx
cmd=$1
shift
[ -x "$here/$cmd" ] && cmd=$here/$cmd
exec "$cmd" "$@"
RUN
chmod +x "$dest/run.sh"
du -sh "$dest"
