#!/usr/bin/env bash
# Checks generated unit files with `systemd-analyze verify`, with their ExecStart binaries (under
# BINDIR, where they would be installed) replaced by the given build-tree binaries; everything else
# (config and key paths) is checked as generated. The installed units are checked for real by
# tests/packaging/deb_install_test.sh.
# Usage: verify-units.sh BINDIR UNIT BINARY [UNIT BINARY ...]
set -euo pipefail
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze is not installed"; exit 77
fi
bindir=$1; shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
while [ $# -ge 2 ]; do
  unit=$1 binary=$2; shift 2
  name=$(basename "$unit")
  grep -q "^ExecStart=$bindir/${name%.service} " "$unit" || {
    echo "$name: ExecStart does not start $bindir/${name%.service}"; exit 1; }
  sed -e "s#^ExecStart=$bindir/${name%.service} #ExecStart=$binary #" "$unit" > "$dir/$name"
done
# --man=no: the Documentation= man pages are not installed from a build tree.
out=$(systemd-analyze verify --man=no "$dir"/*.service 2>&1) || { echo "$out"; exit 1; }
# verify exits 0 on some warnings; treat any line about our units as a failure.
if echo "$out" | grep -E "cohort-(coordinator|agent)\.service" ; then exit 1; fi
echo "units verified: $(ls "$dir")"
