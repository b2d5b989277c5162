#!/usr/bin/env python3
"""The stock DDP script (examples/torch/ddp_digits.py) on the `cohort` backend under torch's own
launcher, torchrun (`python3 -m torch.distributed.run`), in real processes on 127.0.0.1:

    torchrun_check.py --python-dir <build>/python --script examples/torch/ddp_digits.py SCENARIO

Scenarios:

  static   two torchrun agents (--nnodes 2, --node_rank 0 and 1, --nproc_per_node 2) meet at
           --master_addr/--master_port (torchrun's static rendezvous, whose store the first agent
           hosts) and run the script with --backend cohort; COHORT_NUM_REDUCERS=2 and two
           `python3 -m cohort.torch.reducer --store MASTER_ADDR:MASTER_PORT`. Every agent exits 0;
           the four ranks report torchrun's view (rank r/4, local rank, node, torchelastic True) and
           one parameters digest; each reducer served one session of 4 workers and left by itself
           (exit 0) once the store was gone.
  restart  the same with --max_restarts 1: once rank 0 has written epoch 2's checkpoint, rank 3's
           process is SIGKILLed. torchrun stops the other workers and starts all four again
           (restart 1); the script resumes from its newest checkpoint and finishes, every agent
           exits 0, the four ranks of the restart agree on the digest, and each reducer served the
           second session too (the agent's store outlives the attempt, so the reducers follow it).
  c10d     torchrun's c10d rendezvous (one agent, 3 ranks): there the workers' store is rank 0's,
           at a port torchrun picks. Without reducers the job runs (ring or halving-doubling; one
           digest). With COHORT_NUM_REDUCERS=1 and no reducer, init_process_group fails before its
           5 s timeout has long passed, naming the store's address and the static rendezvous.

Debian 12's torch 1.13 under Python 3.11 ships a torchrun that fails at start (its Std.from_str
returns None for "0"; AttributeError in to_map): this check then passes `--redirects 9:1 --tee 9:1`
(a local rank no worker has, so every worker keeps its output as it is), which torchrun accepts on
every version; the README says so too.

Exit status 77 (ctest's SKIP_RETURN_CODE) with the reason when torch, torchrun or the backend is
absent.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from torch_backend_check import SKIP, Checker, free_port  # this folder's

DEADLINE_S = 200


def torchrun_workaround():
    """torchrun's flags that get Debian's torch 1.13 under Python 3.11 past its start (see above)."""
    from torch.distributed.elastic.multiprocessing.api import Std
    if Std.from_str("0") is None:
        return ["--redirects", "9:1", "--tee", "9:1"]
    return []


class Run:
    """Agents and reducers of one scenario; their output goes to files under `out`."""

    def __init__(self, args, out, env):
        self.args = args
        self.out = out
        self.env = env
        self.procs = []  # (name, Popen, log path)

    def start(self, name, command, extra_env=None):
        path = os.path.join(self.out, name + ".log")
        log = open(path, "a")  # O_APPEND: the agent and its workers write whole lines to it
        p = subprocess.Popen(command, env=dict(self.env, **(extra_env or {})), stdout=log,
                             stderr=subprocess.STDOUT, cwd=self.out, start_new_session=True)
        self.procs.append((name, p, path))
        return p

    def agent(self, name, torchrun_args, script_args):
        # torchrun's own log folders (a fresh /tmp/torchelastic_* per start otherwise, never removed).
        log_dir = os.path.join(self.out, name + "-elastic")
        return self.start(name, [sys.executable, "-m", "torch.distributed.run", "--log_dir", log_dir] +
                          torchrun_workaround() + torchrun_args + [self.args.script] + script_args)

    def reducer(self, name, store, rejoin=10):
        return self.start(name, [sys.executable, "-m", "cohort.torch.reducer", "--store", store,
                                 "--timeout", "60", "--rejoin", str(rejoin)])

    def wait(self):
        """Exit codes by name; each process gets what is left of the deadline, then is killed."""
        deadline = time.time() + DEADLINE_S
        codes = {}
        for name, p, _ in self.procs:
            try:
                codes[name] = p.wait(timeout=max(1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                codes[name] = f"killed after {DEADLINE_S} s"
                p.wait()
        return codes

    def log(self, name):
        with open(os.path.join(self.out, name + ".log")) as f:
            return f.read()

    def dump(self):
        for name, _, path in self.procs:
            with open(path) as f:
                sys.stdout.write("".join(f"[{name}] {line}\n" for line in f.read().splitlines()))


# The ranks of one agent share its output, and a print may reach it in two writes (the text, then
# its newline), so one rank's line can end up inside another's: the patterns are not anchored.
def digests(text):
    return re.findall(r"parameters sha256 ([0-9a-f]{64})", text)


def launch_lines(text):
    """The script's first line per rank: (rank, world, local rank, local world, node, nodes,
    restart, torchelastic)."""
    pattern = (r"rank (\d+)/(\d+) local rank (\d+)/(\S+) node (\S+)/(\S+) backend cohort device \S+ "
               r"restart (\d+) torchelastic (True|False)")
    return re.findall(pattern, text)


def check_reducers(check, run, names, sessions, workers):
    for name in names:
        text = run.log(name)
        served = re.findall(r"session \S+: reducer \d of \d+ for (\d+) workers", text)
        check.expect(len(served) == sessions and all(int(w) == workers for w in served),
                     f"{name} served {len(served)} sessions ({served}), expected {sessions} of {workers} workers")
        check.expect(re.search(r"the store (at \S+ )?is gone|no new session", text) is not None,
                     f"{name} did not say why it left")


def rank_launches(check, launches, world, restart):
    ranks = sorted(int(r) for r, w, *_ in launches if int(w) == world)
    check.expect(ranks == list(range(world)), f"restart {restart}: ranks {ranks} started, expected 0..{world - 1}")
    for rank, w, local, local_world, node, nodes, rs, elastic in launches:
        check.expect(elastic == "True", f"rank {rank} does not take itself for a torchrun worker")
        check.expect(int(local) == int(rank) % 2 and local_world == "2" and int(node) == int(rank) // 2
                     and nodes == "2", f"rank {rank}: local rank {local}/{local_world} node {node}/{nodes}")


def scenario_static(args, run, port, restart):
    store = f"127.0.0.1:{port}"
    for i in range(2):
        # After the kill, torchrun restarts its workers only once every rank has failed and its
        # rendezvous is done again, which may take tens of seconds on a loaded machine: the
        # reducers wait that long for the restart's session.
        run.reducer(f"reducer{i}", store, rejoin=60 if restart else 10)
    torchrun = ["--nnodes", "2", "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(port)]
    if restart:
        torchrun += ["--max_restarts", "1"]
    script = ["--backend", "cohort", "--epochs", "5" if restart else "3", "--checkpoint-dir", "ckpt",
              "--model-dir", "model", "--timeout", "60"]
    if restart:
        script += ["--step-delay", "0.01"]  # an epoch long enough to kill a rank in it
    agents = [run.agent(f"node{n}", torchrun + ["--node_rank", str(n)], script) for n in range(2)]
    killed = None
    if restart:
        killed = kill_rank_after(run, agents, rank=3, checkpoint=os.path.join(run.out, "ckpt", "epoch-2.pt"))
    codes = run.wait()
    check = Checker(rank=None)
    check.expect(all(code == 0 for code in codes.values()), f"exit codes {codes}, expected 0 everywhere")
    text = run.log("node0") + run.log("node1")
    launches = launch_lines(text)
    if restart:
        check.expect(killed is not None, "rank 3 was never found to be killed")
        first = [line for line in launches if line[6] == "0"]
        again = [line for line in launches if line[6] == "1"]
        rank_launches(check, first, 4, 0)
        rank_launches(check, again, 4, 1)
        resumed = [int(e) for e in re.findall(r"resumed from epoch (\d+)", text)]
        check.expect(len(resumed) == 4 and all(e >= 2 for e in resumed) and len(set(resumed)) == 1,
                     f"after the restart the ranks resumed from epochs {resumed}, expected one epoch >= 2")
        check.expect(re.search(r"epoch 5/5 loss", text) is not None, "epoch 5 never ended")
    else:
        rank_launches(check, launches, 4, 0)
        check.expect("resumed from" not in text, "a fresh run resumed from a checkpoint")
    found = digests(text)
    check.expect(len(found) == 4 and len(set(found)) == 1, f"parameters digests {found}: expected 4 equal")
    check_reducers(check, run, ["reducer0", "reducer1"], 2 if restart else 1, 4)
    return check


def kill_rank_after(run, agents, rank, checkpoint):
    """SIGKILLs the worker process of `rank` (a child of one of `agents`) once `checkpoint` exists;
    returns its pid, or None when the agents ended first."""
    while not os.path.exists(checkpoint):
        if all(a.poll() is not None for a in agents):
            return None
        time.sleep(0.05)
    parents = {a.pid for a in agents}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            continue
        if ppid in parents and f"RANK={rank}".encode() in environ:
            os.kill(int(pid), signal.SIGKILL)
            print(f"killed rank {rank} (pid {pid}) after {os.path.basename(checkpoint)}", flush=True)
            return int(pid)
    return None


def scenario_c10d(args, run, port):
    check = Checker(rank=None)
    torchrun = ["--nnodes", "1", "--nproc_per_node", "3", "--rdzv_backend", "c10d", "--rdzv_endpoint",
                f"127.0.0.1:{port}"]
    script = ["--backend", "cohort", "--epochs", "2", "--checkpoint-dir", "ckpt", "--model-dir", "model"]
    run.agent("ring", torchrun, script + ["--timeout", "60"])
    codes = run.wait()
    check.expect(codes == {"ring": 0}, f"without reducers: exit codes {codes}, expected 0")
    found = digests(run.log("ring"))
    check.expect(len(found) == 3 and len(set(found)) == 1, f"parameters digests {found}: expected 3 equal")

    run.env["COHORT_NUM_REDUCERS"] = "1"
    started = time.time()
    run.agent("no-reducer", torchrun[:-1] + [f"127.0.0.1:{free_port()}"], script + ["--timeout", "5"])
    codes = run.wait()
    took = time.time() - started
    check.expect(codes.get("no-reducer") not in (0, None), f"with a reducer nobody started: exit codes {codes}")
    check.expect(took < 60, f"with a reducer nobody started torchrun took {took:.0f} s")
    text = run.log("no-reducer")
    errors = [line for line in text.splitlines() if line.startswith("RuntimeError: cohort:")]
    check.expect(len(errors) >= 1, "no rank raised the backend's RuntimeError")
    # Every rank says where reducers join; the first to time out (rank 0, which hosts the store)
    # says that none did. The others may instead find the store gone with it ("Broken pipe").
    for line in errors:
        check.expect(re.search(r"python3 -m cohort\.torch\.reducer --store [\w.]+:\d+", line) is not None
                     and "--master_addr" in line, f"the error does not say where reducers join: {line}")
    check.expect(any("reducer 0 never published its address" in line for line in errors),
                 f"no error says that the reducer never came: {errors}")
    return check


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", choices=["static", "restart", "c10d"])
    parser.add_argument("--python-dir", required=True, help="<build>/python")
    parser.add_argument("--script", required=True, help="examples/torch/ddp_digits.py")
    parser.add_argument("--backend-built", default="ON", help="CMake's COHORT_HAVE_TORCH")
    parser.add_argument("--out", help="where the logs go (default: a fresh temporary folder)")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
        import torch.distributed.run  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {sys.executable} has no torch with torchrun ({e}); install python3-torch")
        return SKIP
    if args.backend_built != "ON":
        print(f"SKIP: the cohort torch backend was not built (CMake: Cohort torch backend: {args.backend_built})")
        return SKIP
    import tempfile
    out = args.out or tempfile.mkdtemp(prefix=f"torchrun-{args.scenario}-")
    os.makedirs(out, exist_ok=True)
    args.script = os.path.abspath(args.script)
    args.python_dir = os.path.abspath(args.python_dir)
    env = dict(os.environ)
    env.update({"PYTHONPATH": args.python_dir + os.pathsep + env.get("PYTHONPATH", ""), "COHORT_LOG_LEVEL": "info",
                "OMP_NUM_THREADS": "1"})
    for name in ("COHORT_BOOTSTRAP_ADDR", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        env.pop(name, None)
    if args.scenario == "c10d":
        env.pop("COHORT_NUM_REDUCERS", None)
    else:
        env.update({"COHORT_NUM_REDUCERS": "2", "COHORT_ALLREDUCE_ALGORITHM": "reduction-server"})
    run = Run(args, out, env)
    port = free_port()
    if args.scenario == "c10d":
        check = scenario_c10d(args, run, port)
    else:
        check = scenario_static(args, run, port, restart=args.scenario == "restart")
    run.dump()
    if check.failures:
        print(f"FAILED: {len(check.failures)} of {check.checks} checks (logs in {out})")
        return 1
    if not args.out:
        shutil.rmtree(out, ignore_errors=True)
    print(f"PASSED: {args.scenario}, {check.checks} checks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
