/* The C ABI, compiled as C (not C++): every function, and an error of every kind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvbridge/c_abi.h"

static int failures = 0;
#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      printf("%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

static int starts_with(const char* text, const char* prefix) {
  return strncmp(text, prefix, strlen(prefix)) == 0;
}

static void test_pool(void) {
  kvb_pool* pool = NULL;
  kvb_buffer* got = NULL;
  kvb_pool_stats stats;
  const int64_t batch[2] = {1, 2};
  const int64_t live = kvb_live_pools();

  CHECK(kvb_pool_create(4, &pool) == KVB_OK);
  CHECK(kvb_live_pools() == live + 1);
  CHECK(kvb_pool_num_blocks(pool) == 4 && kvb_pool_num_free(pool) == 4);
  CHECK(kvb_pool_allocate(pool, 2, &got) == KVB_OK && got != NULL);
  CHECK(kvb_buffer_size(got) == 2 && kvb_buffer_data(got)[0] == 0 && kvb_buffer_data(got)[1] == 1);
  kvb_buffer_free(got);
  CHECK(kvb_pool_allocate(pool, 3, &got) == KVB_OK && got == NULL); /* all or nothing */
  CHECK(kvb_pool_allocate_many(pool, batch, 2, &got) == KVB_OK && got == NULL);
  CHECK(kvb_pool_num_free(pool) == 2);
  CHECK(kvb_pool_retain(pool, 0) == KVB_OK);
  CHECK(kvb_pool_refcount(pool, 0) == 2);
  CHECK(kvb_pool_release(pool, 0) == KVB_OK && kvb_pool_release(pool, 0) == KVB_OK);
  CHECK(kvb_pool_release(pool, 0) == KVB_RUNTIME_ERROR);
  CHECK(starts_with(kvb_last_error(), "cannot release block 0"));
  CHECK(kvb_pool_refcount(pool, 9) == -KVB_OUT_OF_RANGE); /* minus the status, as counted */
  CHECK(kvb_pool_allocate(pool, -1, &got) == KVB_INVALID_ARGUMENT);
  CHECK(kvb_pool_allocate_many(pool, batch, 2, &got) == KVB_OK && got != NULL);
  CHECK(kvb_buffer_size(got) == 3 && kvb_buffer_data(got)[0] == 0); /* released block first */
  kvb_buffer_free(got);
  CHECK(kvb_pool_refcounts(pool, &got) == KVB_OK && kvb_buffer_size(got) == 4);
  CHECK(kvb_live_buffers() == 1);
  kvb_buffer_free(got);
  CHECK(kvb_live_buffers() == 0);
  kvb_pool_stats_read(pool, &stats);
  CHECK(stats.allocated_total == 5 && stats.released_total == 1 && stats.peak_in_use == 4);
  CHECK(strcmp(kvb_pool_repr(pool), "<BlockPool free=0/4>") == 0);
  kvb_pool_free(pool);
  CHECK(kvb_live_pools() == live);
  CHECK(kvb_pool_create(-1, &pool) == KVB_INVALID_ARGUMENT);
  CHECK(kvb_pool_create((int64_t)1 << 40, &pool) == KVB_OVERFLOW_ERROR);
  CHECK(strcmp(kvb_last_error(), "num_blocks=1099511627776 does not fit in int32") == 0);
}

static void test_kernels(void) {
  const int32_t a[5] = {1, 2, 3, 4, 5};
  const int64_t b[4] = {1, 2, 9, 4};
  const uint64_t big[2] = {UINT64_C(1) << 63, 7};
  int64_t out = -1;
  uintptr_t address = 0;
  const float x[4] = {1, 2, 3, 4};
  const float w[2] = {1, 1};
  /* x's shape and strides, weight's shape and stride, out's shape */
  const int64_t dims[8] = {2, 2, 2, 1, 2, 1, 2, 2};
  float y[4];

  CHECK(kvb_common_prefix(a, KVB_INT32, 5, 1, b, KVB_INT64, 4, 1) == 2);
  CHECK(kvb_count_eos(a, KVB_INT32, 3, 2, 5) == 1); /* 1, 3, 5 */
  CHECK(kvb_count_eos(big, KVB_UINT64, 2, 1, 7) == 1);
  CHECK(kvb_count_eos(a, KVB_INT32, 0, 1, 5) == 0);
  /* a failure is the negated status, with its text */
  CHECK(kvb_count_eos(a, 99, 5, 1, 5) == -KVB_INVALID_ARGUMENT);
  CHECK(starts_with(kvb_last_error(), "unknown kvb_dtype 99"));
  CHECK(kvb_common_prefix(a, KVB_INT32, -1, 1, b, KVB_INT64, 4, 1) == -KVB_INVALID_ARGUMENT);
  { /* the contiguous forms of one dtype: each reads its own type, and checks its sizes */
    const int32_t a2[4] = {1, 2, 7, 7};
    const int64_t b2[5] = {1, 2, 9, 4, 5};
    const int64_t c2[3] = {1, 2, 9};
    CHECK(kvb_count_eos_int32(a2, 4, 7) == 2);
    CHECK(kvb_count_eos_int32(a2, 2, 7) == 0); /* reads only size elements */
    CHECK(kvb_count_eos_int64(b2, 5, 9) == 1);
    CHECK(kvb_count_eos_uint64(big, 2, 7) == 1);
    CHECK(kvb_count_eos_uint64(big, 2, INT64_MIN) == 0); /* 2^63 is not -2^63 */
    CHECK(kvb_common_prefix_int32(a, 5, a2, 4) == 2);
    CHECK(kvb_common_prefix_int64(b2, 5, c2, 3) == 3);
    CHECK(kvb_common_prefix_int64(b2, 5, b, 4) == 4);
    CHECK(kvb_count_eos_int64(b2, -3, 9) == -KVB_INVALID_ARGUMENT);
    CHECK(starts_with(kvb_last_error(), "size must be >= 0, got -3"));
    CHECK(kvb_common_prefix_int32(a, 5, a2, -1) == -KVB_INVALID_ARGUMENT);
  }
  CHECK(kvb_testing_data_address(a, KVB_INT32, 5, 1, &address) == KVB_OK &&
        address == (uintptr_t)a);
  CHECK(kvb_rmsnorm(x, 2, w, 1, y, 2, dims, 0.0, 0) == KVB_OK);
  /* row [1, 2]: rms = sqrt(2.5) */
  CHECK(y[0] > 0.632f && y[0] < 0.633f);
  CHECK(kvb_rmsnorm(x, 2, w, 1, y, 2, dims, -1.0, 1) == KVB_INVALID_ARGUMENT);
  CHECK(starts_with(kvb_last_error(), "eps must be"));
  { /* each part of dims is read where it lies: weight's length, then out's shape */
    const float w3[3] = {1, 1, 1};
    const int64_t long_weight[8] = {2, 2, 2, 1, 3, 1, 2, 2};
    const int64_t other_out[8] = {2, 2, 2, 1, 2, 1, 4, 1};
    CHECK(kvb_rmsnorm(x, 2, w3, 1, y, 2, long_weight, 0.0, 0) == KVB_INVALID_ARGUMENT);
    CHECK(strcmp(kvb_last_error(), "weight has length 3, expected x.shape[-1] = 2") == 0);
    CHECK(kvb_rmsnorm(x, 2, w, 1, y, 2, other_out, 0.0, 0) == KVB_INVALID_ARGUMENT);
    CHECK(strcmp(kvb_last_error(), "out has shape (4, 1), expected (2, 2)") == 0);
  }
}

static void test_threads(void) {
  int64_t n = 0;
  CHECK(kvb_default_num_threads(&n) == KVB_OK && n >= 1);
  CHECK(kvb_set_num_threads(2) == KVB_OK && kvb_get_num_threads() == 2);
  CHECK(kvb_set_num_threads(0) == KVB_INVALID_ARGUMENT);
  CHECK(strcmp(kvb_last_error(), "num_threads must be >= 1, got 0") == 0);
  CHECK(kvb_get_num_threads() == 2);
  CHECK(kvb_testing_last_num_threads() >= 1);
}

/* What the page quotes: the store policy and the kernels' paths, each for the process's life. */
static void test_machine(void) {
  const char* said = NULL;
  CHECK(kvb_store_choice(&said) == KVB_OK && said != NULL && starts_with(said, "auto: "));
  said = NULL;
  CHECK(kvb_rmsnorm_paths(&said) == KVB_OK && said != NULL && starts_with(said, "float32: "));
  CHECK(said != NULL && strstr(said, "; bfloat16: ") != NULL &&
        strstr(said, "; float16: ") != NULL);
}

static void test_every_kind(void) {
  int status;
  CHECK(strcmp(kvb_status_name(KVB_OK), "ok") == 0 && kvb_status_exception(KVB_OK) == NULL);
  CHECK(kvb_status_name(KVB_STATUS_COUNT) == NULL && kvb_status_name(-1) == NULL);
  for (status = 1; status < KVB_STATUS_COUNT; ++status) {
    const char* kind = kvb_status_name(status);
    CHECK(kind != NULL && kvb_status_exception(status) != NULL);
    CHECK(kvb_testing_throw(kind) == status);
  }
  CHECK(strcmp(kvb_status_exception(KVB_OUT_OF_RANGE), "IndexError") == 0);
  CHECK(kvb_testing_throw("overflow_error") == KVB_OVERFLOW_ERROR);
  CHECK(strcmp(kvb_last_error(), "kvbridge test exception: overflow_error") == 0);
  CHECK(kvb_testing_throw("nope") == KVB_INVALID_ARGUMENT);
  CHECK(strcmp(kvb_last_error(), "unknown exception kind: 'nope'") == 0);
  CHECK(kvb_version()[0] != '\0');
}

int main(void) {
  test_pool();
  test_kernels();
  test_threads();
  test_machine();
  test_every_kind();
  printf("test_c_abi: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
