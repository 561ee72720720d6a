// The C ABI over the core (c_abi.h). Each function is one `guarded` call (or `counted`, its
// form for the calls that return a count: the token kernels, a block's refcount): nothing thrown
// inside may cross an extern "C" boundary (it would terminate the process), so every exception is
// sorted into a kvb_status by the core's one catch chain and its what() kept per thread.
#include "kvbridge/c_abi.h"

#include <algorithm>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "kvbridge/kvbridge.hpp"
#include "kvbridge/testing.hpp"

// The core is built with hidden visibility; only these functions leave the shared library.
#define KVB_EXPORT extern "C" __attribute__((visibility("default")))

struct kvb_pool {
  explicit kvb_pool(std::int64_t n) : pool(n) {}
  kvbridge::BlockPool pool;
};
struct kvb_buffer {
  std::unique_ptr<kvbridge::Buffer<std::int32_t>> buffer;
};

namespace {

thread_local std::string t_last_error;
thread_local std::string t_repr;

template <class F>
kvb_status guarded(F&& body) noexcept {
  try {
    body();
    return KVB_OK;
  } catch (...) {
    kvbridge::CaughtException caught = kvbridge::caught_exception();
    t_last_error = std::move(caught.message);
    return caught.status;
  }
}

// A count, or minus the status the call failed with (the token kernels, a refcount: c_abi.h).
template <class F>
int64_t counted(F&& body) noexcept {
  int64_t count = 0;
  const kvb_status status = guarded([&] { count = body(); });
  return status == KVB_OK ? count : -static_cast<int64_t>(status);
}

// A flat copy of block ids in a counted Buffer (live_buffers() sees it until it is freed).
kvb_buffer* to_buffer(const std::vector<kvbridge::BlockId>& ids) {
  auto out = std::make_unique<kvbridge::Buffer<std::int32_t>>(ids.size());
  std::copy(ids.begin(), ids.end(), out->data());  // not memcpy: ids.data() may be null (n = 0)
  return new kvb_buffer{std::move(out)};
}

template <class T>
kvbridge::TokenView<T> view(const void* data, std::int64_t size, std::int64_t stride = 1) {
  if (size < 0) throw std::invalid_argument("size must be >= 0, got " + std::to_string(size));
  return {static_cast<const T*>(data), size, stride};
}

// The token view `dtype` names; an unknown dtype is the caller's bug.
kvbridge::AnyTokens token_view(const void* data, int dtype, std::int64_t size,
                               std::int64_t stride) {
  switch (dtype) {
    case KVB_INT32:
      return view<std::int32_t>(data, size, stride);
    case KVB_INT64:
      return view<std::int64_t>(data, size, stride);
    case KVB_UINT64:
      return view<std::uint64_t>(data, size, stride);
    default:
      throw std::invalid_argument("unknown kvb_dtype " + std::to_string(dtype));
  }
}

// An array of `ndim` dimensions whose shape and then strides start at `dims`.
kvbridge::FloatArrayView float_view(const float* data, std::int64_t ndim,
                                    const std::int64_t* dims) {
  if (ndim < 0) throw std::invalid_argument("ndim must be >= 0, got " + std::to_string(ndim));
  return {data, {dims, dims + ndim}, {dims + ndim, dims + 2 * ndim}};
}

}  // namespace

// --- errors ------------------------------------------------------------------------------------

KVB_EXPORT const char* kvb_version(void) { return KVBRIDGE_VERSION; }
KVB_EXPORT const char* kvb_last_error(void) { return t_last_error.c_str(); }

KVB_EXPORT const char* kvb_status_name(int status) {
  static const char* const names[KVB_STATUS_COUNT] = {
      "ok",          "invalid_argument", "domain_error",    "length_error", "out_of_range",
      "range_error", "overflow_error",   "underflow_error", "bad_alloc",    "bad_cast",
      "ios_failure", "logic_error",      "runtime_error",   "system_error", "custom",
      "non_std"};
  return status >= 0 && status < KVB_STATUS_COUNT ? names[status] : nullptr;
}

KVB_EXPORT const char* kvb_status_exception(int status) {
  return status >= 0 && status < KVB_STATUS_COUNT
             ? kvbridge::python_exception_name(static_cast<kvb_status>(status))
             : nullptr;
}

// --- BlockPool ---------------------------------------------------------------------------------

KVB_EXPORT kvb_status kvb_pool_create(int64_t num_blocks, kvb_pool** out) {
  return guarded([&] { *out = new kvb_pool(num_blocks); });
}
KVB_EXPORT void kvb_pool_free(kvb_pool* pool) { delete pool; }
KVB_EXPORT int32_t kvb_pool_num_blocks(const kvb_pool* pool) { return pool->pool.num_blocks(); }
KVB_EXPORT int32_t kvb_pool_num_free(const kvb_pool* pool) { return pool->pool.num_free(); }

KVB_EXPORT kvb_status kvb_pool_allocate(kvb_pool* pool, int64_t n, kvb_buffer** out) {
  return guarded([&] {
    auto got = pool->pool.allocate(n);
    *out = got ? to_buffer(*got) : nullptr;
  });
}

KVB_EXPORT kvb_status kvb_pool_allocate_many(kvb_pool* pool, const int64_t* counts,
                                             int64_t num_requests, kvb_buffer** out) {
  return guarded([&] {
    if (num_requests < 0) {
      throw std::invalid_argument("num_requests must be >= 0, got " + std::to_string(num_requests));
    }
    auto got = pool->pool.allocate_many(counts, static_cast<std::size_t>(num_requests));
    if (!got) {
      *out = nullptr;
      return;
    }
    std::vector<kvbridge::BlockId> flat;
    for (const auto& ids : *got) flat.insert(flat.end(), ids.begin(), ids.end());
    *out = to_buffer(flat);
  });
}

KVB_EXPORT kvb_status kvb_pool_retain(kvb_pool* pool, int64_t block) {
  return guarded([&] { pool->pool.retain(block); });
}
KVB_EXPORT kvb_status kvb_pool_release(kvb_pool* pool, int64_t block) {
  return guarded([&] { pool->pool.release(block); });
}
KVB_EXPORT int64_t kvb_pool_refcount(const kvb_pool* pool, int64_t block) {
  return counted([&]() -> int64_t { return pool->pool.refcount(block); });
}
KVB_EXPORT kvb_status kvb_pool_refcounts(const kvb_pool* pool, kvb_buffer** out) {
  return guarded([&] { *out = new kvb_buffer{pool->pool.refcounts()}; });
}

KVB_EXPORT void kvb_pool_stats_read(const kvb_pool* pool, kvb_pool_stats* out) {
  const kvbridge::PoolStats& stats = pool->pool.stats();
  out->allocated_total = stats.allocated_total.load();
  out->released_total = stats.released_total.load();
  out->peak_in_use = stats.peak_in_use.load();
}

KVB_EXPORT const char* kvb_pool_repr(const kvb_pool* pool) {
  t_repr = pool->pool.repr();
  return t_repr.c_str();
}

KVB_EXPORT const char* kvb_pool_stats_repr(const kvb_pool* pool) {
  t_repr = pool->pool.stats().repr();
  return t_repr.c_str();
}

// --- buffers -----------------------------------------------------------------------------------

KVB_EXPORT int32_t* kvb_buffer_data(kvb_buffer* buffer) { return buffer->buffer->data(); }
KVB_EXPORT int64_t kvb_buffer_size(const kvb_buffer* buffer) {
  return static_cast<int64_t>(buffer->buffer->size());
}
KVB_EXPORT void kvb_buffer_free(kvb_buffer* buffer) { delete buffer; }

// --- kernels -----------------------------------------------------------------------------------

KVB_EXPORT int64_t kvb_common_prefix(const void* a, int a_dtype, int64_t a_size, int64_t a_stride,
                                     const void* b, int b_dtype, int64_t b_size, int64_t b_stride) {
  return counted([&] {
    return kvbridge::common_prefix(token_view(a, a_dtype, a_size, a_stride),
                                   token_view(b, b_dtype, b_size, b_stride));
  });
}

KVB_EXPORT int64_t kvb_count_eos(const void* tokens, int dtype, int64_t size, int64_t stride,
                                 int64_t eos) {
  return counted([&] { return kvbridge::count_eos(token_view(tokens, dtype, size, stride), eos); });
}

// The contiguous forms of one dtype (c_abi.h): the strided kernels' views, with stride 1.
template <class T>
int64_t count_eos_contiguous(const void* tokens, int64_t size, int64_t eos) {
  return counted([&] { return kvbridge::count_eos(view<T>(tokens, size), eos); });
}
template <class T>
int64_t common_prefix_contiguous(const void* a, int64_t a_size, const void* b, int64_t b_size) {
  return counted([&] { return kvbridge::common_prefix(view<T>(a, a_size), view<T>(b, b_size)); });
}

KVB_EXPORT int64_t kvb_count_eos_int32(const void* tokens, int64_t size, int64_t eos) {
  return count_eos_contiguous<std::int32_t>(tokens, size, eos);
}
KVB_EXPORT int64_t kvb_count_eos_int64(const void* tokens, int64_t size, int64_t eos) {
  return count_eos_contiguous<std::int64_t>(tokens, size, eos);
}
KVB_EXPORT int64_t kvb_count_eos_uint64(const void* tokens, int64_t size, int64_t eos) {
  return count_eos_contiguous<std::uint64_t>(tokens, size, eos);
}
KVB_EXPORT int64_t kvb_common_prefix_int32(const void* a, int64_t a_size, const void* b,
                                           int64_t b_size) {
  return common_prefix_contiguous<std::int32_t>(a, a_size, b, b_size);
}
KVB_EXPORT int64_t kvb_common_prefix_int64(const void* a, int64_t a_size, const void* b,
                                           int64_t b_size) {
  return common_prefix_contiguous<std::int64_t>(a, a_size, b, b_size);
}

KVB_EXPORT kvb_status kvb_rmsnorm(const float* x, int64_t x_ndim, const float* weight,
                                  int64_t weight_ndim, float* out, int64_t out_ndim,
                                  const int64_t* dims, double eps, int out_fresh) {
  return guarded([&] {
    if (out_ndim < 0) throw std::invalid_argument("out_ndim must be >= 0");
    const kvbridge::FloatArrayView x_view = float_view(x, x_ndim, dims);
    const int64_t* weight_dims = dims + 2 * x_ndim;
    const kvbridge::FloatArrayView weight_view = float_view(weight, weight_ndim, weight_dims);
    const int64_t* out_shape = weight_dims + 2 * weight_ndim;
    kvbridge::rmsnorm(x_view, weight_view, eps, out, {out_shape, out_shape + out_ndim},
                      out_fresh ? kvbridge::Out::kFresh : kvbridge::Out::kExisting);
  });
}

KVB_EXPORT int64_t kvb_live_buffers(void) { return kvbridge::live_buffers(); }
KVB_EXPORT int64_t kvb_live_pools(void) { return kvbridge::live_pools(); }

// --- threads -----------------------------------------------------------------------------------

KVB_EXPORT kvb_status kvb_set_num_threads(int64_t n) {
  return guarded([&] { kvbridge::set_num_threads(n); });
}
KVB_EXPORT int64_t kvb_get_num_threads(void) { return kvbridge::get_num_threads(); }
KVB_EXPORT kvb_status kvb_default_num_threads(int64_t* out) {
  return guarded([&] { *out = kvbridge::default_num_threads(); });
}

KVB_EXPORT kvb_status kvb_store_choice(const char** out) {
  return guarded([&] {
    // The description grows as auto times sizes: each text said is kept, so every pointer handed
    // out stays valid for the process's life (a text is said again, not stored twice).
    static std::mutex mutex;
    static std::set<std::string> said;
    const std::lock_guard<std::mutex> lock(mutex);
    *out = said.insert(kvbridge::describe_stores()).first->c_str();
  });
}

KVB_EXPORT kvb_status kvb_rmsnorm_paths(const char** out) {
  return guarded([&] {
    static const std::string description = kvbridge::rmsnorm_paths();
    *out = description.c_str();
  });
}

// --- testing hooks -----------------------------------------------------------------------------

KVB_EXPORT kvb_status kvb_testing_throw(const char* kind) {
  return guarded([&] { kvbridge::testing::throw_kind(kind); });
}

KVB_EXPORT int64_t kvb_testing_last_num_threads(void) { return kvbridge::last_num_threads(); }

KVB_EXPORT kvb_status kvb_testing_arm_gate(double timeout_s) {
  return guarded([&] { kvbridge::testing::arm_gate(timeout_s); });
}

KVB_EXPORT int kvb_testing_open_gate(void) { return kvbridge::testing::open_gate(); }

KVB_EXPORT int kvb_testing_close_gate(void) { return kvbridge::testing::close_gate(); }

KVB_EXPORT kvb_status kvb_testing_data_address(const void* tokens, int dtype, int64_t size,
                                               int64_t stride, uintptr_t* out) {
  return guarded([&] {
    *out = std::visit([](auto v) { return reinterpret_cast<std::uintptr_t>(v.data); },
                      token_view(tokens, dtype, size, stride));
  });
}
