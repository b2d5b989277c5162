#!/usr/bin/env python3
"""The Python binding of the collective library (python/cohort/collective.py) end to end.

Starts cohort-reducer processes and Python worker processes with the environment an agent injects
(COHORT_BOOTSTRAP_ADDR, RANK, WORLD_SIZE, COHORT_NUM_REDUCERS), on 127.0.0.1. Every worker
all-reduces numpy arrays of every dtype with every op over the Reduction Server and the ring,
checks each result against the exact reduction computed here, checks that a repeat gives the same
bytes, and checks that bad arrays are refused with a clear error. Exit 0 when every process did.

    python_collective_check.py --reducer <build>/collective/cohort-reducer --python-dir <build>/python
"""
import argparse
import os
import socket
import subprocess
import sys
import time

WORKERS = 3
REDUCERS = 2
COUNTS = (0, 1, 1001, 70001)
OPS = ("sum", "avg", "min", "max")


def values(rank, count):
    import numpy as np
    i = np.arange(count, dtype=np.int64)
    return ((i * 7 + rank * 3) % 13 - 6).astype(np.float64)  # small integers: exact in every dtype


def expected(op, n, count):
    import numpy as np
    stack = np.stack([values(r, count) for r in range(n)]) if count else np.zeros((n, 0))
    if op == "sum":
        return stack.sum(axis=0)
    if op == "avg":
        return stack.sum(axis=0) / n
    return stack.min(axis=0) if op == "min" else stack.max(axis=0)


def to_bf16_bits(x):
    import numpy as np
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def from_bf16_bits(bits):
    import numpy as np
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def worker_main():
    import numpy as np
    from cohort.collective import INVALID_ARGUMENT, CollectiveError, Communicator

    rank = int(os.environ["RANK"])
    n = int(os.environ["WORLD_SIZE"])
    dtypes = (np.float32, np.float64, np.float16, np.int32, np.int64, "bf16")
    tolerance = {np.float32: 1e-6, np.float64: 1e-12, np.float16: 1e-2, "bf16": 5e-2, np.int32: 0, np.int64: 0}
    failures = []
    with Communicator.from_env() as comm:
        if comm.rank != rank or comm.size != n:
            failures.append(f"rank/size {comm.rank}/{comm.size}, expected {rank}/{n}")
        # Every process runs on this host with UCX's default transports: shared memory is there.
        for algorithm in ("reduction-server", "ring", "shared-memory"):
            for dtype in dtypes:
                for op in OPS:
                    for count in COUNTS:
                        mine = values(rank, count)
                        if dtype == "bf16":
                            a = to_bf16_bits(mine)
                        else:
                            a = mine.astype(dtype)
                        b = a.copy()
                        override = "bf16" if dtype == "bf16" else None
                        comm.allreduce(a, op=op, algorithm=algorithm, dtype=override)
                        comm.allreduce(b, op=op, algorithm=algorithm, dtype=override)
                        want = expected(op, n, count)
                        if dtype in (np.int32, np.int64) and op == "avg":
                            want = np.trunc(want)  # integer average truncates, as in C++
                        got = from_bf16_bits(a) if dtype == "bf16" else a.astype(np.float64)
                        name = f"{algorithm}/{getattr(dtype, '__name__', dtype)}/{op}/{count}"
                        if count and np.max(np.abs(got - want)) > tolerance[dtype]:
                            k = int(np.argmax(np.abs(got - want)))
                            failures.append(f"{name}: element {k} is {got[k]}, expected {want[k]}")
                        if a.tobytes() != b.tobytes():
                            failures.append(f"{name}: a repeat gave other bytes")
        # Bad arrays are refused before anything is sent, and the communicator stays usable.
        for bad, why in ((np.zeros(4, dtype=np.uint8), "unsupported dtype"),
                         (np.zeros((4, 4), dtype=np.float32)[:, 1], "C-contiguous"),
                         ([1.0, 2.0], "numpy array")):
            try:
                comm.allreduce(bad)
                failures.append(f"{why}: accepted")
            except (ValueError, TypeError) as e:
                if why not in str(e):
                    failures.append(f"{why}: wrong message {e}")
        # Halving-doubling needs a power-of-two number of workers: refused by the library, by name,
        # without poisoning the communicator.
        try:
            comm.allreduce(np.ones(5, dtype=np.float32), algorithm="halving-doubling")
            failures.append(f"halving-doubling among {n} workers: accepted")
        except CollectiveError as e:
            if e.code != INVALID_ARGUMENT or "power-of-two" not in e.message:
                failures.append(f"halving-doubling among {n} workers: {e}")
        one = np.ones(5, dtype=np.float32)
        comm.allreduce(one)
        if not np.all(one == n):
            failures.append(f"all-reduce after refused calls gave {one}")
    try:
        comm.allreduce(np.ones(1, dtype=np.float32))
        failures.append("a closed communicator accepted an all-reduce")
    except CollectiveError as e:
        if "closed" not in e.message:
            failures.append(f"closed communicator: wrong message {e}")
    for f in failures:
        print(f"worker {rank}: {f}", file=sys.stderr)
    print(f"worker {rank}: {'ok' if not failures else 'FAILED'}")
    return 0 if not failures else 1


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--reducer", help="the cohort-reducer binary")
    parser.add_argument("--python-dir", help="<build>/python, which holds the cohort package")
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    if args.worker:
        return worker_main()
    if not args.reducer or not args.python_dir:
        parser.error("--reducer and --python-dir are required")
    env = dict(os.environ)
    env.update({
        "COHORT_BOOTSTRAP_ADDR": f"127.0.0.1:{free_port()}",
        "WORLD_SIZE": str(WORKERS),
        "COHORT_NUM_REDUCERS": str(REDUCERS),
        "COHORT_COMM_TIMEOUT_MS": "30000",
        "COHORT_REDUCER_REJOIN_MS": "0",
        "PYTHONPATH": args.python_dir,
        "UCX_WARN_UNUSED_ENV_VARS": "n",
    })
    env.pop("COHORT_ALLREDUCE_ALGORITHM", None)
    env.pop("UCX_TLS", None)  # UCX's default: shared memory between these same-host processes
    procs = []
    for j in range(REDUCERS):
        procs.append((f"reducer {j}", subprocess.Popen([args.reducer], env=dict(env, COHORT_REDUCER_INDEX=str(j)))))
    for r in range(WORKERS):
        procs.append((f"worker {r}", subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                                      env=dict(env, RANK=str(r)))))
    deadline = time.monotonic() + args.timeout
    failed = []
    for name, p in procs:
        try:
            code = p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = "timed out"
        if code != 0:
            failed.append(f"{name}: {code}")
    for _, p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    if failed:
        print("python collective check FAILED: " + ", ".join(failed), file=sys.stderr)
        return 1
    print(f"python collective check: ok ({WORKERS} workers, {REDUCERS} reducers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
