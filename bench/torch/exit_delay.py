#!/usr/bin/env python3
"""How long a rank that raises with a collective in flight takes to exit, gloo against cohort.

    /usr/bin/python3 bench/torch/exit_delay.py --python-dir build/python [--busy 25] [--runs 3]

Two ranks on 127.0.0.1 (env://, a 60 s group timeout), once per backend and run: rank 1 issues an
async all-reduce of 4 MiB that rank 0 never makes, then raises; rank 0 sleeps --busy seconds
(computing, say) and exits without calling. Prints, per run, the seconds from rank 1's raise to its
exit. With gloo, and with cohort before its exit hook aborted (653ea22), rank 1's exit waited for
rank 0 to go; a rank that exits at once lets Cohort see the failure at once.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

RANK_CODE = r"""
import datetime, sys, time
sys.path.insert(0, sys.argv[1])
import torch, torch.distributed as dist
import cohort.torch  # noqa: F401
dist.init_process_group(sys.argv[2], init_method="env://", timeout=datetime.timedelta(seconds=60))
if dist.get_rank() == 1:
    dist.all_reduce(torch.ones(1 << 20), async_op=True)
    print(f"raised {time.time():.3f}", flush=True)
    raise RuntimeError("rank 1 fails with an all-reduce in flight (on purpose)")
time.sleep(float(sys.argv[3]))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_run(python_dir, backend, busy):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2")
    ranks = [subprocess.Popen([sys.executable, "-c", RANK_CODE, python_dir, backend, str(busy)],
                              env=dict(env, RANK=str(r)), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True) for r in range(2)]
    out, _ = ranks[1].communicate()
    exited = time.time()
    ranks[0].wait()
    raised = [float(line.split()[1]) for line in out.splitlines() if line.startswith("raised ")]
    if ranks[1].returncode != 1 or not raised:
        raise SystemExit(f"{backend}: rank 1 ended with code {ranks[1].returncode} without raising")
    return exited - raised[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python-dir", required=True, help="<build>/python")
    parser.add_argument("--busy", type=float, default=25, help="seconds rank 0 stays busy")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for backend in ("gloo", "cohort"):
        delays = [one_run(args.python_dir, backend, args.busy) for _ in range(args.runs)]
        print(f"{backend}: rank 1 exited {statistics.median(delays):.2f} s after raising (median of "
              f"{args.runs}: {', '.join(f'{d:.2f}' for d in delays)}); rank 0 busy {args.busy:g} s", flush=True)


if __name__ == "__main__":
    main()
