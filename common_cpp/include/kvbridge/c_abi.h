/* The kvbridge core as a C ABI: what a ctypes or cffi user (or any C program) links against.
 *
 * Shaped like llama.cpp's llama.h: opaque handles, explicit free functions, nothing C++ in the
 * header. No C++ exception crosses this boundary: every function that can fail catches
 * everything and returns a kvb_status (the token kernels: a count, or a negated kvb_status);
 * the failed call's what() text stays readable from the same
 * thread through kvb_last_error(). Arrays cross as pointer, length and stride (in elements).
 *
 * The header is plain declarations with no function-like macros, so cffi's cdef() can read it
 * as shipped (kvbridge_cffi drops the preprocessor lines and the __cplusplus blocks, nothing else).
 */
#ifndef KVBRIDGE_C_ABI_H
#define KVBRIDGE_C_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How a call ended: 0, or the kind of C++ exception it ended with. This enum is the one table of
 * the contract's exception kinds (docs/contract.md, "Errors"): the core's catch chain
 * (kvbridge::caught_exception) returns these codes, kvb_status_name() and kvb_status_exception()
 * give each one's name and Python exception type, and every binding maps through them. */
typedef enum kvb_status {
  KVB_OK = 0,
  KVB_INVALID_ARGUMENT = 1,   /* std::invalid_argument    -> ValueError */
  KVB_DOMAIN_ERROR = 2,       /* std::domain_error        -> ValueError */
  KVB_LENGTH_ERROR = 3,       /* std::length_error        -> ValueError */
  KVB_OUT_OF_RANGE = 4,       /* std::out_of_range        -> IndexError */
  KVB_RANGE_ERROR = 5,        /* std::range_error         -> ValueError */
  KVB_OVERFLOW_ERROR = 6,     /* std::overflow_error      -> OverflowError */
  KVB_UNDERFLOW_ERROR = 7,    /* std::underflow_error     -> RuntimeError */
  KVB_BAD_ALLOC = 8,          /* std::bad_alloc           -> MemoryError */
  KVB_BAD_CAST = 9,           /* std::bad_cast            -> RuntimeError */
  KVB_IOS_FAILURE = 10,       /* std::ios_base::failure   -> RuntimeError */
  KVB_LOGIC_ERROR = 11,       /* std::logic_error         -> RuntimeError */
  KVB_RUNTIME_ERROR = 12,     /* std::runtime_error       -> RuntimeError */
  KVB_SYSTEM_ERROR = 13,      /* std::system_error        -> RuntimeError */
  KVB_STD_EXCEPTION = 14,     /* another std::exception   -> RuntimeError */
  KVB_UNKNOWN_EXCEPTION = 15, /* not a std::exception     -> RuntimeError */
  KVB_STATUS_COUNT = 16
} kvb_status;

/* Element types of token arrays. */
typedef enum kvb_dtype { KVB_INT32 = 0, KVB_INT64 = 1, KVB_UINT64 = 2 } kvb_dtype;

typedef struct kvb_pool kvb_pool;     /* a BlockPool */
typedef struct kvb_buffer kvb_buffer; /* an int32 array the core allocated; kvb_buffer_free it */

typedef struct kvb_pool_stats {
  int64_t allocated_total; /* blocks ever handed out */
  int64_t released_total;  /* blocks ever returned to the free list */
  int64_t peak_in_use;     /* most blocks in use at once */
} kvb_pool_stats;

/* --- errors ------------------------------------------------------------------------------- */
const char* kvb_version(void);
/* The what() text of the last call on this thread that did not return KVB_OK. */
const char* kvb_last_error(void);
/* "invalid_argument", ..., or "ok"; NULL for a code outside the enum. */
const char* kvb_status_name(int status);
/* The Python exception the contract maps a status to: "ValueError", ...; NULL for KVB_OK. */
const char* kvb_status_exception(int status);

/* --- BlockPool ---------------------------------------------------------------------------- */
kvb_status kvb_pool_create(int64_t num_blocks, kvb_pool** out);
void kvb_pool_free(kvb_pool* pool);
int32_t kvb_pool_num_blocks(const kvb_pool* pool);
int32_t kvb_pool_num_free(const kvb_pool* pool);
/* All or nothing: *out is the n block ids, or NULL when fewer than n blocks are free. */
kvb_status kvb_pool_allocate(kvb_pool* pool, int64_t n, kvb_buffer** out);
/* All or nothing over the batch: *out holds every request's ids, concatenated in order (request
 * i has counts[i] of them), or is NULL when the pool cannot serve the whole batch. */
kvb_status kvb_pool_allocate_many(kvb_pool* pool, const int64_t* counts, int64_t num_requests,
                                  kvb_buffer** out);
kvb_status kvb_pool_retain(kvb_pool* pool, int64_t block);
kvb_status kvb_pool_release(kvb_pool* pool, int64_t block);
/* A block's refcount (>= 0), or minus the kvb_status the call failed with: like the token
 * kernels' results below, a call an engine makes per block needs no out-parameter. */
int64_t kvb_pool_refcount(const kvb_pool* pool, int64_t block);
/* A snapshot of every block's refcount, num_blocks long. */
kvb_status kvb_pool_refcounts(const kvb_pool* pool, kvb_buffer** out);
/* The pool's counters now (each read atomically). */
void kvb_pool_stats_read(const kvb_pool* pool, kvb_pool_stats* out);
/* "<BlockPool free=5/8>", valid until the next repr call on this thread. */
const char* kvb_pool_repr(const kvb_pool* pool);
/* "<PoolStats allocated_total=... released_total=... peak_in_use=...>", likewise. */
const char* kvb_pool_stats_repr(const kvb_pool* pool);

/* --- buffers ------------------------------------------------------------------------------ */
int32_t* kvb_buffer_data(kvb_buffer* buffer);
int64_t kvb_buffer_size(const kvb_buffer* buffer);
/* Frees the buffer; call exactly once per buffer the core returned. NULL is ignored. */
void kvb_buffer_free(kvb_buffer* buffer);

/* --- kernels ------------------------------------------------------------------------------ */
/* The token kernels return their count (>= 0), or minus the kvb_status the call failed with
 * (kvb_last_error() says why, as after any call): a count is never negative, and a call made
 * once per decode step then needs no out-parameter, which costs a ctypes or cffi caller more
 * than the kernel does on a short input. */
int64_t kvb_common_prefix(const void* a, int a_dtype, int64_t a_size, int64_t a_stride,
                          const void* b, int b_dtype, int64_t b_size, int64_t b_stride);
int64_t kvb_count_eos(const void* tokens, int dtype, int64_t size, int64_t stride, int64_t eos);
/* The same two kernels over contiguous arrays of the dtype in their name (both arrays of one
 * dtype for common_prefix): address and length only. What a decode loop passes every step, and
 * each argument costs a cffi caller about 45 ns and a ctypes caller about 130, more than the
 * kernel on a short input: two and four arguments fewer than the strided forms above, which
 * take every other case. The address is `const void*` because cffi passes the buffer it lends
 * by default (`char[]`) only to a void* or char* parameter: a typed one would need a typed view,
 * made on every call. */
int64_t kvb_count_eos_int32(const void* tokens, int64_t size, int64_t eos);
int64_t kvb_count_eos_int64(const void* tokens, int64_t size, int64_t eos);
int64_t kvb_count_eos_uint64(const void* tokens, int64_t size, int64_t eos);
int64_t kvb_common_prefix_int32(const void* a, int64_t a_size, const void* b, int64_t b_size);
int64_t kvb_common_prefix_int64(const void* a, int64_t a_size, const void* b, int64_t b_size);
/* x and weight are strided float32 arrays, out a C-contiguous one, of x_ndim, weight_ndim and
 * out_ndim dimensions. `dims` holds, one after the other: x's shape and its strides (in
 * elements), weight's shape and strides, and out's shape (2 * x_ndim + 2 * weight_ndim + out_ndim
 * values): one array, where five would cost a ctypes or cffi caller more than the kernel does on
 * a decode step. out_fresh is nonzero when the caller has just allocated out for this call (a
 * large output is then not streamed past the cache: kvbridge::Out in rmsnorm.hpp). */
kvb_status kvb_rmsnorm(const float* x, int64_t x_ndim, const float* weight, int64_t weight_ndim,
                       float* out, int64_t out_ndim, const int64_t* dims, double eps,
                       int out_fresh);
int64_t kvb_live_buffers(void);
int64_t kvb_live_pools(void);

/* --- threads ------------------------------------------------------------------------------ */
/* Threads a kernel call may use (n >= 1), and the setting now. */
kvb_status kvb_set_num_threads(int64_t n);
int64_t kvb_get_num_threads(void);
/* The default: the CPUs this process may run on, or KVBRIDGE_NUM_THREADS (refused if malformed). */
kvb_status kvb_default_num_threads(int64_t* out);

/* --- stores ------------------------------------------------------------------------------ */
/* How this process writes a large existing out= (stores.hpp): "auto: outputs under 8 MiB (...)
 * written to the cache; ...", and what auto has timed so far ("; timed here: float32 ..."). *out
 * stays valid for the process's life. A bad KVBRIDGE_STORES: ValueError. */
kvb_status kvb_store_choice(const char** out);
/* The paths the RMSNorm kernels take on this CPU (rmsnorm.hpp's rmsnorm_paths): "float32: ...;
 * bfloat16: ...; float16: ...". *out stays valid for the process's life. */
kvb_status kvb_rmsnorm_paths(const char** out);

/* --- testing hooks (the conformance suite's _testing) ------------------------------------- */
/* Throws the named C++ exception inside the core; returns its status like any other call. */
kvb_status kvb_testing_throw(const char* kind);
/* How many threads the last kernel call from this thread ran on. */
int64_t kvb_testing_last_num_threads(void);
/* The address kvb_count_eos would read `tokens` from. */
kvb_status kvb_testing_data_address(const void* tokens, int dtype, int64_t size, int64_t stride,
                                    uintptr_t* out);
/* The GIL gate (kvbridge/testing.hpp): the next kernel call waits at it, up to timeout_s seconds,
 * until another thread opens it. open and close return the gate's state: 0 idle, 1 armed,
 * 2 a kernel waiting, 3 opened, 4 timed out. A timeout outside (0, 3600]: ValueError. */
kvb_status kvb_testing_arm_gate(double timeout_s);
int kvb_testing_open_gate(void);
int kvb_testing_close_gate(void);

#ifdef __cplusplus
}
#endif

#endif /* KVBRIDGE_C_ABI_H */
