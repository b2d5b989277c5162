#!/usr/bin/env bash
# Installs every Debian package Cohort needs to build, test, run its demo and its benchmarks.
# Idempotent: installs only what is missing. Needs root (or sudo) on Debian 12.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config ccache git clang clang-format lld libclang-rt-14-dev
  # libraries Cohort links
  libzmq3-dev cppzmq-dev libflatbuffers-dev flatbuffers-compiler libspdlog-dev libfmt-dev
  libucx-dev ucx-utils libyaml-cpp-dev nlohmann-json3-dev libboost-dev libboost-program-options-dev
  libgtest-dev libgmock-dev libbenchmark-dev libeigen3-dev libsystemd-dev zlib1g-dev libsqlite3-dev
  libcpp-httplib-dev libssl-dev
  # job-end notices over https: the system's CAs; the test makes its receiver's certificate
  ca-certificates openssl
  # benchmark peers
  libopenmpi-dev openmpi-bin libgloo-dev
  # demo data set (digits.csv.gz), Python client, network emulation, process tools
  python3-sklearn python3-zmq python3-numpy python3-flatbuffers iproute2 procps iperf3
  # PyTorch: the `cohort` torch.distributed backend builds against libtorch-dev (a pybind11
  # extension: pybind11-dev, python3-dev); stock DDP scripts (gloo and cohort backends) run under
  # Debian's python3-torch in the tests and examples
  libtorch-dev python3-torch pybind11-dev python3-dev
  # containers: OCI runtimes, image unpacking, a static busybox for test root filesystems
  runc crun umoci busybox-static
  # packaging: man pages (help2man), Debian packages (dpkg-dev: dpkg-shlibdeps) and their test
  # (file, man-db), `pip install ./python` in a venv (python3-venv)
  help2man dpkg-dev file man-db python3-venv
  # a Vertex pythonPackageSpec's sdist, built with setuptools and installed with pip by the
  # replica (tests/integration/vertex_job_test.cc)
  python3-pip python3-setuptools python3-wheel
  # the agent's stack dumps of hung replicas (eu-stack; gdb where elfutils is missing)
  elfutils
  # observability: a real Prometheus scrapes the daemons in the tests, python3-prometheus-client
  # parses their exposition strictly, headless Chromium renders the dashboard, whose charts use
  # Chart.js from /usr/share/javascript
  prometheus python3-prometheus-client chromium libjs-chart.js
  # measuring (bench/RESULTS.md): profiles (perf), and instruction and cache-miss counts that do
  # not depend on how busy a shared machine is (valgrind's callgrind)
  linux-perf valgrind
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
