# Declarations mirroring common_cpp/include/kvbridge/*.hpp. Every declaration that can throw
# carries `except +translate_exception`: without `except +` a C++ throw through Cython code
# aborts the process (NVIDIA/raft#1001), and plain `except +` maps five exceptions differently
# from docs/contract.md, "Errors" (see translate_exception.hpp). Kernels are `nogil` so callers can release
# the GIL around them.

from libc.stdint cimport int32_t, int64_t, uint64_t
from libcpp.atomic cimport atomic
from libcpp.memory cimport unique_ptr
from libcpp.optional cimport optional
from libcpp.string cimport string
from libcpp.vector cimport vector


cdef extern from "translate_exception.hpp" namespace "kvbridge_cython":
    cdef void translate_exception()


cdef extern from "kvbridge/buffer.hpp" namespace "kvbridge" nogil:
    cdef cppclass Buffer[T]:
        T* data()
        size_t size()
    int64_t live_buffers()


cdef extern from "kvbridge/block_pool.hpp" namespace "kvbridge" nogil:
    cdef cppclass PoolStats:
        atomic[int64_t] allocated_total
        atomic[int64_t] released_total
        atomic[int64_t] peak_in_use
        string repr() except +translate_exception

    cdef cppclass BlockPool:
        BlockPool(int64_t num_blocks) except +translate_exception
        int32_t num_blocks()
        int32_t num_free()
        optional[vector[int32_t]] allocate(int64_t n) except +translate_exception
        optional[vector[vector[int32_t]]] allocate_many(
            const int64_t* counts, size_t num_requests) except +translate_exception
        void retain(int64_t block) except +translate_exception
        void release(int64_t block) except +translate_exception
        int32_t refcount(int64_t block) except +translate_exception
        unique_ptr[Buffer[int32_t]] refcounts() except +translate_exception
        const PoolStats& stats()
        string repr() except +translate_exception

    int64_t live_pools()


cdef extern from "kvbridge/tokens.hpp" namespace "kvbridge" nogil:
    cdef cppclass TokenView[T]:
        const T* data
        int64_t size
        int64_t stride
    int64_t common_prefix[A, B](TokenView[A] a, TokenView[B] b)
    int64_t count_eos[T](TokenView[T] tokens, int64_t eos)


cdef extern from "kvbridge/rmsnorm.hpp" namespace "kvbridge" nogil:
    cdef cppclass FloatArrayView:
        const float* data
        vector[int64_t] shape
        vector[int64_t] strides
    void rmsnorm(const FloatArrayView& x, const FloatArrayView& weight, double eps, float* out,
                 const vector[int64_t]& out_shape) except +translate_exception


# rmsnorm into a fresh numpy array, shared with the pybind11 and nanobind packages
# (packages/args/args.hpp): the core checks, then calls back to allocate with the GIL held, and
# runs the kernel with the GIL released. NULL with a Python error set, or a core exception.
cdef extern from "args.hpp" namespace "kvbridge::args":
    bint args_init "kvbridge::args::init"()
    object rmsnorm_fresh(const FloatArrayView& x, const FloatArrayView& weight,
                         double eps) except +translate_exception


cdef extern from "kvbridge/threads.hpp" namespace "kvbridge" nogil:
    void set_num_threads(int64_t n) except +translate_exception
    int64_t get_num_threads()
    int64_t default_num_threads() except +translate_exception
    int64_t last_num_threads()


cdef extern from "kvbridge/testing.hpp" namespace "kvbridge::testing" nogil:
    void throw_kind(string kind) except +translate_exception
