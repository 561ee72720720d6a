# cython: language_level=3, boundscheck=False, wraparound=False, auto_pickle=False
# (auto_pickle=False: a pool holds C++ state that pickling could not carry.)
"""kvbridge_cython._core: the Cython binding of the kvbridge core.

Where Cython's defaults differ from docs/contract.md, and what this file does instead:
- `def f(int x)` truncates 1.5 to 1 and wraps or raises differently on overflow: every int
  argument goes through `as_int64` (TypeError for non-ints and bools, OverflowError past int64);
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
from operator import index as _index

BACKEND = "cython"
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


# --- arguments --------------------------------------------------------------------------------


def _describe(value):
    cls = type(value)
    name = cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"
    return f"{name}: {value!r}"


cdef int64_t as_int64(object value) except? -1:
    """An int as the contract reads it: int or __index__ (numpy ints), never bool/float/str."""
    cdef int overflow = 0
    cdef long long fast
    if type(value) is int:  # the common case, without a Python-level check
        fast = PyLong_AsLongLongAndOverflow(value, &overflow)
        if not overflow:
            return fast
    # numpy.bool_ too: its __index__ is deprecated in some numpy releases, an error in others.
    if isinstance(value, (bool, np.bool_)) or not hasattr(type(value), "__index__"):
        raise TypeError(f"expected an int, got {_describe(value)}")
    i = _index(value)
    if i < _INT64_MIN or i > _INT64_MAX:
        raise OverflowError(f"{i} does not fit in int64")
    return i


cdef object _token_array(obj, str name, bint keep_uint64):
    """A 1-D integer numpy array the core can read: the input itself for int32/int64 (and
    uint64 when `keep_uint64`), otherwise an int64 conversion. Lists and tuples are copied.
    Dtypes are judged by kind and size, not `dtype == np.int32` (which builds a dtype per call:
    most of this function's cost on small inputs)."""
    if isinstance(obj, (list, tuple)):
        return np.array([as_int64(v) for v in obj], dtype=np.int64)
    arr = obj if type(obj) is np.ndarray else np.asarray(obj)
    dt = arr.dtype
    kind = dt.kind
    if kind == "O":
        raise TypeError(f"{name} must be an integer array or sequence, got {_describe(obj)}")
    if kind != "i" and kind != "u":  # type before shape, as in every package
        raise TypeError(f"{name} must have an integer dtype, got {dt}")
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    cdef Py_ssize_t size = dt.itemsize
    readable = dt.isnative and arr.strides[0] % size == 0
    if readable and ((kind == "i" and (size == 4 or size == 8)) or
                     (keep_uint64 and kind == "u" and size == 8)):
        return arr
    return arr.astype(np.int64)


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


def _float_array(obj, str name):
    arr = np.asarray(obj) if obj is not None and not isinstance(obj, str) else None
    if arr is None or arr.dtype.kind == "O":
        raise TypeError(f"{name} must be a float32 array, got {_describe(obj)}")
    if arr.dtype.kind != "f" or arr.dtype.itemsize != 4:  # float32 in either byte order
        raise TypeError(f"{name} must be float32, got {arr.dtype}")
    if not arr.dtype.isnative or any(s % 4 for s in arr.strides):  # byte-swapped: converted
        arr = np.ascontiguousarray(arr, dtype=np.float32)
    return arr


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
        return (f"<PoolStats allocated_total={self.allocated_total} "
                f"released_total={self.released_total} peak_in_use={self.peak_in_use}>")


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
        arr = np.ascontiguousarray(_token_array(counts, "counts", False), dtype=np.int64)
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
    cdef _Buffer ba = _Buffer(_token_array(a, "a", False))
    cdef _Buffer bb = _Buffer(_token_array(b, "b", False))
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
    cdef _Buffer buf = _Buffer(_token_array(tokens, "tokens", True))
    code = _fast_code(&buf.view, True)
    with nogil:
        result = _count(&buf.view, code, target)
    return result


def rmsnorm(x, weight, eps=1e-6, *, out=None):
    """Fused RMSNorm over the last dimension."""
    if eps is None or isinstance(eps, str):
        raise TypeError(f"eps must be a float, got {_describe(eps)}")
    cdef double c_eps = eps
    cdef _Buffer bx = _Buffer(_float_array(x, "x"))
    cdef _Buffer bw = _Buffer(_float_array(weight, "weight"))
    cdef kv.FloatArrayView xv = bx.floats(), wv = bw.floats()
    kv.check_rmsnorm_args(xv, wv, c_eps)
    cdef kv.Out frm = kv.Out.kFresh if out is None else kv.Out.kExisting
    if out is None:
        out = np.empty(tuple(xv.shape), np.float32)
    else:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a numpy.ndarray, got {_describe(out)}")
        if out.dtype != np.float32:
            raise TypeError(f"out must be float32, got {out.dtype}")
        if not (out.flags.c_contiguous and out.flags.writeable):
            raise ValueError("out must be a writeable C-contiguous array")
    cdef _Buffer bout = _Buffer(out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS)
    cdef vector[int64_t] out_shape = out.shape
    with nogil:
        kv.rmsnorm(xv, wv, c_eps, <float*>bout.view.buf, out_shape, frm)
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


# --- _testing -----------------------------------------------------------------------------------


def _throw(kind):
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a str, got {_describe(kind)}")
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
    arr = _token_array(tokens, "tokens", True)
    return <uintptr_t>_Buffer(arr).view.buf
