# distutils: language = c++
# Cython on a free-threaded Python: the seed pool wrapped with Cython's defaults, and with
# cython.critical_section, its per-object lock. Compiled twice: with the directive
# freethreading_compatible=True (declared), and without (declares nothing).
cimport cython
from libc.stdint cimport int32_t, int64_t
from libcpp.vector cimport vector


cdef extern from "seed_pool.hpp" namespace "kvbp":
    cdef cppclass CSeedPool "kvbp::SeedPool":
        CSeedPool(int32_t) except +
        vector[int32_t] allocate(int32_t)
        void release(int32_t)
        int64_t num_free()
        int64_t num_blocks()
        int64_t handed_out_twice()
        int64_t allocated()
        int64_t released()


def noop():
    pass


cdef class SeedPool:
    cdef CSeedPool* pool

    def __cinit__(self, int32_t num_blocks):
        self.pool = new CSeedPool(num_blocks)

    def __dealloc__(self):
        del self.pool

    def allocate(self, int32_t n):
        return self.pool.allocate(n)

    def release(self, int32_t b):
        self.pool.release(b)

    def noop(self):
        pass

    def take_int64(self, int64_t x):
        return x

    @property
    def num_free(self):
        return self.pool.num_free()

    @property
    def num_blocks(self):
        return self.pool.num_blocks()

    def counters(self):
        return (self.pool.handed_out_twice(), self.pool.allocated(), self.pool.released())


cdef class LockedPool(SeedPool):
    def allocate(self, int32_t n):
        with cython.critical_section(self):
            return self.pool.allocate(n)

    def release(self, int32_t b):
        with cython.critical_section(self):
            self.pool.release(b)
