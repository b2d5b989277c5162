#!/usr/bin/env python3
"""The all-reduce of sparse COO tensors (what DDP sends for an nn.Embedding(sparse=True)) on the cohort
backend against torch's gloo backend, over the same ranks in the same run, calls of the two in turns.

    sparse_allreduce.py [--python-dir <build>/python] [--workers 3] [--rows 1000,20000] [--dim 64]
                        [--table 100000] [--iters 12] [--warmup 2]

Each rank holds the gradient of `rows` rows looked up at random in a `table` x `dim` float32
embedding (so ranks share some rows), and all-reduces it with SUM. Ranks run as local processes on
127.0.0.1 (torch.multiprocessing, one thread each). Prints one markdown row per size: rank 0's
median call in ms on each backend and gloo's over cohort's. Run it on a quiet machine.
"""
import argparse
import datetime
import os
import socket
import statistics
import sys
import time


def rank_main(rank, args, port):
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401  (registers the backend)

    torch.set_num_threads(1)
    dist.init_process_group("cohort", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=args.workers, timeout=datetime.timedelta(seconds=120))
    gloo = dist.new_group(backend="gloo")
    gen = torch.Generator().manual_seed(rank)
    for rows in args.rows:
        grad = torch.sparse_coo_tensor(torch.randint(0, args.table, (1, rows), generator=gen),
                                       torch.randn(rows, args.dim, generator=gen), (args.table, args.dim))
        times = {"cohort": [], "gloo": []}
        for i in range(args.warmup + args.iters):
            for name, group in (("cohort", None), ("gloo", gloo)):
                x = grad.clone()
                dist.barrier(group=gloo)
                start = time.perf_counter()
                dist.all_reduce(x, group=group)
                if i >= args.warmup:
                    times[name].append(time.perf_counter() - start)
        if rank == 0:
            c, g = (1e3 * statistics.median(times[k]) for k in ("cohort", "gloo"))
            print(f"| {rows} | {rows * args.dim * 4 / 2**20:.2f} | {c:.2f} | {g:.2f} | {g / c:.2f}x |", flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python-dir", default=os.path.join(os.path.dirname(__file__), "../../build/python"))
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--rows", default="1000,20000")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--table", type=int, default=100000)
    p.add_argument("--iters", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    args = p.parse_args()
    args.rows = [int(r) for r in args.rows.split(",")]
    sys.path.insert(0, os.path.abspath(args.python_dir))
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    print(f"# sparse all-reduce, {args.workers} ranks, rows of a {args.table} x {args.dim} float32 table, "
          f"median of {args.iters} calls each\n")
    print("| rows a rank | MiB of values a rank | cohort ms | gloo ms | gloo / cohort |")
    print("|---:|---:|---:|---:|---:|", flush=True)
    mp.spawn(rank_main, args=(args, port), nprocs=args.workers)


if __name__ == "__main__":
    main()
