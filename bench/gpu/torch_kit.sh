#!/usr/bin/env bash
# torch_kit.sh: a self-contained folder for building the `cohort` torch.distributed backend on a
# machine with its own torch (e.g. a pip torch 2.x with CUDA) and none of our Debian libraries,
# and for running the backend's checks there (DEST/device.sh).
#
#   bench/gpu/torch_kit.sh [BUILD_DIR] [DEST]        (defaults: build, .torchkit)
#   DEST/device.sh OUT [--quick]                     (on the machine; see device.sh's header)
#
# Build first: ninja -C BUILD_DIR cohort_torch_backend cohort_python cohort-reducer cohort-bench
# The kit holds:
#   src/          the backend's sources (python/torch_backend) and every header of ours they
#                 include (taken from the build's dependency records); no third-party headers are
#                 needed: the torch sources include only torch, Python and the C/C++ libraries
#   lib/          libcohort_torch_support.so: the collective library, its CUDA part and the
#                 common base (the build's static archives) plus log_line.cc (the one torch-free
#                 source, which includes spdlog), linked into one shared library; and every shared
#                 library that one loads, except glibc's, libstdc++/libgcc_s (the machine's are
#                 newer) and the NVIDIA driver's
#   bin/          cohort-reducer (the cohort-job scenario) and cohort-bench (the all-reduce
#                 alone, for targets.sh), with run.sh putting lib/ in front
#   python/       the cohort Python package without its extension (device.sh builds that)
#   tests/ examples/ bench/   the checks, the DDP example, the torch benchmark scripts and the
#                 emulated cluster (bench/netns/cluster.sh)
#   build_ext.sh  compiles and links cohort/torch/_C against the torch of a given python
#   device.sh     build_ext.sh, then the checks
#   targets.sh    build_ext.sh, then issue 13's DDP and all-reduce figures at 1 Gbit/s
#   session.sh    targets.sh's parts in one device call within a deadline, archived in OUT/res.tgz
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-build}" && pwd)
dest=${2:-.torchkit}
objdir=$build/python/torch_backend/CMakeFiles/cohort_torch_backend.dir
skip='^(linux-vdso|ld-linux|libc|libm|libpthread|libdl|librt|libresolv|libstdc\+\+|libgcc_s|libz|libcuda|libnvidia-ml)\.so'

for f in "$objdir/process_group_cohort.cc.o" "$build/collective/cohort-reducer" \
         "$build/bench/cohort_bench/cohort-bench" "$build/python/cohort/__init__.py"; do
  [ -e "$f" ] || { echo "torch_kit.sh: $f is missing: ninja -C $build cohort_torch_backend cohort_python cohort-reducer cohort-bench" >&2; exit 2; }
done
rm -rf "$dest"
mkdir -p "$dest"/{src,lib,bin,python,tests/torch,examples/torch,bench/torch,bench/common,bench/netns}
dest=$(cd "$dest" && pwd)

# Sources: the backend's translation units (those CMake builds into it, but log_line.cc, which
# goes into the support library below), and our headers they include.
mapfile -t torch_units < <(awk '/^add_library\(cohort_torch_backend/ {on = 1; next}
  on && /^\)/ {on = 0} on && /\.cc$/ {sub(/^ +/, ""); sub(/\.cc$/, ""); print}' \
  "$root/python/torch_backend/CMakeLists.txt" | grep -vx log_line)
[ "${#torch_units[@]}" -gt 0 ] || { echo "torch_kit.sh: no sources in python/torch_backend/CMakeLists.txt" >&2; exit 2; }
for u in "${torch_units[@]}"; do
  ninja -C "$build" -t deps "python/torch_backend/CMakeFiles/cohort_torch_backend.dir/$u.cc.o" |
    awk 'NR > 1 {print $1}' | grep '^\.\./' | sed 's|^\.\./||'
done | sort -u | while read -r f; do
  mkdir -p "$dest/src/$(dirname "$f")"
  cp "$root/$f" "$dest/src/$f"
done
printf '%s\n' "${torch_units[@]}" >"$dest/src/units.txt"

# libcohort_torch_support.so: what the extension links besides torch, as the build links it.
link=$(ninja -C "$build" -t commands cohort_torch_backend | tail -1)
archives=() shared=()
for item in $link; do
  case "$item" in
    *.a) archives+=("$build/$item") ;;
    */libtorch*|*/libc10*|*/libprotobuf*|*/libglog*|*/libgflags*|*/libpython*|*/_C.*) ;;
    /*.so|/*.so.*) shared+=("$item") ;;
  esac
done
# (Whole inputs into awk, never head or grep -m1: under pipefail an early exit is a SIGPIPE.)
cuda_lib=$(printf '%s\n' $link | awk '/^-L.*cuda/ && !found {print substr($0, 3); found = 1}')
spdlog_defs=$(ninja -C "$build" -t commands cohort_torch_backend | awk '/log_line\.cc/ && !found {
  found = 1; for (i = 1; i <= NF; i++) if ($i ~ /^-D(FMT|SPDLOG)/) printf "%s ", $i }')
g++ -std=c++20 -O2 -fPIC $spdlog_defs -I"$root" -c "$root/python/torch_backend/log_line.cc" \
  -o "$dest/lib/log_line.o"
g++ -shared -o "$dest/lib/libcohort_torch_support.so" -Wl,-soname,libcohort_torch_support.so \
  "$dest/lib/log_line.o" -Wl,--whole-archive "${archives[@]}" -Wl,--no-whole-archive "${shared[@]}" \
  ${cuda_lib:+-L"$cuda_lib" -lcudadevrt} -lpthread -lrt -ldl -Wl,-z,defs
rm "$dest/lib/log_line.o"
strip --strip-debug "$dest/lib/libcohort_torch_support.so"

# shellcheck source=bench/gpu/bundle_lib.sh
source "$root/bench/gpu/bundle_lib.sh"
copy_deps "$dest/lib/libcohort_torch_support.so" "$dest/lib" "$skip" torch_kit.sh
for b in collective/cohort-reducer bench/cohort_bench/cohort-bench; do
  cp "$build/$b" "$dest/bin/"
  strip --strip-debug "$dest/bin/$(basename "$b")"
  copy_deps "$dest/bin/$(basename "$b")" "$dest/lib" "$skip" torch_kit.sh
done
mkdir -p "$dest/lib/ucx"
ucx_modules=/usr/lib/x86_64-linux-gnu/ucx
if [ -e "$ucx_modules/libuct_cma.so.0" ]; then
  cp -L "$ucx_modules/libuct_cma.so.0" "$dest/lib/ucx/"
  strip --strip-debug "$dest/lib/ucx/libuct_cma.so.0"
fi
cat >"$dest/bin/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs a kit binary (by name) or any command with the kit's libraries in front.
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$here/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export UCX_MODULE_DIR=$here/../lib/ucx
cmd=$1
shift
[ -x "$here/$cmd" ] && cmd=$here/$cmd
exec "$cmd" "$@"
RUN
printf '#!/usr/bin/env bash\nexec "$(dirname "$0")/run.sh" cohort-reducer "$@"\n' >"$dest/bin/cohort-reducer.sh"
chmod +x "$dest/bin/run.sh" "$dest/bin/cohort-reducer.sh"

# The Python package (pure Python; device.sh adds the extension), the checks and the scripts.
(cd "$build/python" && find cohort -name '*.py' -o -name '*.pyi') | while read -r f; do
  mkdir -p "$dest/python/$(dirname "$f")"
  cp "$build/python/$f" "$dest/python/$f"
done
cp "$root/tests/torch/torch_backend_check.py" "$dest/tests/torch/"
cp "$root/examples/torch/ddp_digits.py" "$dest/examples/torch/"
cp "$root/bench/torch/run.sh" "$root/bench/torch/torch_bench.py" "$root/bench/torch/summarize.py" "$dest/bench/torch/"
cp "$root/bench/common/flags.sh" "$root/bench/common/bench_results.py" "$dest/bench/common/"
cp "$root/bench/netns/cluster.sh" "$root/bench/netns/delayed_ack_ab.sh" "$dest/bench/netns/"
cp "$root/bench/gpu/torch_kit_build_ext.sh" "$dest/build_ext.sh"
cp "$root/bench/gpu/torch_kit_device.sh" "$dest/device.sh"
cp "$root/bench/gpu/torch_kit_targets.sh" "$dest/targets.sh"
cp "$root/bench/gpu/torch_kit_session.sh" "$dest/session.sh"
chmod +x "$dest/build_ext.sh" "$dest/device.sh" "$dest/targets.sh" "$dest/session.sh"
echo "# made by bench/gpu/torch_kit.sh from $(git -C "$root" rev-parse --short HEAD) on $(date -u +%FT%TZ)" >"$dest/VERSION"
du -sh "$dest"
