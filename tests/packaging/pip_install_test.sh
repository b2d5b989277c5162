#!/usr/bin/env bash
# `pip install ./python` into a fresh venv installs a complete cohort package: its wire code is
# generated, `import cohort` (and cohort.wire, cohort.collective) works from the venv, and the
# package's version is the project's. Offline: --no-deps --no-build-isolation, with Debian's
# python3 (whose pyzmq, flatbuffers and numpy the venv sees through --system-site-packages).
# Usage: pip_install_test.sh SOURCE_DIR VERSION
set -euo pipefail
src=$1 version=$2
python=/usr/bin/python3
if ! $python -c "import venv, ensurepip" 2>/dev/null; then
  echo "SKIP: $python has no venv/ensurepip (python3-venv)"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A copy, so pip's in-tree build leaves the checkout clean.
mkdir -p "$work/src/common"
cp -r "$src/python" "$work/src/python"
cp -r "$src/common/schema" "$work/src/common/schema"
rm -rf "$work/src/python/build" "$work/src/python"/*.egg-info
$python -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --quiet --no-deps --no-build-isolation --no-index "$work/src/python"
cd "$work"
"$work/venv/bin/python" - "$work/venv" "$version" <<'PY'
import importlib.metadata, os, sys
venv, version = sys.argv[1], sys.argv[2]
import cohort, cohort.collective, cohort.hypertune
from cohort.wire.Envelope import Envelope
assert cohort.__file__.startswith(os.path.realpath(venv)) or cohort.__file__.startswith(venv), cohort.__file__
assert hasattr(cohort, "Client"), dir(cohort)
got = importlib.metadata.version("cohort")
assert got == version, f"installed cohort {got}, project {version}"
print(f"ok: cohort {got} from {cohort.__file__}")
PY
