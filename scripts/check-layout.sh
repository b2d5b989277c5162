#!/usr/bin/env bash
# Fails when an include crosses the layout of DESIGN.md: common depends on nothing of ours,
# collective only on common's base library (cohort_base: status, logging, env, file_util,
# checkpoint, flight_recorder, mutex, thread_annotations, clock, enum_names, fnv, zmq_calls; the
# generated version and build_version, which depend on nothing), coordinator and agent never on
# each other.
set -u
cd "$(dirname "$0")/.."
status=0
check() {  # folder, forbidden top-level folders...
  local dir=$1; shift
  [ -d "$dir" ] || return 0
  for p in "$@"; do
    if grep -rnE "#include *[\"<]$p/" "$dir" --include='*.h' --include='*.cc' --include='*.cu'; then
      echo "layout: $dir/ must not include $p/" >&2
      status=1
    fi
  done
}
check common collective coordinator agent cli
check collective coordinator agent cli python torch
check coordinator agent cli
check agent coordinator cli
base='status|logging|env|file_util|checkpoint|flight_recorder|mutex|thread_annotations|clock|enum_names|fnv|zmq_calls|version|build_version'
if grep -rnE '#include *"common/' collective --include='*.h' --include='*.cc' --include='*.cu' |
    grep -vE "#include *\"common/($base)\.h\""; then
  echo "layout: collective/ may include only cohort_base's headers from common/" >&2
  status=1
fi
exit $status
