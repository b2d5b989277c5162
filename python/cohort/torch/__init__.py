"""The `cohort` torch.distributed backend: DDP on Cohort's collective library.

Importing this module registers the backend; the rest of a DDP script stays as it is:

    import cohort.torch  # noqa: F401  (registers "cohort")
    import torch.distributed as dist
    dist.init_process_group("cohort", init_method="env://")

Where the peers come from:
- Inside a Cohort job (COHORT_BOOTSTRAP_ADDR is set), the default process group joins the job's
  communicator: Cohort's bootstrap store and the job's reducer pool (Reduction Server).
- Elsewhere (torchrun, or MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE), through the store torch hands
  the backend: ring, halving-doubling or recursive-doubling all-reduce, or the Reduction Server when COHORT_NUM_REDUCERS
  (or Options(num_reducers=...)) asks for reducers, started on any host with
      python3 -m cohort.torch.reducer --store MASTER_ADDR:MASTER_PORT
  once per reducer (under torchrun: its static rendezvous, --master_addr/--master_port, whose
  store outlives torchrun's restarts; see examples/torch/README.md). Subgroups (dist.new_group)
  never use reducers.

Tuning, as for the C++ communicator: COHORT_ALLREDUCE_ALGORITHM=auto|ring|reduction-server|
halving-doubling|recursive-doubling|shared-memory|hierarchical pins the all-reduce (auto picks per call),
COHORT_CHUNK_BYTES, COHORT_RS_MAX_FLOWS (1 across hosts, with UCX_TCP_SNDBUF 128k for jobs with
reducers: see the README), COHORT_TORCH_CHECK_CALLS, COHORT_TORCH_OVERLAP, and
COHORT_WIRE_DTYPE=bf16|f16 (float32 all-reduces cross to the reducers compressed; the reducers sum
in float32); or pass
Options as init_process_group's pg_options.
The process group's timeout (init_process_group(timeout=...)) bounds the rendezvous and every
operation. torch.distributed.set_timeout(timeout, group) (torch 2.14) changes it for the operations
issued from then on, as torch 2.6's private _set_pg_timeout does (it reaches only gloo and nccl
there, so it is wrapped to reach cohort too) and backend_of(group).set_timeout(timeout) on every
torch; a job's reducers keep the first one.

Aborting: torch.distributed's _abort_process_group (torch 2.14) and backend_of(group).abort() (every
torch) fail the operation in flight and the queued ones at once, without waiting for the peers;
a process that exits on an unhandled exception aborts its groups the same way, while a normal exit
shuts them down (finishing what is queued). The peers' operations that wait for an aborted rank
fail at once naming it, although its process lives on (its connections reset; on one host its
liveness token is gone); a rank that waits for a peer which gave up but stays connected (in a
ring, the ranks beyond a failed rank's neighbours) learns it from the store, where every rank
that gives up writes why, once it has waited 5 s (COHORT_TORCH_WATCH_PEERS=0 turns that off),
and the ranks may make a new group (on the same store, say), or, on
torch 2.14, shrink_group the failed ranks out: the survivors' new group is made through the old
one's store, which must still be there (under env://, rank 0 hosts it). Abort hooks
(ProcessGroup.register_abort_hook on torch 2.14, backend_of(group).register_abort_hook(id, fn) on
every torch) run once, when the group gives up: at an abort, before anything is cancelled, or when
an operation first fails or times out, before its error is raised. get_error() (torch's
Backend.get_error on torch 2.14, an ErrorType; the name on older torch, through backend_of) says
whether the group gave up and why: SUCCESS, TIMEOUT, REMOTE_ERROR (a peer gone or failed) or
COMM_ERROR (any other failure, or an abort). A future's callback may shut down, abort or destroy
the group it follows. torch.distributed.monitored_barrier (torch 2.14; on older torch, which
allows it on gloo only, the group's monitored_barrier(timeout)) names the ranks that did not
arrive within its timeout. dist.recv and dist.irecv without a source take the first message with
their tag from any rank, and name it (dist.recv's return, the Work's _source_rank()).

Torch versions: built against torch 1.13 (Debian's) the backend is the process group itself; built
against torch 2.x it is a c10d Backend that torch wraps in a ProcessGroup, registered for "cpu"
and "cuda" tensors (one backend serves both: CUDA tensors are staged through pinned host memory).
backend_of(group) returns the backend object (describe(), num_reducers) under either. Checked
against torch 1.13 (Debian 12: ctest), 2.6 (Debian 13) and 2.14 (sid) with
tests/torch/debian_torch_check.sh, and pip's 2.11 on a GPU machine (bench/gpu/torch_kit.sh).
"""

import atexit
import sys
import weakref

import torch
import torch.distributed as dist

from .. import _stack_dump

_stack_dump.register()

try:
    from . import _C
except ImportError as e:  # built without torch, or for another interpreter
    raise ImportError(
        "cohort.torch: the backend's extension (cohort/torch/_C) is missing or does not load "
        f"({e}); it is built where CMake finds libtorch-dev, python3-torch and pybind11-dev, for "
        "the interpreter COHORT_TORCH_PYTHON names (/usr/bin/python3)") from e

ProcessGroupCohort = _C.ProcessGroupCohort
BACKEND = "cohort"
# 1.13: the creator's object is the ProcessGroup; 2.x: a Backend that torch wraps in one.
_TORCH_MAJOR = int(torch.__version__.split(".")[0])


class Options:
    """pg_options for init_process_group("cohort", pg_options=Options(...)); None: from the
    environment.

    num_reducers: Reduction Server reducers outside a Cohort job (default COHORT_NUM_REDUCERS or
        0); inside a job the job's pool decides.
    algorithm: the all-reduce to pin (default COHORT_ALLREDUCE_ALGORITHM or auto).
    chunk_bytes: the pipeline unit (default COHORT_CHUNK_BYTES, else chosen by placement).
    check_calls: a debugging aid: before every all-reduce, all-gather what each rank passes
        (count, dtype, op, tensors and their shapes) and fail naming a rank that differs (default
        COHORT_TORCH_CHECK_CALLS or False). Without it every all-reduce still compares the ranks'
        calls within the call itself, as the library's other collectives do (ranks whose sizes
        differ enough to pick different algorithms once the call has waited 0.2 s); the
        all-gather also tells int8, uint8 and bool tensors apart, compares the tensors of a
        coalesced call one by one, and fails such ranks at once, for a round per call.
    wire_dtype: "bf16" or "f16": float32 all-reduces on the Reduction Server cross the network in
        that type (half the bytes) and the reducers sum in float32, rounding once on the way back;
        every rank gets the same bytes. "f32" or "none": off. Default COHORT_WIRE_DTYPE (off).
    overlap: let an all-reduce on the Reduction Server start sending while the one before it
        still receives its results (DDP's buckets then keep the link busy); default
        COHORT_TORCH_OVERLAP or True.
    """

    def __init__(self, num_reducers=None, algorithm=None, chunk_bytes=None, check_calls=None, wire_dtype=None,
                 overlap=None):
        self.num_reducers = num_reducers
        self.algorithm = algorithm
        self.chunk_bytes = chunk_bytes
        self.check_calls = check_calls
        self.wire_dtype = wire_dtype
        self.overlap = overlap


_live_groups = weakref.WeakSet()
# torch 1.13 holds the object the creator returns (it is the group); torch 2.x holds only the C++
# backend inside its ProcessGroup, so the Python object is held here: backend_of finds it by the
# group's name and the exit hook below reaches it (destroy_process_group shuts it down: see
# _shut_down_cohort_backends_on_destroy).
_held = []
_by_group_name = {} if _TORCH_MAJOR >= 2 else weakref.WeakValueDictionary()  # group name -> backend


def _create_process_group(backend_options, pg_options):
    options = pg_options if pg_options is not None else Options()
    if not isinstance(options, Options):
        raise TypeError(f"cohort: pg_options must be cohort.torch.Options, not {type(options).__name__}")
    num_reducers = -1 if options.num_reducers is None else int(options.num_reducers)
    if options.num_reducers is not None and num_reducers < 0:
        raise ValueError(f"cohort: Options.num_reducers must be at least 0, not {options.num_reducers}")
    pg = _C._create(
        backend_options.store,
        backend_options.group_rank,
        backend_options.group_size,
        backend_options.timeout.total_seconds(),
        len(backend_options.global_ranks_in_group) == 0,  # torch's default group has no rank list
        _C.Config(
            num_reducers=num_reducers,
            algorithm=options.algorithm or "",
            chunk_bytes=int(options.chunk_bytes or 0),
            check_calls=-1 if options.check_calls is None else int(bool(options.check_calls)),
            wire_dtype=options.wire_dtype or "",
            overlap=-1 if options.overlap is None else int(bool(options.overlap)),
        ),
    )
    _live_groups.add(pg)
    if _TORCH_MAJOR >= 2:
        _held.append(pg)
    group_id = getattr(backend_options, "group_id", None)
    if group_id is not None:
        _by_group_name[group_id] = pg
    return pg


def backend_of(group=None):
    """The ProcessGroupCohort behind `group` (default: the world group), for describe(),
    num_reducers, set_timeout() and abort(): the group itself under torch 1.13, the backend torch
    2.x wraps in it."""
    if group is None:
        group = dist.distributed_c10d._get_default_group()
    if isinstance(group, ProcessGroupCohort):
        return group
    if _TORCH_MAJOR >= 2:
        try:
            backend = group._get_backend(torch.device("cpu"))
        except RuntimeError:
            backend = None
        if isinstance(backend, ProcessGroupCohort):
            return backend
        name = getattr(group, "group_name", None)
        if name in _by_group_name:
            return _by_group_name[name]
    raise ValueError(f"cohort: {group!r} is not a process group of the cohort backend")


def _shut_down_cohort_backends_on_destroy():
    """torch 2.x before Backend::shutdown (2.6, say) shuts only NCCL's backends down in
    destroy_process_group (through distributed_c10d._shutdown_backend), and the cohort backend is
    held above: its communicator would stay open until exit (the reducers waiting for this worker,
    a forked child inheriting its UCX state). There, that function is wrapped to shut the group's
    cohort backend down as well. Newer torch (2.14) calls the backend's shutdown() itself; a torch
    with neither leaves the group to the exit hook below."""
    c10d = dist.distributed_c10d
    shutdown_backend = getattr(c10d, "_shutdown_backend", None)
    if _TORCH_MAJOR < 2 or shutdown_backend is None or hasattr(dist.ProcessGroup, "shutdown"):
        return

    def _shutdown_backend(pg):
        shutdown_backend(pg)
        try:
            backend = pg._get_backend(torch.device("cpu"))
        except RuntimeError:  # the group has no CPU backend
            return
        if isinstance(backend, ProcessGroupCohort):
            backend.shutdown()

    c10d._shutdown_backend = _shutdown_backend


def _set_cohort_timeouts_in_set_pg_timeout():
    """torch 2.x before torch.distributed.set_timeout (2.6, say) has only the private
    distributed_c10d._set_pg_timeout, which training loops call to shorten the timeout after
    their first step, and which sets gloo's and nccl's backends only (warning "Set timeout is now
    only supported for either nccl or gloo" for a cohort group, and leaving its timeout as it
    was). There, that function is wrapped to set a cohort group's. Newer torch reaches the
    backend itself (Backend::setTimeout)."""
    c10d = dist.distributed_c10d
    set_pg_timeout = getattr(c10d, "_set_pg_timeout", None)
    if _TORCH_MAJOR < 2 or set_pg_timeout is None or hasattr(dist, "set_timeout"):
        return

    def _set_pg_timeout(timeout, group=None):
        try:
            backend = backend_of(group)
        except (ValueError, RuntimeError):  # not a cohort group (or no default group)
            return set_pg_timeout(timeout, group)
        backend.set_timeout(timeout)

    c10d._set_pg_timeout = _set_pg_timeout


@atexit.register
def _close_groups_at_exit():
    # Scripts rarely call destroy_process_group: at a normal exit, finish what is queued and tell
    # the reducers this worker is done, so they need not wait for it to time out. An exit on an
    # unhandled exception (the interpreter has set sys.last_value by then) aborts instead: the
    # operations still queued or in flight would wait for peers that may never make those calls
    # (they are busy, or waiting for a later one) for up to the group's timeout, holding the
    # process, and its error, back from whatever restarts the job.
    on_error = getattr(sys, "last_value", None) is not None
    for pg in list(_live_groups):
        if on_error:
            pg.abort()
        else:
            pg.shutdown()


if BACKEND.upper() not in dist.Backend._plugins:
    _shut_down_cohort_backends_on_destroy()
    _set_cohort_timeouts_in_set_pg_timeout()
    if _TORCH_MAJOR >= 2:
        dist.Backend.register_backend(BACKEND, _create_process_group, extended_api=True, devices=["cpu", "cuda"])
    else:
        dist.Backend.register_backend(BACKEND, _create_process_group, extended_api=True)
