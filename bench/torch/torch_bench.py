#!/usr/bin/env python3
"""One rank of the torch benchmarks (bench/torch/run.sh starts one per host of the emulated cluster).

    torch_bench.py ddp --backend gloo|cohort [--model comm|compute] [--batch B] [--warmup W]
                       [--steps S] [--windows R]
    torch_bench.py allreduce --backend gloo|cohort [--sizes 1M:256M] [--iters N] [--warmup W] [--check]

Rendezvous: init_method="env://" (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), as a stock script.
The cohort backend reads COHORT_NUM_REDUCERS, COHORT_ALLREDUCE_ALGORITHM, COHORT_WIRE_DTYPE and
COHORT_TORCH_CHECK_CALLS and COHORT_TORCH_OVERLAP from the environment; gloo reads GLOO_SOCKET_IFNAME.

ddp: DistributedDataParallel training on synthetic data, timed in R windows of S steps after W
warm-up steps; rank 0 prints one JSON line per window ("samples_per_s": global samples, i.e.
batch x world, per second of the window; the seconds of its steps rank 0 spent in the forward,
the backward and the optimizer; with the cohort backend, the seconds in which one of its
all-reduces ran, from its flight recorder, the slowest of them and the seconds they took beyond
the median call of their size; the CPU seconds rank 0's process used, all its threads; the share
of the machine's CPUs busy, from /proc/stat) and one summary line with their median.
Models:
  comm     a wide MLP (2048 -> 4096 x3 -> 2048 -> 1000, about 50 M parameters): little compute per
           byte of gradient, so the all-reduce bounds the step (communication-bound)
  compute  a small convolutional net on 3x32x32 images (about 0.5 M parameters, 2 MB of gradient,
           about 0.6 GFLOP per sample forward and backward): the step is mostly compute
allreduce: dist.all_reduce of float32 buffers over a sweep of sizes, timed like cohort-bench
(time_us: the slowest rank's mean over the timed iterations; GB = 1e9 bytes; busbw = algbw x
2(n-1)/n); rank 0 prints one JSON line per size with cohort-bench's keys, and its own fastest,
median and slowest call.
"""
import argparse
import datetime
import json
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time


def parse_sizes(spec):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}

    def one(text):
        text = text.strip().upper()
        if text[-1] in units:
            return int(text[:-1]) * units[text[-1]]
        return int(text)

    if "," in spec or ":" not in spec:
        return [one(p) for p in spec.split(",")]
    lo, hi = (one(p) for p in spec.split(":")[:2])
    sizes = []
    while lo <= hi:
        sizes.append(lo)
        lo *= 2
    return sizes


# The flight recorder's file (common/flight_recorder.h): a 128-byte header, then 64-byte slots, each
# a seqlock version and a 56-byte FlightRecord. Read here after the timed windows, while nothing runs.
_FR_HEADER = struct.Struct("<QIIIIiiiIqqQI60x")
_FR_SLOT = struct.Struct("<QIIQqqqiiBBBBB3x")
_FR_MAGIC = 0x31524643_54524F43
_FR_ALLREDUCE = 1


def flight_allreduces(path):
    """(start_ns, end_ns, bytes) of every finished all-reduce in the recorder's file at `path`."""
    with open(path, "rb") as f:
        data = f.read()
    magic, _, header_bytes, slot_bytes, capacity = _FR_HEADER.unpack_from(data)[:5]
    if magic != _FR_MAGIC:
        return []
    calls = []
    for i in range(capacity):
        (version, _seq, _comm, nbytes, _enqueue, start, end, _peer, _group, op, _algo, _dtype,
         _outcome, _code) = _FR_SLOT.unpack_from(data, header_bytes + i * slot_bytes)
        if version > 0 and version % 4 == 0 and op == _FR_ALLREDUCE and end > 0:
            calls.append((start, end, nbytes))
    return sorted(calls)


def busy_seconds(calls, lo, hi):
    """Seconds of [lo, hi) (monotonic ns) in which at least one of `calls` ran."""
    busy, reach = 0, lo
    for start, end, _ in calls:
        start, end = max(start, reach), min(end, hi)
        if end > start:
            busy += end - start
            reach = end
    return busy / 1e9


def median_by_size(calls):
    """The median duration (ns) of the `calls` of each size."""
    by_size = {}
    for start, end, nbytes in calls:
        by_size.setdefault(nbytes, []).append(end - start)
    return {nbytes: statistics.median(d) for nbytes, d in by_size.items()}


def stalls(calls, median, lo, hi):
    """Of the `calls` inside [lo, hi): the slowest one's (seconds, bytes), and the seconds they took
    beyond `median` (median_by_size of all the calls): how much of a window stalled calls cost, as
    against a window whose time went between the calls."""
    inside = [(end - start, nbytes) for start, end, nbytes in calls if lo <= start and end <= hi]
    slowest = max(inside, default=(0, 0))
    excess = sum(max(0, d - median[nbytes]) for d, nbytes in inside)
    return slowest[0] / 1e9, slowest[1], excess / 1e9


def machine_cpu():
    """(busy, total) jiffies of every CPU of the machine so far (/proc/stat; (0, 0) where absent)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def init(args):
    import torch.distributed as dist
    if args.backend == "cohort":
        import cohort.torch  # registers the backend
    dist.init_process_group(args.backend, init_method="env://", timeout=datetime.timedelta(seconds=args.timeout))
    if args.backend == "cohort":
        description = cohort.torch.backend_of().describe()
    else:
        description = f"{args.backend} process group"
    return dist, description


def model_for(name):
    import torch.nn as nn
    if name == "comm":
        widths = [2048, 4096, 4096, 4096, 2048]
        layers = []
        for a, b in zip(widths, widths[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        layers.append(nn.Linear(widths[-1], 1000))
        return nn.Sequential(*layers), (2048,)
    if name == "compute":
        def block(a, b):
            return [nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU()]
        net = nn.Sequential(*block(3, 64), *block(64, 64), nn.MaxPool2d(2), *block(64, 128), *block(128, 128),
                            nn.MaxPool2d(2), *block(128, 128), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                            nn.Linear(128, 1000))
        return net, (3, 32, 32)
    raise SystemExit(f"torch_bench: unknown model {name!r} (comm, compute)")


def run_ddp(args):
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(args.threads)
    # The cohort backend's calls, from its flight recorder (a file of this run's own, read below).
    recorder = None
    if args.backend == "cohort" and not os.environ.get("COHORT_FLIGHT_RECORDER"):
        recorder = os.path.join(tempfile.mkdtemp(prefix="torch-bench-"), "flight")
        os.environ["COHORT_FLIGHT_RECORDER"] = recorder
    dist, description = init(args)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model, shape = model_for(args.model)
    params = sum(p.numel() for p in model.parameters())
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(args.batch, *shape, generator=g)
    y = torch.randint(0, 1000, (args.batch,), generator=g)
    loss_fn = torch.nn.CrossEntropyLoss()

    # Where a step goes: the forward, the backward (with the all-reduces DDP waits for before it
    # returns), the optimizer step; seconds summed over a window.
    def step(phases):
        t0 = time.monotonic_ns()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(x), y)
        t1 = time.monotonic_ns()
        loss.backward()
        t2 = time.monotonic_ns()
        opt.step()
        t3 = time.monotonic_ns()
        for key, ns in (("forward_s", t1 - t0), ("backward_s", t2 - t1), ("optimizer_s", t3 - t2)):
            phases[key] = phases.get(key, 0.0) + ns / 1e9

    for _ in range(args.warmup):
        step({})
    rates, rows = [], []
    for window in range(args.windows):
        dist.barrier()
        phases = {}
        busy0, total0 = machine_cpu()
        cpu0 = time.process_time()
        start = time.monotonic_ns()
        for _ in range(args.steps):
            step(phases)
        dist.barrier()
        end = time.monotonic_ns()
        process_cpu_s = time.process_time() - cpu0
        busy1, total1 = machine_cpu()
        seconds = (end - start) / 1e9
        rates.append(args.steps * args.batch * world / seconds)
        rows.append({"bench": "ddp", "label": args.label, "model": args.model, "window": window,
                     "steps": args.steps, "seconds": round(seconds, 4), "samples_per_s": round(rates[-1], 3),
                     **{k: round(v, 4) for k, v in phases.items()}, "span_ns": (start, end),
                     "process_cpu_s": round(process_cpu_s, 4),
                     "machine_busy": round((busy1 - busy0) / max(1, total1 - total0), 4)})
    # The share of each window in which an all-reduce of this rank ran (the link's busy time, as
    # far as the calls show it), and how many there were.
    calls = flight_allreduces(recorder) if recorder else []
    if recorder:
        shutil.rmtree(os.path.dirname(recorder), ignore_errors=True)  # the mapping stays valid
    median = median_by_size(calls)
    for row in rows:
        lo, hi = row.pop("span_ns")
        if calls:
            row["allreduce_busy_s"] = round(busy_seconds(calls, lo, hi), 4)
            row["allreduce_calls"] = sum(1 for a, b, _ in calls if lo <= a and b <= hi)
            slowest_s, slowest_bytes, excess_s = stalls(calls, median, lo, hi)
            row.update(allreduce_slowest_s=round(slowest_s, 4), allreduce_slowest_bytes=slowest_bytes,
                       allreduce_beyond_median_s=round(excess_s, 4))
        if rank == 0:
            print(json.dumps(row), flush=True)
    if rank == 0:
        print(json.dumps({"bench": "ddp", "label": args.label, "model": args.model, "summary": True,
                          "parameters": params, "gradient_bytes": 4 * params, "world": world, "batch": args.batch,
                          "windows": args.windows, "steps": args.steps,
                          "samples_per_s_median": round(statistics.median(rates), 3),
                          "samples_per_s": [round(r, 3) for r in rates], "backend": description,
                          "wire_dtype": os.environ.get("COHORT_WIRE_DTYPE", "")}), flush=True)
    dist.destroy_process_group()


def run_allreduce(args):
    import torch
    dist, description = init(args)
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"# {description}", flush=True)
    for size in parse_sizes(args.sizes):
        count = size // 4
        buf = torch.empty(count, dtype=torch.float32)
        pattern = (torch.arange(count, dtype=torch.int64) % 7 + 1).to(torch.float32) * (rank + 1)
        iters = args.iters
        for _ in range(args.warmup):
            buf.copy_(pattern)
            dist.all_reduce(buf)
        # Cap the timed iterations of large sizes on slow links (one timed call decides).
        if args.max_seconds_per_size > 0:
            start = time.perf_counter()
            dist.all_reduce(buf)
            one = time.perf_counter() - start
            iters = max(1, min(iters, int(args.max_seconds_per_size / max(one, 1e-9))))
        limit = torch.tensor([iters], dtype=torch.int64)
        dist.all_reduce(limit, op=dist.ReduceOp.MIN)  # every rank runs as many calls
        iters = int(limit.item())
        wrong = 0
        if args.check:
            buf.copy_(pattern)
            dist.all_reduce(buf)
            want = (torch.arange(count, dtype=torch.int64) % 7 + 1).to(torch.float32) * (world * (world + 1) // 2)
            wrong = int((buf != want).sum().item())
        dist.barrier()
        calls = []
        start = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
            calls.append(time.perf_counter())
        mean_s = (calls[-1] - start) / iters
        # Each call's own time (rank 0's): a mean well above the median is a few stalled calls.
        calls = [b - a for a, b in zip([start] + calls, calls)]
        worst = torch.tensor([mean_s, float(wrong)], dtype=torch.float64)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        if rank == 0:
            time_us = float(worst[0]) * 1e6
            algbw = size / (time_us * 1e-6) / 1e9
            print(json.dumps({"impl": args.label, "algo": os.environ.get("COHORT_ALLREDUCE_ALGORITHM", "auto"),
                              "size": size, "count": count, "type": "float", "time_us": round(time_us, 2),
                              "algbw_GBps": round(algbw, 4), "busbw_GBps": round(algbw * 2 * (world - 1) / world, 4),
                              "wrong": int(worst[1]), "iters": iters,
                              "call_us_min": round(min(calls) * 1e6, 1),
                              "call_us_median": round(statistics.median(calls) * 1e6, 1),
                              "call_us_max": round(max(calls) * 1e6, 1)}), flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bench", choices=("ddp", "allreduce"))
    parser.add_argument("--backend", required=True, choices=("gloo", "cohort"))
    parser.add_argument("--label", help="name in the output (default: the backend)")
    parser.add_argument("--timeout", type=float, default=1800, help="process group timeout, seconds")
    parser.add_argument("--python-dir", help="<build>/python, when cohort is not installed")
    parser.add_argument("--model", default="comm", choices=("comm", "compute"))
    parser.add_argument("--batch", type=int, default=16, help="samples per rank and step")
    parser.add_argument("--warmup", type=int, help="untimed steps (ddp, default 3) or calls per size (allreduce, 5)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--windows", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    parser.add_argument("--sizes", default="1M:256M")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--max-seconds-per-size", type=float, default=8)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    args.label = args.label or args.backend
    if args.python_dir:
        sys.path.insert(0, args.python_dir)
    if args.bench == "ddp":
        args.warmup = 3 if args.warmup is None else args.warmup
        run_ddp(args)
    else:
        args.warmup = 5 if args.warmup is None else args.warmup
        run_allreduce(args)


if __name__ == "__main__":
    main()
