#!/usr/bin/python3
"""Runs a training script unchanged, with one replica stalling as a stuck data loader would.

    ddp_stall.py SCRIPT [ARGS...]

runs SCRIPT as `python3 SCRIPT ARGS...` would (runpy, as __main__). When the environment names
this replica (DDP_STALL_REPLICA equal to COHORT_REPLICA) and this is the job's first attempt
(COHORT_RESTART_COUNT 0), the DDP_STALL_AT_STEP-th forward pass of a DistributedDataParallel
model (1-based) prints "stalled at <unix ms> before step <n>" and sleeps for an hour instead:
the replica stays alive and never enters the all-reduce of that step's gradients, while its peers
wait in it. The job's test (tests/integration/watchdog_test.cc) sets the variables for one pool
and names the replica, so the script itself stays as users write it.
"""
import os
import runpy
import sys
import time


def install_stall():
    replica = os.environ.get("COHORT_REPLICA", "")
    if not replica or os.environ.get("DDP_STALL_REPLICA") != replica:
        return
    if os.environ.get("COHORT_RESTART_COUNT", "0") != "0":
        return
    at_step = int(os.environ["DDP_STALL_AT_STEP"])
    from torch.nn.parallel import DistributedDataParallel

    forward = DistributedDataParallel.forward
    steps = [0]

    def stalling_forward(self, *args, **kwargs):
        steps[0] += 1
        if steps[0] == at_step:
            print("%s: stalled at %d before step %d" % (replica, int(time.time() * 1000), at_step),
                  flush=True)
            time.sleep(3600)
        return forward(self, *args, **kwargs)

    DistributedDataParallel.forward = stalling_forward


def main():
    if len(sys.argv) < 2:
        print("usage: ddp_stall.py SCRIPT [ARGS...]", file=sys.stderr)
        sys.exit(2)
    install_stall()
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
