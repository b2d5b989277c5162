"""What the tests/integration/*_check.py scripts share. An integration test runs each as
    python3 NAME_check.py CLIENT_ENDPOINT SCRATCH_DIR
with PYTHONPATH=<build>/python (the script's own folder is on sys.path, so `import check_util`
finds this file). Every check raises on failure: the script exits non-zero with the reason.
"""

import sys


def check(condition, what):
    """Raises AssertionError(what) unless condition holds."""
    if not condition:
        raise AssertionError(what)


def run_checks(checks, name):
    """Calls checks(endpoint, scratch) with the command line's two arguments, then prints
    "NAME: ok", the line the calling test looks for."""
    endpoint, scratch = sys.argv[1], sys.argv[2]
    checks(endpoint, scratch)
    print(f"{name}: ok")
