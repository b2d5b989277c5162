"""Cohort's collective library from Python: all-reduce over the Reduction Server or the ring, and
the other collectives (broadcast, allgather, reduce_scatter, reduce, gather, scatter, alltoall,
barrier) and tagged point-to-point send/recv among the workers.

A binding through ctypes over the C API (collective/cohort_collective.h, libcohort_collective_c.so).
Training code in a Cohort job builds its communicator from the environment the agent injects,
exactly as C++ code does with Communicator::FromEnvironment():

    import numpy as np
    from cohort.collective import Communicator

    with Communicator.from_env() as comm:
        grads = np.zeros(1 << 20, dtype=np.float32)
        comm.allreduce(grads, op="avg")      # in place; every worker gets the same bytes

Buffers: any C-contiguous numpy array of float32, float64, float16, int32 or int64 (writable where
it receives; for a torch CPU tensor, pass tensor.numpy(), which shares its memory). bfloat16 has no
numpy type: pass the raw bits as a uint16 array with dtype="bf16". Counts are the arrays' sizes:
every worker passes arrays of the same sizes (an all-reduce that differs raises CollectiveError on
every worker, naming one whose call differs; in the other collectives a worker that receives from
one that disagrees gets a CollectiveError naming it).

The library is found, in this order, at $COHORT_COLLECTIVE_LIB, next to this package in a build tree
(<build>/collective/), and by the dynamic loader's search (installed under the library dir).
Errors raise CollectiveError with the C API's code and message; after an error the communicator is
poisoned (code ABORTED on later calls) and must be rebuilt, as in C++. Calls on one communicator
must not overlap.
"""

import ctypes
import os

import numpy as np

from . import _stack_dump

_stack_dump.register()

# Codes of cohort_collective.h.
OK = 0
INVALID_ARGUMENT = 1
UNAVAILABLE = 5
DEADLINE_EXCEEDED = 6
ABORTED = 7
CANCELLED = 10

_DTYPES = {
    np.dtype(np.float32): 0,
    np.dtype(np.float64): 1,
    np.dtype(np.float16): 2,
    np.dtype(np.int32): 4,
    np.dtype(np.int64): 5,
}
_BF16 = 3
# band, bor and bxor reduce integer arrays only.
_OPS = {"sum": 0, "avg": 1, "min": 2, "max": 3, "product": 4, "band": 5, "bor": 6, "bxor": 7}
_ALGORITHMS = {"auto": 0, "reduction-server": 1, "ring": 2, "halving-doubling": 3, "shared-memory": 4, "hierarchical": 5,
               "recursive-doubling": 6}


class CollectiveError(RuntimeError):
    """A failed call of the collective library: `code` is the C API's code."""

    def __init__(self, code, message):
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message


def _candidates():
    explicit = os.environ.get("COHORT_COLLECTIVE_LIB")
    if explicit:
        return [explicit]
    here = os.path.dirname(os.path.abspath(__file__))
    return [
        os.path.join(here, "..", "..", "collective", "libcohort_collective_c.so"),  # <build>/python/cohort
        "libcohort_collective_c.so.0",  # the installed library (its SONAME; Debian: libcohort-collective0)
        "libcohort_collective_c.so",
    ]


def _load():
    errors = []
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{path}: {e}")
            continue
        lib.cohort_comm_from_env.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        lib.cohort_comm_from_env.restype = ctypes.c_int
        lib.cohort_comm_destroy.argtypes = [ctypes.c_void_p]
        lib.cohort_comm_destroy.restype = None
        lib.cohort_comm_cancel.argtypes = [ctypes.c_void_p]
        lib.cohort_comm_cancel.restype = None
        lib.cohort_comm_rank.argtypes = [ctypes.c_void_p]
        lib.cohort_comm_rank.restype = ctypes.c_int
        lib.cohort_comm_size.argtypes = [ctypes.c_void_p]
        lib.cohort_comm_size.restype = ctypes.c_int
        lib.cohort_allreduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                         ctypes.c_int, ctypes.c_int]
        lib.cohort_allreduce.restype = ctypes.c_int
        p, size, i = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
        for name, args in (
                ("cohort_broadcast", [p, p, size, i, i]),
                ("cohort_allgather", [p, p, p, size, i]),
                ("cohort_reduce_scatter", [p, p, p, size, i, i]),
                ("cohort_barrier", [p]),
                ("cohort_reduce", [p, p, p, size, i, i, i]),
                ("cohort_gather", [p, p, p, size, i, i]),
                ("cohort_scatter", [p, p, p, size, i, i]),
                ("cohort_alltoall", [p, p, p, size, i]),
                ("cohort_alltoallv", [p, p, p, p, p, i]),
                ("cohort_send", [p, p, size, i, i, i]),
                ("cohort_recv", [p, p, size, i, i, i]),
                ("cohort_isend", [p, p, size, i, i, i, ctypes.POINTER(p)]),
                ("cohort_irecv", [p, p, size, i, i, i, ctypes.POINTER(p)]),
                ("cohort_wait", [p]),
                ("cohort_wait_source", [p, ctypes.POINTER(i)])):
            fn = getattr(lib, name)
            fn.argtypes = args
            fn.restype = ctypes.c_int
        lib.cohort_last_error.argtypes = []
        lib.cohort_last_error.restype = ctypes.c_char_p
        return lib
    raise CollectiveError(INVALID_ARGUMENT, "libcohort_collective_c.so not found (set COHORT_COLLECTIVE_LIB): " +
                          "; ".join(errors))


_lib = None


def _library():
    global _lib
    if _lib is None:
        _lib = _load()
    return _lib


def _check(code):
    if code != OK:
        raise CollectiveError(code, _library().cohort_last_error().decode(errors="replace"))


def _ptr(array):
    return None if array is None else array.ctypes.data_as(ctypes.c_void_p)


def _op_code(op):
    if op not in _OPS:
        raise ValueError(f"unknown op {op!r} ({', '.join(_OPS)})")
    return _OPS[op]


def _dtype_code(array, dtype, what, writable=False):
    """The C API's dtype code for `array`, after checking it can be passed as is."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"{what} needs a numpy array, not {type(array).__name__}")
    if not array.flags.c_contiguous or (writable and not array.flags.writeable):
        raise ValueError(f"{what} needs a C-contiguous{', writable' if writable else ''} array "
                         "(np.ascontiguousarray makes one)")
    if dtype == "bf16":
        if array.dtype != np.uint16:
            raise ValueError(f"dtype='bf16' needs the raw bits in a uint16 array, not {array.dtype}")
        return _BF16
    if dtype is not None:
        raise ValueError(f"unknown dtype override {dtype!r} (only 'bf16')")
    if array.dtype in _DTYPES:
        return _DTYPES[array.dtype]
    raise ValueError(f"unsupported dtype {array.dtype} (float32, float64, float16, int32, int64, or "
                     "uint16 with dtype='bf16')")


ANY_WORKER = -1  # cohort_collective.h's COHORT_ANY_WORKER


def _peer(peer):
    """A receive's peer for the C API: None means any worker."""
    return ANY_WORKER if peer is None else peer


class Request:
    """A posted isend/irecv: wait() completes it (raising CollectiveError on failure) and returns
    the array; then `source` is the worker at the other end (for a receive from any worker, the
    one that sent it; None until then). Wait for every request before closing the communicator."""

    def __init__(self, handle, array):
        self._handle = handle
        self._array = array  # kept alive while the transport uses it
        self.source = None

    def wait(self):
        if self._handle is None:
            raise CollectiveError(INVALID_ARGUMENT, "the request was already waited for")
        handle, self._handle = self._handle, None
        source = ctypes.c_int(-1)
        _check(_library().cohort_wait_source(handle, ctypes.byref(source)))
        self.source = source.value
        return self._array


class Communicator:
    """One worker's communicator. Build it with from_env(); close() (or a with block) tells the
    reducers this worker is done and frees it."""

    def __init__(self, handle):
        self._handle = handle

    @classmethod
    def from_env(cls):
        """From COHORT_BOOTSTRAP_ADDR, RANK, WORLD_SIZE, COHORT_NUM_REDUCERS and the optional
        COHORT_COMM_TIMEOUT_MS, COHORT_CHUNK_BYTES and COHORT_ALLREDUCE_ALGORITHM."""
        handle = ctypes.c_void_p()
        _check(_library().cohort_comm_from_env(ctypes.byref(handle)))
        return cls(handle)

    @property
    def rank(self):
        return _library().cohort_comm_rank(self._live())

    @property
    def size(self):
        return _library().cohort_comm_size(self._live())

    def allreduce(self, array, op="sum", algorithm="auto", dtype=None):
        """Reduces `array` in place across the workers and returns it. op: sum, avg, min, max,
        product, or for integer arrays band, bor, bxor; algorithm: auto, reduction-server, ring, halving-doubling (a power-of-two number of
        workers), recursive-doubling, shared-memory (every worker on one host), hierarchical (several
        hosts with as many workers each); dtype="bf16" for bfloat16 bits in a uint16 array."""
        code = _dtype_code(array, dtype, "allreduce", writable=True)
        if algorithm not in _ALGORITHMS:
            raise ValueError(f"unknown algorithm {algorithm!r} ({', '.join(_ALGORITHMS)})")
        _check(_library().cohort_allreduce(self._live(), _ptr(array), array.size, code, _op_code(op),
                                           _ALGORITHMS[algorithm]))
        return array

    def broadcast(self, array, root=0, dtype=None):
        """The root's `array` lands in every worker's `array` (in place); returns it."""
        code = _dtype_code(array, dtype, "broadcast", writable=True)
        _check(_library().cohort_broadcast(self._live(), _ptr(array), array.size, code, root))
        return array

    def allgather(self, array, out=None, dtype=None):
        """Every worker's `array` (equal sizes) gathered on every worker: returns `out` (a new array
        of size * array.size elements of the same dtype when not given), worker r's at r * array.size."""
        code = _dtype_code(array, dtype, "allgather")
        out = self._output(out, array, array.size * self.size, "allgather")
        _check(_library().cohort_allgather(self._live(), _ptr(array), _ptr(out), array.size, code))
        return out

    def reduce_scatter(self, array, out=None, op="sum", dtype=None):
        """`array` holds size equal blocks; block r reduced over the workers lands in worker r's
        `out` (a new array of array.size // size elements when not given), which is returned."""
        code = _dtype_code(array, dtype, "reduce_scatter")
        if array.size % self.size != 0:
            raise ValueError(f"reduce_scatter: {array.size} elements do not split into {self.size} equal blocks")
        out = self._output(out, array, array.size // self.size, "reduce_scatter")
        _check(_library().cohort_reduce_scatter(self._live(), _ptr(array), _ptr(out), out.size, code,
                                                _op_code(op)))
        return out

    def reduce(self, array, root=0, out=None, op="sum", dtype=None):
        """Every worker's `array` reduced by `op` on the root: returns the root's result (`out`, or a
        new array; out=array reduces in place) there, None elsewhere."""
        code = _dtype_code(array, dtype, "reduce")
        is_root = self.rank == root
        out = self._output(out, array, array.size, "reduce") if is_root else None
        _check(_library().cohort_reduce(self._live(), _ptr(array), _ptr(out) if is_root else None, array.size, code,
                                        _op_code(op), root))
        return out

    def gather(self, array, root=0, out=None, dtype=None):
        """Every worker's `array` (equal sizes) on the root at rank * array.size: returns `out` (or a
        new array of size * array.size elements) on the root, None elsewhere."""
        code = _dtype_code(array, dtype, "gather")
        is_root = self.rank == root
        out = self._output(out, array, array.size * self.size, "gather") if is_root else None
        _check(_library().cohort_gather(self._live(), _ptr(array), _ptr(out) if is_root else None, array.size, code,
                                        root))
        return out

    def scatter(self, out, root=0, array=None, dtype=None):
        """Block r of the root's `array` (size equal blocks) lands in worker r's `out`, which is
        returned; `array` is only read on the root."""
        code = _dtype_code(out, dtype, "scatter", writable=True)
        is_root = self.rank == root
        if is_root:
            if array is None:
                raise ValueError("scatter: the root needs `array`")
            if _dtype_code(array, dtype, "scatter") != code or array.size != out.size * self.size:
                raise ValueError(f"scatter: the root's array must hold {self.size} blocks of {out.size} {out.dtype}")
        _check(_library().cohort_scatter(self._live(), _ptr(array) if is_root else None, _ptr(out), out.size, code,
                                         root))
        return out

    def alltoall(self, array, out=None, dtype=None):
        """Block j of `array` (size equal blocks) lands in worker j's `out` (or a new array) at block
        rank; returns `out`."""
        code = _dtype_code(array, dtype, "alltoall")
        if array.size % self.size != 0:
            raise ValueError(f"alltoall: {array.size} elements do not split into {self.size} equal blocks")
        out = self._output(out, array, array.size, "alltoall")
        _check(_library().cohort_alltoall(self._live(), _ptr(array), _ptr(out), array.size // self.size, code))
        return out

    def alltoallv(self, array, send_counts, recv_counts, out=None, dtype=None):
        """send_counts[j] elements of `array` (blocks contiguous in worker order) go to worker j;
        recv_counts[i] elements from worker i land in `out` (or a new array); returns `out`."""
        code = _dtype_code(array, dtype, "alltoallv")
        sends = np.ascontiguousarray(send_counts, dtype=np.uintp)
        recvs = np.ascontiguousarray(recv_counts, dtype=np.uintp)
        if sends.size != self.size or recvs.size != self.size:
            raise ValueError(f"alltoallv: needs {self.size} send and receive counts")
        if int(sends.sum()) != array.size:
            raise ValueError(f"alltoallv: send counts add up to {int(sends.sum())}, the array has {array.size}")
        out = self._output(out, array, int(recvs.sum()), "alltoallv")
        _check(_library().cohort_alltoallv(self._live(), _ptr(array), _ptr(sends), _ptr(out), _ptr(recvs), code))
        return out

    def barrier(self):
        """Returns once every worker has called it."""
        _check(_library().cohort_barrier(self._live()))

    def send(self, array, peer, tag=0, dtype=None):
        """Sends `array` to worker `peer` (blocks until it has gone)."""
        code = _dtype_code(array, dtype, "send")
        _check(_library().cohort_send(self._live(), _ptr(array), array.size, code, peer, tag))

    def recv(self, array, peer, tag=0, dtype=None):
        """Receives into `array` from worker `peer` what it sent with `tag` (same size and dtype);
        returns `array`. `peer` None: from whichever worker sends with `tag` first (irecv's
        Request names it)."""
        code = _dtype_code(array, dtype, "recv", writable=True)
        _check(_library().cohort_recv(self._live(), _ptr(array), array.size, code, _peer(peer), tag))
        return array

    def isend(self, array, peer, tag=0, dtype=None):
        """Posts a send and returns a Request; keep `array` unchanged until its wait() returns."""
        code = _dtype_code(array, dtype, "isend")
        handle = ctypes.c_void_p()
        _check(_library().cohort_isend(self._live(), _ptr(array), array.size, code, peer, tag, ctypes.byref(handle)))
        return Request(handle, array)

    def irecv(self, array, peer, tag=0, dtype=None):
        """Posts a receive into `array` and returns a Request; wait() returns the array. `peer`
        None: from any worker, named by the Request's `source` once it is waited for."""
        code = _dtype_code(array, dtype, "irecv", writable=True)
        handle = ctypes.c_void_p()
        _check(_library().cohort_irecv(self._live(), _ptr(array), array.size, code, _peer(peer), tag,
                                       ctypes.byref(handle)))
        return Request(handle, array)

    def _output(self, out, like, size, what):
        if out is None:
            return np.empty(size, dtype=like.dtype)
        if not isinstance(out, np.ndarray) or out.dtype != like.dtype or out.size != size:
            raise ValueError(f"{what}: out must be a numpy array of {size} {like.dtype}")
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise ValueError(f"{what}: out must be C-contiguous and writable")
        return out

    def cancel(self):
        """Gives up on this worker's calls, from any thread: the call in progress on another thread
        raises CollectiveError(CANCELLED) within milliseconds instead of waiting for its peers, as
        does every later call. close() then frees it without the reducers' goodbye."""
        _library().cohort_comm_cancel(self._live())

    def close(self):
        if self._handle is not None:
            _library().cohort_comm_destroy(self._handle)
            self._handle = None

    def _live(self):
        if self._handle is None:
            raise CollectiveError(INVALID_ARGUMENT, "the communicator is closed")
        return self._handle

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
