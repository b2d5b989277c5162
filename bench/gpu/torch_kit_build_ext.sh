#!/usr/bin/env bash
# build_ext.sh (in a kit made by bench/gpu/torch_kit.sh): builds the backend's extension,
# cohort/torch/_C, against the torch of a Python interpreter, as torch.utils.cpp_extension would
# (its include and library paths, its pybind11 ABI strings, its _GLIBCXX_USE_CXX11_ABI), linking
# the kit's lib/libcohort_torch_support.so; writes DIR/python, the cohort package with _C in it.
#
#   build_ext.sh PYTHON DIR                     compile and link
#   build_ext.sh PYTHON DIR --syntax-only       g++ -fsyntax-only each source
#
# Environment: JOBS (parallel compiles, default nproc); COHORT_TORCH_INCLUDES and
# COHORT_PYTHON_INCLUDE (space-separated directories) replace what PYTHON reports, to check the
# sources against another torch's headers (with --syntax-only).
set -euo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
py=${1:?usage: build_ext.sh PYTHON DIR [--syntax-only]}
dir=${2:?usage: build_ext.sh PYTHON DIR [--syntax-only]}
syntax_only=0
[ "${3:-}" = --syntax-only ] && syntax_only=1
jobs=${JOBS:-$(nproc)}
mkdir -p "$dir/obj"
dir=$(cd "$dir" && pwd)

# One line each: include dirs, library dirs, python include, extension suffix, pybind11 ABI
# strings (empty where this torch defines none), the C++11 ABI flag, the version.
mapfile -t info < <("$py" - <<'PY'
import sysconfig, torch
from torch.utils.cpp_extension import include_paths, library_paths
print(" ".join(include_paths()))
print(" ".join(library_paths()))
print(sysconfig.get_paths()["include"])
print(sysconfig.get_config_var("EXT_SUFFIX"))
for name in ("_PYBIND11_COMPILER_TYPE", "_PYBIND11_STDLIB", "_PYBIND11_BUILD_ABI"):
    print(getattr(torch._C, name, "") or "")
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(torch.__version__)
PY
)
[ "${#info[@]}" -eq 9 ] || { echo "build_ext.sh: $py could not describe its torch" >&2; exit 1; }
torch_includes=${COHORT_TORCH_INCLUDES:-${info[0]}}
torch_libs=${info[1]}
python_include=${COHORT_PYTHON_INCLUDE:-${info[2]}}
suffix=${info[3]}
echo "build_ext.sh: torch ${info[8]} ($py), C++11 ABI ${info[7]}, extension _C$suffix"
echo "build_ext.sh: torch headers: $torch_includes"

flags=(-std=c++20 -O2 -g0 -fPIC -fvisibility=hidden -Wall -Wno-unused-parameter
       -DTORCH_EXTENSION_NAME=_C -DTORCH_API_INCLUDE_EXTENSION_H "-D_GLIBCXX_USE_CXX11_ABI=${info[7]}"
       -I"$kit/src")
[ -n "${info[4]}" ] && flags+=("-DPYBIND11_COMPILER_TYPE=\"${info[4]}\"")
[ -n "${info[5]}" ] && flags+=("-DPYBIND11_STDLIB=\"${info[5]}\"")
[ -n "${info[6]}" ] && flags+=("-DPYBIND11_BUILD_ABI=\"${info[6]}\"")
for d in $torch_includes $python_include; do flags+=(-isystem "$d"); done

mapfile -t units <"$kit/src/units.txt"
pids=() failed=0
for u in "${units[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || failed=1; done
  if [ "$syntax_only" = 1 ]; then
    g++ "${flags[@]}" -fsyntax-only "$kit/src/python/torch_backend/$u.cc" &
  else
    g++ "${flags[@]}" -c "$kit/src/python/torch_backend/$u.cc" -o "$dir/obj/$u.o" &
  fi
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ "$failed" = 0 ] || { echo "build_ext.sh: a source did not compile" >&2; exit 1; }
if [ "$syntax_only" = 1 ]; then
  echo "build_ext.sh: ${#units[@]} sources pass g++ -fsyntax-only"
  exit 0
fi

rm -rf "$dir/python"
cp -r "$kit/python" "$dir/python"
libs=()
for d in $torch_libs; do libs+=(-L"$d" "-Wl,-rpath,$d"); done
# DT_RPATH (not RUNPATH): the kit's libraries also serve the support library's own dependencies;
# a library of the same name the process already loaded (torch's libcudart, the system's libz)
# is used as it is.
objs=()
for u in "${units[@]}"; do objs+=("$dir/obj/$u.o"); done
g++ -shared -o "$dir/python/cohort/torch/_C$suffix" "${objs[@]}" \
  -Wl,--disable-new-dtags -L"$kit/lib" -Wl,-rpath,"$kit/lib" -lcohort_torch_support \
  "${libs[@]}" -ltorch -ltorch_cpu -lc10 -ltorch_python
echo "build_ext.sh: built $dir/python/cohort/torch/_C$suffix"
