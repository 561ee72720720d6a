/* An extern "C" library as teams ship one: plain C declarations, implemented in C++, with no
 * care taken at the boundary. ctypes and cffi load it with their defaults (probe_semantics.py);
 * cffi's API mode compiles a module against this header (probe_cffi_api). */
#ifndef KVBRIDGE_PROBE_C_ABI_H
#define KVBRIDGE_PROBE_C_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void kvbp_noop(void);
int64_t kvbp_take_int64(int64_t x);
int32_t kvbp_take_int32(int32_t x);
/* Lets a C++ exception escape: nothing catches it on this side of the boundary. */
void kvbp_throw_kind(const char* kind);
/* kvbridge::testing::wait_for_python: 1 if another thread stored 2 at address in time. */
int kvbp_wait_for_python(int64_t address, double timeout_s);
/* The address the library reads an int64 array from, and its element i as the library sees it. */
uintptr_t kvbp_array_address(const int64_t* data);
/* The floors of a call given arrays (bench_call_overhead.py): a C function is given each array
 * as its address and its length, as kvbridge's c_abi.h and every C library are (a binding's
 * array carries its own). Each folds what it is given into one value (XOR). One int64 array: */
uintptr_t kvbp_array(const int64_t* data, int64_t n);
/* one int64 array and an int: */
uintptr_t kvbp_array_and_int(const int64_t* data, int64_t n, int64_t x);
/* two int64 arrays: */
uintptr_t kvbp_arrays(const int64_t* a, int64_t na, const int64_t* b, int64_t nb);
/* and RMSNorm's arrays (x, weight, out) with its eps: the arguments rmsnorm(out=) takes. */
uintptr_t kvbp_three_arrays(const float* x, int64_t nx, const float* w, int64_t nw, float* out,
                            int64_t nout, double eps);
int64_t kvbp_element(const int64_t* data, int64_t i);
/* How many of the n int64 values at data equal eos: a kernel over an input array. */
int64_t kvbp_count_eos(const int64_t* data, int64_t n, int64_t eos);
/* One object the library owns, reached through an opaque handle as a C library's classes are:
 * the floors of a Python class over a handle (a method, a method taking one int, a property). */
typedef struct kvbp_object kvbp_object;
kvbp_object* kvbp_object_get(void);
void kvbp_object_noop(const kvbp_object* o);
int64_t kvbp_object_take_int64(const kvbp_object* o, int64_t x);
int64_t kvbp_object_value(const kvbp_object* o);
/* An object of the caller's, as a C library hands out its classes: made by create, freed by
 * destroy; the handle stays a plain pointer after destroy (nothing checks it). */
kvbp_object* kvbp_object_create(void);
void kvbp_object_destroy(kvbp_object* o);
/* Four int32 ones in memory the library allocated (malloc); nothing says who frees it. */
int32_t* kvbp_returned_buffer(void);
void kvbp_free(void* p);
/* Buffers kvbp_returned_buffer handed out that kvbp_free has not freed yet. */
int64_t kvbp_live_buffers(void);

#ifdef __cplusplus
}
#endif

#endif
