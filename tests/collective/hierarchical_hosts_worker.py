#!/usr/bin/env python3
"""A worker of hierarchical_hosts_test.sh: two emulated hosts of two workers each, the numpy binding
(python/cohort/collective.py), Communicator.from_env. An all-reduce by the hierarchical all-reduce
(asked for by name: refused if the placement does not give it) sums exactly; then worker 3 passes
one element more than the others: every worker, on its host or the other, raises CollectiveError
INVALID_ARGUMENT naming a worker whose call differs, well before the communicator's timeout.
Exit 0 when all of that held."""
import os
import sys
import time

import numpy as np
from cohort.collective import INVALID_ARGUMENT, CollectiveError, Communicator

COUNT = 70001  # several shared-memory slots; the ring across the hosts
ODD = 3


def main():
    rank = int(os.environ["RANK"])
    n = int(os.environ["WORLD_SIZE"])
    failures = []
    with Communicator.from_env() as comm:
        a = np.ones(COUNT, dtype=np.float32)
        comm.allreduce(a, algorithm="hierarchical")
        if not np.all(a == n):
            failures.append(f"hierarchical all-reduce gave {a[:4]}..., expected {n}")
        b = np.ones(COUNT + (1 if rank == ODD else 0), dtype=np.float32)
        start = time.monotonic()
        try:
            comm.allreduce(b, algorithm="hierarchical")
            failures.append("an all-reduce over different counts succeeded")
        except CollectiveError as e:
            mine, theirs = (COUNT + 1, COUNT) if rank == ODD else (COUNT, COUNT + 1)
            want = [f"called {theirs} f32 (sum), this worker {mine} f32 (sum)", "the workers disagree"]
            if rank != ODD:
                want.append(f"worker {ODD} called")
            if e.code != INVALID_ARGUMENT or any(w not in e.message for w in want):
                failures.append(f"wrong error: {e}")
            print(f"worker {rank}: {e.message}")
        took = time.monotonic() - start
        if took > 10:
            failures.append(f"the error took {took:.1f} s")
    for f in failures:
        print(f"worker {rank}: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
