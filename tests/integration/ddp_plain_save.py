#!/usr/bin/python3
"""A DDP script that checkpoints as the PyTorch tutorials do: after each epoch rank 0 calls
torch.save() straight into $AIP_CHECKPOINT_DIR/epoch_<N>.pt (no temporary file, no rename), and at
start every rank loads the highest-numbered epoch_*.pt there. A save cut short by a lost node or a
stop therefore stops the next start: torch.load raises on the torn file, every node healthy.
tests/integration/torch_ddp_test.cc runs it under Cohort, whose agents set such a file aside before
the whole job restarts (agent/torn_checkpoints.h).

    ddp_plain_save.py [--epochs N] [--step-delay SECONDS] [--snapshot PATH]

With --snapshot it saves as torchrun's fault-tolerance tutorial does instead: rank 0 torch.save()s
the state into PATH (a relative path: the working directory) after each epoch, overwriting it, and
every rank starts from PATH when it exists ("resumed from epoch N (PATH)").

gloo, init_method env://, a small MLP on seeded synthetic data. Prints "starting from scratch" or
"resumed from epoch N (PATH)", "epoch E/N loss L" on rank 0, and "parameters sha256 DIGEST".
"""
import argparse
import datetime
import glob
import hashlib
import os
import re
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--step-delay", type=float, default=0.0)
    parser.add_argument("--snapshot", default="")
    args = parser.parse_args()

    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    checkpoint_dir = os.environ["AIP_CHECKPOINT_DIR"]

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    start = 0
    latest = None
    if args.snapshot:
        latest = args.snapshot if os.path.exists(args.snapshot) else None
    else:
        checkpoints = glob.glob(os.path.join(checkpoint_dir, "epoch_*.pt"))
        if checkpoints:
            latest = max(checkpoints,
                         key=lambda p: int(re.search(r"epoch_(\d+)\.pt$", p).group(1)))
    if latest:
        state = torch.load(latest)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["epoch"]
        print("resumed from epoch %d (%s)" % (start, latest), flush=True)
    else:
        print("starting from scratch", flush=True)

    ddp = DistributedDataParallel(model)
    data = torch.Generator().manual_seed(1)
    batch = 32
    steps = 10  # per rank and epoch: every rank makes the same number of all-reduces
    x = torch.randn(steps * batch * world, 32, generator=data)
    y = x[:, :4].argmax(dim=1)
    for epoch in range(start + 1, args.epochs + 1):
        total = torch.zeros(2)
        for first in range(rank * batch, len(x), world * batch):
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp(x[first:first + batch]), y[first:first + batch])
            loss.backward()
            optimizer.step()
            total += torch.stack([loss.detach(), torch.ones(())])
            if args.step_delay > 0:
                time.sleep(args.step_delay)
        dist.all_reduce(total)
        if rank == 0:
            path = args.snapshot or os.path.join(checkpoint_dir, "epoch_%d.pt" % epoch)
            if not args.snapshot:
                os.makedirs(checkpoint_dir, exist_ok=True)
            torch.save({"epoch": epoch, "model": model.state_dict(),
                        "optimizer": optimizer.state_dict()}, path)
            print("epoch %d/%d loss %.4f" % (epoch, args.epochs, (total[0] / total[1]).item()),
                  flush=True)

    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().contiguous().numpy().tobytes())
    print("parameters sha256 %s" % digest.hexdigest(), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
