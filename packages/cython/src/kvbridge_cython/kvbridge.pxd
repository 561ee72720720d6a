# Declarations mirroring common_cpp/include/kvbridge/*.hpp. Every declaration that can throw
# carries `except +translate_exception`: without `except +` a C++ throw through Cython code
# aborts the process (NVIDIA/raft#1001), and plain `except +` maps five exceptions differently
# from docs/contract.md, "Errors" (see raise_caught.hpp). Kernels are `nogil` so callers can release
# the GIL around them.

from libc.stdint cimport int32_t, int64_t, uint64_t, uintptr_t
from libcpp.atomic cimport atomic
from libcpp.memory cimport unique_ptr
from libcpp.optional cimport optional
from libcpp.string cimport string
from libcpp.vector cimport vector


# Cython's built-in `except +` maps five standard exceptions differently from pybind11 and torch
# (length_error -> RuntimeError, range_error and underflow_error -> ArithmeticError, bad_cast ->
# TypeError, ios_base::failure -> OSError); the contract follows the other two, so the handler
# Cython calls inside its catch block is the compiled front ends' one error path.
cdef extern from "raise_caught.hpp" namespace "kvbridge::args":
    cdef void translate_exception "kvbridge::args::raise_caught"()


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
    cdef cppclass AnyTokens:
        pass
    int64_t common_prefix(const AnyTokens& a, const AnyTokens& b) except +translate_exception
    int64_t count_eos(const AnyTokens& tokens, int64_t eos)


# The argument rules at the CPython C API level (packages/args/args.hpp; who shares them:
# packages/registry.json's `shares`):
# each returns false with a Python error set (`except 0` raises it).
cdef extern from "args.hpp" namespace "kvbridge::args":
    bint args_init "kvbridge::args::init"() except 0
    string describe(object obj)
    bint as_int64(object obj, int64_t* out) except 0
    bint as_eps(object obj, double* out) except 0
    cdef cppclass Tokens:
        AnyTokens view
    bint to_tokens(object obj, const char* name, bint keep_uint64, Tokens& out) except 0
    bint to_counts(object obj, vector[int64_t]& out) except 0
    uintptr_t address_of(const Tokens& tokens)


# A module function that threads call together with the GIL off: no reference count written
# (packages/args/immortal.hpp).
cdef extern from "immortal.hpp" namespace "kvbridge::args":
    void make_immortal(object op)

# rmsnorm's call (packages/args/rmsnorm_call.hpp): the checks, a fresh output or out='s buffer,
# the kernel without the GIL: a new reference, or NULL with a Python error set.
cdef extern from "rmsnorm_call.hpp" namespace "kvbridge::args":
    object rmsnorm(object x, object weight, double eps, object out) except +translate_exception


cdef extern from "kvbridge/threads.hpp" namespace "kvbridge" nogil:
    void set_num_threads(int64_t n) except +translate_exception
    int64_t get_num_threads()
    int64_t default_num_threads() except +translate_exception
    int64_t last_num_threads()


cdef extern from "kvbridge/testing.hpp" namespace "kvbridge::testing" nogil:
    void throw_kind(string kind) except +translate_exception
    void arm_gate(double timeout_s) except +translate_exception
    int open_gate()
    int close_gate()
