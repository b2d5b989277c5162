#!/usr/bin/env python3
"""The Python binding's collectives other than the all-reduce, end to end (python/cohort/collective.py).

Starts Python worker processes with the environment an agent injects (COHORT_BOOTSTRAP_ADDR, RANK,
WORLD_SIZE; no reducers), on 127.0.0.1. Every worker runs broadcast, allgather, reduce_scatter,
reduce, gather, scatter, alltoall, alltoallv, barrier, send/recv and isend/irecv (from a named
worker and from any) on numpy arrays of every dtype and checks each result against numpy computed here (exact: the inputs are small
integers, or powers of two for the product), then checks that arrays of the wrong size are refused
and that a worker whose receive disagrees with the sender is told which worker sent what, and that
cancel() from another thread ends a receive nobody answers. Exit 0 when every worker did.

    python_collectives_check.py --python-dir <build>/python
"""
import os
import sys

from collective_check_processes import as_dtype, as_float, report, run_check, values

WORKERS = 3
COUNTS = (0, 1, 1001, 70001)


def worker_main():
    import numpy as np
    from cohort.collective import CANCELLED, INVALID_ARGUMENT, CollectiveError, Communicator

    rank = int(os.environ["RANK"])
    n = int(os.environ["WORLD_SIZE"])
    failures = []

    def expect(name, got, want):
        if got.shape != want.shape or not np.array_equal(got, want):
            failures.append(f"{name}: got {got[:8]}..., want {want[:8]}...")

    with Communicator.from_env() as comm:
        for dtype in (np.float32, np.float64, np.float16, np.int32, np.int64, "bf16"):
            override = "bf16" if dtype == "bf16" else None
            label = getattr(dtype, "__name__", dtype)
            for count in COUNTS:
                name = f"{label}/{count}"
                # broadcast from the last worker
                a = as_dtype(values(rank, count), dtype)
                comm.broadcast(a, root=n - 1, dtype=override)
                expect(f"broadcast {name}", as_float(a, dtype), values(n - 1, count))
                # allgather: worker r's block at r * count
                g = comm.allgather(as_dtype(values(rank, count), dtype), dtype=override)
                expect(f"allgather {name}", as_float(g, dtype), np.concatenate([values(r, count) for r in range(n)]))
                # reduce_scatter (sum and max) of n blocks
                big = values(rank, n * count)
                for op, fold in (("sum", np.sum), ("max", np.max)):
                    got = comm.reduce_scatter(as_dtype(big, dtype), op=op, dtype=override)
                    full = fold(np.stack([values(r, n * count) for r in range(n)]), axis=0)
                    expect(f"reduce_scatter {op} {name}", as_float(got, dtype), full[rank * count:(rank + 1) * count])
                # reduce to worker 1
                got = comm.reduce(as_dtype(values(rank, count), dtype), root=1, op="sum", dtype=override)
                if rank == 1:
                    expect(f"reduce {name}", as_float(got, dtype), sum(values(r, count) for r in range(n)))
                elif got is not None:
                    failures.append(f"reduce {name}: a result off the root")
                # gather to worker 0, scatter from worker 2
                got = comm.gather(as_dtype(values(rank, count), dtype), root=0, dtype=override)
                if rank == 0:
                    expect(f"gather {name}", as_float(got, dtype), np.concatenate([values(r, count) for r in range(n)]))
                src = as_dtype(np.concatenate([values(100 + r, count) for r in range(n)]), dtype) if rank == 2 else None
                out = np.empty(count, dtype=np.uint16 if dtype == "bf16" else dtype)
                comm.scatter(out, root=2, array=src, dtype=override)
                expect(f"scatter {name}", as_float(out, dtype), values(100 + rank, count))
                # alltoall: block j of worker i is values(i * n + j)
                send = np.concatenate([values(rank * n + j, count) for j in range(n)])
                got = comm.alltoall(as_dtype(send, dtype), dtype=override)
                expect(f"alltoall {name}", as_float(got, dtype), np.concatenate([values(i * n + rank, count) for i in range(n)]))
            # alltoallv: worker i sends worker j (i + 2j) % 4 * 501 elements
            size = lambda i, j: (i + 2 * j) % 4 * 501  # noqa: E731
            send = np.concatenate([values(rank * n + j, size(rank, j)) for j in range(n)])
            got = comm.alltoallv(as_dtype(send, dtype), [size(rank, j) for j in range(n)],
                                 [size(i, rank) for i in range(n)], dtype=override)
            expect(f"alltoallv {label}", as_float(got, dtype),
                   np.concatenate([values(i * n + rank, size(i, rank)) for i in range(n)]))
        # product: powers of two, exact
        p = np.array([2.0, -0.5, 1.0, -1.0], dtype=np.float32) * (1 if rank % 2 == 0 else -1)
        comm.allreduce(p, op="product")
        expect("allreduce product", p.astype(np.float64), np.array([2.0, -0.5, 1.0, -1.0]) ** n * (-1) ** (n // 2))
        # bitwise ops on integers, the sign bit and an int64's top half included; refused on floats
        def bits(r):
            return np.array([1 << r, ~(1 << r), (1 << 62) >> r, -r], dtype=np.int64)
        for op, fold in (("band", np.bitwise_and), ("bor", np.bitwise_or), ("bxor", np.bitwise_xor)):
            want = fold.reduce([bits(r) for r in range(n)])
            expect(f"allreduce {op} int64", comm.allreduce(bits(rank), op=op), want)
            expect(f"allreduce {op} int32", comm.allreduce(bits(rank).astype(np.int32), op=op), want.astype(np.int32))
        try:
            comm.allreduce(np.ones(3, dtype=np.float32), op="bor")
            failures.append("allreduce bor of float32: accepted")
        except CollectiveError as e:
            if e.code != INVALID_ARGUMENT or "bor reduces integers (i32, i64), not f32" not in e.message:
                failures.append(f"allreduce bor of float32: {e}")
        # point-to-point round the ring, blocking and not
        right, left = (rank + 1) % n, (rank - 1) % n
        out = values(rank, 5000).astype(np.float64)
        inbox = np.empty(5000, dtype=np.float64)
        pending = comm.irecv(inbox, left, tag=3)
        sent = comm.isend(out, right, tag=3)
        pending.wait()
        sent.wait()
        expect("isend/irecv", inbox, values(left, 5000))
        token = np.array([rank], dtype=np.int64)
        if rank == 0:
            comm.send(token, right, tag=4)
            comm.recv(token, left, tag=4)
        else:
            comm.recv(token, left, tag=4)
            token += 1
            comm.send(token, right, tag=4)
        if rank == 0 and token[0] != n - 1:
            failures.append(f"token round the ring came back as {token[0]}")
        # Receives from any worker: worker 0 takes every other worker's message on tag 5, each
        # named by its request, and one more with the blocking recv.
        if rank == 0:
            senders = []
            for _ in range(n - 1):
                box = np.empty(3, dtype=np.int32)
                req = comm.irecv(box, None, tag=5)
                req.wait()
                senders.append(req.source)
                expect(f"irecv from any worker (from {req.source})", box,
                       np.full(3, req.source * 7, dtype=np.int32))
            if sorted(senders) != list(range(1, n)):
                failures.append(f"irecv from any worker: the senders were {senders}")
            box = comm.recv(np.empty(3, dtype=np.int32), None, tag=6)
            expect("recv from any worker", box, np.full(3, 7 * (n - 1), dtype=np.int32))
        else:
            comm.send(np.full(3, rank * 7, dtype=np.int32), 0, tag=5)
            if rank == n - 1:
                comm.send(np.full(3, rank * 7, dtype=np.int32), 0, tag=6)
        comm.barrier()
        # Sizes that do not fit are refused before anything is sent.
        for call, why in ((lambda: comm.reduce_scatter(np.zeros(n * 2 + 1, dtype=np.float32)), "equal blocks"),
                          (lambda: comm.allgather(np.zeros(4, dtype=np.float32), out=np.zeros(5, dtype=np.float32)),
                           "out must be"),
                          (lambda: comm.broadcast(np.zeros(4, dtype=np.uint8)), "unsupported dtype")):
            try:
                call()
                failures.append(f"{why}: accepted")
            except ValueError as e:
                if why not in str(e):
                    failures.append(f"{why}: wrong message {e}")
        comm.barrier()
        # Worker 1 expects 3 elements from worker 0, which sends 4: worker 1 is told so, by name.
        # The message is already there when worker 1 posts its receive (sent before a barrier that
        # worker 1 waits for), the case where the transport refuses the too-small receive at once.
        if rank == 0:
            try:
                comm.send(np.zeros(4, dtype=np.float32), 1, tag=9)
            except CollectiveError:
                pass  # the receiver refused it: a deadline on the send is allowed
            comm.barrier()
        elif rank == 1:
            comm.barrier()
            try:
                comm.recv(np.zeros(3, dtype=np.float32), 0, tag=9)
                failures.append("a 4-element message was received into 3 elements")
            except CollectiveError as e:
                if e.code != INVALID_ARGUMENT or "worker 0 sent 4 f32" not in e.message:
                    failures.append(f"mismatched receive: {e}")
        else:
            comm.barrier()
        # Worker 2 waits for a message worker 0 never sends, and a thread of its own cancels the
        # communicator: the receive raises CANCELLED long before its 5 s deadline, and so does every
        # later call. Worker 0 waits for worker 2 (a receive that can only fail) until it has gone.
        if rank == 2:
            import threading
            canceller = threading.Timer(0.3, comm.cancel)
            canceller.start()
            for what, call in (("the receive in progress", lambda: comm.recv(np.zeros(4, dtype=np.float32), 0, tag=11)),
                               ("a barrier after it", comm.barrier)):
                try:
                    call()
                    failures.append(f"cancelled: {what} returned")
                except CollectiveError as e:
                    if e.code != CANCELLED:
                        failures.append(f"cancelled: {what}: {e}")
            canceller.join()
        elif rank == 0:
            try:
                comm.recv(np.zeros(1, dtype=np.float32), 2, tag=12)
                failures.append("received from a worker that sent nothing")
            except CollectiveError:
                pass
    return report(rank, failures)


if __name__ == "__main__":
    sys.exit(run_check("python collectives check", __file__, worker_main, WORKERS,
                       env_extra={"COHORT_COMM_TIMEOUT_MS": "5000"}))
