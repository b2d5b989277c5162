"""One Reduction Server reducer for `cohort` process groups outside a Cohort job.

Workers started by torchrun (or with MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE) and
COHORT_NUM_REDUCERS=M use M reducers; start each, on any host the workers can reach, with

    python3 -m cohort.torch.reducer --store MASTER_ADDR:MASTER_PORT [--index I]

(under torchrun: its static rendezvous, --master_addr/--master_port, whose store the first agent
hosts for the whole run; under its c10d rendezvous the workers' store moves with every attempt).
It connects to the workers' TCPStore as a client and follows the sessions of their default
process group: for each, it reads how many workers and reducers rank 0 asked for, takes index I (or
the next free one) and serves all-reduce rounds until the workers leave; then it waits for the next
session (a torchrun restart, a new process group) for --rejoin seconds. It ends then, when the store
goes away (rank 0 hosted it and exited), or on SIGTERM/SIGINT. Inside a Cohort job the agent starts
cohort-reducer for the job's reducer pool instead. Exit status, as cohort-reducer's: that of the last
session it served, however its end was noticed (no session within --rejoin, the store gone): 0 when
every worker said it was done, 1 when the session failed (a worker gone, a round timed out; the error
names it), also 1 when no session came at all; 0 on a signal.

A worker that dies is named to the others: the reducer lingers, answering each later all-reduce
with "worker N is gone", until every other worker has heard, left or exited, or 30 s at most (a
torchrun restart kills the old workers, which ends it at once), before it waits for the next
session; see collective/algorithms/reduction_server.h, "Failures".
"""

import argparse
import datetime
import signal
import sys
import threading
import time

import torch.distributed as dist

from . import _C

# The store is polled this often; this many failed polls in a row (the workers' rank 0 hosts the
# store and has exited) end the reducer.
_STORE_POLL_S = 1.0
_STORE_FAILURES = 3
# Once the store is gone, a session still being served ends as its workers go (they stopped, or
# their connections closed); one that does not end within this long (longer than a reducer lingers
# telling the workers left of a dead one, 30 s) has workers that are neither done nor gone.
_SESSION_END_GRACE_S = 40.0


def _parse(argv):
    parser = argparse.ArgumentParser(prog="python3 -m cohort.torch.reducer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="HOST:PORT of the workers' TCPStore (MASTER_ADDR:MASTER_PORT)")
    parser.add_argument("--index", type=int, default=-1, help="this reducer's index (default: the next free one)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds to wait for the workers, and each round's deadline (default 300)")
    parser.add_argument("--rejoin", type=float, default=60.0,
                        help="seconds to wait for workers to come back after they left (default 60)")
    args = parser.parse_args(argv)
    host, sep, port = args.store.rpartition(":")
    if not sep or not host or not port.isdigit():
        parser.error(f"--store must be HOST:PORT, not {args.store!r}")
    return args, host, int(port)


def _client(host, port, timeout):
    options = {"is_master": False, "timeout": datetime.timedelta(seconds=timeout), "wait_for_workers": False}
    try:
        return dist.TCPStore(host, port, **options)
    except RuntimeError as e:
        # torch 2.4 on asks for libuv by default even where it was built without it (Debian 13's
        # 2.6), and a client has no use for it: torch's env:// reads USE_LIBUV=0 for the same.
        if "libuv" not in str(e):
            raise
        return dist.TCPStore(host, port, use_libuv=False, **options)


def main(argv=None):
    args, host, port = _parse(sys.argv[1:] if argv is None else argv)
    try:
        store = _client(host, port, args.timeout)
        reducer = _C.Reducer(store, args.index, args.timeout, args.rejoin)
        watch = _client(host, port, args.timeout)
    except RuntimeError as e:
        print(f"cohort reducer: {e}", file=sys.stderr)
        return 1
    print(f"cohort reducer: following the sessions at {args.store}", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    reducer.start()
    failures = 0
    store_gone_at = None
    cut = False
    while not reducer.join(_STORE_POLL_S):
        if stop.is_set() or cut:
            reducer.stop()
        elif store_gone_at is not None:
            if time.monotonic() - store_gone_at > _SESSION_END_GRACE_S:
                cut = True
                reducer.stop()
        else:
            try:
                watch.num_keys()
                failures = 0
            except RuntimeError:
                failures += 1
                if failures >= _STORE_FAILURES:
                    print(f"cohort reducer: the store at {args.store} is gone; exiting once the session it "
                          "serves, if any, ends", flush=True)
                    store_gone_at = time.monotonic()
                    reducer.store_gone()
    if stop.is_set():
        return 0
    if cut:
        print(f"cohort reducer: the session it served had not ended {_SESSION_END_GRACE_S:.0f} s after the store at "
              f"{args.store} went away: its workers are neither done nor gone", file=sys.stderr)
        return 1
    if reducer.error:
        print(f"cohort reducer: {reducer.error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
