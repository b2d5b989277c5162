#!/usr/bin/env bash
# Checks the unit files with `systemd-analyze verify`, with ExecStart pointing at the given
# cohort-coordinator and cohort-agent binaries. Usage: verify-units.sh COORDINATOR AGENT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIP: systemd-analyze is not installed"; exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for unit in cohort-coordinator cohort-agent; do
  binary=$1; [ "$unit" = cohort-agent ] && binary=$2
  sed -e "s#@CMAKE_INSTALL_FULL_BINDIR@/$unit#$binary#" \
      -e "s#@CMAKE_INSTALL_FULL_SYSCONFDIR@#/etc#" "$here/$unit.service" > "$dir/$unit.service"
done
out=$(systemd-analyze verify "$dir"/*.service 2>&1) || { echo "$out"; exit 1; }
# verify exits 0 on some warnings; treat any line about our units as a failure.
if echo "$out" | grep -E "cohort-(coordinator|agent)\.service" ; then exit 1; fi
echo "units verified: $(ls "$dir")"
