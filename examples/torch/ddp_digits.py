#!/usr/bin/python3
"""Data-parallel training of a digits classifier with torch.distributed, written the way users
write DDP scripts: nothing in it knows about Cohort beyond the environment every managed service
sets (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK, AIP_CHECKPOINT_DIR, AIP_MODEL_DIR).

- The process group comes from `init_method="env://"`; --backend picks gloo (the default) or
  cohort (Cohort's Reduction Server backend, registered by `import cohort.torch`).
- The model is an MLP built in code; the data is the digits set (1797 8x8 images) that Debian's
  python3-sklearn installs, or generated data with --data=synthetic. Nothing is downloaded.
- A DistributedSampler gives each rank its share of every epoch.
- After every epoch rank 0 writes a checkpoint to $AIP_CHECKPOINT_DIR/epoch-<N>.pt (a temporary
  file, fsync, rename); at start the newest checkpoint that loads is resumed from, and the log
  says which ("resumed from epoch N") or that training starts from scratch.
- Rank 0 logs the test accuracy after every epoch and at the end, then saves the model to
  $AIP_MODEL_DIR/model.pt. Every rank ends by logging a SHA-256 of its parameters' bytes: data
  parallelism keeps one model, so the ranks' digests must agree.

Exit codes: 0 done; 1 an error (a lost peer surfaces as gloo's RuntimeError; --fail-at-epoch);
2 bad arguments or unreadable data.
"""
import argparse
import datetime
import gzip
import hashlib
import os
import re
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

DIGITS_CSV = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
CHECKPOINT_NAME = re.compile(r"^epoch-(\d+)\.pt$")


def parse_args():
    p = argparse.ArgumentParser(description="DDP training of a digits MLP.")
    p.add_argument("--backend", default="gloo",
                   help="torch.distributed backend: gloo, or cohort (needs the cohort package)")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32, help="per replica")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--seed", type=int, default=0, help="model initialisation and data order")
    p.add_argument("--data", default=DIGITS_CSV,
                   help="digits CSV (gzip'd or plain: 64 pixel columns, then the label), "
                        "or 'synthetic'")
    p.add_argument("--checkpoint-dir", default=os.environ.get("AIP_CHECKPOINT_DIR", "checkpoints"))
    p.add_argument("--model-dir", default=os.environ.get("AIP_MODEL_DIR", "model"))
    p.add_argument("--timeout", type=float, default=600,
                   help="seconds a collective may wait for its peers")
    p.add_argument("--step-delay", type=float, default=0.0,
                   help="seconds to sleep after each step: stands in for a bigger model, so that "
                        "tests and demos can act in the middle of training")
    p.add_argument("--fail-at-epoch", type=int, default=0,
                   help="the replica of rank --fail-rank exits 1 as it starts this epoch "
                        "(1-based; 0: never): a bug of the script, for tests")
    p.add_argument("--fail-rank", type=int, default=0)
    args = p.parse_args()
    if args.epochs < 1 or args.batch_size < 1 or args.hidden < 1 or args.step_delay < 0:
        p.error("--epochs, --batch-size and --hidden must be positive, --step-delay not negative")
    return args


def fail_usage(message):
    print(message, file=sys.stderr, flush=True)
    sys.exit(2)


def load_digits(path):
    """(features [n, 64] float32 in [0, 1], labels [n] int64)."""
    if path == "synthetic":
        g = torch.Generator().manual_seed(1234)
        centers = torch.rand(10, 64, generator=g)
        labels = torch.randint(0, 10, (1800,), generator=g)
        features = (centers[labels] + 0.25 * torch.randn(1800, 64, generator=g)).clamp(0, 1)
        return features, labels
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            rows = np.loadtxt(f, delimiter=",", dtype=np.float32, ndmin=2)
    except (OSError, ValueError) as e:
        fail_usage("cannot read the digits data %s: %s (--data=synthetic generates data)" %
                   (path, e))
    if rows.shape[1] != 65 or rows.shape[0] == 0:
        fail_usage("%s: expected rows of 64 pixels and a label, got %d columns in %d rows" %
                   (path, rows.shape[1], rows.shape[0]))
    return torch.from_numpy(rows[:, :64] / 16.0), torch.from_numpy(rows[:, 64].astype(np.int64))


def split_train_test(features, labels):
    """A fixed split (independent of --seed): every run and every rank sees the same test set."""
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(42))
    n_test = len(labels) // 5
    test, train = order[:n_test], order[n_test:]
    return (features[train], labels[train]), (features[test], labels[test])


def build_model(hidden):
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 10))


def checkpoints_newest_first(directory):
    """[(epoch, path)] of the committed checkpoints in `directory`, newest first."""
    found = []
    if os.path.isdir(directory):
        for name in os.listdir(directory):
            match = CHECKPOINT_NAME.match(name)
            if match:
                found.append((int(match.group(1)), os.path.join(directory, name)))
    return sorted(found, reverse=True)


def newest_loadable_checkpoint(directory):
    """(epoch, path) of the newest checkpoint that loads, or (0, "") when there is none."""
    for epoch, path in checkpoints_newest_first(directory):
        try:
            torch.load(path, map_location="cpu")
            return epoch, path
        except Exception as e:  # a damaged file: say so and try the one before it
            print("skipping checkpoint %s: %s" % (path, e), flush=True)
    return 0, ""


def save_checkpoint(directory, epoch, model, optimizer):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "epoch-%d.pt" % epoch)
    tmp = os.path.join(directory, ".epoch-%d.pt.tmp" % epoch)
    with open(tmp, "wb") as f:
        torch.save({"epoch": epoch, "model": model.state_dict(),
                    "optimizer": optimizer.state_dict()}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def accuracy(model, features, labels, device):
    model.eval()
    with torch.no_grad():
        predicted = model(features.to(device)).argmax(dim=1).cpu()
    model.train()
    return (predicted == labels).float().mean().item()


def main():
    args = parse_args()
    if args.backend == "cohort":
        import cohort.torch  # noqa: F401  registers the "cohort" backend
    (train_x, train_y), (test_x, test_y) = split_train_test(*load_digits(args.data))

    dist.init_process_group(args.backend, init_method="env://",
                            timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        # torchrun shows a process every GPU of its node, Cohort (as Vertex) only the replica's
        # own: LOCAL_RANK picks among the visible ones either way.
        device = torch.device("cuda", local_rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    # torchrun's view of the launch, which Cohort gives its replicas too.
    print("rank %d/%d local rank %d/%s node %s/%s backend %s device %s restart %s torchelastic %s" %
          (rank, world, local_rank, os.environ.get("LOCAL_WORLD_SIZE", "?"),
           os.environ.get("GROUP_RANK", "?"), os.environ.get("GROUP_WORLD_SIZE", "?"), args.backend,
           device, os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"),
           dist.is_torchelastic_launched()), flush=True)

    torch.manual_seed(args.seed)
    model = build_model(args.hidden).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    # Rank 0 picks the checkpoint, so that every rank resumes from the same one.
    choice = [newest_loadable_checkpoint(args.checkpoint_dir) if rank == 0 else None]
    dist.broadcast_object_list(choice, src=0)
    start_epoch, path = choice[0]
    if path:
        state = torch.load(path, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        print("resumed from epoch %d (%s)" % (start_epoch, path), flush=True)
    else:
        print("no checkpoint in %s: starting from scratch" % args.checkpoint_dir, flush=True)

    ddp = DistributedDataParallel(model)
    dataset = TensorDataset(train_x, train_y)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True,
                                 seed=args.seed)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

    for epoch in range(start_epoch + 1, args.epochs + 1):
        if epoch == args.fail_at_epoch and rank == args.fail_rank:
            print("rank %d failing on purpose at epoch %d (--fail-at-epoch)" % (rank, epoch),
                  flush=True)
            sys.exit(1)
        sampler.set_epoch(epoch)
        loss_sum = torch.zeros(2, device=device)  # sum of losses, number of batches
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
            loss_sum += torch.stack([loss.detach(), torch.ones((), device=device)])
            if args.step_delay > 0:
                time.sleep(args.step_delay)
        dist.all_reduce(loss_sum)
        test_accuracy = accuracy(model, test_x, test_y, device)
        if rank == 0:
            save_checkpoint(args.checkpoint_dir, epoch, model, optimizer)
            print("epoch %d/%d loss %.4f test accuracy %.4f" %
                  (epoch, args.epochs, (loss_sum[0] / loss_sum[1]).item(), test_accuracy),
                  flush=True)

    final_accuracy = accuracy(model, test_x, test_y, device)
    if rank == 0:
        os.makedirs(args.model_dir, exist_ok=True)
        torch.save(model.state_dict(), os.path.join(args.model_dir, "model.pt"))
    print("final test accuracy %.4f" % final_accuracy, flush=True)
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().cpu().contiguous().numpy().tobytes())
    print("parameters sha256 %s" % digest.hexdigest(), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
