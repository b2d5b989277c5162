"""Cohort's collective library from Python: all-reduce over the Reduction Server or the ring.

A binding through ctypes over the C API (collective/cohort_collective.h, libcohort_collective_c.so).
Training code in a Cohort job builds its communicator from the environment the agent injects,
exactly as C++ code does with Communicator::FromEnvironment():

    import numpy as np
    from cohort.collective import Communicator

    with Communicator.from_env() as comm:
        grads = np.zeros(1 << 20, dtype=np.float32)
        comm.allreduce(grads, op="avg")      # in place; every worker gets the same bytes

Buffers: any C-contiguous, writable numpy array of float32, float64, float16, int32 or int64 (for
a torch CPU tensor, pass tensor.numpy(), which shares its memory). bfloat16 has no numpy type:
pass the raw bits as a uint16 array with dtype="bf16".

The library is found, in this order, at $COHORT_COLLECTIVE_LIB, next to this package in a build tree
(<build>/collective/), and by the dynamic loader's search (installed under the library dir).
Errors raise CollectiveError with the C API's code and message; after an error the communicator is
poisoned (code ABORTED on later calls) and must be rebuilt, as in C++. Calls on one communicator
must not overlap.
"""

import ctypes
import os

import numpy as np

# Codes of cohort_collective.h.
OK = 0
INVALID_ARGUMENT = 1
UNAVAILABLE = 5
DEADLINE_EXCEEDED = 6
ABORTED = 7

_DTYPES = {
    np.dtype(np.float32): 0,
    np.dtype(np.float64): 1,
    np.dtype(np.float16): 2,
    np.dtype(np.int32): 4,
    np.dtype(np.int64): 5,
}
_BF16 = 3
_OPS = {"sum": 0, "avg": 1, "min": 2, "max": 3}
_ALGORITHMS = {"auto": 0, "reduction-server": 1, "ring": 2, "halving-doubling": 3, "shared-memory": 4, "hierarchical": 5}


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
        lib.cohort_comm_rank.argtypes = [ctypes.c_void_p]
        lib.cohort_comm_rank.restype = ctypes.c_int
        lib.cohort_comm_size.argtypes = [ctypes.c_void_p]
        lib.cohort_comm_size.restype = ctypes.c_int
        lib.cohort_allreduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                         ctypes.c_int, ctypes.c_int]
        lib.cohort_allreduce.restype = ctypes.c_int
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
        """Reduces `array` in place across the workers and returns it. op: sum, avg, min, max;
        algorithm: auto, reduction-server, ring, halving-doubling (a power-of-two number of workers),
        shared-memory (every worker on one host), hierarchical (several hosts with as many workers
        each); dtype="bf16" for bfloat16 bits in a uint16 array."""
        if not isinstance(array, np.ndarray):
            raise TypeError(f"allreduce needs a numpy array, not {type(array).__name__}")
        if not array.flags.c_contiguous or not array.flags.writeable:
            raise ValueError("allreduce needs a C-contiguous, writable array (np.ascontiguousarray makes one)")
        if dtype == "bf16":
            if array.dtype != np.uint16:
                raise ValueError(f"dtype='bf16' needs the raw bits in a uint16 array, not {array.dtype}")
            code = _BF16
        elif dtype is not None:
            raise ValueError(f"unknown dtype override {dtype!r} (only 'bf16')")
        elif array.dtype in _DTYPES:
            code = _DTYPES[array.dtype]
        else:
            raise ValueError(f"unsupported dtype {array.dtype} (float32, float64, float16, int32, int64, or "
                             "uint16 with dtype='bf16')")
        if op not in _OPS:
            raise ValueError(f"unknown op {op!r} (sum, avg, min, max)")
        if algorithm not in _ALGORITHMS:
            raise ValueError(f"unknown algorithm {algorithm!r} (auto, reduction-server, ring, halving-doubling, shared-memory, hierarchical)")
        _check(_library().cohort_allreduce(self._live(), array.ctypes.data_as(ctypes.c_void_p), array.size, code,
                                           _OPS[op], _ALGORITHMS[algorithm]))
        return array

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
