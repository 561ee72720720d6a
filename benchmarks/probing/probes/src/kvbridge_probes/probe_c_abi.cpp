// The probe C ABI library (probe_c_abi.h): C++ behind extern "C", built as a plain shared
// library with the compiler's defaults and no try/catch at the boundary.
#include "probe_c_abi.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "kvbridge/testing.hpp"

extern "C" {

void kvbp_noop(void) {}
int64_t kvbp_take_int64(int64_t x) { return x; }
int32_t kvbp_take_int32(int32_t x) { return x; }
void kvbp_throw_kind(const char* kind) { kvbridge::testing::throw_kind(kind); }

int kvbp_wait_for_python(int64_t address, double timeout_s) {
  return kvbridge::testing::wait_for_python(address, timeout_s);
}

uintptr_t kvbp_array_address(const int64_t* data) { return reinterpret_cast<uintptr_t>(data); }
uintptr_t kvbp_array(const int64_t* data, int64_t n) {
  return reinterpret_cast<uintptr_t>(data) ^ static_cast<uintptr_t>(n);
}
uintptr_t kvbp_array_and_int(const int64_t* data, int64_t n, int64_t x) {
  return reinterpret_cast<uintptr_t>(data) ^ static_cast<uintptr_t>(n) ^ static_cast<uintptr_t>(x);
}
uintptr_t kvbp_arrays(const int64_t* a, int64_t na, const int64_t* b, int64_t nb) {
  return reinterpret_cast<uintptr_t>(a) ^ static_cast<uintptr_t>(na) ^
         reinterpret_cast<uintptr_t>(b) ^ static_cast<uintptr_t>(nb);
}
uintptr_t kvbp_three_arrays(const float* x, int64_t nx, const float* w, int64_t nw, float* out,
                            int64_t nout, double eps) {
  return reinterpret_cast<uintptr_t>(x) ^ static_cast<uintptr_t>(nx) ^
         reinterpret_cast<uintptr_t>(w) ^ static_cast<uintptr_t>(nw) ^
         reinterpret_cast<uintptr_t>(out) ^ static_cast<uintptr_t>(nout) ^
         static_cast<uintptr_t>(eps > 0);
}
int64_t kvbp_element(const int64_t* data, int64_t i) { return data[i]; }

int64_t kvbp_count_eos(const int64_t* data, int64_t n, int64_t eos) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += data[i] == eos;
  return count;
}

struct kvbp_object {
  int64_t value;
};

namespace {
std::atomic<int64_t> live_buffers{0};
kvbp_object the_object{0};
}  // namespace

kvbp_object* kvbp_object_get(void) { return &the_object; }
void kvbp_object_noop(const kvbp_object*) {}
int64_t kvbp_object_take_int64(const kvbp_object*, int64_t x) { return x; }
int64_t kvbp_object_value(const kvbp_object* o) { return o->value; }
kvbp_object* kvbp_object_create(void) { return new kvbp_object{0}; }
void kvbp_object_destroy(kvbp_object* o) { delete o; }

int32_t* kvbp_returned_buffer(void) {
  auto* p = static_cast<int32_t*>(std::malloc(4 * sizeof(int32_t)));
  for (int i = 0; i < 4; ++i) p[i] = 1;
  ++live_buffers;
  return p;
}

void kvbp_free(void* p) {
  --live_buffers;
  std::free(p);
}

int64_t kvbp_live_buffers(void) { return live_buffers; }

}  // extern "C"
