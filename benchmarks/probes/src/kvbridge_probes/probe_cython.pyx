# cython: language_level=3
# Cython with its defaults: plain `except +`, typed arguments, typed memoryviews, GIL held.
from libc.stdint cimport int32_t, int64_t, uintptr_t
from libcpp.string cimport string
from libcpp.vector cimport vector

cdef extern from "kvbridge/testing.hpp":
    void cpp_throw_kind "kvbridge::testing::throw_kind"(string kind) except +

cdef extern from *:
    """
    #include <chrono>
    static void probe_spin(double seconds) {
      const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
      while (std::chrono::steady_clock::now() < end) {}
    }
    """
    void probe_spin(double seconds)


def noop():
    pass


def throw_kind(kind):
    cpp_throw_kind(kind.encode())


def take_int32(int32_t x):
    return x


def take_int64(int64_t x):
    return x


def array_address(int64_t[:] a):
    return <uintptr_t>&a[0]


def spin(double seconds):
    probe_spin(seconds)


def returned_vector():
    cdef vector[int32_t] v = vector[int32_t](4, 1)
    return v


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


def live_owners():
    return _live[0]
