#!/usr/bin/env bash
# Fails when an include crosses the layout of DESIGN.md: common depends on nothing of ours,
# collective only on common, coordinator and agent never on each other.
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
exit $status
