"""What the Python collective checks share: their inputs, the bf16 conversions, and a run of
worker processes (and cohort-reducer processes) with the environment an agent injects
(COHORT_BOOTSTRAP_ADDR, RANK, WORLD_SIZE, COHORT_NUM_REDUCERS), on 127.0.0.1.

A check script calls run_check(); run as a worker (--worker) it runs its own worker function.
"""
import argparse
import os
import socket
import subprocess
import sys
import time


def values(seed, count):
    """count small integers (exact in every dtype) that differ with seed."""
    import numpy as np
    i = np.arange(count, dtype=np.int64)
    return ((i * 7 + seed * 3) % 13 - 6).astype(np.float64)


def as_dtype(x, dtype):
    """x in dtype; bf16 as its uint16 bit patterns."""
    import numpy as np
    if dtype == "bf16":
        return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return x.astype(dtype)


def as_float(a, dtype):
    """a (of dtype; bf16 as uint16 bit patterns) as float64."""
    import numpy as np
    if dtype == "bf16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def report(rank, failures):
    """Prints a worker's failures and verdict; its exit code."""
    for f in failures:
        print(f"worker {rank}: {f}", file=sys.stderr)
    print(f"worker {rank}: {'ok' if not failures else 'FAILED'}")
    return 0 if not failures else 1


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_check(name, script, worker_main, workers, reducers=0, env_extra=None):
    """The command line of a check: --worker runs worker_main(); otherwise starts `reducers`
    cohort-reducer processes (--reducer) and `workers` processes of `script` as workers, waits
    for all (--timeout) and returns 0 when every one exited 0."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    if reducers:
        parser.add_argument("--reducer", help="the cohort-reducer binary")
    parser.add_argument("--python-dir", help="<build>/python, which holds the cohort package")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    if args.worker:
        return worker_main()
    if not args.python_dir or (reducers and not args.reducer):
        parser.error("--reducer and --python-dir are required" if reducers else "--python-dir is required")
    env = dict(os.environ)
    env.update({
        "COHORT_BOOTSTRAP_ADDR": f"127.0.0.1:{free_port()}",
        "WORLD_SIZE": str(workers),
        "COHORT_NUM_REDUCERS": str(reducers),
        "PYTHONPATH": args.python_dir,
        "UCX_WARN_UNUSED_ENV_VARS": "n",
    })
    env.update(env_extra or {})
    env.pop("COHORT_ALLREDUCE_ALGORITHM", None)
    env.pop("UCX_TLS", None)  # UCX's default: shared memory between these same-host processes
    procs = []
    for j in range(reducers):
        procs.append((f"reducer {j}", subprocess.Popen([args.reducer], env=dict(env, COHORT_REDUCER_INDEX=str(j)))))
    for r in range(workers):
        procs.append((f"worker {r}", subprocess.Popen([sys.executable, os.path.abspath(script), "--worker"],
                                                      env=dict(env, RANK=str(r)))))
    deadline = time.monotonic() + args.timeout
    failed = []
    for proc_name, p in procs:
        try:
            code = p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = "timed out"
        if code != 0:
            failed.append(f"{proc_name}: {code}")
    for _, p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    if failed:
        print(f"{name} FAILED: " + ", ".join(failed), file=sys.stderr)
        return 1
    print(f"{name}: ok ({workers} workers" + (f", {reducers} reducers)" if reducers else ")"))
    return 0
