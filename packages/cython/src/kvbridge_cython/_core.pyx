# cython: language_level=3, boundscheck=False, wraparound=False, auto_pickle=False
# (auto_pickle=False: a pool holds C++ state that pickling could not carry.)
"""kvbridge_cython._core: the Cython binding of the kvbridge core.

Where Cython's defaults differ from docs/contract.md, and what this file does instead:
- `def f(int x)` truncates 1.5 to 1 and wraps or raises differently on overflow: every argument
  follows the contract's rules in `_args.py` (shared with the torch and C ABI packages), with a
  cdef fast path in front for the common case (a plain int; an array the core reads in place);
- typed memoryviews refuse other dtypes, byte-swapped and read-only arrays: arrays are read
  through the buffer protocol (PyBUF_RECORDS_RO: any strides, read-only fine) after a dtype
  check, and only unsupported dtypes are converted;
- the GIL is held by default: kernels run in `with nogil:` blocks over `nogil` declarations;
- `except +` maps five exceptions its own way: `except +translate_exception` (kvbridge.pxd).
"""

from cpython.buffer cimport (
    PyBUF_C_CONTIGUOUS,
    PyBUF_RECORDS_RO,
    PyBUF_WRITABLE,
    PyBuffer_Release,
    PyObject_GetBuffer,
)
from cpython.long cimport PyLong_AsLongLongAndOverflow
from libc.stdint cimport int32_t, int64_t, uint64_t, uintptr_t
from libcpp.memory cimport unique_ptr
from libcpp.optional cimport optional
from libcpp.vector cimport vector

cimport kvbridge_cython.kvbridge as kv

import numpy as np

import kvbridge_cython._args as _args

BACKEND = "cython"


# --- arguments --------------------------------------------------------------------------------


cdef int64_t as_int64(object value) except? -1:
    """An int argument: a plain int within int64 here, everything else by _args.as_int64."""
    cdef int overflow = 0
    cdef long long fast
    if type(value) is int:
        fast = PyLong_AsLongLongAndOverflow(value, &overflow)
        if not overflow:
            return fast
    return _args.as_int64(value)


# Token dtypes the core reads in place, as buffer-protocol formats (numpy exports native-order
# data with no byte-order prefix): the per-call fast path reads these without touching numpy.
cdef enum TokenCode:
    NOT_FAST = -1
    INT32 = 0
    INT64 = 1
    UINT64 = 2


cdef TokenCode _fast_code(const Py_buffer* v, bint keep_uint64) noexcept:
    if v.ndim != 1 or v.format == NULL or v.format[0] == 0 or v.format[1] != 0:
        return NOT_FAST
    if v.strides[0] % v.itemsize != 0:
        return NOT_FAST
    cdef char c = v.format[0]
    if c == b"i" and v.itemsize == 4:
        return INT32
    if (c == b"l" or c == b"q") and v.itemsize == 8:
        return INT64
    if keep_uint64 and (c == b"L" or c == b"Q") and v.itemsize == 8:
        return UINT64
    return NOT_FAST


cdef kv.TokenView[int32_t] _view32(const Py_buffer* v) noexcept nogil:
    cdef kv.TokenView[int32_t] t
    t.data = <const int32_t*>v.buf
    t.size = v.shape[0]
    t.stride = v.strides[0] // 4
    return t


cdef kv.TokenView[int64_t] _view64(const Py_buffer* v) noexcept nogil:
    cdef kv.TokenView[int64_t] t
    t.data = <const int64_t*>v.buf
    t.size = v.shape[0]
    t.stride = v.strides[0] // 8
    return t


cdef kv.TokenView[uint64_t] _viewu64(const Py_buffer* v) noexcept nogil:
    cdef kv.TokenView[uint64_t] t
    t.data = <const uint64_t*>v.buf
    t.size = v.shape[0]
    t.stride = v.strides[0] // 8
    return t


cdef int64_t _count(const Py_buffer* v, TokenCode code, int64_t eos) noexcept nogil:
    if code == INT32:
        return kv.count_eos(_view32(v), eos)
    if code == UINT64:
        return kv.count_eos(_viewu64(v), eos)
    return kv.count_eos(_view64(v), eos)


cdef int64_t _prefix(const Py_buffer* a, TokenCode ca, const Py_buffer* b,
                     TokenCode cb) noexcept nogil:
    if ca == INT32 and cb == INT32:
        return kv.common_prefix(_view32(a), _view32(b))
    if ca == INT32:
        return kv.common_prefix(_view32(a), _view64(b))
    if cb == INT32:
        return kv.common_prefix(_view64(a), _view32(b))
    return kv.common_prefix(_view64(a), _view64(b))


cdef class _Buffer:
    """A Py_buffer held for the length of one call (released in __dealloc__): read-only with any
    strides by default, or with the flags given (a writable C-contiguous `out`)."""
    cdef Py_buffer view
    cdef bint held

    def __cinit__(self, obj, int flags=PyBUF_RECORDS_RO):
        PyObject_GetBuffer(obj, &self.view, flags)
        self.held = True

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)

    cdef kv.FloatArrayView floats(self):
        cdef kv.FloatArrayView v
        cdef int d
        v.data = <const float*>self.view.buf
        for d in range(self.view.ndim):
            v.shape.push_back(self.view.shape[d])
            v.strides.push_back(self.view.strides[d] // 4)
        return v


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
        arr = np.ascontiguousarray(_args.tokens(counts, "counts", False)[0], dtype=np.int64)
        cdef const int64_t[::1] c = arr
        cdef optional[vector[vector[int32_t]]] got = self.thisptr.allocate_many(
            &c[0] if c.shape[0] else NULL, c.shape[0])
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
    cdef _Buffer ba = _Buffer(_args.tokens(a, "a", False)[0])
    cdef _Buffer bb = _Buffer(_args.tokens(b, "b", False)[0])
    cdef TokenCode ca = _fast_code(&ba.view, False), cb = _fast_code(&bb.view, False)
    cdef int64_t result
    with nogil:
        result = _prefix(&ba.view, ca, &bb.view, cb)
    return result


def count_eos(tokens, eos):
    """How many tokens equal eos (compared exactly, as int64)."""
    cdef int64_t target = as_int64(eos)
    cdef Py_buffer view
    cdef TokenCode code
    cdef int64_t result
    if type(tokens) is np.ndarray:  # fast path: an array the core reads as it is
        PyObject_GetBuffer(tokens, &view, PyBUF_RECORDS_RO)
        try:
            code = _fast_code(&view, True)
            if code != NOT_FAST:
                with nogil:
                    result = _count(&view, code, target)
                return result
        finally:
            PyBuffer_Release(&view)
    cdef _Buffer buf = _Buffer(_args.tokens(tokens, "tokens", True)[0])
    code = _fast_code(&buf.view, True)
    with nogil:
        result = _count(&buf.view, code, target)
    return result


def rmsnorm(x, weight, eps=1e-6, *, out=None):
    """Fused RMSNorm over the last dimension."""
    cdef double c_eps = _args.as_eps(eps)
    cdef _Buffer bx = _Buffer(_args.floats(x, "x"))
    cdef _Buffer bw = _Buffer(_args.floats(weight, "weight"))
    cdef kv.FloatArrayView xv = bx.floats(), wv = bw.floats()
    if out is None:  # the core checks, then allocates through args.hpp; no GIL for the kernel
        return kv.rmsnorm_fresh(xv, wv, c_eps)
    _args.check_out_layout(_args.numpy_out(out))  # every type before any shape
    cdef _Buffer bout = _Buffer(out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS)
    cdef vector[int64_t] out_shape = out.shape
    with nogil:
        kv.rmsnorm(xv, wv, c_eps, <float*>bout.view.buf, out_shape)
    return out


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
if not kv.args_init():  # what args.hpp looks up once (numpy's names)
    raise ImportError("kvbridge_cython: numpy's names could not be looked up")


# --- _testing -----------------------------------------------------------------------------------


def _throw(kind):
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a str, got {_args.describe(kind)}")
    kv.throw_kind(kind.encode())


def _last_num_threads():
    return kv.last_num_threads()


def _data_address(tokens):
    """The address count_eos reads tokens from: the same two paths as count_eos."""
    cdef Py_buffer view
    if type(tokens) is np.ndarray:
        PyObject_GetBuffer(tokens, &view, PyBUF_RECORDS_RO)
        try:
            if _fast_code(&view, True) != NOT_FAST:
                return <uintptr_t>view.buf
        finally:
            PyBuffer_Release(&view)
    arr = _args.tokens(tokens, "tokens", True)[0]
    return <uintptr_t>_Buffer(arr).view.buf
