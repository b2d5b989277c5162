#!/bin/sh
# run_demo.sh FOLDER PYTHON SCRIPT [NAME=VALUE...]: runs a demo script as a user would, with the
# environment given and DEMO_DIR=FOLDER (emptied first). PYTHON, when not "-", must import torch,
# else the test skips (exit 77) saying so. The demo's daemons must stay off the default HTTP ports
# (127.0.0.1:7480 and :7481), which an installed coordinator and agent bind (packaging_deb_install
# runs beside the demos): a daemon log naming one fails the test. Nor may the demo leave a level of
# replica cgroups behind (each agent's log names its own), its lost node's included.
set -eu
folder=$1 python=$2 script=$3
shift 3
if [ "$python" != - ] && ! "$python" -c 'import torch' 2>/dev/null; then
  echo "$python cannot import torch (Debian's python3-torch): skipped"
  exit 77
fi
rm -rf "$folder"
rc=0
env DEMO_DIR="$folder" "$@" "$script" || rc=$?
if grep -H -E '127\.0\.0\.1:748[01]' "$folder"/coordinator.log "$folder"/agent-*.log; then
  echo "run_demo.sh: a daemon of the demo took a default HTTP port (above)"
  [ "$rc" != 0 ] || rc=1
fi
for log in "$folder"/agent-*.log; do
  [ -f "$log" ] || continue
  level=$(sed -n 's/.*replica cgroups under \(.*\)$/\1/p' "$log" | head -n 1)
  if [ -n "$level" ] && [ -d "$level" ]; then
    echo "run_demo.sh: the demo left $level behind: $(find "$level" -type d | tr '\n' ' ')"
    [ "$rc" != 0 ] || rc=1
  fi
done
exit "$rc"
