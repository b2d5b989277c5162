#!/usr/bin/env python3
"""A worker of hierarchical_hosts_test.sh, through the numpy binding (python/cohort/collective.py),
Communicator.from_env. argv[1] says what it checks:

  hierarchical  two emulated hosts of two workers each: an all-reduce by the hierarchical
                all-reduce (asked for by name: refused if the placement does not give it) sums
                exactly; then worker 3 passes one element more than the others
  sizes-hosts   the same placement under kAuto (the hierarchical all-reduce): the first host's
                workers pass 1000 elements, the second's 3000, so the stage across hosts runs
                recursive doubling on one host and the ring on the other
  sizes-flat    one worker on each of two hosts under kAuto: worker 0 passes 1000 elements
                (recursive doubling), worker 1 100000 (the ring)

Where the calls differ, every worker, on its host or the other, must raise CollectiveError
INVALID_ARGUMENT naming a worker whose call differs from its own, well before the communicator's
timeout. Exit 0 when all of that held."""
import os
import sys
import time

import numpy as np
from cohort.collective import INVALID_ARGUMENT, CollectiveError, Communicator

COUNT = 70001  # several shared-memory slots; the ring across the hosts
ODD = 3


def expect_disagreement(comm, rank, mine, theirs, odd, algorithm, failures):
    """All-reduces `mine` elements; records in `failures` anything but the error naming one of the
    workers `odd` (for the others) as calling `theirs`."""
    start = time.monotonic()
    try:
        comm.allreduce(np.ones(mine, dtype=np.float32), algorithm=algorithm)
        failures.append("an all-reduce over different counts succeeded")
    except CollectiveError as e:
        want = [f"called {theirs} f32 (sum), this worker {mine} f32 (sum)", "the workers disagree"]
        named = rank in odd or any(f"worker {w} called" in e.message for w in odd)
        if e.code != INVALID_ARGUMENT or any(w not in e.message for w in want) or not named:
            failures.append(f"wrong error: {e}")
        print(f"worker {rank}, after {time.monotonic() - start:.2f} s: {e.message}")
    took = time.monotonic() - start
    if took > 10:
        failures.append(f"the error took {took:.1f} s")


def main():
    mode = sys.argv[1]
    rank = int(os.environ["RANK"])
    n = int(os.environ["WORLD_SIZE"])
    failures = []
    with Communicator.from_env() as comm:
        if mode == "hierarchical":
            a = np.ones(COUNT, dtype=np.float32)
            comm.allreduce(a, algorithm="hierarchical")
            if not np.all(a == n):
                failures.append(f"hierarchical all-reduce gave {a[:4]}..., expected {n}")
            mine, theirs = (COUNT + 1, COUNT) if rank == ODD else (COUNT, COUNT + 1)
            expect_disagreement(comm, rank, mine, theirs, (ODD,), "hierarchical", failures)
        elif mode == "sizes-hosts":
            # Each worker hears of a worker of the other host (named by its rank in the job, not in
            # the stage across hosts): its stage's peer, or the other stage's, whichever found first.
            mine, theirs, other = (1000, 3000, (2, 3)) if rank < 2 else (3000, 1000, (0, 1))
            expect_disagreement(comm, rank, mine, theirs, other, "auto", failures)
        else:
            mine, theirs = (1000, 100000) if rank == 0 else (100000, 1000)
            expect_disagreement(comm, rank, mine, theirs, (1 - rank,), "auto", failures)
    for f in failures:
        print(f"worker {rank}: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
