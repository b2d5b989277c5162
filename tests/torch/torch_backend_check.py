#!/usr/bin/env python3
"""The `cohort` torch.distributed backend (python/cohort/torch) end to end, in real processes.

    torch_backend_check.py --python-dir <build>/python [--backend-built ON|OFF] SCENARIO

starts the workers of SCENARIO on 127.0.0.1 as a launcher would (MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE), with `python3 -m cohort.torch.reducer` processes where the scenario has reducers, and
exits 0 when every worker did, and every reducer exited as the session it served ended (1 where
the scenario fails it: a dead worker, workers that disagree, an aborted one; else 0). Scenarios:

  ops           every ProcessGroup operation on the cohort backend against torch's gloo backend
                (a gloo group over the same ranks, same inputs) and the exact result every rank
                computes from the others' (deterministic) inputs: exact for integers and byte
                moves, within rounding for float reductions; int8/uint8/int16/bool reductions;
                sparse all-reduce; torch 2.x's coalesced all-gathers into tensors and
                reduce-scatters of tensors, and its functional collectives; also a cohort subgroup
  ops-reducers  the same on the Reduction Server (2 reducers, algorithm pinned); results must also
                be byte-identical on every rank
  ddp           DDP training of a small MLP on the Reduction Server (2 reducers), plain, with
                bf16_compress_hook, fp16_compress_hook and PowerSGD, and with torch's
                ZeroRedundancyOptimizer (optimizer state sharded, parameters broadcast from their
                owners): the loss falls, every rank ends with byte-identical parameters, and
                without a hook they match DDP on gloo
  ddp-loops     DDP loops beyond the plain step on the Reduction Server, each against gloo:
                no_sync(), find_unused_parameters, Join over uneven inputs, static_graph,
                gradient_as_bucket_view, an nn.Embedding(sparse=True) (its gradients all-reduced
                as sparse tensors), and BatchNorm buffers broadcast from rank 0 before each forward
  objects       the object collectives, batch_isend_irecv and recv from any rank; results the
                backend writes back land in parameters that require grad and in tensors made under
                torch.inference_mode()
  file-store    init_method file://: reducers asked for are refused at once, naming the FileStore
                (no reducer can join one; nor a HashStore); without them the group all-reduces and
                DDP trains as on gloo
  spawn         the DDP tutorial's launch: torch.multiprocessing.spawn starts three ranks in fresh
                interpreters, each joins with the rank spawn gives it and trains DDP as on gloo
  fsdp          FSDP2's fully_shard and FSDP1 train a small MLP to gloo's parameters (torch 2.6 on;
                skips on older torch, saying why)
  tensor-parallel  a 2x2 mesh: tensor parallelism (DTensor) by data parallelism (fully_shard, or
                gradients all-reduced over the dp group where fully_shard fails on CPU) ends at the
                parameters of one process's training, and torch.distributed.checkpoint saves and
                restores the sharded model exactly (torch 2.2 on)
  pipeline      torch.distributed.pipelining's schedules (GPipe, 1F1B, interleaved 1F1B, looped
                BFS, zero bubble) train a small MLP cut into stages to the parameters one process
                training the whole model ends with (torch 2.6 on)
  compile       torch.compile with DDP on the Reduction Server (2 reducers), against gloo: DDP over a
                compiled module (dynamo's DDPOptimizer cuts the graph at DDP's buckets), and compiled
                autograd with DDP's python reducer (the all-reduces traced into the backward graph
                as functional collectives) (torch 2.6 on)
  backend-strings  "cpu:cohort,cuda:gloo" and "cpu:gloo,cuda:cohort" (torch 2.x's backend per
                device): CPU tensors go to the backend named for the CPU (torch 2.6 on)
  debug-detail  TORCH_DISTRIBUTED_DEBUG=DETAIL: DDP trains; the group's sequence number counts
                collectives alike on every rank; on torch 2.x, whose wrapper checks each
                collective first, a collective that differs across ranks raises naming both
  wire-bf16     wire compression chosen with cohort.torch.Options(wire_dtype="bf16"): float32
                all-reduces on the Reduction Server come back identical on every rank, in bf16,
                within one rounding of each input and of the result; float64 untouched; DDP trains
  wire-f16      the same with COHORT_WIRE_DTYPE=f16 (all-reduces only)
  cuda          allreduce, broadcast and allgather of CUDA tensors (staged through pinned host
                memory) give what CPU tensors give; skips where torch has no CUDA or no GPU
  bad-use       unsupported op, dtype (complex), tensor count, root, output shape: a clear
                RuntimeError on the calling rank, and the group still works; once shut down, it
                still describes itself and refuses operations by name
  mismatch      ranks pass different sizes (allreduce, allgather, sparse allreduce): every rank
                fails with an error naming a rank that disagrees, before the timeout; the
                all-reduce is the ring's, whose exchanges carry the ranks' calls
  mismatch-check-calls  the same with COHORT_TORCH_CHECK_CALLS=1: the backend's all-gather of
                the ranks' calls names the rank, and tells int8 from uint8 tensors, which the
                library reduces alike
  mismatch-shared-memory  the same on one host's shared memory (kAuto's choice), which compares
                the ranks' calls itself
  mismatch-reducers  the same with the all-reduce on the Reduction Server (2 reducers), where the
                reducers' verdicts, not the backend's all-gather, name the rank
  mismatch-recursive-doubling  the same by recursive doubling, whose exchanges carry the ranks'
                calls (no all-gather before)
  mismatch-sizes  over TCP (no shared memory), kAuto: ranks 0 and 1 all-reduce 1000 elements
                (recursive doubling), rank 2 100000 (the ring): the two algorithms never meet,
                and every rank still fails naming a rank that differs, not at the timeout
  mismatch-sizes-reducers  the same with 2 reducers: rank 2's call goes to the Reduction Server
  mismatch-collectives  rank 1 calls barrier where ranks 0 and 2 all-reduce (one host: the
                shared-memory all-reduce): every rank fails quoting the other side's call, not at
                the timeout
  mismatch-collectives-reducers  the same over TCP with 2 reducers (the Reduction Server)
  mismatch-order  rank 0 broadcasts (as the root) and then all-reduces, ranks 1 and 2 the other
                way round (one host: the shared-memory all-reduce): rank 0's broadcast ends at
                once, and every rank fails quoting the other side's call, not at the timeout
  mismatch-order-tcp  the same over TCP (no shared memory)
  mismatch-order-reducers  the same with 2 reducers, the all-reduce on the Reduction Server (whose
                reducers take the workers' calls in order: they see rank 0's second call beside
                the others' first)
  mismatch-roots  ranks 0 and 1 broadcast from rank 0, rank 2 from rank 1, then all enter a
                barrier: every rank fails quoting both roots, not at the timeout
  mismatch-own-roots  every rank broadcasts from itself (src=rank: the broadcast ends at once on
                every rank), then all-reduces: every rank's all-reduce fails quoting its own
                broadcast, the call before (-tcp: over TCP; -reducers: on the Reduction Server)
  no-join       one rank never starts: the others' init_process_group fails within the timeout,
                naming what is missing
  silent-peer   a rank stays alive but never calls: the others' allreduce fails at the timeout,
                naming the peer each waited for
  set-timeout   the same after the group's timeout was shortened (torch.distributed.set_timeout,
                2.6's _set_pg_timeout, or backend_of(group).set_timeout): it fails at the new one
  fork-after-destroy  rank 0 destroys its group while rank 1 is busy (its UCX close still pending),
                then each rank forks a multiprocessing child (fork start method) that builds a
                fresh cohort group with the other's child: the children's all-reduce works
  hf-trainer    Hugging Face's Trainer on a default cohort group the script made, the Reduction
                Server (2 reducers) under the DDP it builds: a small BERT (built from its config)
                trains as on gloo (where transformers and accelerate are installed: sid)
  cohort-job    the environment of a Cohort job (COHORT_BOOTSTRAP_ADDR; reducers are cohort-reducer
                processes, as an agent starts them): the default group joins the job's store and
                reducer pool, subgroups torch's store
  dead-peer-reducers  a rank dies while the others' all-reduces on the Reduction Server wait for
                it: they fail within the timeout, the first naming the dead rank (over TCP;
                dead-peer-reducers-sm: over one host's shared memory)
  dead-peer-between  a rank dies between steps while the others compute for 4 s: their next
                all-reduce on the Reduction Server raises naming it, not at the group's timeout
                (over TCP; dead-peer-between-sm: over one host's shared memory)
  dead-peer     a rank dies after the first all-reduce: the others' next operation fails within
                the timeout naming it, and later operations fail at once
  abort         a rank aborts its group (torch 2.14's _abort_process_group, else backend_of(group)
                .abort()) with all-reduces in flight and queued that its peer never makes: they
                fail within seconds, not at the timeout; the group refuses more; the peer's next
                all-reduce fails at once naming the aborted rank, which lives on; both ranks then
                make a new group on the same store and all-reduce on it (abort-tcp: over TCP).
                abort-reducers: on the Reduction Server; the aborted rank exits, and the peer's
                next all-reduce fails naming it
  abort-far     a rank of four aborts and lives on during the others' ring all-reduce: the two
                that wait for ranks that gave up (not for it) fail seconds later naming it,
                through the store, not at the timeout
  exit-on-error  a rank raises an unhandled exception with an all-reduce in flight that its peer
                never makes: it exits at once (the exit hook aborts), and the peer's next
                all-reduce fails naming it
  shrink        torch 2.14's shrink_group: a rank aborts and leaves; the other two see it fail,
                shrink the default group without it and go on (all-reduce, broadcast, a DDP step
                against gloo), then shrink once more to a group of one (skips on torch without it)
  flight-recorder  each rank records into its own COHORT_FLIGHT_RECORDER file: every operation
                once (not again by the backend above the Communicator), in order, with the time
                it was queued on the backend's thread; an agreement all-gather before each
                all-reduce (COHORT_TORCH_CHECK_CALLS=1, the ring pinned)
  flight-recorder-reducers  the same on the Reduction Server (1 reducer): no all-gathers
  overlap       all-reduces queued together on the Reduction Server (2 reducers): the next one
                starts (flight recorder) before the one before it has finished, and every result
                is exact, including an all-reduce of a tensor still in flight and of a view of
                it, and a broadcast queued between them
  overlap-off   the same with COHORT_TORCH_OVERLAP=0: no all-reduce starts before the one before
                it has finished
  reducer-sits-out  two reducers (--index 0 and 1) follow the sessions of this process's TCPStore:
                a one-worker group with two reducers whose worker dies after an all-reduce, then
                one with one reducer that finishes. Reducer 1 sits the second out and exits 1, as
                the last session it served ended; reducer 0 exits 0

Exit status 77 (ctest's SKIP_RETURN_CODE) with the reason when torch or the backend is absent.
"""
import argparse
import datetime
import hashlib
import importlib
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import warnings

SKIP = 77
# The process group timeout of the failure scenarios: an error must come before it (plus slack).
FAIL_TIMEOUT_S = 10
SLACK_S = 8


# ----------------------------------------------------------------------------------------------
# Launcher

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# What rank 0's TCPStore says when another process took the free port between free_port() and
# its bind (any connect() on the host may be given it as its ephemeral port).
PORT_TAKEN = "Address already in use"


def launch(args, workers, reducers=0, extra_env=None, absent=(), cohort_job=False):
    """Runs `workers` worker processes (ranks in `absent` are never started) and `reducers`
    reducers; prints their output and returns their exit codes ("rank R", "reducer I") and the
    reducers' output (by the same names): a reducer must leave by itself once the workers have (its
    store gone, or no new session), with the exit of the last session it served.
    Where rank 0 could not bind its store because the port was taken meanwhile, launches again on
    another port (twice at most), saying so."""
    for attempt in range(3):
        codes, outs = launch_once(args, workers, reducers, extra_env, absent, cohort_job)
        if codes.get("rank 0", 0) == 0 or PORT_TAKEN not in outs["rank 0"] or attempt == 2:
            return codes, outs
        print(f"launcher: another process took rank 0's store port; launching again ({attempt + 2}/3)")
    return codes, outs


def launch_once(args, workers, reducers, extra_env, absent, cohort_job):
    """One launch of launch(): the exit codes, rank 0's output and the reducers'."""
    port = free_port()
    base = dict(os.environ)
    base.update({
        "PYTHONPATH": args.python_dir + os.pathsep + base.get("PYTHONPATH", ""),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "WORLD_SIZE": str(workers),
        "COHORT_LOG_LEVEL": "warn",
    })
    base.pop("COHORT_BOOTSTRAP_ADDR", None)
    base["COHORT_NUM_REDUCERS"] = str(reducers)
    if cohort_job:  # what an agent renders for every replica of the job
        base["COHORT_BOOTSTRAP_ADDR"] = f"127.0.0.1:{free_port()}"
        base["COHORT_NUM_WORKERS"] = str(workers)
    base.update(extra_env or {})
    procs = []
    for rank in range(workers):
        if rank in absent:
            continue
        env = dict(base, RANK=str(rank), LOCAL_RANK=str(rank))
        procs.append((f"rank {rank}", subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", args.scenario, "--python-dir", args.python_dir],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    helpers = []
    for i in range(reducers):
        if cohort_job:  # the job's reducer pool: cohort-reducer, as the agent starts it
            command = [args.reducer_bin]
            env = dict(base, COHORT_REDUCER_INDEX=str(i), COHORT_REDUCER_REJOIN_MS="3000")
        else:
            # They end when rank 0's store goes, or past --rejoin without a new session, either way
            # with the exit of the last session they served.
            command = [sys.executable, "-m", "cohort.torch.reducer", "--store", f"127.0.0.1:{port}", "--timeout",
                       "120", "--rejoin", "30"]
            env = base
        helpers.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True))
    codes = {}
    outs = {"rank 0": ""}
    deadline = time.time() + 240
    for name, p in procs:
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += "\n(killed by the launcher after 240 s)"
        codes[name] = p.returncode
        if name == "rank 0":
            outs[name] = out
            if p.returncode != 0 and PORT_TAKEN in out:
                for _, other in procs:  # they wait for a store that never comes
                    if other.poll() is None:
                        other.kill()
        sys.stdout.write("".join(f"[{name}] {line}\n" for line in out.splitlines()))
    reducer_codes, reducer_outs = collect_reducers(helpers, 30)
    codes.update(reducer_codes)
    outs.update(reducer_outs)
    return codes, outs


def collect_reducers(reducers, timeout_s):
    """Waits for each reducer process (one still running `timeout_s` later is killed), prints its
    output, and returns their exit codes and outputs by name ("reducer I")."""
    codes, outs = {}, {}
    for i, h in enumerate(reducers):
        try:
            out, _ = h.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            h.kill()
            out, _ = h.communicate()
            out += f"\n(killed by the launcher {timeout_s} s after the workers ended)"
        codes[f"reducer {i}"] = h.returncode
        outs[f"reducer {i}"] = out
        sys.stdout.write("".join(f"[reducer {i}] {line}\n" for line in out.splitlines()))
    return codes, outs


# ----------------------------------------------------------------------------------------------
# Worker helpers

class Checker:
    def __init__(self, rank):
        self.rank = rank
        self.failures = []
        self.checks = 0

    def expect(self, ok, what):
        """Records a check; returns whether it held."""
        self.checks += 1
        if not ok:
            self.failures.append(what)
            print(f"FAIL: {what}", flush=True)
        return bool(ok)

    def expect_raises(self, fn, fragments, what, errors=(RuntimeError,)):
        """fn() must raise one of `errors` (a RuntimeError) whose message holds every fragment."""
        try:
            fn()
        except errors as e:
            text = str(e).split("\n")[0]
            missing = [f for f in fragments if f not in text]
            self.expect(not missing, f"{what}: error {text!r} lacks {missing}")
            return text
        self.expect(False, f"{what}: no error")
        return None

    def finish(self):
        if self.failures:
            print(f"{len(self.failures)} of {self.checks} checks failed", flush=True)
            return 1
        print(f"all {self.checks} checks passed", flush=True)
        return 0


def inputs(torch, rank, count, dtype, salt):
    """Deterministic per-rank input: every rank can rebuild every other rank's."""
    g = torch.Generator().manual_seed(1000 * salt + rank)
    if dtype.is_floating_point:
        return torch.randn(count, generator=g, dtype=torch.float64).to(dtype)
    return torch.randint(-50, 50, (count,), generator=g, dtype=torch.int64).to(dtype)


def tolerance(torch, dtype, n):
    return {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}.get(dtype, 0) * n


def close(torch, got, want, dtype, n, scale=1.0):
    if not dtype.is_floating_point:
        return torch.equal(got, want)
    tol = tolerance(torch, dtype, n) * max(1.0, scale)
    return bool(torch.allclose(got.double(), want.double(), rtol=tol, atol=tol))


def gloo_reduces(torch, dist, gloo, dtype):
    """Whether the `gloo` group all-reduces `dtype` (which dtypes it has depends on the build)."""
    try:
        dist.all_reduce(torch.zeros(1, dtype=dtype), group=gloo)
        return True
    except RuntimeError:  # "Invalid scalar type", raised alike on every rank
        return False


def digest(tensor):
    return hashlib.sha256(tensor.contiguous().view(-1).view(__import__("torch").uint8).numpy().tobytes()).hexdigest()


def same_on_every_rank(dist, gloo, value):
    """True when every rank passed the same value (gathered over the gloo group)."""
    values = [None] * dist.get_world_size()
    dist.all_gather_object(values, value, group=gloo)
    return all(v == values[0] for v in values)


# ----------------------------------------------------------------------------------------------
# Scenarios (worker side)

def start_training(features, classes, rows_per_rank, seed):
    """The training scenarios' start: the default cohort group (env://, 60 s), a gloo group over
    the same ranks for the reference runs, and one classification set every rank draws alike.
    Returns rank, world size, a Checker, the gloo group, the generator (for more draws), the
    inputs (rows_per_rank rows per rank) and their labels."""
    import torch
    import torch.distributed as dist
    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=60))
    rank, n = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    g = torch.Generator().manual_seed(seed)
    x_all = torch.randn(rows_per_rank * n, features, generator=g)
    y_all = (x_all @ torch.randn(features, classes, generator=g)).argmax(1)
    return rank, n, Checker(rank), gloo, g, x_all, y_all


def expect_learned_as_on_gloo(check, dist, gloo, name, result, reference):
    """A training run on the cohort group (`result`: its parameters and its first and last mean
    losses) lowered its loss and ended at the same run's parameters on gloo (`reference`)."""
    params, first, last = result
    print(f"{name}: loss {first:.3f} -> {last:.3f}", flush=True)
    check.expect(last < first, f"{name}: the loss did not fall ({first:.3f} -> {last:.3f})")
    expect_trained_alike(check, dist, gloo, name, params, reference, atol=1e-5)


def expect_trained_alike(check, dist, gloo, name, params, reference, atol):
    """The parameters a training run ended with are the same bytes on every rank and, given a
    `reference` (the same run on gloo), equal to it within rounding."""
    import torch
    check.expect(same_on_every_rank(dist, gloo, digest(params)), f"{name}: ranks end with different parameters")
    if reference is not None:
        check.expect(bool(torch.allclose(params, reference, rtol=1e-4, atol=atol)),
                     f"{name}: parameters differ from the same run on gloo (max diff "
                     f"{float((params - reference).detach().abs().max()):.2e})")


def scenario_ops():
    """(The launcher's COHORT_NUM_REDUCERS says how many reducers serve the group.)"""
    reducers = int(os.environ["COHORT_NUM_REDUCERS"])
    import torch
    import torch.distributed as dist
    import cohort.torch

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=60))
    rank, n = dist.get_rank(), dist.get_world_size()
    check = Checker(rank)
    pg = dist.distributed_c10d._get_default_group()
    ours = cohort.torch.backend_of(pg)
    print(ours.describe(), flush=True)
    check.expect(ours.num_reducers == reducers, f"the group has {ours.num_reducers} reducers, not {reducers}")
    gloo = dist.new_group(backend="gloo")
    sub = dist.new_group(backend="cohort")
    check.expect(cohort.torch.backend_of(sub).num_reducers == 0, "a subgroup never uses reducers")
    R = dist.ReduceOp
    dtypes = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64)
    # The dtypes this torch's gloo reduces (1.13's: no bfloat16; Debian sid's 2.14: no float16
    # nor bfloat16): the others are checked against the exact results only.
    gloo_dtypes = tuple(d for d in dtypes if gloo_reduces(torch, dist, gloo, d))
    print(f"compared with gloo: {', '.join(str(d) for d in gloo_dtypes)}", flush=True)
    counts = (0, 1, 1001, 300_001)
    salt = 0

    def record_identical(name, t):
        if reducers:
            check.expect(same_on_every_rank(dist, gloo, digest(t)), f"{name}: ranks differ in bytes")

    # allreduce: every dtype and op, against gloo (where it has them) and the exact reduction.
    for dtype in dtypes:
        for op_name, op in (("SUM", R.SUM), ("AVG", R.AVG), ("MIN", R.MIN), ("MAX", R.MAX)):
            for count in counts:
                salt += 1
                name = f"allreduce {op_name} {dtype} x{count}"
                mine = inputs(torch, rank, count, dtype, salt)
                every = torch.stack([inputs(torch, r, count, dtype, salt).double() for r in range(n)])
                want = {"SUM": every.sum(0), "MIN": every.min(0).values if count else every.sum(0),
                        "MAX": every.max(0).values if count else every.sum(0),
                        "AVG": every.sum(0) / n if dtype.is_floating_point else
                        torch.div(every.sum(0), n, rounding_mode="trunc")}[op_name]
                t = mine.clone()
                work = dist.all_reduce(t, op=op, async_op=True)
                work.wait()
                check.expect(close(torch, t, want.to(dtype), dtype, n, float(every.abs().max()) if count else 1.0),
                             f"{name}: differs from the exact reduction")
                if dtype in gloo_dtypes and op_name != "AVG":
                    g = mine.clone()
                    dist.all_reduce(g, op=op, group=gloo)
                    check.expect(close(torch, t, g, dtype, n, float(every.abs().max()) if count else 1.0),
                                 f"{name}: differs from gloo")
                record_identical(name, t)

    # The narrow integers and bool, reduced as int32 and cast back: sums and products wrap as in
    # the narrow type (gloo's too), a bool's SUM/MAX are OR and MIN/PRODUCT AND. Every reduction.
    for dtype in (torch.uint8, torch.int8, torch.int16, torch.bool):
        for op_name, op in (("SUM", R.SUM), ("MIN", R.MIN), ("MAX", R.MAX), ("PRODUCT", R.PRODUCT)):
            salt += 1
            name = f"{op_name} {dtype}"
            def make(r, count=1001, b=0):
                x = inputs(torch, r, count, torch.int64, 100 * salt + b)
                return (x % 3 == 0) if dtype == torch.bool else x.to(dtype)
            def exact(tensors):
                every = torch.stack([t.long() for t in tensors])
                want = {"SUM": every.sum(0), "MIN": every.min(0).values, "MAX": every.max(0).values,
                        "PRODUCT": every.prod(0)}[op_name]
                return want.to(dtype)  # int64 to a narrow type keeps the low bits, as wrapping does
            t = make(rank)
            dist.all_reduce(t, op=op)
            check.expect(torch.equal(t, exact([make(r) for r in range(n)])), f"allreduce {name}: not exact")
            record_identical(f"allreduce {name}", t)
            if dtype in (torch.uint8, torch.int8):
                g = make(rank)
                dist.all_reduce(g, op=op, group=gloo)
                check.expect(torch.equal(t, g), f"allreduce {name}: differs from gloo")
            root = salt % n
            t = make(rank)
            dist.reduce(t, dst=root, op=op)
            if rank == root:
                check.expect(torch.equal(t, exact([make(r) for r in range(n)])), f"reduce {name}: not exact")
            out = torch.empty(7, dtype=dtype)
            dist.reduce_scatter(out, [make(rank, 7, b) for b in range(n)], op=op)
            check.expect(torch.equal(out, exact([make(r, 7, rank) for r in range(n)])),
                         f"reduce_scatter {name}: not exact")
            mixed = [make(rank, 5), inputs(torch, rank, 6, torch.float32, salt), make(rank, 9, 1)]
            opts = dist.AllreduceCoalescedOptions()  # torch's all_reduce_coalesced refuses mixed dtypes
            opts.reduceOp = op
            pg.allreduce_coalesced(mixed, opts).wait()
            check.expect(torch.equal(mixed[0], exact([make(r, 5) for r in range(n)])) and
                         torch.equal(mixed[2], exact([make(r, 9, 1) for r in range(n)])),
                         f"allreduce_coalesced {name} beside float32: not exact")

    # The bitwise ops (BAND, BOR, BXOR) on every integer dtype and bool, over random bit patterns:
    # all_reduce (sizes that kAuto sends down different algorithms), reduce and reduce_scatter,
    # exact, against gloo where it has the dtype (not bool), and in bytes alike on every rank.
    folds = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or, "BXOR": torch.bitwise_xor}
    for dtype in (torch.int32, torch.int64, torch.uint8, torch.int8, torch.int16, torch.bool):
        for op_name, fold in folds.items():
            op = getattr(R, op_name)
            salt += 1
            def make(r, count, b=0):
                g = torch.Generator().manual_seed(1000 * (100 * salt + b) + r)
                x = torch.randint(-(1 << 62), 1 << 62, (count,), generator=g, dtype=torch.int64)
                return (x % 3 == 0) if dtype == torch.bool else x.to(dtype)  # .to keeps the low bits
            def exact(tensors):
                out = tensors[0].clone()
                for t in tensors[1:]:
                    out = fold(out, t)
                return out
            for count in (1, 1001, 300_001):
                name = f"{op_name} {dtype} x{count}"
                t = make(rank, count)
                dist.all_reduce(t, op=op)
                check.expect(torch.equal(t, exact([make(r, count) for r in range(n)])), f"allreduce {name}: not exact")
                record_identical(f"allreduce {name}", t)
                if dtype != torch.bool and gloo_reduces(torch, dist, gloo, dtype):
                    g = make(rank, count)
                    dist.all_reduce(g, op=op, group=gloo)
                    check.expect(torch.equal(t, g), f"allreduce {name}: differs from gloo")
            root = salt % n
            t = make(rank, 1001)
            dist.reduce(t, dst=root, op=op)
            if rank == root:
                check.expect(torch.equal(t, exact([make(r, 1001) for r in range(n)])), f"reduce {op_name} {dtype}: not exact")
            out = torch.empty(7, dtype=dtype)
            dist.reduce_scatter(out, [make(rank, 7, b) for b in range(n)], op=op)
            check.expect(torch.equal(out, exact([make(r, 7, rank) for r in range(n)])),
                         f"reduce_scatter {op_name} {dtype}: not exact")

    # NCCL's PREMUL_SUM (FSDP divides gradients with it): each rank's input times the factor, then
    # summed, from a double or a one-element tensor; the input of a reduce's other ranks untouched.
    def premul(factor):
        try:
            return dist._make_nccl_premul_sum(factor)
        except TypeError:  # torch 1.13 takes a tensor factor in a list, 2.x as it is
            return dist._make_nccl_premul_sum([factor])
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        for factor in (0.25, torch.tensor([0.5], dtype=torch.float64)):
            f = float(factor)
            salt += 1
            name = f"PREMUL_SUM({f}{', a tensor' if torch.is_tensor(factor) else ''}) {dtype}"
            every = [inputs(torch, r, 3001, dtype, salt) for r in range(n)]
            want = sum(x.double() * f for x in every)
            t = every[rank].clone()
            dist.all_reduce(t, op=premul(factor))
            check.expect(close(torch, t, want.to(dtype), dtype, n, 4.0), f"allreduce {name}: differs from the exact result")
            record_identical(f"allreduce {name}", t)
            root = salt % n
            t = every[rank].clone()
            dist.reduce(t, dst=root, op=premul(factor))
            check.expect(close(torch, t, want.to(dtype), dtype, n, 4.0) if rank == root else torch.equal(t, every[rank]),
                         f"reduce {name} to {root}")
            out = torch.empty(1000, dtype=dtype)
            dist.reduce_scatter(out, [every[rank][b * 1000:(b + 1) * 1000] for b in range(n)], op=premul(factor))
            check.expect(close(torch, out, want[rank * 1000:(rank + 1) * 1000].to(dtype), dtype, n, 4.0),
                         f"reduce_scatter {name}")
            runs = [every[rank][:5].clone(), every[rank][5:].clone()]
            opts = dist.AllreduceCoalescedOptions()
            opts.reduceOp = premul(factor)
            pg.allreduce_coalesced(runs, opts).wait()
            check.expect(close(torch, torch.cat(runs), want.to(dtype), dtype, n, 4.0), f"allreduce_coalesced {name}")

    # Sparse COO tensors (allreduce SUM): every rank's nonzeros summed, against gloo and the dense
    # sum: nonzeros repeating within a rank (uncoalesced) and across ranks, a rank with none, dense
    # dimensions (an embedding's gradient rows), two sparse dimensions, no nonzero anywhere.
    def sparse_input(r, case):
        gen = torch.Generator().manual_seed(500 + 10 * case + r)
        if case == 0:
            return torch.sparse_coo_tensor(torch.randint(0, 40, (1, 3 * r), generator=gen),
                                           torch.randn(3 * r, generator=gen), (40,))
        if case == 1:
            return torch.sparse_coo_tensor(torch.randint(0, 100, (1, 5 + r), generator=gen),
                                           torch.randn(5 + r, 8, generator=gen, dtype=torch.float64), (100, 8))
        if case == 2:
            return torch.sparse_coo_tensor(torch.randint(0, 6, (2, 4 + 2 * r), generator=gen),
                                           torch.randint(-9, 9, (4 + 2 * r,), generator=gen), (6, 6))
        return torch.sparse_coo_tensor(torch.zeros((1, 0), dtype=torch.int64), torch.zeros(0), (7,))
    for case in range(4):
        name = f"sparse allreduce, case {case}"
        t = sparse_input(rank, case)
        work = dist.all_reduce(t, async_op=True)
        work.wait()
        want = sum(sparse_input(r, case).to_dense() for r in range(n))
        check.expect(t.is_sparse and t.is_coalesced() and
                     close(torch, t.to_dense(), want, want.dtype, n, float(want.abs().max()) if want.numel() else 1.0),
                     f"{name}: differs from the dense sum")
        check.expect(torch.equal(work.get_future().value()[0].to_dense(), t.to_dense()), f"{name}: the future's value")
        g = sparse_input(rank, case)
        dist.all_reduce(g, group=gloo)
        check.expect(close(torch, t.to_dense(), g.to_dense(), want.dtype, n, 8.0), f"{name}: differs from gloo")
        check.expect(same_on_every_rank(dist, gloo, (digest(t._indices()), digest(t._values()))),
                     f"{name}: ranks differ in bytes")

    # Once wait() returns, the Work's future holds the result (gloo's order: future, then Work).
    not_done = 0
    for i in range(100):
        t = torch.full((4,), float(i))
        work = dist.all_reduce(t, async_op=True)
        work.wait()
        fut = work.get_future()
        if not (work.is_completed() and fut.done() and torch.equal(fut.value()[0], t)):
            not_done += 1
    check.expect(not_done == 0, f"{not_done} of 100 futures were not complete when wait() returned")

    # PRODUCT against gloo.
    for dtype in (torch.float32, torch.float64, torch.int32, torch.int64):
        salt += 1
        mine = inputs(torch, rank, 1001, dtype, salt)
        if not dtype.is_floating_point:
            mine = mine % 5 - 2  # keep products small
        t, g = mine.clone(), mine.clone()
        dist.all_reduce(t, op=R.PRODUCT)
        dist.all_reduce(g, op=R.PRODUCT, group=gloo)
        check.expect(close(torch, t, g, dtype, n, 8.0), f"allreduce PRODUCT {dtype}: differs from gloo")
        record_identical(f"allreduce PRODUCT {dtype}", t)

    # Byte moves (any dtype, sizes that are no whole number of int32s): broadcast from every root,
    # allgather, _allgather_base. gloo is the reference where it takes the dtype; elsewhere every
    # rank rebuilds the others' inputs.
    move_dtypes = (torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.uint8, torch.int8, torch.bool)
    for dtype in move_dtypes:
        for count in (0, 1, 3, 1001, 200_001):
            salt += 1
            def make(r):
                x = inputs(torch, r, count, torch.int64 if dtype in (torch.uint8, torch.int8, torch.bool) else dtype,
                           salt)
                return (x % 2 == 0) if dtype == torch.bool else x.to(dtype)
            for root in range(n):
                name = f"broadcast {dtype} x{count} from {root}"
                t = make(rank)
                dist.broadcast(t, src=root)
                check.expect(torch.equal(t, make(root)), f"{name}: not the root's tensor")
                if count and (dtype in gloo_dtypes or dtype in (torch.uint8, torch.int8)):  # gloo: no empty ones
                    g = make(rank)
                    dist.broadcast(g, src=root, group=gloo)
                    check.expect(torch.equal(t, g), f"{name}: differs from gloo")
            outs = [torch.empty(count, dtype=dtype) for _ in range(n)]
            dist.all_gather(outs, make(rank))
            check.expect(all(torch.equal(outs[r], make(r)) for r in range(n)), f"allgather {dtype} x{count}")
            if count and dtype in gloo_dtypes:
                gouts = [torch.empty(count, dtype=dtype) for _ in range(n)]
                dist.all_gather(gouts, make(rank), group=gloo)
                check.expect(all(torch.equal(a, b) for a, b in zip(outs, gouts)),
                             f"allgather {dtype} x{count}: differs from gloo")
            flat = torch.empty(n * count, dtype=dtype)
            dist._all_gather_base(flat, make(rank))
            check.expect(torch.equal(flat, torch.cat([make(r) for r in range(n)])), f"_allgather_base {dtype} x{count}")

    # reduce_scatter and _reduce_scatter_base: rank r gets block r of the reduction; against gloo's
    # all-reduce of the same blocks (gloo 1.13 has no reduce-scatter).
    for dtype in dtypes:
        for op_name, op in (("SUM", R.SUM), ("MAX", R.MAX), ("AVG", R.AVG)):
            for count in (0, 1, 4099):
                salt += 1
                name = f"reduce_scatter {op_name} {dtype} x{count}"
                blocks = [inputs(torch, rank, count, dtype, 100 * salt + b) for b in range(n)]
                every = torch.stack([torch.cat([inputs(torch, r, count, dtype, 100 * salt + b).double()
                                                for b in range(n)]) for r in range(n)])
                want = {"SUM": every.sum(0), "MAX": every.max(0).values if count else every.sum(0),
                        "AVG": every.sum(0) / n if dtype.is_floating_point else
                        torch.div(every.sum(0), n, rounding_mode="trunc")}[op_name]
                want = want[rank * count:(rank + 1) * count].to(dtype)
                scale = float(every.abs().max()) if count else 1.0
                out = torch.empty(count, dtype=dtype)
                dist.reduce_scatter(out, [b.clone() for b in blocks], op=op)
                check.expect(close(torch, out, want, dtype, n, scale), f"{name}: differs from the exact reduction")
                if dtype in gloo_dtypes and op_name != "AVG":
                    g = torch.cat(blocks)
                    dist.all_reduce(g, op=op, group=gloo)
                    check.expect(close(torch, out, g[rank * count:(rank + 1) * count], dtype, n, scale),
                                 f"{name}: differs from gloo")
                base = torch.empty(count, dtype=dtype)
                dist._reduce_scatter_base(base, torch.cat(blocks), op=op)
                check.expect(torch.equal(base, out), f"_reduce_scatter_base {op_name} {dtype} x{count}")

    # reduce from every root, against gloo and the exact reduction.
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        for op_name, op in (("SUM", R.SUM), ("MIN", R.MIN), ("PRODUCT", R.PRODUCT)):
            for root in range(n):
                salt += 1
                name = f"reduce {op_name} {dtype} to {root}"
                def make(r):
                    x = inputs(torch, r, 2001, dtype, salt)
                    return x if dtype.is_floating_point else x % 5 - 2
                every = torch.stack([make(r).double() for r in range(n)])
                want = {"SUM": every.sum(0), "MIN": every.min(0).values, "PRODUCT": every.prod(0)}[op_name]
                t = make(rank)
                dist.reduce(t, dst=root, op=op)
                if rank == root:
                    check.expect(close(torch, t, want.to(dtype), dtype, n, 8.0), f"{name}: differs from the exact result")
                if dtype in gloo_dtypes:
                    g = make(rank)
                    dist.reduce(g, dst=root, op=op, group=gloo)
                    if rank == root:
                        check.expect(close(torch, t, g, dtype, n, 8.0), f"{name}: differs from gloo")

    # gather and scatter from every root (any dtype: byte moves).
    for dtype in (torch.float32, torch.uint8, torch.bool, torch.float16):
        for count in (0, 3, 5001):
            salt += 1
            def make(r, b=0):
                x = inputs(torch, r, count, torch.int64, salt * 10 + b)
                return (x % 2 == 0) if dtype == torch.bool else x.to(dtype)
            for root in range(n):
                outs = [torch.empty(count, dtype=dtype) for _ in range(n)] if rank == root else None
                dist.gather(make(rank), gather_list=outs, dst=root)
                if rank == root:
                    check.expect(all(torch.equal(outs[r], make(r)) for r in range(n)),
                                 f"gather {dtype} x{count} to {root}")
                out = torch.empty(count, dtype=dtype)
                dist.scatter(out, scatter_list=[make(root, b) for b in range(n)] if rank == root else None, src=root)
                check.expect(torch.equal(out, make(root, rank)), f"scatter {dtype} x{count} from {root}")
                if count and dtype in (torch.float32, torch.uint8):
                    g = torch.empty(count, dtype=dtype)
                    dist.scatter(g, scatter_list=[make(root, b) for b in range(n)] if rank == root else None,
                                 src=root, group=gloo)
                    check.expect(torch.equal(out, g), f"scatter {dtype} x{count} from {root}: differs from gloo")

    # all_to_all_single (alltoall_base): equal splits and uneven ones, rows of odd byte sizes;
    # against gloo and the exact result. all_to_all (the list form) too.
    for dtype, cols in ((torch.float32, 3), (torch.int64, 1), (torch.uint8, 3), (torch.float16, 5)):
        salt += 1
        def block(src, dst, rows):
            return (inputs(torch, 100 * src + dst, rows * cols, torch.int64, salt) % 100).to(dtype).reshape(rows, cols)
        # Equal: 2 rows to everyone. Uneven: rank r sends (r + j) % 3 rows to rank j.
        for uneven in (False, True):
            rows_to = [((rank + j) % 3) if uneven else 2 for j in range(n)]
            rows_from = [((j + rank) % 3) if uneven else 2 for j in range(n)]
            inp = torch.cat([block(rank, j, rows_to[j]) for j in range(n)])
            out = torch.empty(sum(rows_from), cols, dtype=dtype)
            splits = (rows_from, rows_to) if uneven else (None, None)
            dist.all_to_all_single(out, inp, output_split_sizes=splits[0], input_split_sizes=splits[1])
            want = torch.cat([block(j, rank, rows_from[j]) for j in range(n)])
            check.expect(torch.equal(out, want), f"all_to_all_single {dtype} uneven={uneven}")
            if dtype in (torch.float32, torch.int64):
                g = torch.empty_like(out)
                dist.all_to_all_single(g, inp, output_split_sizes=splits[0], input_split_sizes=splits[1],
                                       group=gloo)
                check.expect(torch.equal(out, g), f"all_to_all_single {dtype} uneven={uneven}: differs from gloo")
        outs = [torch.empty(rows_from[j], cols, dtype=dtype) for j in range(n)]
        dist.all_to_all(outs, [block(rank, j, rows_to[j]) for j in range(n)])
        check.expect(all(torch.equal(outs[j], block(j, rank, rows_from[j])) for j in range(n)), f"all_to_all {dtype}")

    # send/recv: every rank sends to the next and receives from the previous, posted in either
    # order (a large message needs its receive posted: an ordered queue that blocked on the send
    # would deadlock), with tags, blocking and not; against gloo's send/recv.
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    for count, dtype in ((1, torch.float32), (7, torch.uint8), (2_000_003, torch.float32)):
        salt += 1
        mine = inputs(torch, rank, count, torch.float64, salt).to(dtype)
        got = torch.empty(count, dtype=dtype)
        if rank % 2 == 0:
            reqs = [dist.isend(mine, nxt, tag=5), dist.irecv(got, prv, tag=5)]
        else:
            reqs = [dist.irecv(got, prv, tag=5), dist.isend(mine, nxt, tag=5)]
        for r in reqs:
            r.wait()
        check.expect(torch.equal(got, inputs(torch, prv, count, torch.float64, salt).to(dtype)),
                     f"isend/irecv {dtype} x{count}")
    a, b = torch.full((10,), float(rank)), torch.full((10,), float(rank) + 0.5)
    got_a, got_b = torch.empty(10), torch.empty(10)
    # Two tags in flight: the receiver asks for tag 2 first; matching is by tag, not order.
    sends = [dist.isend(a, nxt, tag=1), dist.isend(b, nxt, tag=2)]
    dist.recv(got_b, prv, tag=2)
    dist.recv(got_a, prv, tag=1)
    for w in sends:
        w.wait()
    check.expect(torch.equal(got_a, torch.full((10,), float(prv))) and
                 torch.equal(got_b, torch.full((10,), float(prv) + 0.5)), "send/recv with two tags")
    g = torch.empty(10)
    if rank % 2 == 0:
        dist.send(a, nxt, group=gloo)
        dist.recv(g, prv, group=gloo)
    else:
        dist.recv(g, prv, group=gloo)
        dist.send(a, nxt, group=gloo)
    check.expect(torch.equal(g, got_a), "send/recv: differs from gloo")

    # A future: completes with the output tensors (what DDP comm hooks chain on).
    t = torch.full((5,), float(rank))
    fut = dist.all_reduce(t, async_op=True).get_future()
    chained = fut.then(lambda f: f.value()[0] * 2)
    check.expect(torch.equal(chained.wait(), torch.full((5,), float(sum(range(n)) * 2))),
                 "a callback chained on the future sees the result")

    # Non-contiguous tensors are staged and written back.
    base = torch.arange(20, dtype=torch.float64).reshape(4, 5) * (rank + 1)
    view = base.t()
    dist.all_reduce(view)
    check.expect(torch.equal(base, torch.arange(20, dtype=torch.float64).reshape(4, 5) * sum(range(1, n + 1))),
                 "allreduce of a non-contiguous view")

    # allreduce_coalesced: through torch.distributed (one dtype), and on the process group itself
    # with mixed dtypes; against one allreduce per tensor on gloo.
    for mixed in (False, True):
        salt += 1
        shapes = ((7, torch.float32), (1000, torch.float64 if mixed else torch.float32), (3, torch.float32),
                  (50, torch.int64 if mixed else torch.float32))
        parts = [inputs(torch, rank, c, d, salt + i).reshape(-1, 1) for i, (c, d) in enumerate(shapes)]
        mine = [p.clone() for p in parts]
        if mixed:
            opts = dist.AllreduceCoalescedOptions()
            opts.reduceOp = R.MAX
            pg.allreduce_coalesced(mine, opts).wait()
        else:
            dist.all_reduce_coalesced(mine, op=R.MAX)
        for i, p in enumerate(parts):
            g = p.clone()
            dist.all_reduce(g, op=R.MAX, group=gloo)
            check.expect(torch.equal(mine[i], g), f"allreduce_coalesced (mixed={mixed}) part {i}: differs from gloo")

    # Subgroup: the same operation on a cohort group made by new_group.
    t = torch.ones(1000, dtype=torch.int64) * (rank + 1)
    dist.all_reduce(t, group=sub)
    check.expect(torch.equal(t, torch.full((1000,), sum(range(1, n + 1)), dtype=torch.int64)), "subgroup allreduce")

    # torch 2.x's coalesced tensor collectives, as FSDP2 and the functional collectives issue
    # them: all-gathers into tensors and reduce-scatters of tensors, several in one call
    # (_coalescing_manager: allgather_into_tensor_coalesced, reduce_scatter_tensor_coalesced),
    # exact against every rank's inputs. (torch 1.13 has neither call.)
    if not torch.__version__.startswith("1."):
        import torch.distributed._functional_collectives as funcol
        sizes = (5, 1, 4099)
        ins = [inputs(torch, rank, c, torch.int64, 700 + i) for i, c in enumerate(sizes)]
        outs = [torch.empty(n * c, dtype=torch.int64) for c in sizes]
        with dist._coalescing_manager(async_ops=True) as cm:
            for out, x in zip(outs, ins):
                dist.all_gather_into_tensor(out, x)
        cm.wait()
        for i, c in enumerate(sizes):
            want = torch.cat([inputs(torch, r, c, torch.int64, 700 + i) for r in range(n)])
            check.expect(torch.equal(outs[i], want), f"coalesced all_gather_into_tensor {i}")
        ins = [inputs(torch, rank, n * c, torch.int64, 800 + i) for i, c in enumerate(sizes)]
        outs = [torch.empty(c, dtype=torch.int64) for c in sizes]
        with dist._coalescing_manager(async_ops=True) as cm:
            for out, x in zip(outs, ins):
                dist.reduce_scatter_tensor(out, x, op=R.MAX)
        cm.wait()
        for i, c in enumerate(sizes):
            every = torch.stack([inputs(torch, r, n * c, torch.int64, 800 + i) for r in range(n)])
            want = every.max(0).values[rank * c:(rank + 1) * c]
            check.expect(torch.equal(outs[i], want), f"coalesced reduce_scatter_tensor {i}")
        x = inputs(torch, rank, 10, torch.int64, 900)
        every = torch.stack([inputs(torch, r, 10, torch.int64, 900) for r in range(n)])
        got = funcol.all_reduce(x, "sum", dist.group.WORLD)
        check.expect(torch.equal(funcol.wait_tensor(got), every.sum(0)), "functional all_reduce")
        got = funcol.all_gather_tensor(x, 0, dist.group.WORLD)
        check.expect(torch.equal(funcol.wait_tensor(got), every.reshape(-1)), "functional all_gather_tensor")
        got = funcol.reduce_scatter_tensor(every.reshape(-1), "sum", 0, dist.group.WORLD)
        check.expect(torch.equal(funcol.wait_tensor(got), n * every[rank]), "functional reduce_scatter_tensor")

    # Barrier: nobody leaves before everybody arrived.
    store = dist.distributed_c10d._get_default_store()
    store.add("arrived", 1)
    dist.barrier()
    check.expect(store.add("arrived", 0) == n, "barrier returned before every rank arrived")

    # Many operations queued at once complete in order.
    ts = [torch.full((1000,), float(i + rank)) for i in range(20)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for i, w in enumerate(works):
        w.wait()
        check.expect(torch.equal(ts[i], torch.full((1000,), float(i * n + sum(range(n))))), f"queued allreduce {i}")

    dist.barrier(group=gloo)
    dist.destroy_process_group()
    return check.finish()


def scenario_ddp():
    """DDP trains a small MLP on the cohort backend (the Reduction Server: 2 reducers), plain and
    with torch's comm hooks, against the same training on gloo."""
    import torch
    import torch.distributed as dist
    import cohort.torch
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=60))
    rank, n = dist.get_rank(), dist.get_world_size()
    check = Checker(rank)
    ours = cohort.torch.backend_of()
    reducers = int(os.environ["COHORT_NUM_REDUCERS"])
    check.expect(ours.num_reducers == reducers, f"the DDP group has {ours.num_reducers} reducers, not {reducers}")
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(0)
    features, classes, steps, batch = 16, 4, 40, 32
    # Synthetic, learnable data: the class is the argmax of a fixed projection of the features.
    g = torch.Generator().manual_seed(123)
    x_all = torch.randn(steps * n * batch, features, generator=g)
    y_all = (x_all @ torch.randn(features, classes, generator=g)).argmax(1)

    def train(group, hook=None, state=None, zero=False):
        torch.manual_seed(1)
        model = torch.nn.Sequential(torch.nn.Linear(features, 64), torch.nn.ReLU(), torch.nn.Linear(64, classes))
        if rank != 0:  # DDP's constructor broadcasts rank 0's parameters: make them differ first
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(0.5)
        ddp = DDP(model, process_group=group, bucket_cap_mb=0.01)  # several buckets
        if hook is not None:
            ddp.register_comm_hook(state, hook)
        if zero:
            from torch.distributed.optim import ZeroRedundancyOptimizer
            opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.SGD,
                                          process_group=group, lr=0.1, momentum=0.9)
        else:
            opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
        losses = []
        for step in range(steps):
            lo = (step * n + rank) * batch
            loss = torch.nn.functional.cross_entropy(ddp(x_all[lo:lo + batch]), y_all[lo:lo + batch])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        return params, sum(losses[:5]) / 5, sum(losses[-5:]) / 5

    def bf16_hook(state, bucket):
        # torch 1.13's DDP refuses a hook *named* bf16_compress_hook unless torch was built with
        # CUDA 11+ and NCCL 2.10+ (a check of the build, not of the backend): call it under
        # another name. The hook's own code is what runs.
        return default_hooks.bf16_compress_hook(state, bucket)

    reference, _, _ = train(gloo)
    runs = {
        "no hook": (None, None),
        "bf16_compress_hook": (bf16_hook, None),
        "fp16_compress_hook": (default_hooks.fp16_compress_hook, None),
        "PowerSGD": (powerSGD_hook.powerSGD_hook,
                     powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=2,
                                                 start_powerSGD_iter=3, use_error_feedback=True, warm_start=True)),
    }
    runs["ZeroRedundancyOptimizer"] = (None, None)
    for name, (hook, state) in runs.items():
        params, first, last = train(None, hook, state, zero=name == "ZeroRedundancyOptimizer")
        print(f"{name}: loss {first:.3f} -> {last:.3f}", flush=True)
        check.expect(last < first * 0.6, f"{name}: the loss did not fall ({first:.3f} -> {last:.3f})")
        expect_trained_alike(check, dist, gloo, name, params, reference if hook is None else None, atol=1e-4)
    dist.barrier(group=gloo)
    return check.finish()


def scenario_ddp_loops():
    """DDP as real training loops use it beyond the plain step, on the Reduction Server, each
    against the same loop on gloo: gradient accumulation under no_sync(), a branch some steps do
    not use (find_unused_parameters), uneven inputs under the Join context (ranks run out of
    batches at different steps; the ones done shadow the others' all-reduces), static_graph,
    gradient_as_bucket_view (the gradients are views of the buckets the backend reduces), an
    nn.Embedding(sparse=True) whose gradients DDP all-reduces as sparse tensors, and a BatchNorm
    layer whose buffers (running statistics, float32, and its int64 batch count) DDP broadcasts
    from rank 0 before each forward: after an evaluation pass every rank holds rank 0's."""
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401  (registers the backend)
    from torch.distributed.algorithms.join import Join
    from torch.nn.parallel import DistributedDataParallel as DDP

    features, classes, batch = 12, 3, 16
    rank, n, check, gloo, g, x_all, y_all = start_training(features, classes, 64 * batch, seed=7)

    class Branchy(torch.nn.Module):
        """An MLP with a side branch (the find_unused_parameters loop uses it on odd steps only)."""
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Linear(features, 32), torch.nn.ReLU())
            self.side = torch.nn.Linear(32, 32)
            self.head = torch.nn.Linear(32, classes)

        def forward(self, x, use_side):
            h = self.body(x)
            return self.head(self.side(h) if use_side else h)

    vocab = 60
    tokens_all = torch.randint(0, vocab, (64 * n * batch, 5), generator=g)
    token_labels = torch.nn.functional.one_hot(tokens_all % classes, classes).sum(1).argmax(1)  # tokens vote

    class Embedder(torch.nn.Module):
        """A bag-of-tokens classifier whose embedding's gradients are sparse (nn.Embedding(sparse=True))."""
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, 16, sparse=True)
            self.head = torch.nn.Linear(16, classes)

        def forward(self, tokens, use_side):
            return self.head(self.embed(tokens).mean(1))

    class Normed(torch.nn.Module):
        """An MLP with a BatchNorm1d: buffers that each rank's forward updates from its own batch."""
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(features, 32), torch.nn.BatchNorm1d(32),
                                           torch.nn.ReLU(), torch.nn.Linear(32, classes))

        def forward(self, x, use_side):
            return self.net(x)

    def batches(step, loop=None):
        lo = (step * n + rank) * batch
        if loop == "sparse_embedding":
            return tokens_all[lo:lo + batch], token_labels[lo:lo + batch]
        return x_all[lo:lo + batch], y_all[lo:lo + batch]

    def train(group, loop):
        torch.manual_seed(3)
        model = {"sparse_embedding": Embedder, "batch_norm": Normed}.get(loop, Branchy)()
        if rank != 0:  # DDP's constructor broadcasts rank 0's parameters: make them differ first
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(0.25)
        options = {"find_unused_parameters": True} if loop == "find_unused_parameters" else {}
        if loop in ("static_graph", "gradient_as_bucket_view"):  # the latter: gradients are the buckets
            options = {loop: True}
        ddp = DDP(model, process_group=group, bucket_cap_mb=0.001, **options)
        lr, momentum = (2.0, 0.0) if loop == "sparse_embedding" else (0.05, 0.9)
        opt = torch.optim.SGD(ddp.parameters(), lr=lr, momentum=momentum)

        def step_on(x, y, use_side=True):
            loss = torch.nn.functional.cross_entropy(ddp(x, use_side), y)
            loss.backward()
            return loss.item()

        losses = []
        if loop == "no_sync":  # two micro-batches a step; the second all-reduces both
            for step in range(0, 24, 2):
                opt.zero_grad()
                with ddp.no_sync():
                    losses.append(step_on(*batches(step)))
                losses.append(step_on(*batches(step + 1)))
                opt.step()
        elif loop == "find_unused_parameters":
            for step in range(24):
                opt.zero_grad()
                losses.append(step_on(*batches(step), use_side=step % 2 == 1))
                opt.step()
        elif loop == "join":  # rank r has 12 + 3r batches; the Join shadows the finished ranks
            with Join([ddp]):
                for step in range(12 + 3 * rank):
                    opt.zero_grad()
                    losses.append(step_on(*batches(step)))
                    opt.step()
        else:  # static_graph, gradient_as_bucket_view; sparse_embedding (its embedding's gradients
            # all-reduced as sparse tensors); batch_norm
            for step in range(24):
                opt.zero_grad()
                losses.append(step_on(*batches(step, loop)))
                opt.step()
        if loop == "batch_norm":  # its forward takes in rank 0's buffers and, evaluating, keeps them
            model.eval()
            with torch.no_grad():
                ddp(batches(0)[0], False)
        params = torch.cat([p.detach().reshape(-1).to(torch.float32)
                            for p in list(model.parameters()) + list(model.buffers())])
        return params, sum(losses[:4]) / 4, sum(losses[-4:]) / 4

    for loop in ("no_sync", "find_unused_parameters", "join", "static_graph", "gradient_as_bucket_view",
                 "sparse_embedding", "batch_norm"):
        reference, _, _ = train(gloo, loop)
        expect_learned_as_on_gloo(check, dist, gloo, loop, train(None, loop), reference)
    dist.barrier(group=gloo)
    return check.finish()


def scenario_fsdp():
    """FSDP as torch 2.x scripts shard a model, on the cohort backend (its all-gathers into
    tensors and reduce-scatters, coalesced where FSDP2 coalesces them), each against the same run
    on gloo: FSDP2's fully_shard (each layer, then the root), the same with the gradients' norm
    clipped (clip_grad_norm_ over sharded gradients: an all-reduce of the shards' norms), and
    FSDP1's FullyShardedDataParallel, CPU tensors.
    The loss falls, and every rank ends with gloo's full parameters. A flavour that fails on gloo
    as well (torch 2.6's fully_shard on CPU) is reported and not compared."""
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401  (registers the backend)
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import fully_shard

    features, classes, batch = 12, 3, 8
    rank, n, check, gloo, _, x_all, y_all = start_training(features, classes, 24 * batch, seed=11)

    def train(group, flavour):
        torch.manual_seed(5)
        model = torch.nn.Sequential(torch.nn.Linear(features, 64), torch.nn.ReLU(), torch.nn.Linear(64, 63),
                                    torch.nn.ReLU(), torch.nn.Linear(63, classes))  # 63: shards of unequal size
        if flavour.startswith("fully_shard"):
            mesh = DeviceMesh.from_group(group, "cpu")
            for layer in model:
                if isinstance(layer, torch.nn.Linear):
                    fully_shard(layer, mesh=mesh)
            sharded = fully_shard(model, mesh=mesh)
        else:
            sharded = FSDP(model, process_group=group, device_id=torch.device("cpu"))
        opt = torch.optim.SGD(sharded.parameters(), lr=0.1, momentum=0.9)
        losses, norms = [], []
        for step in range(24):
            lo = (step * n + rank) * batch
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(sharded(x_all[lo:lo + batch]), y_all[lo:lo + batch])
            loss.backward()
            if flavour == "fully_shard, clipped":
                norm = torch.nn.utils.clip_grad_norm_(sharded.parameters(), max_norm=0.5)
                norms.append(float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm))
            opt.step()
            losses.append(loss.item())
        if flavour.startswith("fully_shard"):
            params = torch.cat([p.full_tensor().reshape(-1) for p in sharded.parameters()])
        else:
            with FSDP.summon_full_params(sharded):
                params = torch.cat([p.detach().reshape(-1).clone() for p in sharded.parameters()])
        if norms:  # the clipping must have bitten, or the check says nothing about it
            print(f"{flavour}: gradient norms {norms[0]:.3f} .. {norms[-1]:.3f}", flush=True)
            check.expect(max(norms) > 0.5, f"{flavour}: no gradient norm above the clip (0.5): {norms}")
        return params, sum(losses[:4]) / 4, sum(losses[-4:]) / 4

    for flavour in ("fully_shard", "fully_shard, clipped", "FullyShardedDataParallel"):
        try:
            reference, _, _ = train(gloo, flavour)
        except (AttributeError, RuntimeError) as e:  # torch 2.6's FSDP2 needs a CUDA stream on CPU too
            print(f"{flavour}: not compared: on torch {torch.__version__} it fails on gloo as well ({e})", flush=True)
            continue
        expect_learned_as_on_gloo(check, dist, gloo, flavour, train(dist.group.WORLD, flavour), reference)
    dist.barrier(group=gloo)
    return check.finish()


def scenario_compile():
    """torch.compile with DDP (inductor, CPU tensors) on the Reduction Server, each flavour against
    the same compiled training on gloo:
    - DDPOptimizer: DDP over a compiled module; dynamo cuts the graph at DDP's bucket boundaries
      (three here) and the backward's all-reduces run on the backend bucket by bucket.
      (torch.compile(DDP(model)) on Debian's torch 2.6 and 2.14 compiles nothing, on gloo too: a
      graph break in DDP's forward leaves the module to run eagerly.)
    - compiled autograd: the whole DDP model compiled, its backward too, with DDP's python
      reducer, which traces the all-reduces into the backward graph as functional collectives on
      the group."""
    import logging
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401  (registers the backend)
    from torch._dynamo.utils import counters
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Buckets(logging.Handler):
        """Keeps the N of DDPOptimizer's "... created N buckets" (logged at INFO)."""
        def __init__(self):
            super().__init__(logging.INFO)
            self.counts = []

        def emit(self, record):
            if "created %d buckets" in str(record.msg):
                self.counts.append(record.args[1])

    buckets = Buckets()
    ddp_optimizer_log = logging.getLogger("torch._dynamo.backends.distributed")
    ddp_optimizer_log.setLevel(logging.INFO)
    ddp_optimizer_log.addHandler(buckets)
    features, classes, batch, steps = 16, 4, 16, 12
    rank, n, check, gloo, _, x_all, y_all = start_training(features, classes, steps * batch, seed=13)

    def train(group, flavour):
        torch._dynamo.reset()
        torch.manual_seed(3)
        # Two 1 MiB layers and 1 MiB buckets (DDPOptimizer takes none smaller than DDP's first,
        # 1 MiB): three buckets.
        model = torch.nn.Sequential(torch.nn.Linear(features, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                    torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, classes))
        if rank != 0:  # DDP's constructor broadcasts rank 0's parameters: make them differ first
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(0.5)
        # DDP reads optimize_ddp when it is built; "python_reducer" leaves its buckets to compiled
        # autograd.
        torch._dynamo.config.optimize_ddp = True if flavour == "DDPOptimizer" else "python_reducer"
        if flavour == "DDPOptimizer":
            compiled = DDP(torch.compile(model), process_group=group, bucket_cap_mb=1)
        else:
            compiled = torch.compile(DDP(model, process_group=group, bucket_cap_mb=1))
        opt = torch.optim.SGD(compiled.parameters(), lr=0.02, momentum=0.9)
        losses = []
        for step in range(steps):
            lo = (step * n + rank) * batch
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(compiled(x_all[lo:lo + batch]), y_all[lo:lo + batch])
            if flavour == "DDPOptimizer":
                loss.backward()
            else:
                with torch._dynamo.compiled_autograd._enable(torch.compile()):
                    loss.backward()
            opt.step()
            losses.append(loss.item())
        torch._dynamo.config.optimize_ddp = True
        params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        return params, sum(losses[:3]) / 3, sum(losses[-3:]) / 3

    # DDPOptimizer first: a DDP built for the python reducer changes dynamo's and inductor's
    # settings for the rest of the process.
    for flavour in ("DDPOptimizer", "compiled autograd"):
        reference = train(gloo, flavour)[0]
        buckets.counts.clear()
        graphs = counters["aot_autograd"]["total"]
        captures = counters["compiled_autograd"]["captures"]
        result = train(dist.group.WORLD, flavour)
        check.expect(counters["aot_autograd"]["total"] > graphs, f"{flavour}: nothing was compiled")
        if flavour == "DDPOptimizer":
            check.expect(buckets.counts == [3], f"DDPOptimizer: the graph was cut into {buckets.counts} buckets, "
                                                "not once into 3")
        else:
            check.expect(counters["compiled_autograd"]["captures"] > captures,
                         "compiled autograd: no backward graph was captured")
        expect_learned_as_on_gloo(check, dist, gloo, flavour, result, reference)
    dist.barrier(group=gloo)
    return check.finish()


def scenario_pipeline():
    """Pipeline parallelism as torch 2.x scripts write it (torch.distributed.pipelining): a small
    MLP cut into stages, the activations and their gradients carried between ranks by the
    backend's sends and receives (the schedules' batch_isend_irecv, and the stages' shape
    inference). One stage per rank (GPipe, 1F1B) and two per rank (interleaved 1F1B, looped BFS,
    the zero-bubble schedules where torch has them: messages between one pair for two stages,
    which must meet in the order they were sent); each trains 4 steps of 6 microbatches, the loss
    falls, and every rank's stages end with the parameters (and the last stage with the losses)
    of one process training the whole model on the same microbatches, within rounding."""
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401  (registers the backend)
    from torch.distributed import pipelining

    # Six microbatches: the interleaved schedules want a multiple of the ranks (3).
    features, classes, hidden, batch, microbatches, steps = 12, 3, 24, 24, 6, 4
    rank, n, check, gloo, _, x_all, y_all = start_training(features, classes, steps * batch, seed=13)
    loss_fn = torch.nn.functional.cross_entropy

    def blocks(count):
        # `count` blocks in a row, each a Linear and a ReLU (the last block's Linear only).
        torch.manual_seed(9)
        sizes = [features] + [hidden] * (count - 1) + [classes]
        return [torch.nn.Sequential(torch.nn.Linear(sizes[i], sizes[i + 1]),
                                    *([torch.nn.ReLU()] if i + 1 < count else [])) for i in range(count)]

    def batches():
        for step in range(steps):
            yield x_all[step * batch:(step + 1) * batch], y_all[step * batch:(step + 1) * batch]

    def train_in_one_process(count, grad_scale):
        # The whole model, microbatch by microbatch, gradients summed (and scaled where the
        # schedule scales them): what the pipeline computes.
        model = torch.nn.Sequential(*blocks(count))
        opt = torch.optim.SGD(model.parameters(), lr=0.2)
        means = []
        for x, y in batches():
            opt.zero_grad()
            losses = []
            for xm, ym in zip(x.tensor_split(microbatches), y.tensor_split(microbatches)):
                losses.append(loss_fn(model(xm), ym))
                (losses[-1] / grad_scale).backward()
            opt.step()
            means.append(float(torch.stack(losses).detach().mean()))
        return model, means

    def train(schedule_class, placement):
        per_rank = 1 if placement == "one" else 2
        stages_total = n * per_rank
        model = blocks(stages_total)
        # Looped: rank r holds stages r, r + n; V-shaped (the V schedules): r and 2n - 1 - r.
        mine = [rank, 2 * n - 1 - rank] if placement == "v" else [s for s in range(stages_total) if s % n == rank]
        stages = [pipelining.PipelineStage(model[s], s, stages_total, torch.device("cpu"), group=dist.group.WORLD)
                  for s in mine]
        schedule = schedule_class(stages[0] if per_rank == 1 else stages, microbatches, loss_fn=loss_fn)
        params = [p for s in mine for p in model[s].parameters()]
        opt = torch.optim.SGD(params, lr=0.2)
        means = []
        for x, y in batches():
            opt.zero_grad()
            inputs = (x,) if 0 in mine else ()
            if stages_total - 1 in mine:
                losses = []
                schedule.step(*inputs, target=y, losses=losses)
                means.append(float(torch.stack(losses).detach().mean()))
            else:
                schedule.step(*inputs)
            opt.step()
        # Torch 2.7 on scales the gradients by the microbatches (scale_grads, on by default).
        grad_scale = microbatches if getattr(schedule, "scale_grads", False) else 1
        reference, reference_means = train_in_one_process(stages_total, grad_scale)
        got = torch.cat([p.detach().reshape(-1) for p in params])
        want = torch.cat([p.detach().reshape(-1) for s in mine for p in reference[s].parameters()])
        return got, want, means, reference_means

    # Torch 2.6's zero-bubble schedules fail on gloo as well (on trixie's 2.6.0: an exception at
    # the first step, or a hang), and leave messages unreceived that the next schedule's first
    # receive then meets: they run from torch 2.7 on. (1F1B hangs on gloo there, not on cohort.)
    version = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2])
    flavours = [("ScheduleGPipe", "one", (2, 4)), ("Schedule1F1B", "one", (2, 4)),
                ("ScheduleInterleaved1F1B", "looped", (2, 4)), ("ScheduleLoopedBFS", "looped", (2, 4)),
                ("ScheduleInterleavedZeroBubble", "looped", (2, 7)), ("ScheduleZBVZeroBubble", "v", (2, 7))]
    for name, placement, since in flavours:
        schedule_class = getattr(pipelining, name, None)
        if schedule_class is None or version < since:
            why = f"from {since[0]}.{since[1]} on" if schedule_class else "absent"
            print(f"{name}: not run on torch {torch.__version__} ({why})", flush=True)
            continue
        got, want, means, reference_means = train(schedule_class, placement)
        check.expect(bool(torch.allclose(got, want, rtol=1e-4, atol=1e-6)),
                     f"{name}: rank {rank}'s stages end with other parameters than one process training the "
                     f"whole model (max diff {float((got - want).abs().max()):.2e})")
        if means:  # the rank with the last stage
            print(f"{name}: loss {means[0]:.3f} -> {means[-1]:.3f}", flush=True)
            check.expect(means[-1] < means[0], f"{name}: the loss did not fall ({means[0]:.3f} -> {means[-1]:.3f})")
            check.expect(all(abs(a - b) < 1e-5 for a, b in zip(means, reference_means)),
                         f"{name}: losses {means} against one process's {reference_means}")
    dist.barrier(group=gloo)
    return check.finish()


def scenario_backend_strings():
    """Torch 2.x's backend strings that name a backend per device, as scripts write
    "cpu:gloo,cuda:nccl": the default group made with "cpu:cohort,cuda:gloo" sends CPU tensors to
    the cohort backend, a group made with "cpu:gloo,cuda:cohort" sends them to gloo (its cohort
    backend, for CUDA tensors, is made and left unused here), and both all-reduce exactly."""
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401  (registers the backend)

    dist.init_process_group("cpu:cohort,cuda:gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
    rank, n = dist.get_rank(), dist.get_world_size()
    check = Checker(rank)
    other = dist.new_group(backend="cpu:gloo,cuda:cohort")
    want = torch.arange(5, dtype=torch.float32) * (n * (n + 1) // 2)
    for group, spec, expected in ((dist.group.WORLD, "cpu:cohort,cuda:gloo", "ProcessGroupCohort"),
                                  (other, "cpu:gloo,cuda:cohort", "ProcessGroupGloo")):
        used = type(group._get_backend(torch.device("cpu"))).__name__
        check.expect(used == expected, f"{spec}: CPU tensors go to {used}, not {expected}")
        t = torch.arange(5, dtype=torch.float32) * (rank + 1)
        dist.all_reduce(t, group=group)
        check.expect(torch.equal(t, want), f"{spec}: all-reduce gave {t.tolist()}")
    dist.barrier()
    return check.finish()


def scenario_tensor_parallel():
    """The 2-D parallelism of torch 2.x scripts on the cohort backend: a 2x2 device mesh ("dp",
    "tp") of the cohort group; tensor parallelism over "tp" (a column-wise then a row-wise
    Linear: the all-reduces and all-gathers of DTensor on a subgroup) and data parallelism over
    "dp" by FSDP2's fully_shard, or, where fully_shard fails on CPU (torch 2.6, on gloo too), by
    all-reducing each local gradient over the "dp" group. Three steps of SGD must end where one
    process training the unsharded model on both dp ranks' batches ends (within rounding). Then
    torch.distributed.checkpoint saves the sharded model and optimizer, the parameters are
    zeroed, and loading restores them exactly."""
    import shutil
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    import cohort.torch  # noqa: F401  (registers the backend)
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    check = Checker(rank)
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    dp_rank = mesh["dp"].get_local_rank()
    g = torch.Generator().manual_seed(21)
    batches = [[torch.randn(4, 16, generator=g) for _ in range(3)] for _ in range(2)]  # [dp rank][step]

    def fresh():
        torch.manual_seed(4)
        return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16))

    # The reference: one process, the unsharded model, the mean loss over both dp ranks' rows.
    reference = fresh()
    opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(3):
        opt.zero_grad()
        reference(torch.cat([batches[0][step], batches[1][step]])).pow(2).mean().backward()
        opt.step()
    expected = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])

    def train(data_parallel):
        model = parallelize_module(fresh(), mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
        if data_parallel == "fully_shard":
            fully_shard(model, mesh=mesh["dp"])
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            opt.zero_grad()
            model(batches[dp_rank][step]).pow(2).mean().backward()
            if data_parallel == "gradient all-reduce":
                for p in model.parameters():
                    local = p.grad.to_local()
                    dist.all_reduce(local, group=mesh["dp"].get_group())
                    local.div_(2)
            opt.step()
        return model, opt

    try:
        data_parallel = "fully_shard"
        model, opt = train(data_parallel)
    except AttributeError as e:  # torch 2.6: "'Stream' object has no attribute 'record_event'"
        print(f"fully_shard fails on CPU in torch {torch.__version__} ({e}): data parallel by all-reducing "
              "gradients over the dp group", flush=True)
        data_parallel = "gradient all-reduce"
        model, opt = train(data_parallel)
    params = torch.cat([p.full_tensor().detach().reshape(-1) for p in model.parameters()])
    check.expect(bool(torch.allclose(params, expected, rtol=1e-5, atol=1e-6)),
                 f"tp x dp ({data_parallel}): parameters differ from one process's training (max diff "
                 f"{float((params - expected).abs().max()):.2e})")
    print(f"tp x dp ({data_parallel}): the parameters of one process's training", flush=True)

    folder = [tempfile.mkdtemp(prefix="cohort-dcp-") if rank == 0 else None]
    dist.broadcast_object_list(folder, src=0)
    try:
        model_state, optim_state = get_state_dict(model, opt)
        dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=folder[0])
        saved = {k: v.full_tensor().clone() for k, v in model.state_dict().items()}
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()
        model_state, optim_state = get_state_dict(model, opt)
        state = {"model": model_state, "optim": optim_state}
        dcp.load(state, checkpoint_id=folder[0])
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        restored = {k: v.full_tensor() for k, v in model.state_dict().items()}
        check.expect(all(torch.equal(saved[k], restored[k]) for k in saved),
                     "torch.distributed.checkpoint: the loaded parameters differ from the saved ones")
        print("torch.distributed.checkpoint: saved and restored exactly", flush=True)
    finally:
        dist.barrier()
        if rank == 0:
            shutil.rmtree(folder[0], ignore_errors=True)
    return check.finish()


def scenario_debug_detail():
    """TORCH_DISTRIBUTED_DEBUG=DETAIL (the launcher sets it), as users set it to find a
    desynchronized collective. torch 2.x wraps plugin backends in its ProcessGroupWrapper, which
    first compares each collective's kind, shapes and the group's sequence number across ranks
    over a gloo group; 1.13 wraps only its own. DDP trains under it; the sequence number counts
    the collectives a rank issued, alike on every rank, and sends and receives leave it be; and
    where torch wraps the group, a collective that differs across ranks (all_reduce on rank 0, a
    broadcast elsewhere) raises on every rank naming both, before it reaches the backend, which
    then goes on working."""
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401  (registers the backend)

    rank, n, check, gloo, _, x_all, y_all = start_training(6, 2, 8, seed=3)
    pg = dist.distributed_c10d._get_default_group()
    backend = pg._get_backend(torch.device("cpu")) if hasattr(pg, "_get_backend") else pg
    wrapped = "Wrapper" in type(backend).__name__
    print(f"TORCH_DISTRIBUTED_DEBUG={os.environ.get('TORCH_DISTRIBUTED_DEBUG')}: the cpu backend is "
          f"{type(backend).__name__}", flush=True)
    torch.manual_seed(2)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(6, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(4):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x_all[step * 2:step * 2 + 2]), y_all[step * 2:step * 2 + 2]).backward()
        opt.step()
    expect_trained_alike(check, dist, gloo, "DDP", torch.cat([p.detach().reshape(-1) for p in model.parameters()]),
                         None, atol=0)

    def sequence():  # the backend's (torch 2.6's ProcessGroup forwards only gloo's, NCCL's and UCC's)
        return backend._get_sequence_number_for_group()

    before = sequence()
    check.expect(before > 0 and same_on_every_rank(dist, gloo, before),
                 f"the sequence number after DDP ({before}) is not one positive number on every rank")
    dist.all_reduce(torch.ones(3))
    check.expect(sequence() == before + 1, f"one all_reduce took the sequence number from {before} to {sequence()}")
    if rank < 2:
        (dist.send if rank == 0 else dist.recv)(torch.ones(2), 1 - rank)
    check.expect(sequence() == before + 1, f"a send and a receive moved the sequence number to {sequence()}")
    if wrapped:
        text = check.expect_raises(
            lambda: dist.all_reduce(torch.ones(4)) if rank == 0 else dist.broadcast(torch.ones(4), src=0),
            ["mismatch between collectives", "ALLREDUCE", "BROADCAST"], "all_reduce on rank 0, broadcast elsewhere")
        print(f"mismatch: {text[:200]}", flush=True)
        check.expect(sequence() == before + 1, f"the refused collective moved the sequence number to {sequence()}")
    else:
        print(f"torch {torch.__version__} does not wrap plugin backends under DETAIL: no mismatch to catch", flush=True)
    t = torch.full((2,), float(rank))
    dist.all_reduce(t)
    check.expect(t.tolist() == [float(n * (n - 1) // 2)] * 2, f"the group after it: all_reduce gave {t.tolist()}")
    dist.barrier(group=gloo)
    return check.finish()


def scenario_file_store():
    """init_method file:// (a FileStore on a filesystem every rank sees, as clusters with a shared
    one use): reducers asked for are refused at once, naming the FileStore and what to use instead
    (no reducer can join one), as on a HashStore; without reducers the group all-reduces and DDP trains to the same
    parameters as on gloo over the same kind of store."""
    import torch.distributed as dist
    import cohort.torch

    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    check = Checker(rank)
    # Named for this launch (the launcher is every rank's parent): a file left by another run
    # would hand its keys to this one.
    files = f"{tempfile.gettempdir()}/cohort-file-store-{os.getppid()}-{os.environ['MASTER_PORT']}"
    timeout = datetime.timedelta(seconds=FAIL_TIMEOUT_S)
    start = time.time()
    check.expect_raises(
        lambda: dist.init_process_group("cohort", init_method=f"file://{files}-refused", rank=rank, world_size=n,
                                        timeout=timeout, pg_options=cohort.torch.Options(num_reducers=2)),
        ["reducers were asked for", "FileStore (file://)", "cannot join", "TCPStore"], "reducers on a FileStore")
    check.expect(time.time() - start < FAIL_TIMEOUT_S, f"the refusal took {time.time() - start:.1f} s, not at once")
    # A HashStore (one process's memory) no reducer can reach either: a group of this rank alone.
    check.expect_raises(
        lambda: dist.init_process_group("cohort", store=dist.HashStore(), rank=0, world_size=1, timeout=timeout,
                                        pg_options=cohort.torch.Options(num_reducers=1)),
        ["reducers were asked for", "a HashStore", "cannot join"], "reducers on a HashStore")

    dist.init_process_group("cohort", init_method=f"file://{files}", rank=rank, world_size=n, timeout=timeout)
    expect_default_group_works(check, dist, "on a FileStore")
    return check.finish()


def expect_default_group_works(check, dist, where):
    """The default (cohort) group all-reduces exactly, and five DDP steps of a small MLP on it end,
    on every rank, at the same parameters as the same steps on a gloo group over the same ranks
    (each rank draws its own batches)."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    rank, n = dist.get_rank(), dist.get_world_size()
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t)
    check.expect(torch.equal(t, torch.full((5,), n * (n + 1) / 2)), f"all_reduce {where}: {t.tolist()}")
    gloo = dist.new_group(backend="gloo")

    def train(group):
        torch.manual_seed(1)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
        ddp = DDP(model, process_group=group)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        g = torch.Generator().manual_seed(rank)
        for _ in range(5):
            opt.zero_grad()
            ddp(torch.randn(4, 8, generator=g)).square().mean().backward()
            opt.step()
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    expect_trained_alike(check, dist, gloo, f"DDP {where}", train(None), train(gloo), atol=1e-6)
    dist.barrier(group=gloo)


def spawned_rank(index, n):
    """One rank that scenario_spawn's torch.multiprocessing.spawn started: the DDP tutorial's
    setup (init_process_group with the rank spawn gives it, MASTER_ADDR/MASTER_PORT from the
    environment), DDP against gloo, cleanup. A failed check exits 1, which spawn raises."""
    import torch.distributed as dist
    import cohort.torch  # noqa: F401  (registers the backend; the script's import, run again here)

    dist.init_process_group("cohort", rank=index, world_size=n, timeout=datetime.timedelta(seconds=60))
    print(f"spawned rank {index} of {n}: pid {os.getpid()}, parent {os.getppid()}", flush=True)
    check = Checker(index)
    expect_default_group_works(check, dist, "in spawned ranks")
    dist.destroy_process_group()
    if check.finish() != 0:
        sys.exit(1)


def scenario_spawn():
    """The launch of PyTorch's DDP tutorial: one process starts every rank with
    torch.multiprocessing.spawn (fresh interpreters that import this script again, so the backend
    registers in each), and each joins the cohort group with the rank spawn handed it."""
    import torch.multiprocessing as mp
    n = 3
    mp.spawn(spawned_rank, args=(n,), nprocs=n, join=True)  # raises when a rank failed
    print(f"all {n} spawned ranks passed", flush=True)
    return 0


def scenario_objects():
    """The object collectives (pickled objects in uint8 tensors), batch_isend_irecv and receives
    from any rank, as evaluation loops, samplers, pipeline schedules and parameter servers use
    them, on the cohort group."""
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401  (registers the backend)

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=60))
    rank, n = dist.get_rank(), dist.get_world_size()
    check = Checker(rank)
    mine = {"rank": rank, "name": "r" * (rank + 1), "values": list(range(rank * 3))}
    every = [None] * n
    dist.all_gather_object(every, mine)
    check.expect(every == [{"rank": r, "name": "r" * (r + 1), "values": list(range(r * 3))} for r in range(n)],
                 f"all_gather_object: {every}")
    objects = [{"config": "from rank 1", "lr": 0.1}, [1, 2, 3]] if rank == 1 else [None, None]
    dist.broadcast_object_list(objects, src=1)
    check.expect(objects == [{"config": "from rank 1", "lr": 0.1}, [1, 2, 3]], f"broadcast_object_list: {objects}")
    gathered = [None] * n if rank == 0 else None
    dist.gather_object(("rank", rank), gathered, dst=0)
    if rank == 0:
        check.expect(gathered == [("rank", r) for r in range(n)], f"gather_object: {gathered}")
    received = [None]
    dist.scatter_object_list(received, [f"shard {r}" for r in range(n)] if rank == 2 else None, src=2)
    check.expect(received == [f"shard {rank}"], f"scatter_object_list: {received}")
    # A ring of point-to-point transfers in one batch (each rank sends right, receives from left).
    send = torch.full((5,), float(rank))
    recv = torch.empty(5)
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % n), dist.P2POp(dist.irecv, recv, (rank - 1) % n)]
    for req in dist.batch_isend_irecv(ops):
        req.wait()
    check.expect(bool(torch.equal(recv, torch.full((5,), float((rank - 1) % n)))),
                 f"batch_isend_irecv: received {recv.tolist()}")
    # Receives from any rank, as a parameter server or a work queue takes what comes first:
    # rank 0 takes one message from each other rank with dist.recv, which returns the sender,
    # then one with dist.irecv, whose Work names it; in a subgroup the sender is a global rank.
    if rank == 0:
        senders = []
        for _ in range(n - 1):
            t = torch.empty(4, dtype=torch.int64)
            src = dist.recv(t, tag=3)
            senders.append(src)
            check.expect(bool(torch.equal(t, torch.full((4,), 10 * src, dtype=torch.int64))),
                         f"recv from any rank: {t.tolist()} from rank {src}")
        check.expect(sorted(senders) == list(range(1, n)), f"recv from any rank: the senders were {senders}")
        t = torch.empty(2)
        work = dist.irecv(t, tag=4)
        work.wait()
        check.expect(work._source_rank() == n - 1 and bool(torch.equal(t, torch.full((2,), float(n - 1)))),
                     f"irecv from any rank: {t.tolist()} from rank {work._source_rank()}")
    else:
        dist.send(torch.full((4,), 10 * rank, dtype=torch.int64), 0, tag=3)
        if rank == n - 1:
            dist.send(torch.full((2,), float(rank)), 0, tag=4)
    sub = dist.new_group([1, 2])
    if rank == 1:
        t = torch.empty(3)
        src = dist.recv(t, group=sub)
        check.expect(src == 2 and bool(torch.equal(t, torch.full((3,), 2.0))),
                     f"recv from any rank of a subgroup: {t.tolist()} from rank {src}")
    elif rank == 2:
        dist.send(torch.full((3,), 2.0), 1, group=sub)

    # Results the backend writes back on its own thread (into non-contiguous tensors, ones padded
    # to whole int32s, widened dtypes, coalesced runs, list outputs; on a GPU, every CUDA tensor)
    # land in parameters that require grad and in tensors made under torch.inference_mode(), as
    # gloo's in-place results do, and the group goes on.
    total = float(sum(range(1, n + 1)))
    p = torch.nn.Parameter((torch.ones(3, 2) * (rank + 1)).t())  # not contiguous
    dist.all_reduce(p)
    check.expect(p.is_leaf and p.requires_grad and torch.equal(p.detach(), torch.full((2, 3), total)),
                 f"all_reduce into a non-contiguous parameter: {p.tolist()}")
    h = torch.nn.Parameter(torch.full((3,), float(rank), dtype=torch.float16))  # 6 bytes: padded
    dist.broadcast(h, src=n - 1)
    check.expect(torch.equal(h.detach(), torch.full((3,), float(n - 1), dtype=torch.float16)),
                 f"broadcast into a padded parameter: {h.tolist()}")
    params = [torch.nn.Parameter(torch.empty(3)) for _ in range(n)]
    dist.all_gather(params, torch.full((3,), float(rank)))
    check.expect(all(torch.equal(q.detach(), torch.full((3,), float(r))) for r, q in enumerate(params)),
                 f"all_gather into parameters: {[q.tolist() for q in params]}")
    runs = [torch.nn.Parameter(torch.ones(2) * (rank + 1)), torch.nn.Parameter(torch.ones(3) * (rank + 1))]
    dist.distributed_c10d._get_default_group().allreduce_coalesced(runs, dist.AllreduceCoalescedOptions()).wait()
    check.expect(all(torch.equal(q.detach(), torch.full(q.shape, total)) for q in runs),
                 f"allreduce_coalesced of parameters: {[q.tolist() for q in runs]}")
    with torch.inference_mode():
        mask = torch.tensor([rank % 2, 1, 0], dtype=torch.int8)  # reduced as int32, cast back
    dist.all_reduce(mask, op=dist.ReduceOp.MAX)  # outside inference mode, as gloo takes it
    check.expect(mask.tolist() == [1, 1, 0], f"all_reduce of an inference tensor: {mask.tolist()}")
    with torch.inference_mode():
        flat = (torch.ones(3, 2) * (rank + 1)).t()
        dist.all_reduce(flat)
        check.expect(torch.equal(flat, torch.full((2, 3), total)), f"all_reduce in inference mode: {flat.tolist()}")
        parts = [torch.empty(2, dtype=torch.int8) for _ in range(n)]
        dist.all_gather(parts, torch.full((2,), rank, dtype=torch.int8))
        check.expect([q.tolist() for q in parts] == [[r, r] for r in range(n)],
                     f"all_gather in inference mode: {[q.tolist() for q in parts]}")
        inbox = [torch.empty(2, dtype=torch.int64) for _ in range(n)]
        dist.all_to_all(inbox, [torch.full((2,), 10 * rank + j) for j in range(n)])
        check.expect([q.tolist() for q in inbox] == [[10 * j + rank] * 2 for j in range(n)],
                     f"all_to_all in inference mode: {[q.tolist() for q in inbox]}")
    dist.barrier()
    return check.finish()


def scenario_wire(wire, via_options):
    """Wire compression on the Reduction Server: float32 all-reduces come back rounded once to the
    wire type, identical on every rank and within that rounding of the exact sum; DDP trains."""
    import torch
    import torch.distributed as dist
    import cohort.torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    options = cohort.torch.Options(wire_dtype=wire) if via_options else None
    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=60),
                            pg_options=options)
    rank, n = dist.get_rank(), dist.get_world_size()
    check = Checker(rank)
    described = cohort.torch.backend_of().describe()
    check.expect(f"wire {wire}" in described, f"the group says it compresses: {described}")
    gloo = dist.new_group(backend="gloo")
    eps = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11}[wire]
    narrow = {"bf16": torch.bfloat16, "f16": torch.float16}[wire]
    for op_name, op in (("SUM", dist.ReduceOp.SUM), ("AVG", dist.ReduceOp.AVG)):
        for count in (1, 1001, 1_000_003):
            name = f"allreduce {op_name} float32 x{count} over {wire}"
            every = torch.stack([inputs(torch, r, count, torch.float64, 50 + count) for r in range(n)])
            want = every.sum(0) / (n if op_name == "AVG" else 1)
            t = inputs(torch, rank, count, torch.float64, 50 + count).float()
            dist.all_reduce(t, op=op)
            # One rounding of each input on the way out, one of the result on the way back.
            bound = eps * (every.abs().sum(0) + want.abs()) + 1e-30
            check.expect(bool(((t.double() - want).abs() <= bound).all()), f"{name}: beyond the wire's rounding")
            check.expect(torch.equal(t.to(narrow).float(), t), f"{name}: the result is not in {wire} (not compressed?)")
            check.expect(same_on_every_rank(dist, gloo, digest(t)), f"{name}: ranks differ in bytes")
    exact = torch.full((4097,), 1.0 + 2.0 ** -20, dtype=torch.float64) * (rank + 1)
    dist.all_reduce(exact)
    check.expect(torch.equal(exact, torch.full((4097,), (1.0 + 2.0 ** -20) * n * (n + 1) / 2, dtype=torch.float64)),
                 "float64 is not compressed")
    if via_options:
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(9)
        x = torch.randn(64 * n, 16, generator=g)
        y = (x @ torch.randn(16, 4, generator=g)).argmax(1)
        model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
        ddp = DDP(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
        losses = []
        for step in range(40):
            lo = ((step % 4) * n + rank) * 16
            loss = torch.nn.functional.cross_entropy(ddp(x[lo:lo + 16]), y[lo:lo + 16])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
        print(f"DDP over {wire}: loss {first:.3f} -> {last:.3f}", flush=True)
        check.expect(last < first * 0.6, f"DDP over {wire}: the loss did not fall ({first:.3f} -> {last:.3f})")
        params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        check.expect(same_on_every_rank(dist, gloo, digest(params)), f"DDP over {wire}: ranks end with different parameters")
    dist.barrier(group=gloo)
    return check.finish()


def scenario_cuda():
    """CUDA tensors: staged through pinned host memory and written back (uint8 widened to int32 there;
    a sparse tensor's nonzeros through the host; a parameter that requires grad); same results as
    CPU."""
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=60))
    rank, n = dist.get_rank(), dist.get_world_size()
    check = Checker(rank)
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.uint8):
        cpu = inputs(torch, rank, 100_003, dtype, 7)
        gpu = cpu.to(device)
        dist.all_reduce(cpu)
        work = dist.all_reduce(gpu, async_op=True)
        fut = work.get_future()
        work.wait()
        check.expect(torch.equal(gpu.cpu(), cpu), f"allreduce of a CUDA {dtype} tensor")
        check.expect(fut.value()[0].device == device, "the future yields the CUDA tensor")
        b = (torch.arange(1001, device=device) * (rank + 1)).to(dtype)
        dist.broadcast(b, src=n - 1)
        check.expect(torch.equal(b.cpu(), (torch.arange(1001) * n).to(dtype)), f"broadcast of a CUDA {dtype} tensor")
        outs = [torch.empty(5, dtype=dtype, device=device) for _ in range(n)]
        dist.all_gather(outs, torch.full((5,), rank, dtype=dtype, device=device))
        check.expect(all(torch.equal(o.cpu(), torch.full((5,), r, dtype=dtype)) for r, o in enumerate(outs)),
                     f"allgather into CUDA {dtype} tensors")
        if int(os.environ.get("COHORT_NUM_REDUCERS", "0")) > 0:  # the Reduction Server: same bytes everywhere
            digests = [None] * n
            dist.all_gather_object(digests, digest(gpu.cpu()))
            check.expect(all(d == digests[0] for d in digests), f"allreduce of CUDA {dtype}: same bytes on every rank")
    def sparse(r):
        return torch.sparse_coo_tensor(torch.tensor([[r % 8, 3]]), torch.ones(2), (8,))
    s = sparse(rank).to(device)
    dist.all_reduce(s)
    check.expect(s.is_cuda and torch.equal(s.to_dense().cpu(), sum(sparse(r).to_dense() for r in range(n))),
                 "allreduce of a sparse CUDA tensor")
    # A CUDA parameter (a leaf that requires grad) broadcast and all-reduced as it is: every CUDA
    # result is written back from the host, which must not be taken for an autograd operation.
    p = torch.nn.Parameter(torch.full((7,), float(rank + 1), device=device))
    dist.broadcast(p, src=n - 1)
    dist.all_reduce(p)
    check.expect(p.is_leaf and torch.equal(p.detach().cpu(), torch.full((7,), float(n * n))),
                 f"broadcast and allreduce of a CUDA parameter: {p.tolist()}")
    return check.finish()


def scenario_bad_use():
    import torch
    import torch.distributed as dist
    import cohort.torch

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=FAIL_TIMEOUT_S))
    check = Checker(dist.get_rank())
    R = dist.ReduceOp
    pg = dist.distributed_c10d._get_default_group()
    # (dist.all_reduce takes a complex tensor as a float one twice as long; the group itself not.)
    check.expect_raises(lambda: pg.allreduce([torch.ones(3, dtype=torch.complex64)]),
                        ["cohort", "allreduce", "torch.complex64"], "complex allreduce")
    # The bitwise ops reduce integer and bool tensors only (gloo's too).
    check.expect_raises(lambda: dist.all_reduce(torch.ones(3), op=R.BAND),
                        ["allreduce", "BAND", "integer and bool tensors", "torch.float32"], "BAND")
    check.expect_raises(lambda: dist.all_reduce(torch.ones(3, dtype=torch.bfloat16), op=R.BXOR),
                        ["allreduce", "BXOR", "torch.bfloat16"], "BXOR")
    bor = dist.AllreduceCoalescedOptions()
    bor.reduceOp = R.BOR
    check.expect_raises(lambda: pg.allreduce_coalesced([torch.ones(2, dtype=torch.int32), torch.ones(2)], bor),
                        ["allreduce_coalesced", "BOR", "torch.float32"], "allreduce_coalesced BOR beside float32")
    check.expect_raises(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int64), op=dist._make_nccl_premul_sum(0.5)),
                        ["allreduce", "PREMUL_SUM", "floating-point", "torch.int64"], "PREMUL_SUM of integers")
    check.expect_raises(lambda: dist.all_reduce(torch.ones(3).to_sparse(), op=R.MAX),
                        ["allreduce of a sparse tensor", "SUM only", "MAX"], "sparse allreduce MAX")
    # (torch 2.x's dispatcher refuses it before the backend is asked, naming the SparseCPU key.)
    sparse_named = "sparse" if torch.__version__.startswith("1.") else "SparseCPU"
    check.expect_raises(lambda: dist.broadcast(torch.ones(3).to_sparse(), 0), ["broadcast", sparse_named],
                        "sparse broadcast")
    check.expect_raises(lambda: pg.allreduce([torch.ones(3), torch.ones(3)]), ["one tensor"], "two tensors")
    check.expect_raises(lambda: pg.allreduce_coalesced([torch.ones(2, dtype=torch.complex64)]),
                        ["allreduce_coalesced", "torch.complex64"], "complex allreduce_coalesced")
    check.expect_raises(lambda: pg.recv_anysource([torch.ones(1)], -1), ["recvAnysource", "tag -1"],
                        "recv from any source, bad tag")
    n = dist.get_world_size()
    check.expect_raises(lambda: dist.broadcast(torch.ones(3), src=n), ["broadcast", f"root {n}"], "broadcast root")
    check.expect_raises(lambda: dist.all_gather([torch.ones(3)] * (n + 1), torch.ones(3)),
                        ["allgather", f"needs {n} output tensors"], "allgather output count")
    check.expect_raises(lambda: dist.all_gather([torch.ones(3)] * (n - 1) + [torch.ones(4)], torch.ones(3)),
                        ["allgather", "4 elements, 3 expected"], "allgather output size")
    check.expect_raises(lambda: pg.allgather([[torch.ones(3, dtype=torch.int32)] * n], [torch.ones(3)]),
                        ["allgather", "torch.int32", "torch.float32"], "allgather output dtype")
    check.expect_raises(lambda: dist._all_gather_base(torch.ones(3 * n + 1), torch.ones(3)),
                        ["_allgather_base", f"{3 * n + 1} elements, {3 * n} expected"], "_allgather_base size")
    check.expect_raises(lambda: dist.reduce_scatter(torch.ones(2), [torch.ones(2)] * n, op=R.BAND),
                        ["reduce_scatter", "BAND", "torch.float32"], "reduce_scatter BAND")
    check.expect_raises(lambda: dist.reduce_scatter(torch.ones(2, dtype=torch.complex64),
                                                    [torch.ones(2, dtype=torch.complex64)] * n),
                        ["reduce_scatter", "torch.complex64"], "reduce_scatter complex")
    me = dist.get_rank()
    if int(torch.__version__.split(".")[0]) >= 2:  # torch 2.x refuses it before the backend sees it
        check.expect_raises(lambda: dist.send(torch.ones(2), me), ["destination rank should not be the same"],
                            "send to self", errors=(ValueError,))
    else:
        check.expect_raises(lambda: dist.send(torch.ones(2), me), ["send", f"rank {me} is not another rank"],
                            "send to self")
    check.expect_raises(lambda: dist.recv(torch.ones(2), (me + 1) % n, tag=1 << 20), ["recv", "tag 1048576"],
                        "recv with a tag out of range")
    check.expect_raises(lambda: dist.all_to_all_single(torch.ones(n + 1), torch.ones(n + 1)),
                        ["alltoall_base", "do not split equally"], "all_to_all_single without equal splits")
    check.expect_raises(lambda: dist.reduce(torch.ones(2), dst=0, op=R.BOR), ["reduce", "BOR"], "reduce BOR")
    # No result can land in a tensor whose elements share memory (an expanded view): refused when
    # the call is made, naming the operation (not failing the group on its thread); reading one
    # is fine, as a broadcast's root does.
    check.expect_raises(lambda: dist.all_reduce(torch.ones(1).expand(3)), ["allreduce", "share memory", "expanded"],
                        "allreduce into an expanded tensor")
    check.expect_raises(lambda: dist.broadcast(torch.zeros(1).expand(3), src=(me + 1) % n),
                        ["broadcast", "share memory"], "broadcast into an expanded tensor")
    check.expect_raises(lambda: dist.all_gather([torch.zeros(1).expand(3)] * n, torch.ones(3)),
                        ["allgather", "share memory"], "allgather into expanded tensors")
    check.expect_raises(lambda: pg.allreduce_coalesced([torch.ones(2), torch.ones(1).expand(2)]),
                        ["allreduce_coalesced", "share memory"], "allreduce_coalesced of an expanded tensor")
    shared = torch.full((1,), 5.0).expand(3) if me == 0 else torch.zeros(3)
    dist.broadcast(shared, src=0)
    check.expect(torch.equal(shared, torch.full((3,), 5.0)), f"broadcast from an expanded root tensor: {shared.tolist()}")
    # Refused calls leave the group usable.
    t = torch.ones(4)
    dist.all_reduce(t)
    check.expect(torch.equal(t, torch.full((4,), float(dist.get_world_size()))), "the group works after refusals")
    # Shut down (destroy_process_group does it on torch 2.14), the group still says what it was,
    # and refuses operations by name.
    backend = cohort.torch.backend_of()
    reducers, before = backend.num_reducers, backend.describe()
    backend.shutdown()
    check.expect(backend.num_reducers == reducers, f"num_reducers after shutdown: {backend.num_reducers}")
    check.expect(backend.describe() == before + ", shut down", f"describe() after shutdown: {backend.describe()}")
    check.expect_raises(lambda: pg.allreduce([torch.ones(3)]), ["cohort", "allreduce", "shut down"],
                        "allreduce after shutdown")
    check.expect_raises(lambda: pg.allreduce_coalesced([torch.ones(3)]), ["cohort", "shut down"],
                        "allreduce_coalesced after shutdown")
    check.expect_raises(lambda: dist.broadcast(torch.ones(3), 0), ["cohort", "broadcast", "shut down"],
                        "broadcast after shutdown")
    dist.destroy_process_group()
    return check.finish()


def scenario_mismatch():
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=FAIL_TIMEOUT_S))
    rank, n = dist.get_rank(), dist.get_world_size()
    check = Checker(rank)
    sub = dist.new_group(backend="cohort")
    sparse_group = dist.new_group(backend="cohort")
    pinned = os.environ.get("COHORT_ALLREDUCE_ALGORITHM")
    if os.environ.get("COHORT_TORCH_CHECK_CALLS") == "1":
        # Every rank sees every descriptor: each names a rank that passes something else, even
        # where the library reduces both alike (int8 and uint8 both as int32).
        dtype_group = dist.new_group(backend="cohort")
        check.expect_raises(
            lambda: dist.all_reduce(torch.ones(8, dtype=torch.int8 if rank == 0 else torch.uint8),
                                    group=dtype_group),
            ["the ranks disagree", "8 elements of torch.int8 with SUM" if rank else
             "8 elements of torch.uint8 with SUM"], "allreduce of int8 against uint8")
        expected = ["the ranks disagree", "elements of torch.float32 with SUM",
                    f"this worker ({rank}) {1000 + rank} elements"]
    else:
        # The library compares the ranks' calls (the reducers, the exchanges of recursive doubling
        # and the ring, the shared-memory all-reduce's published calls), with no all-gather
        # before; each rank's error quotes one that differs. (At the timeout the error would be a
        # deadline, not this.)
        want = pinned or "shared-memory"  # kAuto's choice on one host
        described = cohort.torch.backend_of().describe()
        check.expect(f"all-reduce {want} " in described, f"not the {want} all-reduce: {described}")
        expected = ["the workers disagree", "called", f"this worker {1000 + rank} f32"]
    start = time.time()
    text = check.expect_raises(lambda: dist.all_reduce(torch.ones(1000 + rank)), expected,
                               "allreduce over different sizes")
    print(f"allreduce: {text}", flush=True)
    check.expect(time.time() - start < FAIL_TIMEOUT_S + SLACK_S, "the allreduce error came past the timeout")
    check.expect_raises(lambda: dist.all_reduce(torch.ones(10)), ["failed earlier"], "the group after the error")
    # The library's own check (allgather's call header): whoever receives from a disagreeing rank
    # names it; the others see their peer fail or go silent. Nobody hangs past the timeout.
    start = time.time()
    text = check.expect_raises(
        lambda: dist.all_gather([torch.empty(5 + rank)] * n, torch.ones(5 + rank), group=sub),
        ["cohort", "allgather", "worker"], "allgather over different sizes")
    print(f"allgather: {text}", flush=True)
    took = time.time() - start
    check.expect(took < FAIL_TIMEOUT_S + SLACK_S, f"the allgather error took {took:.1f} s, past the timeout")
    # Sparse tensors of different sizes: every rank sees every rank's shape and names one that differs.
    start = time.time()
    text = check.expect_raises(
        lambda: dist.all_reduce(torch.ones(10 + rank).to_sparse(), group=sparse_group),
        ["the ranks disagree", "a sparse torch.float32 tensor of size [",
         f"this worker ({rank}) a sparse torch.float32 tensor of size [{10 + rank}]"],
        "sparse allreduce over different sizes")
    print(f"sparse allreduce: {text}", flush=True)
    took = time.time() - start
    check.expect(took < FAIL_TIMEOUT_S + SLACK_S, f"the sparse allreduce error took {took:.1f} s, past the timeout")
    return check.finish()


def scenario_mismatch_sizes():
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=FAIL_TIMEOUT_S))
    rank = dist.get_rank()
    check = Checker(rank)
    odd = 2
    mine, theirs = (100000, 1000) if rank == odd else (1000, 100000)
    expected = ["the workers disagree", f"called {theirs} f32 (sum), this worker {mine} f32 (sum)"]
    if rank != odd:
        expected.append(f"worker {odd} called")
    # Each all-reduce compares the calls only within its own exchanges, which recursive doubling's
    # and the ring's (or the Reduction Server's) never share: the stall notices find it. A deadline
    # error would not name the call.
    start = time.time()
    text = check.expect_raises(lambda: dist.all_reduce(torch.ones(mine)), expected,
                               "allreduce over sizes that pick different algorithms")
    print(f"allreduce: {text}", flush=True)
    took = time.time() - start
    check.expect(took < FAIL_TIMEOUT_S + SLACK_S, f"the allreduce error took {took:.1f} s, past the timeout")
    return check.finish()


def expect_disagreement(calls, quoted, what):
    """The scenarios of ranks whose calls never meet: in a cohort group, calls(torch, dist, rank)
    must raise, quoting every fragment of quoted(rank), before the group's timeout (a deadline
    error would not quote the calls)."""
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=FAIL_TIMEOUT_S))
    rank = dist.get_rank()
    check = Checker(rank)
    start = time.time()
    text = check.expect_raises(lambda: calls(torch, dist, rank), quoted(rank), what)
    print(f"rank {rank}: {text}", flush=True)
    took = time.time() - start
    check.expect(took < FAIL_TIMEOUT_S, f"the error took {took:.1f} s, the timeout's")
    return check.finish()


def scenario_mismatch_collectives():
    # A script whose ranks took different paths: no algorithm's exchanges meet the other call's,
    # and neither finishes without every rank; the stall notices find it.
    odd = 1
    count = 100000 if os.environ.get("COHORT_NUM_REDUCERS", "0") != "0" else 1000

    def calls(torch, dist, rank):
        if rank == odd:
            dist.barrier()
        else:
            dist.all_reduce(torch.ones(count))

    return expect_disagreement(
        calls, lambda rank: ["the workers disagree", "called " + (f"all-reduce of {count} f32 (sum)" if rank == odd
                                                                  else "barrier")],
        "barrier against allreduce")


def scenario_mismatch_order(ahead=1):
    # The root's broadcasts send and end without waiting for the others: rank 0 is in call
    # `ahead` + 1 while the others are in their first (ahead=40: a loop of broadcasts that only
    # rank 0 runs, as a script that restores state on rank 0 only might).
    def calls(torch, dist, rank):
        if rank == 0:
            for _ in range(ahead):
                dist.broadcast(torch.ones(8), src=0)
            dist.all_reduce(torch.ones(1000))
        else:
            dist.all_reduce(torch.ones(1000))
            for _ in range(ahead):
                dist.broadcast(torch.ones(8), src=0)

    # With many broadcasts rank 0 may find it before its last one (N calls before this one, N <
    # `ahead`): its eager sends can fill the shared-memory queues of ranks that wait elsewhere, and
    # then a broadcast of its waits, and looks (seen under a loaded 2-core suite: 31 of 40).
    back = "1 call before this one" if ahead == 1 else "calls before this one"
    return expect_disagreement(
        calls, lambda rank: (["called all-reduce of 1000 f32 (sum) where this worker called broadcast of",
                              back] if rank == 0 else
                             ["the workers disagree", "called broadcast of"]),
        "broadcast and allreduce in different orders")


def scenario_mismatch_roots():
    # Ranks 0 and 1 finish rank 0's broadcast and wait in the barrier; rank 2 waits for rank 1, its
    # parent in a broadcast from rank 1. The calls differ only in their roots.
    def calls(torch, dist, rank):
        dist.broadcast(torch.ones(8), src=0 if rank < 2 else 1)
        dist.barrier()

    return expect_disagreement(
        calls, lambda rank: (["called broadcast of", "from root 1 where this worker called broadcast of",
                              "from root 0, 1 call before this one"] if rank < 2 else
                             ["the workers disagree", "from root 0, this worker broadcast of", "from root 1"]),
        "broadcasts from different roots")


def scenario_mismatch_own_roots():
    # A script that passes src=dist.get_rank(): every rank is the root of its own broadcast, whose
    # sends all leave eagerly and which no rank receives, so the broadcast itself ends on every rank
    # without a sign. The all-reduce after it compares the digests of the calls before it.
    def calls(torch, dist, rank):
        dist.broadcast(torch.ones(8), src=rank)
        dist.all_reduce(torch.ones(1000))

    # (The backend moves the bytes as the widest type that divides them: 4 i64.)
    return expect_disagreement(
        calls, lambda rank: ["after other calls than this worker's",
                             f"after broadcast of 4 i64 from root {rank} ("],
        "broadcasts each from its own root")


def scenario_no_join():
    import torch.distributed as dist
    import cohort.torch  # noqa: F401

    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    check = Checker(rank)
    # A store that does not wait for every rank to connect (env:// would make rank 0 wait there,
    # before the backend is even asked): the backend's own rendezvous must notice the absence.
    # (USE_LIBUV=0, as env:// reads it, for a torch 2.x built without libuv: Debian 13's.)
    libuv = {"use_libuv": False} if os.environ.get("USE_LIBUV") == "0" else {}
    store = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), n, rank == 0,
                          timeout=datetime.timedelta(seconds=FAIL_TIMEOUT_S), wait_for_workers=False, **libuv)
    start = time.time()
    text = check.expect_raises(
        lambda: dist.init_process_group("cohort", store=store, rank=rank, world_size=n,
                                        timeout=datetime.timedelta(seconds=FAIL_TIMEOUT_S)),
        ["cohort", "worker 2"], "init without rank 2")
    took = time.time() - start
    print(f"init failed after {took:.1f} s: {text}", flush=True)
    check.expect(took < FAIL_TIMEOUT_S + SLACK_S, f"the error took {took:.1f} s, past the timeout")
    return check.finish()


def dead_peer_start(timeout_s=FAIL_TIMEOUT_S):
    """The dead-peer scenarios' start: a group with a short timeout, one all-reduce that works.
    Returns (torch, dist, check, rank, victim)."""
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=timeout_s))
    rank, n = dist.get_rank(), dist.get_world_size()
    check = Checker(rank)
    t = torch.ones(1000)
    dist.all_reduce(t)
    check.expect(torch.equal(t, torch.full((1000,), float(n))), "the first allreduce")
    victim = n - 1
    # The victim dies only once every rank has its result: a rank that returns from an
    # all-reduce may still have sends in flight that its peers need, and a process that exits
    # with unread data resets its connections, so the first all-reduce itself could fail.
    store = dist.distributed_c10d._get_default_store()
    store.set(f"dead-peer-first-{rank}", "done")
    store.wait([f"dead-peer-first-{r}" for r in range(n)])
    return torch, dist, check, rank, victim


def scenario_dead_peer():
    torch, dist, check, rank, victim = dead_peer_start()
    if rank == victim:
        os._exit(VICTIM_EXIT)  # die without saying goodbye
    time.sleep(0.5)
    start = time.time()
    text = check.expect_raises(lambda: dist.all_reduce(torch.ones(100_000)), ["cohort", f"worker {victim}"],
                               "allreduce with a dead peer")
    took = time.time() - start
    print(f"allreduce failed after {took:.1f} s: {text}", flush=True)
    check.expect(took < FAIL_TIMEOUT_S + SLACK_S, f"the error took {took:.1f} s, past the timeout")
    start = time.time()
    check.expect_raises(lambda: dist.all_reduce(torch.ones(10)), ["failed earlier"], "the next operation")
    check.expect(time.time() - start < 2, "an operation after a failure fails at once")
    return check.finish()


def scenario_abort_far():
    """A rank of four aborts its group and lives on, during a ring all-reduce of the others (which
    compares their calls within its own exchanges, no all-gather before it): only its ring
    neighbour waits for it; the two others wait for ranks that failed (alive, but making no more
    calls). Each of the three fails naming the aborted rank well before the group's 60 s
    timeout: its neighbours from the transport, rank 1 from what the ranks that gave up told
    the store (PeerFailureWatch; with COHORT_TORCH_WATCH_PEERS=0 they wait out the timeout), or
    from its own transport when that saw the aborted rank's connection reset first."""
    import torch
    import torch.distributed as dist
    import cohort.torch

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=ABORT_TIMEOUT_S))
    rank, n = dist.get_rank(), dist.get_world_size()
    check = Checker(rank)
    store = dist.distributed_c10d._get_default_store()
    dist.all_reduce(torch.ones(1000))
    victim = n - 1
    if rank == victim:
        cohort.torch.backend_of().abort()
        store.set("far/aborted", "1")
        store.wait([f"far/done/{r}" for r in range(n - 1)], datetime.timedelta(seconds=2 * ABORT_TIMEOUT_S))
        return check.finish()
    store.wait(["far/aborted"], datetime.timedelta(seconds=ABORT_TIMEOUT_S))
    text = expect_peer_call_fails_naming(check, torch, dist, victim, "an all-reduce rank 3 will not make (it aborted)")
    if rank not in (0, n - 2):  # rank 0 receives from the aborted rank, rank n - 2 sends to it
        # It waits in the ring for ranks that gave up: it learns what they said from the store
        # (PeerFailureWatch), unless its own transport saw its connection to the aborted rank
        # reset first (a race, which a loaded machine tips that way); either names the rank.
        relayed = "gave up" in (text or "")
        check.expect(relayed or f"worker {victim} is gone" in (text or ""),
                     f"the error is neither what another rank said nor its own transport's: {text}")
        if relayed:
            check.expect(error_type(cohort.torch.backend_of()) == "REMOTE_ERROR",
                         f"get_error(): {error_type(cohort.torch.backend_of())}")
    # Every rank stays until all are done: an exit resets connections, which the others see.
    store.set(f"far/done/{rank}", "1")
    store.wait([f"far/done/{r}" for r in range(n - 1)], datetime.timedelta(seconds=2 * ABORT_TIMEOUT_S))
    return check.finish()


def scenario_dead_peer_reducers():
    """A worker dies while the others' all-reduces on the Reduction Server wait for it: their queued
    all-reduces each fail before the timeout, the first naming the dead worker (the reducers tell
    them), none hangs."""
    torch, dist, check, rank, victim = dead_peer_start()
    if rank == victim:
        # The others' next round waits at the reducers for this worker's header when it dies.
        time.sleep(2)
        os._exit(VICTIM_EXIT)  # die without saying goodbye
    start = time.time()
    works = [dist.all_reduce(torch.ones(1 << 22), async_op=True) for _ in range(8)]
    texts, times = [], []
    for i, w in enumerate(works):
        texts.append(check.expect_raises(w.wait, ["cohort"], f"queued allreduce {i} with a dead peer"))
        times.append(round(time.time() - start, 1))
    took = time.time() - start
    print(f"the queued all-reduces failed after {times} s: {texts}", flush=True)
    check.expect(took < FAIL_TIMEOUT_S + SLACK_S, f"the errors took {took:.1f} s, past the timeout")
    first = texts[0] or ""
    check.expect(f"worker {victim} is gone" in first, f"the first error names worker {victim}: {first}")
    return check.finish()


def scenario_dead_peer_between():
    """A worker dies between steps while the others compute (sleep 4 s, past the reducers' former
    2 s notice window): their next all-reduce on the Reduction Server raises naming the dead rank,
    long before the group's 60 s timeout (a reducer that ended its service would have been blamed
    over TCP, and waited out the timeout over shared memory)."""
    torch, dist, check, rank, victim = dead_peer_start(timeout_s=60)
    store = dist.distributed_c10d._get_default_store()
    if rank == victim:
        # Dies once the others have their results (their first all-reduce returned).
        store.wait([f"between/{r}" for r in range(dist.get_world_size()) if r != victim])
        os._exit(VICTIM_EXIT)  # die without saying goodbye
    store.set(f"between/{rank}", "done")
    time.sleep(4)
    start = time.time()
    text = check.expect_raises(lambda: dist.all_reduce(torch.ones(1 << 20)), ["cohort", f"worker {victim} is gone"],
                               "the next allreduce after a rank died between steps")
    print(f"the next allreduce failed after {time.time() - start:.1f} s: {text}", flush=True)
    return check.finish()


# The exit code of the rank dead-peer kills.
VICTIM_EXIT = 3

def fork_child_group(port, rank, queue):
    """A forked child's fresh group of 2 on a new store: one all-reduce, its result on `queue`."""
    import torch
    import torch.distributed as dist
    try:
        dist.init_process_group("cohort", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(seconds=20))
        t = torch.full((1000,), float(rank + 1))
        dist.all_reduce(t)
        dist.destroy_process_group()
        queue.put(("ok", float(t[0])))
    except Exception as e:  # noqa: BLE001  the parent reports it
        queue.put(("error", f"{type(e).__name__}: {e}"))


def scenario_fork_after_destroy():
    """Rank 0 destroys its group while rank 1 is busy (sleeps 4 s, not progressing UCX), so rank 0's
    UCX close is still pending when destroy returns; then each rank forks a multiprocessing child
    (the fork start method) that builds a fresh cohort group with the other's child: it must work
    (UCX's process-wide state is not left to the child)."""
    import multiprocessing
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=60))
    rank, n = dist.get_rank(), dist.get_world_size()
    check = Checker(rank)
    t = torch.ones(1000)
    dist.all_reduce(t)
    check.expect(torch.equal(t, torch.full((1000,), float(n))), "the first allreduce")
    port = [free_port() if rank == 0 else None]
    dist.broadcast_object_list(port, src=0)
    if rank == 1:
        time.sleep(4)  # busy: rank 0's close waits for this process to progress
    start = time.time()
    dist.destroy_process_group()
    print(f"destroy_process_group took {time.time() - start:.1f} s", flush=True)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=fork_child_group, args=(port[0], rank, queue))
    child.start()
    try:
        result = queue.get(timeout=60)
    except Exception:  # noqa: BLE001  queue.Empty: the child hung
        result = ("error", "no answer from the forked child within 60 s")
    child.join(10)
    if child.is_alive():
        child.kill()
    print(f"forked child: {result}", flush=True)
    check.expect(result == ("ok", 3.0), f"the forked child's group: {result}")
    return check.finish()


def error_type(backend):
    """backend.get_error()'s name: torch's ErrorType where torch has one, else the name itself."""
    error = backend.get_error()
    return error if isinstance(error, str) else error.name


def expect_silent_peer_times_out(check, torch, dist, what):
    """The last rank stays alive but never makes the next all-reduce; the others' fails after the
    group's timeout, FAIL_TIMEOUT_S (`what`: where that timeout came from). Returns check.finish()."""
    rank, n = dist.get_rank(), dist.get_world_size()
    if rank == n - 1:
        time.sleep(FAIL_TIMEOUT_S + SLACK_S + 5)  # alive, but never makes the call
        return check.finish()
    start = time.time()
    work = dist.all_reduce(torch.ones(1000), async_op=True)
    # A ring passes the wait along: a rank names the peer it waited for (the silent one, or a
    # neighbour stuck behind it).
    text = check.expect_raises(lambda: work.wait(), ["cohort", "DEADLINE_EXCEEDED", "worker", "timed out"],
                               "allreduce with a silent peer")
    took = time.time() - start
    print(f"allreduce failed after {took:.1f} s: {text}", flush=True)
    check.expect(FAIL_TIMEOUT_S - 1 < took < FAIL_TIMEOUT_S + SLACK_S,
                 f"the error took {took:.1f} s, not {what} ({FAIL_TIMEOUT_S} s)")
    import cohort.torch
    check.expect(error_type(cohort.torch.backend_of()) == "TIMEOUT",
                 f"get_error() after the timeout: {error_type(cohort.torch.backend_of())}")
    return check.finish()


def scenario_silent_peer():
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=FAIL_TIMEOUT_S))
    return expect_silent_peer_times_out(Checker(dist.get_rank()), torch, dist, "the timeout")


def scenario_set_timeout():
    """A group made with a long timeout, then given a short one: torch.distributed.set_timeout
    where torch has it (2.14: through Backend::setTimeout), else the private _set_pg_timeout where
    torch has that (2.6: cohort.torch wraps it), else backend_of(group).set_timeout (1.13). An
    all-reduce with a silent peer then fails at the short timeout, not the long one."""
    import torch
    import torch.distributed as dist
    import cohort.torch

    long_s = 6 * FAIL_TIMEOUT_S
    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=long_s))
    rank, n = dist.get_rank(), dist.get_world_size()
    check = Checker(rank)
    backend = cohort.torch.backend_of()
    check.expect(f"timeout {long_s}s" in backend.describe(), f"made with {long_s} s: {backend.describe()}")
    short = datetime.timedelta(seconds=FAIL_TIMEOUT_S)
    if hasattr(dist, "set_timeout"):
        dist.set_timeout(short)
        how = "torch.distributed.set_timeout"
    elif hasattr(dist.distributed_c10d, "_set_pg_timeout"):
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            dist.distributed_c10d._set_pg_timeout(short)
        check.expect(not warned, f"_set_pg_timeout warned: {[str(w.message) for w in warned]}")
        how = "torch.distributed.distributed_c10d._set_pg_timeout"
    else:
        backend.set_timeout(short)
        how = "backend_of(group).set_timeout"
    print(f"timeout set to {FAIL_TIMEOUT_S} s by {how}: {backend.describe()}", flush=True)
    check.expect(f"timeout {FAIL_TIMEOUT_S}s" in backend.describe(), f"after {how}: {backend.describe()}")
    check.expect_raises(lambda: backend.set_timeout(0), ["cohort", "must be positive"], "a timeout of 0")
    t = torch.ones(1000)
    dist.all_reduce(t)
    check.expect(torch.equal(t, torch.full((1000,), float(n))), "an all-reduce under the new timeout")
    return expect_silent_peer_times_out(check, torch, dist, f"the new timeout (made with {long_s} s)")


# A group's timeout where a check must tell an abort from the timeout, and how long past an abort
# its effects may take (the abort itself is seen within milliseconds; processes exit in a second).
ABORT_TIMEOUT_S = 60
ABORT_SLACK_S = 20


def exited(pid):
    """True once process `pid` has exited (gone, or a zombie its parent has not reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def expect_peer_call_fails_naming(check, torch, dist, peer, what):
    """This rank's next all-reduce, which `peer` (gone, or aborted) will never make, fails naming it
    well before the group's timeout."""
    start = time.time()
    text = check.expect_raises(lambda: dist.all_reduce(torch.ones(1 << 20)), ["cohort", f"worker {peer}"], what)
    took = time.time() - start
    print(f"{what}: failed after {took:.1f} s: {text}", flush=True)
    check.expect(took < ABORT_SLACK_S, f"{what}: the error took {took:.1f} s (timeout {ABORT_TIMEOUT_S} s)")
    return text


def scenario_abort(peer_calls, recover):
    """Rank 1 issues three all-reduces that rank 0 does not make, then aborts its group from
    another thread: torch's _abort_process_group where it reaches the backend (2.14, through
    Backend::abort), else backend_of(group).abort(). The all-reduce in flight and the queued ones
    raise within seconds, not at the group's 60 s timeout, saying the group was aborted; the group
    then describes itself as aborted and refuses operations.
    `peer_calls`: rank 0 then makes an all-reduce, which fails naming rank 1 rather than waiting
    out the timeout, although rank 1's process lives on: over TCP rank 1's aborted transport
    reset its connections; over shared memory it gave up its liveness token.
    `recover`: both ranks then recover as fault-tolerant training does (torch 2.14 resets its
    group names on an abort for this): each drops its group and makes a new one on the same store,
    whose all-reduce works (without reducers: they serve the first group's session only)."""
    import threading
    import torch
    import torch.distributed as dist
    import cohort.torch

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=ABORT_TIMEOUT_S))
    rank, n = dist.get_rank(), dist.get_world_size()
    check = Checker(rank)
    store = dist.distributed_c10d._get_default_store()
    backend = cohort.torch.backend_of()
    t = torch.ones(1000)
    dist.all_reduce(t)
    check.expect(torch.equal(t, torch.full((1000,), float(n))), "an all-reduce before the abort")
    if rank != 1:
        store.wait(["abort/done"], datetime.timedelta(seconds=ABORT_TIMEOUT_S))
        if peer_calls:
            expect_peer_call_fails_naming(check, torch, dist, 1, "an all-reduce rank 1 will not make (it aborted)")
        return recover_after_abort(check, torch, dist, cohort.torch, store) if recover else check.finish()
    # torch 2.14's ProcessGroup.abort reaches every backend; 2.6's _abort_process_group only NCCL's.
    by_torch = hasattr(dist.ProcessGroup, "abort")
    works = [dist.all_reduce(torch.ones(1 << 20), async_op=True) for _ in range(3)]

    def abort_soon():
        time.sleep(0.5)
        if by_torch:
            dist.distributed_c10d._abort_process_group()
        else:
            backend.abort()

    aborter = threading.Thread(target=abort_soon)
    start = time.time()
    aborter.start()
    texts = [check.expect_raises(w.wait, ["cohort", "CANCELLED", "(the process group was aborted)"],
                                 f"all-reduce {i} after the abort") for i, w in enumerate(works)]
    took = time.time() - start
    aborter.join()
    how = "_abort_process_group" if by_torch else "backend_of(group).abort()"
    print(f"aborted by {how}: the all-reduces failed after {took:.1f} s: {texts}", flush=True)
    check.expect(took < ABORT_SLACK_S, f"the all-reduces took {took:.1f} s to fail (timeout {ABORT_TIMEOUT_S} s)")
    check.expect(all("not run" in (x or "") for x in texts[1:]), f"the queued all-reduces did not run: {texts}")
    check.expect(backend.describe().endswith(", aborted"), f"describe(): {backend.describe()}")
    if by_torch:
        check.expect(not dist.is_initialized(), "_abort_process_group() leaves no default group")
    else:
        check.expect_raises(lambda: dist.all_reduce(torch.ones(10)), ["cohort", "was aborted"],
                            "an all-reduce after the abort")
    backend.abort()  # again: nothing changes
    backend.shutdown()
    store.set("abort/done", "1")
    return recover_after_abort(check, torch, dist, cohort.torch, store) if recover else check.finish()


def recover_after_abort(check, torch, dist, cohort_torch, store):
    """scenario_abort's end on every rank: a new group on the same store, and an all-reduce on it."""
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("cohort", store=dist.PrefixStore("recovered", store), rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=ABORT_TIMEOUT_S),
                            pg_options=cohort_torch.Options(num_reducers=0))
    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t)
    check.expect(torch.equal(t, torch.full((1000,), float(n * (n + 1) // 2))), "an all-reduce on the new group")
    print(f"recovered: {cohort_torch.backend_of().describe()}", flush=True)
    dist.destroy_process_group()
    return check.finish()


def scenario_abort_hooks():
    """Abort hooks: the group's register_abort_hook where it has one (torch 2.14's ProcessGroup,
    which reaches the backend's; under 1.13 the group is the backend), else (2.6)
    backend_of(group).register_abort_hook. Rank 1 registers three (one raises, one
    it unregisters again), then aborts its group with an all-reduce in flight that rank 0 never
    makes: the two left ran once, in the order of their ids, before that all-reduce failed, the
    raising one not stopping the other, and not again at a second abort. Rank 0's hook runs when
    its next all-reduce, which rank 1 will not make, fails (before its Work is completed), and not
    again at a second failure; an all-reduce it issues is refused at once; one registered after
    that never runs. get_error() (torch's
    Backend.get_error where it has one) says SUCCESS before, COMM_ERROR after the abort, and
    REMOTE_ERROR on rank 0 after its peer's."""
    import threading
    import torch
    import torch.distributed as dist
    import cohort.torch

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=ABORT_TIMEOUT_S))
    rank = dist.get_rank()
    check = Checker(rank)
    store = dist.distributed_c10d._get_default_store()
    backend = cohort.torch.backend_of()
    group = dist.distributed_c10d._get_default_group()
    by_torch = hasattr(group, "register_abort_hook")
    register = group.register_abort_hook if by_torch else backend.register_abort_hook
    unregister = group.unregister_abort_hook if by_torch else backend.unregister_abort_hook
    print(f"hooks registered through {'ProcessGroup' if by_torch else 'backend_of(group)'}", flush=True)
    ran = []
    dist.all_reduce(torch.ones(1000))
    check.expect(error_type(backend) == "SUCCESS", f"get_error() while the group runs: {error_type(backend)}")
    if rank == 1:
        def raising():
            ran.append(1)
            raise RuntimeError("an abort hook that raises (expected by this scenario)")

        register(3, lambda: ran.append(3))
        register(1, raising)
        register(2, lambda: ran.append(2))
        unregister(2)
        unregister(99)  # never registered: nothing happens
        work = dist.all_reduce(torch.ones(1 << 20), async_op=True)
        time.sleep(0.5)
        check.expect(ran == [], f"hooks ran before anything failed: {ran}")
        seen_at_failure = []
        aborter = threading.Thread(target=backend.abort)
        aborter.start()
        try:
            work.wait()
        except RuntimeError as e:
            seen_at_failure = list(ran)
            check.expect("CANCELLED" in str(e), f"the all-reduce's error: {e}")
        aborter.join()
        check.expect(seen_at_failure == [1, 3], f"hooks that had run when the all-reduce failed: {seen_at_failure}")
        backend.abort()
        check.expect(ran == [1, 3], f"hooks after a second abort: {ran}")
        check.expect(error_type(backend) == "COMM_ERROR", f"get_error() after the abort: {error_type(backend)}")
        store.set("hooks/aborted", "1")
        return check.finish()
    store.wait(["hooks/aborted"], datetime.timedelta(seconds=ABORT_TIMEOUT_S))
    pending = []
    in_hook = []
    issued = threading.Event()

    def hook():
        issued.wait(ABORT_SLACK_S)  # the all-reduce may fail before all_reduce() has returned here
        ran.append(("7", pending[0].is_completed() if pending else "no Work"))
        # An operation of the group the hook issues (the hook runs on the group's queue thread
        # here) is refused at once, not left behind the hook until its timeout.
        started = time.monotonic()
        try:
            dist.all_reduce(torch.ones(10))
            in_hook.append("the all-reduce in the hook returned")
        except RuntimeError as e:
            in_hook.append(f"{time.monotonic() - started:.1f} s: {e}")

    register(7, hook)
    pending.append(dist.all_reduce(torch.ones(1 << 20), async_op=True))
    issued.set()
    text = check.expect_raises(pending[0].wait, ["cohort", "worker 1"], "an all-reduce rank 1 will not make (it aborted)")
    print(f"the all-reduce failed: {text}; hooks: {ran}", flush=True)
    check.expect(ran == [("7", False)], f"the hook, and whether the Work was completed when it ran: {ran}")
    check.expect(len(in_hook) == 1 and "failed earlier" in in_hook[0] and float(in_hook[0].split(" s:")[0]) < ABORT_SLACK_S,
                 f"an all-reduce issued by the hook: {in_hook}")
    check.expect(error_type(backend) == "REMOTE_ERROR", f"get_error() after rank 1 aborted: {error_type(backend)}")
    register(8, lambda: ran.append("8"))
    check.expect_raises(lambda: dist.all_reduce(torch.ones(10)), ["cohort", "failed earlier"],
                        "an all-reduce after the first failure")
    check.expect(ran == [("7", False)], f"hooks after a second failure: {ran}")
    return check.finish()


def scenario_shrink():
    """torch 2.14's shrink_group on the cohort backend, as in-process recovery uses it: rank 2 of 3
    aborts its group and leaves (a failed rank, as its peers see it); ranks 0 and 1 see an
    all-reduce fail naming worker 2 well before the timeout, agree on it through the store, shrink
    the default group without it (SHRINK_ABORT), and go on in a group of two: the new default group's all-reduce, broadcast and a DDP step agree with
    the same ranks' results on gloo, and its backend is a cohort one. A second shrink of the group
    of two, without rank 1, leaves rank 0 a group of one."""
    import torch
    import torch.distributed as dist
    import cohort.torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=ABORT_TIMEOUT_S))
    rank, n = dist.get_rank(), dist.get_world_size()
    check = Checker(rank)
    store = dist.distributed_c10d._get_default_store()
    t = torch.ones(1000)
    dist.all_reduce(t)
    check.expect(torch.equal(t, torch.full((1000,), float(n))), "an all-reduce before the failure")
    if rank == 2:
        cohort.torch.backend_of().abort()
        store.set("shrink/failed", "1")
        return check.finish()
    store.wait(["shrink/failed"], datetime.timedelta(seconds=ABORT_TIMEOUT_S))
    # Each survivor's next all-reduce fails naming rank 2, well before the timeout: directly where
    # its algorithm meets rank 2 (the shared-memory all-reduce, kAuto's on one host, sees its
    # process gone; the ring a reset connection), else from what a survivor that gave up told the
    # store (PeerFailureWatch; abort-far checks that path). Rank 1's group says a peer failed.
    expect_peer_call_fails_naming(check, torch, dist, 2, "an all-reduce rank 2 will not make (it failed)")
    if rank == 1:
        check.expect(error_type(cohort.torch.backend_of()) == "REMOTE_ERROR",
                     f"get_error() on rank 1: {error_type(cohort.torch.backend_of())}")
    # The survivors agree that rank 2 failed before either shrinks (the first to shrink aborts
    # its old group, which its peer would otherwise see fail first).
    store.set(f"shrink/seen/{rank}", "1")
    store.wait([f"shrink/seen/{r}" for r in (0, 1)], datetime.timedelta(seconds=ABORT_TIMEOUT_S))
    started = time.monotonic()
    group = dist.distributed_c10d.shrink_group([2], shrink_flags=dist.distributed_c10d.SHRINK_ABORT)
    print(f"shrink_group([2]) took {time.monotonic() - started:.1f} s", flush=True)
    check.expect(dist.get_world_size() == 2 and dist.get_rank() == rank and group.size() == 2,
                 f"the shrunk default group: rank {dist.get_rank()} of {dist.get_world_size()}")
    described = cohort.torch.backend_of(group).describe()
    check.expect("subgroup" in described, f"the shrunk group's backend: {described}")
    t = torch.full((1001,), float(rank + 1))
    dist.all_reduce(t)
    check.expect(torch.equal(t, torch.full((1001,), 3.0)), f"an all-reduce in the group of two: {t[:3].tolist()}")
    b = torch.arange(7, dtype=torch.float64) * (rank + 1)
    dist.broadcast(b, src=1)
    check.expect(torch.equal(b, torch.arange(7, dtype=torch.float64) * 2), f"a broadcast in the group of two: {b.tolist()}")
    gloo = dist.new_group(backend="gloo")
    weights = {}
    for name, pg in (("cohort", None), ("gloo", gloo)):
        torch.manual_seed(5)
        model = DDP(torch.nn.Linear(8, 3), process_group=pg)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.manual_seed(100 + rank)
        model(torch.randn(16, 8)).square().mean().backward()
        opt.step()
        weights[name] = [p.detach().clone() for p in model.parameters()]
    check.expect(all(torch.allclose(a, b, rtol=0, atol=1e-6) for a, b in zip(weights["cohort"], weights["gloo"])),
                 "a DDP step in the group of two: the parameters differ from gloo's")
    dist.destroy_process_group(gloo)
    if rank == 1:
        store.set("shrink/second", "1")
        return check.finish()
    store.wait(["shrink/second"], datetime.timedelta(seconds=ABORT_TIMEOUT_S))
    alone = dist.distributed_c10d.shrink_group([1])
    t = torch.full((5,), 4.0)
    dist.all_reduce(t)
    check.expect(alone.size() == 1 and torch.equal(t, torch.full((5,), 4.0)),
                 f"a group of one after a second shrink: size {alone.size()}, {t.tolist()}")
    return check.finish()


def scenario_dataloader_workers():
    """A stock training loop's DataLoader with worker processes forked after the group was made
    (num_workers=2, the fork start method that Python before 3.14 defaults to, persistent
    workers): DDP on the cohort backend trains over two epochs fed by the workers, the loss falls
    and both ranks end with the same parameters as the same run on gloo. Then rank 1 aborts its
    group while its workers live on: rank 0's next all-reduce fails at once naming rank 1 (the
    workers, forked while the transport was open, do not keep its liveness token held)."""
    import torch
    import torch.distributed as dist
    import cohort.torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, Dataset
    from torch.utils.data.distributed import DistributedSampler

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=ABORT_TIMEOUT_S))
    rank, n = dist.get_rank(), dist.get_world_size()
    check = Checker(rank)
    store = dist.distributed_c10d._get_default_store()
    gloo = dist.new_group(backend="gloo")
    features, classes = 16, 4
    g = torch.Generator().manual_seed(7)
    x_all = torch.randn(512, features, generator=g)
    y_all = (x_all @ torch.randn(features, classes, generator=g)).argmax(1)

    class Samples(Dataset):
        def __len__(self):
            return len(x_all)

        def __getitem__(self, i):
            return x_all[i], y_all[i], os.getpid()

    def train(group, epochs=2):
        torch.manual_seed(1)
        model = torch.nn.Sequential(torch.nn.Linear(features, 64), torch.nn.ReLU(), torch.nn.Linear(64, classes))
        ddp = DDP(model, process_group=group)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
        sampler = DistributedSampler(Samples(), num_replicas=n, rank=rank, shuffle=True, seed=0)
        loader = DataLoader(Samples(), batch_size=16, sampler=sampler, num_workers=2,
                            multiprocessing_context="fork", persistent_workers=True)
        losses, pids = [], set()
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for x, y, pid in loader:
                loss = torch.nn.functional.cross_entropy(ddp(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
                pids.update(int(p) for p in pid)
        params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        return params, losses, pids, loader

    reference, _, _, gloo_loader = train(gloo)
    del gloo_loader
    params, losses, pids, loader = train(None)
    first, last = sum(losses[:4]) / 4, sum(losses[-4:]) / 4
    print(f"cohort, fed by DataLoader workers {sorted(pids)}: loss {first:.3f} -> {last:.3f}", flush=True)
    check.expect(os.getpid() not in pids and len(pids) == 2, f"the batches came from worker processes: {pids}")
    check.expect(last < first * 0.6, f"the loss did not fall ({first:.3f} -> {last:.3f})")
    expect_trained_alike(check, dist, gloo, "DDP fed by DataLoader workers", params, reference, atol=1e-4)
    dist.barrier(group=gloo)
    if rank == 1:
        check.expect(not any(exited(p) for p in pids), f"the DataLoader workers {pids} are gone before the abort")
        cohort.torch.backend_of().abort()
        store.set("dataloader/aborted", "1")
        store.wait(["dataloader/checked"], datetime.timedelta(seconds=ABORT_TIMEOUT_S + ABORT_SLACK_S))
    else:
        store.wait(["dataloader/aborted"], datetime.timedelta(seconds=ABORT_TIMEOUT_S))
        expect_peer_call_fails_naming(check, torch, dist, 1,
                                      "an all-reduce rank 1 will not make (it aborted; its DataLoader workers live)")
        store.set("dataloader/checked", "1")
    del loader
    return check.finish()


def scenario_monitored_barrier():
    """torch.distributed.monitored_barrier on the cohort backend (torch 2.14 takes it to any backend
    with CPU tensors; older torch allows it on gloo only, so there it is called on the group):
    with every rank it passes; on a second group rank 2 never calls it: rank 0 raises within the
    timeout naming rank 2, and rank 1 naming rank 0's missing acknowledgement; on a third group
    only rank 0 calls it, with wait_all_ranks: it raises naming ranks 1 and 2."""
    import torch.distributed as dist
    import cohort.torch

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    check = Checker(rank)
    store = dist.distributed_c10d._get_default_store()
    second = dist.new_group(backend="cohort")
    third = dist.new_group(backend="cohort")
    short = datetime.timedelta(seconds=3)

    def through_the_group(group=None, timeout=None, wait_all_ranks=False):
        pg = group or dist.distributed_c10d._get_default_group()
        return pg.monitored_barrier(timeout or datetime.timedelta(seconds=60), wait_all_ranks=wait_all_ranks)

    try:
        dist.monitored_barrier()  # the group's timeout
        barrier, how = dist.monitored_barrier, "torch.distributed.monitored_barrier"
    except (RuntimeError, ValueError) as e:
        if "GLOO" not in str(e):
            raise
        through_the_group()
        barrier, how = through_the_group, "the group's monitored_barrier (this torch allows the function on gloo only)"
    print(f"every rank passed {how}", flush=True)

    def expect_fails(fragments, what, **kwargs):
        start = time.time()
        text = check.expect_raises(lambda: barrier(timeout=short, **kwargs), fragments, what)
        took = time.time() - start
        print(f"{what}: failed after {took:.1f} s: {text}", flush=True)
        check.expect(took < short.total_seconds() + SLACK_S, f"{what}: took {took:.1f} s")

    if rank == 0:
        # The failure runs the group's abort hooks (Python, on the queue thread) while this thread
        # waits in monitored_barrier: it must not hold the GIL then.
        hooks = []
        cohort.torch.backend_of(second).register_abort_hook(1, lambda: hooks.append("ran"))
        expect_fails(["monitored_barrier", "rank 2 did not reach it within 3s"], "rank 2 missing", group=second)
        check.expect(hooks == ["ran"], f"the abort hook at the failed monitored_barrier: {hooks}")
        expect_fails(["monitored_barrier", "ranks 1, 2 did not reach it within 3s"],
                     "ranks 1 and 2 missing, wait_all_ranks", group=third, wait_all_ranks=True)
        store.set("monitored/done", "1")
    elif rank == 1:
        expect_fails(["monitored_barrier", "rank 1 reached it", "rank 0's acknowledgement"],
                     "rank 2 missing, seen from rank 1", group=second)
    if rank != 0:
        store.wait(["monitored/done"], datetime.timedelta(seconds=60))
    return check.finish()


def scenario_exit_on_error():
    """Rank 1 raises an unhandled exception while an all-reduce it issued waits for rank 0, which
    makes no call meanwhile. cohort.torch's exit hook aborts the group, so rank 1 exits (code 1, its
    traceback printed) at once, not when rank 0 makes the call or the group's 60 s timeout passes
    (before the hook aborted, its shutdown waited for the all-reduce, as gloo's does). Rank 0 sees
    rank 1's process gone, then its own all-reduce fails naming rank 1."""
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=ABORT_TIMEOUT_S))
    rank = dist.get_rank()
    check = Checker(rank)
    store = dist.distributed_c10d._get_default_store()
    dist.all_reduce(torch.ones(1000))
    if rank == 1:
        store.set("exit/pid", str(os.getpid()))
        dist.all_reduce(torch.ones(1 << 20), async_op=True)
        raise RuntimeError("a user's error on rank 1, with an all-reduce in flight (expected by this scenario)")
    pid = int(store.get("exit/pid"))
    start = time.time()
    while not exited(pid) and time.time() - start < ABORT_TIMEOUT_S / 2:
        time.sleep(0.05)
    took = time.time() - start
    if not check.expect(exited(pid), f"rank 1 still runs {took:.0f} s after raising: its exit waits for its all-reduce"):
        return check.finish()
    print(f"rank 1 exited {took:.1f} s after it raised", flush=True)
    expect_peer_call_fails_naming(check, torch, dist, 1, "an all-reduce rank 1 will not make (it exited)")
    return check.finish()


def wait_done(future, seconds):
    """Whether `future` completes within `seconds` (a callback that deadlocks never completes it)."""
    deadline = time.time() + seconds
    while not future.done() and time.time() < deadline:
        time.sleep(0.05)
    return future.done()


def expect_teardown_callback(check, work, callback, value, backend, state, whose):
    """Chains `callback`, which ends `backend`'s group (leaving it `state`), on `work`'s future: it
    must return (`value`, True: it ran off the main thread) within seconds. Returns whether it did."""
    chained = work.get_future().then(callback)
    if not check.expect(wait_done(chained, ABORT_SLACK_S), f"{whose} callback that left its group {state} never returned"):
        return False
    got, elsewhere = chained.value()
    print(f"{state} from {whose} callback: {backend.describe()}", flush=True)
    check.expect(got == value and elsewhere, f"the callback's value {got}, off the main thread: {elsewhere}")
    check.expect(backend.describe().endswith(", " + state), f"describe(): {backend.describe()}")
    return True


def scenario_shutdown_in_callback():
    """A future's callback that shuts down or aborts the very group whose operation it follows runs
    on that group's own threads: rank 0 shuts the default group down from an all-reduce's callback
    (the completion thread), rank 1 aborts and destroys a second group from a receive's callback
    (the point-to-point thread). Each callback returns its value and the rank goes on: the group's
    teardown leaves the thread it runs on rather than joining it (which was std::terminate)."""
    import threading
    import torch
    import torch.distributed as dist
    import cohort.torch

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=ABORT_TIMEOUT_S))
    rank = dist.get_rank()
    check = Checker(rank)
    store = dist.distributed_c10d._get_default_store()
    second = dist.new_group([0, 1], backend="cohort")
    dist.all_reduce(torch.ones(1000))
    main_thread = threading.get_ident()
    if rank == 0:
        backend = cohort.torch.backend_of()
        # Rank 1 joins this all-reduce a second from now: the callback is registered before it
        # completes, so it runs where the future is completed.
        work = dist.all_reduce(torch.ones(1000), async_op=True)

        def shut_down(fut):
            backend.shutdown()
            return (fut.value()[0][0].item(), threading.get_ident() != main_thread)

        if expect_teardown_callback(check, work, shut_down, 2.0, backend, "shut down", "the all-reduce's"):
            check.expect_raises(lambda: dist.all_reduce(torch.ones(10)), ["cohort", "was shut down"],
                                "an all-reduce after the callback's shutdown")
        time.sleep(1.0)  # rank 1 has registered its callback on the receive by then
        dist.send(torch.full((100,), 7.0), dst=1, group=second)
    else:
        time.sleep(1.0)
        dist.all_reduce(torch.ones(1000))
        backend = cohort.torch.backend_of(second)
        received = torch.zeros(100)
        work = dist.irecv(received, src=0, group=second)

        def abort_and_destroy(fut):
            backend.abort()
            dist.destroy_process_group(second)
            return (received.sum().item(), threading.get_ident() != main_thread)

        expect_teardown_callback(check, work, abort_and_destroy, 700.0, backend, "aborted", "the receive's")
        store.set("callback/done", "1")
    if rank == 0:
        store.wait(["callback/done"], datetime.timedelta(seconds=ABORT_TIMEOUT_S))
    return check.finish()


def read_flight_recorder(path):
    """The entries of a flight-recorder file (common/flight_recorder.h, layout version 1), oldest
    first, as dicts; only whole, stable slots."""
    import struct
    with open(path, "rb") as f:
        data = f.read()
    magic, version, header_bytes, slot_bytes, capacity, rank = struct.unpack_from("<QIIIIi", data, 0)
    assert magic == 0x3152464354524F43 and version == 1 and header_bytes == 128 and slot_bytes == 64, \
        (hex(magic), version, header_bytes, slot_bytes)
    entries = []
    for i in range(capacity):
        at = header_bytes + i * slot_bytes
        (seqlock,) = struct.unpack_from("<Q", data, at)
        if seqlock == 0 or seqlock % 2:
            continue
        op_seq, comm_id, nbytes, enqueue_ns, start_ns, end_ns, peer, group, op, algo, dtype, outcome, code = \
            struct.unpack_from("<IIQqqqiiBBBBB", data, at + 8)
        entries.append(dict(index=(seqlock - 1) // 4, op_seq=op_seq, comm_id=comm_id, bytes=nbytes,
                            enqueue_ns=enqueue_ns, start_ns=start_ns, end_ns=end_ns, peer=peer, op=op,
                            outcome=outcome))
    return rank, sorted(entries, key=lambda e: e["index"])


def scenario_flight_recorder():
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401

    rank = int(os.environ["RANK"])
    folder = tempfile.mkdtemp(prefix="cohort-flight-")
    path = os.path.join(folder, f"rank-{rank}")
    os.environ["COHORT_FLIGHT_RECORDER"] = path  # read when the group's Communicator is built
    dist.init_process_group("cohort", init_method="env://")
    check = Checker(rank)
    n = dist.get_world_size()
    tensors = [torch.ones(1024) for _ in range(6)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]  # queued together
    for w in works:
        w.wait()
    dist.broadcast(torch.zeros(16, dtype=torch.int64), src=0)
    dist.barrier()
    check.expect(all(float(t[0]) == n for t in tensors), "all-reduce results")
    recorded_rank, entries = read_flight_recorder(path)
    check.expect(recorded_rank == rank, f"the file says rank {recorded_rank}")
    ops = [e["op"] for e in entries]
    # 1 allreduce, 2 broadcast, 3 allgather (the backend's agreement check before each call),
    # 10 barrier (common/flight_recorder.h FlightOp).
    check.expect(ops.count(1) == 6, f"6 all-reduces recorded once each, not {ops.count(1)} (ops {ops})")
    check.expect(ops.count(2) == 1, f"one broadcast, not {ops.count(2)}")
    # The library checks the calls: no all-gather before an all-reduce, unless asked for
    # (COHORT_TORCH_CHECK_CALLS=1).
    checks = 6 if os.environ.get("COHORT_TORCH_CHECK_CALLS") == "1" else 0
    check.expect(ops.count(3) == checks, f"{checks} agreement all-gathers, not {ops.count(3)} (ops {ops})")
    check.expect(all(e["outcome"] == 2 for e in entries), f"every entry ok: {entries}")
    seqs = [e["op_seq"] for e in entries if e["comm_id"] == entries[0]["comm_id"]]
    check.expect(seqs == sorted(seqs) and len(set(seqs)) == len(seqs), f"sequence numbers in order: {seqs}")
    allreduces = [e for e in entries if e["op"] == 1]
    check.expect(all(e["enqueue_ns"] <= e["start_ns"] <= e["end_ns"] for e in entries), "enqueue <= start <= end")
    check.expect(allreduces[-1]["enqueue_ns"] < allreduces[-1]["start_ns"],
                 "the last queued all-reduce waited behind the others: queued before it started")
    check.expect(all(e["bytes"] == 4096 for e in allreduces), "4 KiB each")
    dist.destroy_process_group()
    os.remove(path)
    os.rmdir(folder)
    return check.finish()


def scenario_overlap(expect_overlap):
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401

    rank = int(os.environ["RANK"])
    folder = tempfile.mkdtemp(prefix="cohort-overlap-")
    path = os.path.join(folder, f"rank-{rank}")
    os.environ["COHORT_FLIGHT_RECORDER"] = path
    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=120))
    check = Checker(rank)
    n = dist.get_world_size()
    # Distinct buffers of several sizes, as DDP's buckets are (integers: exact in float32).
    sizes = [1 << 20, 300001, 1 << 18, 5, 1 << 20, 700000, 1 << 19, 1 << 20]
    tensors = [torch.arange(s, dtype=torch.float32) % 97 + rank * 3 + k for k, s in enumerate(sizes)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    # The same tensor again while it may still be in flight, then a view of it, then a broadcast
    # queued between all-reduces: each must see the results of the one before.
    again = tensors[-1]
    works.append(dist.all_reduce(again, async_op=True))
    works.append(dist.all_reduce(again[1000:5000], async_op=True))
    b = torch.full((1000,), float(rank))
    works.append(dist.broadcast(b, src=1, async_op=True))
    last = torch.ones(1 << 18)
    works.append(dist.all_reduce(last, async_op=True))
    for w in works:
        w.wait()
    base = [torch.arange(s, dtype=torch.float32) % 97 for s in sizes]
    offsets = sum(r * 3 for r in range(n))
    for k in range(len(sizes) - 1):
        want = base[k] * n + offsets + n * k
        check.expect(torch.equal(tensors[k], want), f"all-reduce {k} ({sizes[k]} elements)")
    once = base[-1] * n + offsets + n * (len(sizes) - 1)
    twice = once * n
    twice[1000:5000] *= n
    check.expect(torch.equal(again, twice), "the same tensor all-reduced twice, then a view of it")
    check.expect(torch.equal(b, torch.full((1000,), 1.0)), "broadcast between all-reduces")
    check.expect(torch.equal(last, torch.full((1 << 18,), float(n))), "all-reduce after the broadcast")
    _, entries = read_flight_recorder(path)
    allreduces = sorted((e for e in entries if e["op"] == 1), key=lambda e: e["op_seq"])
    check.expect(len(allreduces) == len(sizes) + 3, f"{len(sizes) + 3} all-reduces recorded, not {len(allreduces)}")
    overlapped = [(a["op_seq"], b["op_seq"]) for a, b in zip(allreduces, allreduces[1:])
                  if b["start_ns"] < a["end_ns"]]
    print(f"rank {rank}: all-reduces that started before the one before them ended: {overlapped}", flush=True)
    if expect_overlap:
        check.expect(len(overlapped) > 0, "no all-reduce started before the one before it ended")
    else:
        check.expect(not overlapped, f"all-reduces overlapped with COHORT_TORCH_OVERLAP=0: {overlapped}")
    # Nothing else overlaps an all-reduce in flight: every other entry starts after all earlier
    # ones ended.
    for e in entries:
        if e["op"] != 1:
            before = [a for a in allreduces if a["op_seq"] < e["op_seq"]]
            check.expect(all(a["end_ns"] <= e["start_ns"] for a in before),
                         f"op {e['op']} #{e['op_seq']} started while an earlier all-reduce ran")
    check.expect(all(e["outcome"] == 2 for e in entries), f"every entry ok: {entries}")
    dist.destroy_process_group()
    os.remove(path)
    os.rmdir(folder)
    return check.finish()


def scenario_hf_trainer():
    """Hugging Face's Trainer, as fine-tuning scripts use it, on the cohort backend: the script
    makes the default group itself (`import cohort.torch`, init_process_group("cohort")), and
    Trainer (through accelerate, which takes a group already made) wraps the model in DDP on it.
    A small BERT built from its config (nothing downloaded) trains on synthetic token sequences,
    with the all-reduces on the Reduction Server; then the same training with the default group on
    gloo. The loss falls, the DDP that Trainer built is on the cohort group, every rank ends with
    the same bytes, and they equal gloo's parameters within rounding."""
    import shutil
    import torch
    import torch.distributed as dist
    import cohort.torch  # noqa: F401  (registers the backend)

    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    check = Checker(rank)
    scratch = tempfile.mkdtemp(prefix=f"cohort-hf-{rank}-")
    os.environ.update(HF_HOME=scratch, HF_HUB_OFFLINE="1")  # nothing fetched, nothing cached in ~
    from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

    class Sequences(torch.utils.data.Dataset):
        """Token sequences whose class is the parity of their first token."""
        def __init__(self):
            g = torch.Generator().manual_seed(0)
            self.ids = torch.randint(1, 64, (512, 16), generator=g)

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, i):
            return {"input_ids": self.ids[i], "attention_mask": torch.ones_like(self.ids[i]),
                    "labels": self.ids[i, 0] % 2}

    def train(backend):
        torch.manual_seed(0)
        model = BertForSequenceClassification(BertConfig(
            vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            max_position_embeddings=32, num_labels=2))
        args = TrainingArguments(output_dir=os.path.join(scratch, backend), use_cpu=True, per_device_train_batch_size=16,
                                 max_steps=40, learning_rate=3e-3, seed=0, logging_steps=10, save_strategy="no",
                                 report_to=[], disable_tqdm=True, dataloader_num_workers=0)
        trainer = Trainer(model=model, args=args, train_dataset=Sequences())
        trainer.train()
        wrapped = trainer.model_wrapped
        check.expect(isinstance(wrapped, torch.nn.parallel.DistributedDataParallel)
                     and dist.get_backend(wrapped.process_group) == backend,
                     f"{backend}: Trainer's model is {type(wrapped).__name__}, not DDP on the {backend} group")
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        print(f"{backend}: logged losses {[round(x, 3) for x in losses]}", flush=True)
        check.expect(len(losses) >= 2 and losses[-1] < losses[0], f"{backend}: the loss did not fall: {losses}")
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=60))
    ours = train("cohort")
    dist.destroy_process_group()
    store = f"{tempfile.gettempdir()}/cohort-hf-gloo-{os.getppid()}-{os.environ['MASTER_PORT']}"  # this launch's
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=60))
    reference = train("gloo")
    # The same bytes on every rank (gathered over the default group, gloo's now), and gloo's
    # parameters within rounding.
    expect_trained_alike(check, dist, None, "Trainer on cohort", ours, reference, atol=1e-5)
    dist.barrier()
    dist.destroy_process_group()
    shutil.rmtree(scratch, ignore_errors=True)
    return check.finish()


def scenario_cohort_job():
    """Inside a Cohort job: the agent's environment (COHORT_BOOTSTRAP_ADDR, the job's reducer pool
    of cohort-reducer processes) decides, not torch's store."""
    import torch
    import torch.distributed as dist
    import cohort.torch

    dist.init_process_group("cohort", init_method="env://", timeout=datetime.timedelta(seconds=60))
    rank, n = dist.get_rank(), dist.get_world_size()
    check = Checker(rank)
    ours = cohort.torch.backend_of()
    print(ours.describe(), flush=True)
    check.expect("Cohort job store" in ours.describe(), "the group joined through the Cohort job's store")
    check.expect(ours.num_reducers == 2, f"the group has {ours.num_reducers} reducers, not the job's 2")
    gloo = dist.new_group(backend="gloo")
    sub = cohort.torch.backend_of(dist.new_group(backend="cohort"))
    check.expect(sub.num_reducers == 0 and "torch store" in sub.describe(), "a subgroup rendezvouses through torch's store")
    every = torch.stack([inputs(torch, r, 300_001, torch.float32, 3) for r in range(n)])
    t = inputs(torch, rank, 300_001, torch.float32, 3)
    dist.all_reduce(t)
    check.expect(close(torch, t, every.double().sum(0).float(), torch.float32, n, 4.0), "allreduce on the job's reducers")
    check.expect(same_on_every_rank(dist, gloo, digest(t)), "ranks differ in bytes")
    b = torch.arange(10) * rank
    dist.broadcast(b, src=1)
    check.expect(torch.equal(b, torch.arange(10)), "broadcast")
    dist.barrier(group=gloo)
    return check.finish()


SCENARIOS = {
    # name: (workers, reducers, extra environment, ranks not started, worker function)
    "ops": (3, 0, {}, (), scenario_ops),
    "ops-reducers": (3, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server"}, (), scenario_ops),
    # What kAuto runs for small buffers across hosts (on one host it would pick shared memory).
    "ops-recursive-doubling": (3, 0, {"COHORT_ALLREDUCE_ALGORITHM": "recursive-doubling"}, (), scenario_ops),
    # CPU tensors; the GPUs are hidden because torch 2.x's PowerSGD hook calls
    # torch.cuda.synchronize(the bucket's device) whenever CUDA is available, which fails for a CPU
    # bucket (on gloo too).
    "ddp": (3, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server", "CUDA_VISIBLE_DEVICES": ""}, (),
            scenario_ddp),
    "ddp-loops": (3, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server", "CUDA_VISIBLE_DEVICES": ""}, (),
                  scenario_ddp_loops),
    "objects": (3, 0, {}, (), scenario_objects),
    "file-store": (2, 0, {}, (), scenario_file_store),
    # One launching process; it spawns the three ranks.
    "spawn": (1, 0, {}, (), scenario_spawn),
    "fsdp": (3, 0, {}, (), scenario_fsdp),
    "tensor-parallel": (4, 0, {}, (), scenario_tensor_parallel),
    "pipeline": (3, 0, {}, (), scenario_pipeline),
    "compile": (3, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server"}, (), scenario_compile),
    "backend-strings": (3, 0, {}, (), scenario_backend_strings),
    "debug-detail": (3, 0, {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, (), scenario_debug_detail),
    "wire-bf16": (3, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server"}, (),
                  lambda: scenario_wire("bf16", via_options=True)),
    "wire-f16": (3, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server", "COHORT_WIRE_DTYPE": "f16"}, (),
                 lambda: scenario_wire("f16", via_options=False)),
    "cuda": (2, 0, {}, (), scenario_cuda),
    "bad-use": (2, 0, {}, (), scenario_bad_use),
    "mismatch": (3, 0, {"COHORT_ALLREDUCE_ALGORITHM": "ring"}, (), scenario_mismatch),
    "mismatch-check-calls": (3, 0, {"COHORT_ALLREDUCE_ALGORITHM": "ring", "COHORT_TORCH_CHECK_CALLS": "1"}, (),
                             scenario_mismatch),
    "mismatch-shared-memory": (3, 0, {}, (), scenario_mismatch),
    "mismatch-reducers": (3, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server"}, (), scenario_mismatch),
    "mismatch-recursive-doubling": (3, 0, {"COHORT_ALLREDUCE_ALGORITHM": "recursive-doubling"}, (),
                                    scenario_mismatch),
    "mismatch-sizes": (3, 0, {"UCX_TLS": "tcp,self"}, (), scenario_mismatch_sizes),
    "mismatch-sizes-reducers": (3, 2, {"UCX_TLS": "tcp,self"}, (), scenario_mismatch_sizes),
    "mismatch-collectives": (3, 0, {}, (), scenario_mismatch_collectives),
    "mismatch-collectives-reducers": (3, 2, {"UCX_TLS": "tcp,self"}, (), scenario_mismatch_collectives),
    "mismatch-order": (3, 0, {}, (), scenario_mismatch_order),
    "mismatch-order-tcp": (3, 0, {"UCX_TLS": "tcp,self"}, (), scenario_mismatch_order),
    "mismatch-order-far": (3, 0, {}, (), lambda: scenario_mismatch_order(ahead=40)),
    "mismatch-order-reducers": (3, 2, {"UCX_TLS": "tcp,self", "COHORT_ALLREDUCE_ALGORITHM": "reduction-server"}, (),
                                scenario_mismatch_order),
    "mismatch-roots": (3, 0, {}, (), scenario_mismatch_roots),
    "mismatch-own-roots": (3, 0, {}, (), scenario_mismatch_own_roots),
    "mismatch-own-roots-tcp": (3, 0, {"UCX_TLS": "tcp,self"}, (), scenario_mismatch_own_roots),
    "mismatch-own-roots-reducers": (3, 2, {"UCX_TLS": "tcp,self", "COHORT_ALLREDUCE_ALGORITHM": "reduction-server"},
                                    (), scenario_mismatch_own_roots),
    "no-join": (3, 0, {}, (2,), scenario_no_join),
    "silent-peer": (3, 0, {"COHORT_ALLREDUCE_ALGORITHM": "ring"}, (), scenario_silent_peer),
    "set-timeout": (3, 0, {"COHORT_ALLREDUCE_ALGORITHM": "ring"}, (), scenario_set_timeout),
    "fork-after-destroy": (2, 0, {"UCX_TLS": "tcp,self"}, (), scenario_fork_after_destroy),
    "cohort-job": (3, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server"}, (), scenario_cohort_job),
    "hf-trainer": (2, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server"}, (), scenario_hf_trainer),
    "dead-peer": (3, 0, {"COHORT_ALLREDUCE_ALGORITHM": "ring"}, (), scenario_dead_peer),

    # Over one host's shared memory (abort-tcp: over TCP): the peer's next call learns of the abort
    # while the aborted rank lives on; then both recover.
    "abort": (2, 0, {}, (), lambda: scenario_abort(peer_calls=True, recover=True)),
    "abort-tcp": (2, 0, {"UCX_TLS": "tcp,self"}, (), lambda: scenario_abort(peer_calls=True, recover=True)),
    # The all-reduces on the Reduction Server (their second halves on the finisher thread), over
    # shared memory: the aborted rank's chunk sends to the reducers stay in flight; it exits.
    "abort-reducers": (2, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server"}, (),
                       lambda: scenario_abort(peer_calls=True, recover=False)),
    "exit-on-error": (2, 0, {}, (), scenario_exit_on_error),
    "abort-hooks": (2, 0, {}, (), scenario_abort_hooks),
    "abort-far": (4, 0, {"COHORT_ALLREDUCE_ALGORITHM": "ring"}, (), scenario_abort_far),
    "dataloader-workers": (2, 0, {}, (), scenario_dataloader_workers),
    "monitored-barrier": (3, 0, {}, (), scenario_monitored_barrier),
    "shutdown-in-callback": (2, 0, {}, (), scenario_shutdown_in_callback),
    "shrink": (3, 0, {}, (), scenario_shrink),
    # Over TCP, as between hosts.
    "dead-peer-reducers": (3, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server", "UCX_TLS": "tcp,self"}, (),
                           scenario_dead_peer_reducers),
    # The same over UCX's default transports on one host (shared memory): the survivors' sends to
    # the reducers, rendezvous, complete as each reducer takes in what it was sent before it closes.
    "dead-peer-reducers-sm": (3, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server"}, (),
                              scenario_dead_peer_reducers),
    "dead-peer-between": (3, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server", "UCX_TLS": "tcp,self"}, (),
                          scenario_dead_peer_between),
    "dead-peer-between-sm": (3, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server"}, (),
                             scenario_dead_peer_between),
    "flight-recorder": (2, 0, {"COHORT_ALLREDUCE_ALGORITHM": "ring", "COHORT_TORCH_CHECK_CALLS": "1"}, (),
                        scenario_flight_recorder),
    "flight-recorder-reducers": (2, 1, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server"}, (),
                                 scenario_flight_recorder),
    "overlap": (3, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server"}, (),
                lambda: scenario_overlap(expect_overlap=True)),
    "overlap-off": (3, 2, {"COHORT_ALLREDUCE_ALGORITHM": "reduction-server", "COHORT_TORCH_OVERLAP": "0"}, (),
                    lambda: scenario_overlap(expect_overlap=False)),
    "reducer-sits-out": (0, 1, {}, (), None),  # reducer_sits_out(): no workers
}

# Scenarios of torch 2.x's APIs (or of libraries beside torch), skipped where they are missing:
# what they need, and its names. And where they are checked instead
# (tests/torch/debian_torch_check.sh).
TORCH_2_SCENARIOS = {
    "hf-trainer": ("Hugging Face's Trainer", [("transformers", "Trainer"), ("accelerate", "PartialState")],
                   "sid's python3-transformers and python3-accelerate"),
    "fsdp": ("FSDP2", [("torch.distributed.fsdp", "fully_shard")], "torch 2.6 on (trixie, sid)"),
    "backend-strings": ("backends named per device", [("torch.distributed", "BackendConfig")],
                        "torch 2.6 on (trixie, sid)"),
    "pipeline": ("pipeline parallelism", [("torch.distributed.pipelining", "ScheduleGPipe")],
                 "torch 2.6 on (trixie, sid)"),
    "compile": ("torch.compile with compiled autograd", [("torch._dynamo.compiled_autograd", "_enable")],
                "torch 2.6 on (trixie, sid)"),
    "shrink": ("shrink_group", [("torch.distributed.distributed_c10d", "shrink_group")], "sid's torch 2.14"),
    "tensor-parallel": ("2-D parallelism on CPU", [("torch.distributed.checkpoint.state_dict", "get_state_dict"),
                                                   ("torch.distributed.fsdp", "fully_shard"),
                                                   ("torch.distributed.tensor.parallel", "parallelize_module")],
                        "torch 2.6 on (trixie, sid)"),
}


# One worker of reducer-sits-out's sessions (argv: store port, "die" or "finish"): a group of one
# on the test's store (COHORT_NUM_REDUCERS from its environment), one all-reduce on the Reduction
# Server, then it dies (os._exit, its connections reset) or leaves as a script does.
SITS_OUT_WORKER = """
import datetime, os, sys
import torch, torch.distributed as dist
import cohort.torch
port, mode = int(sys.argv[1]), sys.argv[2]
libuv = {"use_libuv": False} if os.environ.get("USE_LIBUV") == "0" else {}
store = dist.TCPStore("127.0.0.1", port, 1, False, timeout=datetime.timedelta(seconds=60), **libuv)
# A prefix per group (torch's init barrier counts on its own key); the backend publishes its
# sessions in the store under it, where the reducers follow them.
store = dist.PrefixStore(mode, store)
dist.init_process_group("cohort", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
t = torch.ones(1 << 16)
dist.all_reduce(t)
print(f"worker: all-reduced {t[0].item()}", flush=True)
if mode == "die":
    os._exit(3)
dist.destroy_process_group()
"""


def reducer_sits_out(args):
    """The reducer-sits-out scenario (see the module's doc): returns its exit status."""
    import torch.distributed as dist
    port = free_port()
    store = dist.TCPStore("127.0.0.1", port, 1, True, timeout=datetime.timedelta(seconds=60),
                          wait_for_workers=False,
                          **({"use_libuv": False} if os.environ.get("USE_LIBUV") == "0" else {}))
    env = dict(os.environ, PYTHONPATH=args.python_dir + os.pathsep + os.environ.get("PYTHONPATH", ""),
               COHORT_ALLREDUCE_ALGORITHM="reduction-server", COHORT_LOG_LEVEL="warn")
    reducers = [subprocess.Popen(
        [sys.executable, "-m", "cohort.torch.reducer", "--store", f"127.0.0.1:{port}", "--index", str(i),
         "--timeout", "30", "--rejoin", "5"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for i in range(2)]

    def worker(mode, num_reducers):
        run = subprocess.run([sys.executable, "-c", SITS_OUT_WORKER, str(port), mode],
                             env=dict(env, COHORT_NUM_REDUCERS=str(num_reducers)), capture_output=True, text=True,
                             timeout=120)
        print(f"worker ({mode}, {num_reducers} reducers) exited {run.returncode}:\n{run.stdout}{run.stderr}", flush=True)
        return run.returncode

    first = worker("die", 2)  # the first session fails on both reducers: its worker is gone
    second = worker("finish", 1)  # reducer 0 serves the second; reducer 1 sits it out
    codes, outs = collect_reducers(reducers, 90)
    if (first, second) != (3, 0):
        print(f"FAILED: the workers exited {first} and {second}, not 3 (it died) and 0")
        return 1
    if "index 1 sits it out" not in outs["reducer 1"]:
        print("FAILED: reducer 1 did not sit the second session out")
        return 1
    # Reducer 0's last session served is the second (OK); reducer 1's the first (its worker gone).
    if codes != {"reducer 0": 0, "reducer 1": 1}:
        print(f"FAILED: the reducers exited {codes}, not 0 and 1: a session sat out is not one served")
        return 1
    print("PASSED: reducer-sits-out: reducer 1 sat the second session out and exited as the first ended (1)")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--python-dir", required=True, help="<build>/python")
    parser.add_argument("--backend-built", default="ON", help="CMake's COHORT_HAVE_TORCH")
    parser.add_argument("--reducer-bin", help="cohort-reducer (the cohort-job scenario)")
    parser.add_argument("--workers", type=int, help="workers instead of the scenario's (ops, ddp, wire, cuda)")
    parser.add_argument("--reducers", type=int,
                        help="reducers instead of the scenario's; with reducers the all-reduce is pinned to the "
                             "Reduction Server (cuda: then the results must also be identical bytes on every rank)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        sys.path.insert(0, args.python_dir)
        warnings.filterwarnings("ignore", message=".*will be deprecated")
        return SCENARIOS[args.scenario][4]()
    try:
        import torch  # noqa: F401
        import torch.distributed as dist
    except ImportError as e:
        print(f"SKIP: {sys.executable} has no torch ({e}); install python3-torch")
        return SKIP
    if not dist.is_available():
        print("SKIP: this torch has no torch.distributed")
        return SKIP
    if args.backend_built != "ON":
        print(f"SKIP: the cohort torch backend was not built (CMake: Cohort torch backend: {args.backend_built})")
        return SKIP
    if args.scenario in TORCH_2_SCENARIOS:
        what, names, where = TORCH_2_SCENARIOS[args.scenario]
        for module, name in names:
            try:
                getattr(importlib.import_module(module), name)
            except Exception as e:  # noqa: BLE001  ImportError, AttributeError, or 1.13's modules failing on Python 3.11
                lacks = f"torch {torch.__version__} has" if module.startswith("torch") else f"{sys.executable} has"
                print(f"SKIP: {lacks} no {what} ({module}.{name}: {e}): {args.scenario} is "
                      f"checked against {where} (tests/torch/debian_torch_check.sh)")
                return SKIP
    if args.scenario == "cuda" and not torch.cuda.is_available():
        why = (f"torch {torch.__version__} here is built without CUDA" if torch.version.cuda is None
               else f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU")
        print(f"SKIP: {why}: CUDA tensors (staged through pinned host memory) are not tested")
        return SKIP
    if args.scenario == "reducer-sits-out":
        return reducer_sits_out(args)
    workers, reducers, env, absent, _ = SCENARIOS[args.scenario]
    if args.workers is not None or args.reducers is not None:
        if absent or args.scenario.startswith(("dead-peer", "abort")) or args.scenario in (
                "silent-peer", "flight-recorder", "cohort-job", "bad-use", "exit-on-error", "shutdown-in-callback",
                "dataloader-workers", "monitored-barrier", "spawn"):
            print(f"FAILED: {args.scenario} runs with its own {workers} workers and {reducers} reducers")
            return 1
        workers = workers if args.workers is None else args.workers
        if args.reducers is not None:
            reducers = args.reducers
            env = dict(env)
            if reducers:
                env["COHORT_ALLREDUCE_ALGORITHM"] = "reduction-server"
            else:
                env.pop("COHORT_ALLREDUCE_ALGORITHM", None)
    if args.scenario == "cohort-job" and not (args.reducer_bin and os.access(args.reducer_bin, os.X_OK)):
        print(f"FAILED: cohort-job needs --reducer-bin (cohort-reducer), got {args.reducer_bin!r}")
        return 1
    codes, outs = launch(args, workers, reducers, env, absent, cohort_job=args.scenario == "cohort-job")
    expected = {}
    if args.scenario.startswith("dead-peer"):
        expected[f"rank {workers - 1}"] = VICTIM_EXIT
    if args.scenario.startswith("dead-peer") or args.scenario in ("mismatch-reducers", "mismatch-sizes-reducers",
                                                                  "mismatch-collectives-reducers",
                                                                  "mismatch-order-reducers",
                                                                  "mismatch-own-roots-reducers",
                                                                  "abort-reducers"):
        # A reducer exits as its last session ended, failed here (a worker dead, workers that
        # disagree, an aborted worker), whichever end it noticed first (the store gone, or no new
        # session within --rejoin).
        expected.update({f"reducer {i}": 1 for i in range(reducers)})
    if args.scenario == "exit-on-error":
        expected = {"rank 1": 1}  # its unhandled exception
    bad = {name: code for name, code in codes.items() if code != expected.get(name, 0)}
    if bad:
        print(f"FAILED: {bad}")
        return 1
    for i in range(reducers if args.scenario.startswith("dead-peer") else 0):
        said = [line for line in outs[f"reducer {i}"].splitlines() if line.startswith("cohort reducer: ")]
        if not any(re.search(rf"session \S+: .*worker {workers - 1}\b", line) for line in said):
            print(f"FAILED: reducer {i}'s error does not name worker {workers - 1}: {said}")
            return 1
    ranks = "3 ranks that one process spawned" if args.scenario == "spawn" else f"{len(codes) - reducers} workers"
    print(f"PASSED: {args.scenario} on {ranks}" + (f" and {reducers} reducers" if reducers else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
