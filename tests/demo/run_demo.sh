#!/bin/sh
# run_demo.sh FOLDER PYTHON SCRIPT [NAME=VALUE...]: runs a demo script as a user would, with the
# environment given and DEMO_DIR=FOLDER (emptied first). PYTHON, when not "-", must import torch,
# else the test skips (exit 77) saying so.
set -eu
folder=$1 python=$2 script=$3
shift 3
if [ "$python" != - ] && ! "$python" -c 'import torch' 2>/dev/null; then
  echo "$python cannot import torch (Debian's python3-torch): skipped"
  exit 77
fi
rm -rf "$folder"
exec env DEMO_DIR="$folder" "$@" "$script"
