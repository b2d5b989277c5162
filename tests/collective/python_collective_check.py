#!/usr/bin/env python3
"""The Python binding of the collective library (python/cohort/collective.py) end to end.

Starts cohort-reducer processes and Python worker processes with the environment an agent injects
(COHORT_BOOTSTRAP_ADDR, RANK, WORLD_SIZE, COHORT_NUM_REDUCERS), on 127.0.0.1. Every worker
all-reduces numpy arrays of every dtype with every op over the Reduction Server and the ring,
checks each result against the exact reduction computed here, checks that a repeat gives the same
bytes, and checks that bad arrays are refused with a clear error. Exit 0 when every process did.

    python_collective_check.py --reducer <build>/collective/cohort-reducer --python-dir <build>/python
"""
import os
import sys

from collective_check_processes import as_dtype, as_float, report, run_check, values

WORKERS = 3
REDUCERS = 2
COUNTS = (0, 1, 1001, 70001)
OPS = ("sum", "avg", "min", "max")


def expected(op, n, count):
    import numpy as np
    stack = np.stack([values(r, count) for r in range(n)]) if count else np.zeros((n, 0))
    if op == "sum":
        return stack.sum(axis=0)
    if op == "avg":
        return stack.sum(axis=0) / n
    return stack.min(axis=0) if op == "min" else stack.max(axis=0)


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
        for algorithm in ("reduction-server", "ring", "recursive-doubling", "shared-memory"):
            for dtype in dtypes:
                for op in OPS:
                    for count in COUNTS:
                        mine = values(rank, count)
                        a = as_dtype(mine, dtype)
                        b = a.copy()
                        override = "bf16" if dtype == "bf16" else None
                        comm.allreduce(a, op=op, algorithm=algorithm, dtype=override)
                        comm.allreduce(b, op=op, algorithm=algorithm, dtype=override)
                        want = expected(op, n, count)
                        if dtype in (np.int32, np.int64) and op == "avg":
                            want = np.trunc(want)  # integer average truncates, as in C++
                        got = as_float(a, dtype)
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
    return report(rank, failures)


if __name__ == "__main__":
    sys.exit(run_check("python collective check", __file__, worker_main, WORKERS, REDUCERS,
                       {"COHORT_COMM_TIMEOUT_MS": "30000", "COHORT_REDUCER_REJOIN_MS": "0"}))
