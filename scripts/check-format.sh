#!/usr/bin/env bash
# Fails when a C++ source the project tracks is not formatted by the repository's .clang-format
# (Google style, 100 columns). Fix with: clang-format -i FILE (or run this with --fix).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cu' '*.cpp' '*.hpp')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! clang-format --dry-run -Werror "${files[@]}" 2> /tmp/cohort-format.$$; then
  grep -E '^[^ ].*: (error|warning):' /tmp/cohort-format.$$ | cut -d: -f1 | sort -u |
    sed 's/^/format: not clang-formatted: /' >&2
  echo "format: run scripts/check-format.sh --fix (clang-format -i) on these files" >&2
  rm -f /tmp/cohort-format.$$
  exit 1
fi
rm -f /tmp/cohort-format.$$
