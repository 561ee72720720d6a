# cython: language_level=3
# Cython with its defaults: plain `except +`, typed arguments, typed memoryviews, GIL held.
from libc.stdint cimport int32_t, int64_t, uintptr_t
from libc.stdlib cimport free, malloc
from libcpp.string cimport string
from libcpp.vector cimport vector

cdef extern from "kvbridge/testing.hpp":
    void cpp_throw_kind "kvbridge::testing::throw_kind"(string kind) except +
    # The same function declared without `except +`, as an extern often is: Cython 3 then
    # assumes it cannot throw.
    void cpp_throw_kind_undeclared "kvbridge::testing::throw_kind"(string kind)
    bint probe_wait_for_python "kvbridge::testing::wait_for_python"(int64_t address, double timeout_s)


def noop():
    pass


def noop_object(o):
    pass


def throw_kind(kind):
    cpp_throw_kind(kind.encode())


def throw_kind_undeclared(kind):
    cpp_throw_kind_undeclared(kind.encode())


def take_int32(int32_t x):
    return x


def take_int64(int64_t x):
    return x


# const, as a user spells a memoryview it only reads (a non-const one refuses a read-only array).
def array_address(const int64_t[:] a):
    return <uintptr_t>&a[0]


def array_and_int(const int64_t[:] a, int64_t x):
    return <uintptr_t>&a[0] ^ <uintptr_t>x


def arrays_address(const int64_t[:] a, const int64_t[:] b):
    return <uintptr_t>&a[0] ^ <uintptr_t>&b[0]


def three_arrays(const float[:, :] x, const float[:] w, float[:, :] out, double eps):
    # rmsnorm(out=)'s arguments: x and out 2-D, the weight 1-D, all float32, and eps.
    return <uintptr_t>&x[0, 0] ^ <uintptr_t>&w[0] ^ <uintptr_t>&out[0, 0] ^ <uintptr_t>(eps > 0)


def array_address_contiguous(const int64_t[::1] a):
    return <uintptr_t>&a[0]  # the opt-in for a kernel that needs contiguous memory: [::1]


def second_element(const int64_t[:] a):
    return (&a[0])[1]  # a raw pointer loop, as a kernel that forgets the memoryview's strides


def wait_for_python(int64_t address, double timeout_s):
    return probe_wait_for_python(address, timeout_s)


def returned_vector():
    cdef vector[int32_t] v = vector[int32_t](4, 1)
    return v


def take_vector(vector[int64_t] v):
    return v.size()


# The zero-copy return idiom: a buffer-protocol owner of C++ memory that numpy adopts.
_adopted = [0, 0]  # live count, last address

cdef class _Adopted:
    cdef int32_t* data
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __cinit__(self):
        self.data = <int32_t*>malloc(4 * sizeof(int32_t))
        for i in range(4):
            self.data[i] = 1
        _adopted[0] += 1
        _adopted[1] = <uintptr_t>self.data

    def __dealloc__(self):
        free(self.data)
        _adopted[0] -= 1

    def __getbuffer__(self, Py_buffer* view, int flags):
        self.shape[0] = 4
        self.strides[0] = sizeof(int32_t)
        view.buf = self.data
        view.obj = self
        view.len = 4 * sizeof(int32_t)
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


def adopted():
    import numpy
    return numpy.asarray(_Adopted())


def adopted_address():
    return _adopted[1]


def live_adopted():
    return _adopted[0]


cdef struct Counters:
    int64_t value

_live = [0]

cdef class Owner:
    cdef Counters counters

    def __cinit__(self):
        _live[0] += 1

    def __dealloc__(self):
        _live[0] -= 1

    @property
    def counters(self):
        return self.counters  # a struct becomes a dict: a copy

    def bump(self):
        self.counters.value += 1

    def noop(self):
        pass  # the floor for a method call

    def take_int64(self, int64_t x):
        return x  # ... and for a method taking one int

    @property
    def value(self):
        return self.counters.value  # the floor for a property returning an int


def live_owners():
    return _live[0]
