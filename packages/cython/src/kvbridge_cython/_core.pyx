# cython: language_level=3, boundscheck=False, wraparound=False, auto_pickle=False
# cython: freethreading_compatible=True
# (auto_pickle=False: a pool holds C++ state that pickling could not carry.
# freethreading_compatible: the module runs without the GIL on a free-threaded Python, the core
# having its own locks.)
"""kvbridge_cython._core: the Cython binding of the kvbridge core.

Reads as a table of what is exposed; the argument rules are packages/args/args.hpp's, the
CPython-level header the pybind11 and nanobind packages share (Cython compiles to the same C API).
Where Cython's defaults differ from docs/contract.md, and what this file does instead:
- `def f(int x)` truncates 1.5 to 1 and wraps or raises differently on overflow: every int
  argument goes through args.hpp's as_int64 (TypeError for non-ints and bools, OverflowError
  past int64);
- typed memoryviews refuse other dtypes, byte-swapped and read-only arrays: arrays are read
  through the buffer protocol by args.hpp, in place where the core can read them, converted
  otherwise;
- the GIL is held by default: kernels run in `with nogil:` blocks over `nogil` declarations
  (rmsnorm releases it inside args.hpp, after its output exists);
- `except +` maps five exceptions its own way: `except +translate_exception` (kvbridge.pxd).
"""

from libc.stdint cimport int32_t, int64_t
from libcpp.memory cimport unique_ptr
from libcpp.optional cimport optional
from libcpp.vector cimport vector

cimport kvbridge_cython.kvbridge as kv

import numpy as np

BACKEND = "cython"

if not kv.args_init():  # what args.hpp looks up once (numpy's names)
    raise ImportError("kvbridge_cython: numpy's names could not be looked up")


# --- arguments --------------------------------------------------------------------------------


cdef int64_t as_int64(object value) except? -1:
    cdef int64_t out = 0
    kv.as_int64(value, &out)
    return out


# --- BlockPool ----------------------------------------------------------------------------------


cdef class _Int32BufferOwner:
    """Owns one C++ Buffer and lends it to numpy through the buffer protocol: numpy keeps this
    object as its array's base, so the buffer is freed exactly once, when the last array over
    it dies (__dealloc__), and never copied."""
    cdef unique_ptr[kv.Buffer[int32_t]] buffer
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __getbuffer__(self, Py_buffer* view, int flags):
        self.shape[0] = self.buffer.get().size()
        self.strides[0] = sizeof(int32_t)
        view.buf = self.buffer.get().data()
        view.obj = self
        view.len = self.shape[0] * sizeof(int32_t)
        view.readonly = 0
        view.itemsize = sizeof(int32_t)
        view.format = "i"
        view.ndim = 1
        view.shape = self.shape
        view.strides = self.strides
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer* view):
        pass


cdef class PoolStats:
    """Live view of one pool's counters; holds a reference that keeps its pool alive."""
    cdef BlockPool _pool

    def __init__(self, *args, **kwargs):
        raise TypeError("PoolStats has no constructor: use BlockPool.stats")

    @property
    def allocated_total(self):
        return self._pool.thisptr.stats().allocated_total.load()

    @property
    def released_total(self):
        return self._pool.thisptr.stats().released_total.load()

    @property
    def peak_in_use(self):
        return self._pool.thisptr.stats().peak_in_use.load()

    def __repr__(self):
        return self._pool.thisptr.stats().repr().decode()


cdef class BlockPool:
    """Ref-counted KV-cache block allocator."""
    cdef kv.BlockPool* thisptr

    def __cinit__(self, num_blocks):
        self.thisptr = new kv.BlockPool(as_int64(num_blocks))

    def __init__(self, num_blocks):
        pass  # the work is in __cinit__; this gives the class an introspectable signature

    def __dealloc__(self):
        del self.thisptr

    @property
    def num_blocks(self):
        return self.thisptr.num_blocks()

    @property
    def num_free(self):
        return self.thisptr.num_free()

    def allocate(self, n):
        cdef optional[vector[int32_t]] got = self.thisptr.allocate(as_int64(n))
        return got.value() if got.has_value() else None

    def allocate_many(self, counts):
        cdef vector[int64_t] c
        kv.to_counts(counts, c)
        cdef optional[vector[vector[int32_t]]] got = self.thisptr.allocate_many(c.data(), c.size())
        return got.value() if got.has_value() else None

    def retain(self, block):
        self.thisptr.retain(as_int64(block))

    def release(self, block):
        self.thisptr.release(as_int64(block))

    def refcount(self, block):
        return self.thisptr.refcount(as_int64(block))

    def refcounts(self):
        cdef _Int32BufferOwner owner = _Int32BufferOwner.__new__(_Int32BufferOwner)
        owner.buffer = self.thisptr.refcounts()
        return np.asarray(owner)

    @property
    def stats(self):
        cdef PoolStats s = PoolStats.__new__(PoolStats)
        s._pool = self
        return s

    def __repr__(self):
        return self.thisptr.repr().decode()


# --- functions --------------------------------------------------------------------------------


def common_prefix(a, b):
    """Length of the longest common prefix."""
    cdef kv.Tokens ta, tb
    kv.to_tokens(a, "a", False, ta)
    kv.to_tokens(b, "b", False, tb)
    cdef int64_t result
    with nogil:
        result = kv.common_prefix(ta.view, tb.view)
    return result


def count_eos(tokens, eos):
    """How many tokens equal eos (compared exactly, as int64)."""
    cdef int64_t target = as_int64(eos)
    cdef kv.Tokens input
    kv.to_tokens(tokens, "tokens", True, input)
    cdef int64_t result
    with nogil:
        result = kv.count_eos(input.view, target)
    return result


def rmsnorm(x, weight, eps=1e-6, *, out=None):
    """Fused RMSNorm over the last dimension."""
    cdef double c_eps = 0
    kv.as_eps(eps, &c_eps)
    return kv.rmsnorm(x, weight, c_eps, out)


def live_buffers():
    """C++-allocated buffers now owned by Python objects."""
    return kv.live_buffers()


def live_pools():
    """C++ BlockPool objects now alive."""
    return kv.live_pools()


def set_num_threads(n):
    """Threads a kernel call may use (n >= 1)."""
    kv.set_num_threads(as_int64(n))


def get_num_threads():
    """Threads a kernel call may use."""
    return kv.get_num_threads()


kv.default_num_threads()  # a malformed KVBRIDGE_NUM_THREADS fails the import


# --- _testing -----------------------------------------------------------------------------------


def _throw(kind):
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a str, got {kv.describe(kind).decode()}")
    kv.throw_kind(kind.encode())


def _last_num_threads():
    return kv.last_num_threads()


def _arm_gate(double timeout_s):
    kv.arm_gate(timeout_s)


def _open_gate():
    return kv.open_gate()


def _close_gate():
    return kv.close_gate()


def _data_address(tokens):
    """The address count_eos reads tokens from (the same input path as count_eos)."""
    cdef kv.Tokens input
    kv.to_tokens(tokens, "tokens", True, input)
    return kv.address_of(input)


# --- free-threaded calls ------------------------------------------------------------------------

# Each function immortal on a free-threaded build, so that threads calling it together do not
# all write its reference count (packages/args/immortal.hpp says why; Cython leaves it counted).
# Last in the module, so that every function it defines is among them.
for _function in [f for f in globals().values() if type(f) is type(count_eos)]:
    kv.make_immortal(_function)
del _function
