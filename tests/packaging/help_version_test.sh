#!/usr/bin/env bash
# Every program answers --help and --version the same way: --version prints "NAME VERSION" and
# exits 0, VERSION being the build's (common/build_version.h: the project version, then the commit
# where built from a git checkout); --help exits 0 and starts with "usage: NAME".
# Usage: help_version_test.sh PROJECT_VERSION BUILD_VERSION_FILE PROGRAM...
set -uo pipefail
project_version=$1 version=$(cat "$2"); shift 2
failed=0
if ! [[ "$version" =~ ^${project_version//./\\.}(\+g[0-9a-f]{12}(\.dirty)?)?$ ]]; then
  echo "FAIL: the build version '$version' is not $project_version, +g and a commit, .dirty"; failed=1
fi
for program in "$@"; do
  name=$(basename "$program")
  out=$("$program" --version 2>&1); rc=$?
  if [ $rc -ne 0 ] || [ "$out" != "$name $version" ]; then
    echo "FAIL: $name --version: exit $rc, printed '$out' (want '$name $version', exit 0)"; failed=1
  fi
  out=$("$program" --help 2>&1); rc=$?
  if [ $rc -ne 0 ] || [ "$(printf '%s\n' "$out" | head -1 | cut -d' ' -f1-2)" != "usage: $name" ]; then
    echo "FAIL: $name --help: exit $rc, first line '$(printf '%s\n' "$out" | head -1)'"; failed=1
  fi
  [ $failed -eq 0 ] && echo "ok: $name"
done
exit $failed
