#!/usr/bin/env bash
# Builds Cohort's Debian packages: cohort-coordinator, cohort-agent, cohort-client,
# libcohort-collective-c0, libcohort-collective-c-dev (and cohort-torch where torch is found), in
# <build>/packages/*.deb. See cmake/packaging.cmake for what each holds.
# Usage: scripts/package.sh [BUILD_DIR]   (default build-deb; BUILD_TYPE, default Release)
# The build is configured for the packages' prefix /usr (/usr/bin, /etc/cohort,
# /lib/systemd/system); binaries are stripped when packaged.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-deb}
build_type=${BUILD_TYPE:-Release}
command -v help2man >/dev/null || { echo "package.sh: help2man is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
command -v dpkg-shlibdeps >/dev/null || { echo "package.sh: dpkg-shlibdeps is missing (dpkg-dev)" >&2; exit 1; }
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DCMAKE_INSTALL_PREFIX=/usr \
  -DCOHORT_CUDA_STATIC_RUNTIME=ON >/dev/null
# Only what the packages hold.
targets=(cohort-coordinator cohort-agent cohort-replica-init cohort-reducer cohort-ps cohort
         cohort_collective_c cohort_python cohort_man_pages)
if grep -q '^COHORT_HAVE_TORCH' "$build/CMakeCache.txt" 2>/dev/null || \
   ninja -C "$build" -t targets all 2>/dev/null | grep -q '^cohort_torch_backend:'; then
  targets+=(cohort_torch_backend)
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
rm -rf "$build/packages"
(cd "$build" && cpack -G DEB >/dev/null)
ls -1 "$build"/packages/*.deb
