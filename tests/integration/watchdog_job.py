#!/usr/bin/env python3
"""A replica for the hang watchdog's integration tests (tests/integration/watchdog_test.cc).

--mode=logs: prints a line every 0.1 s for --steps steps, then exits 0; on its first attempt
  (COHORT_RESTART_COUNT=0) it stops printing after --stall-at steps and sleeps (a replica stuck
  outside any collective), having printed "stalled at <unix ms>".
--mode=allreduce: all-reduces a float32 array --steps times through cohort.collective (operation i
  of the communicator is step i); after every --checkpoint-every steps the chief commits the step to
  $AIP_CHECKPOINT_DIR (a file written, fsynced and renamed), and a restart resumes after the newest
  one. On its first attempt the replica named by --stuck (e.g. worker-2) prints "stalled at <unix
  ms>" and sleeps before step --stall-at. Every rank checks each sum.
--mode=straggler: as allreduce, but the replica named by --stuck sleeps --delay seconds before
  every operation, on every attempt.
"""
import argparse
import os
import sys
import time


def now_ms():
    return int(time.time() * 1000)


def newest_checkpoint(directory):
    best = 0
    if directory and os.path.isdir(directory):
        for name in os.listdir(directory):
            if name.startswith("step-") and not name.endswith(".tmp"):
                best = max(best, int(name[len("step-"):]))
    return best


def commit_checkpoint(directory, step):
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f"step-{step}.tmp")
    with open(tmp, "w") as f:
        f.write(str(step))
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, os.path.join(directory, f"step-{step}"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", required=True)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--stall-at", type=int, default=50)
    p.add_argument("--stuck", default="")
    p.add_argument("--delay", type=float, default=0.2)
    p.add_argument("--checkpoint-every", type=int, default=10)
    args = p.parse_args()
    me = os.environ.get("COHORT_REPLICA", "?")
    first_attempt = os.environ.get("COHORT_RESTART_COUNT", "0") == "0"

    if args.mode == "logs":
        import cohort._stack_dump
        cohort._stack_dump.register()
        for step in range(args.steps):
            if first_attempt and step == args.stall_at:
                print(f"stalled at {now_ms()}", flush=True)
                time.sleep(3600)
            print(f"{me} step {step}", flush=True)
            time.sleep(0.1)
        return 0

    import numpy as np
    from cohort.collective import Communicator

    checkpoints = os.environ.get("AIP_CHECKPOINT_DIR", "")
    start = newest_checkpoint(checkpoints)
    print(f"{me}: starting at step {start} (attempt {os.environ.get('COHORT_RESTART_COUNT')})",
          flush=True)
    with Communicator.from_env() as comm:
        rank, size = comm.rank, comm.size
        data = np.zeros(1 << 16, dtype=np.float32)
        for step in range(start, args.steps):
            if me == args.stuck:
                if args.mode == "straggler":
                    time.sleep(args.delay)
                elif first_attempt and step == args.stall_at:
                    print(f"stalled at {now_ms()}", flush=True)
                    time.sleep(3600)
            data.fill(rank + 1)
            comm.allreduce(data)
            want = size * (size + 1) / 2
            if not np.all(data == want):
                print(f"{me}: step {step}: wrong sum {data[0]} (want {want})", flush=True)
                return 1
            if rank == 0 and (step + 1) % args.checkpoint_every == 0:
                commit_checkpoint(checkpoints, step + 1)
            if step % 10 == 0:
                print(f"{me} step {step}", flush=True)
    print(f"{me}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
