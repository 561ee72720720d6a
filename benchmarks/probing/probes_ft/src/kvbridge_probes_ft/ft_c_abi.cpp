// The seed pool behind an extern "C" library, for ctypes on a free-threaded Python: ctypes
// loads it as any library, and has no lock of its own to offer.
#include <cstdint>

#include "seed_pool.hpp"

extern "C" {

void kvbp_noop(void) {}
void* kvbp_seed_create(std::int32_t n) { return new kvbp::SeedPool(n); }
void kvbp_seed_free(void* pool) { delete static_cast<kvbp::SeedPool*>(pool); }
// Writes n block ids to out and returns n, or returns 0 when fewer than n are free.
std::int32_t kvbp_seed_allocate(void* pool, std::int32_t n, std::int32_t* out) {
  const auto ids = static_cast<kvbp::SeedPool*>(pool)->allocate(n);
  for (std::size_t i = 0; i < ids.size(); ++i) out[i] = ids[i];
  return static_cast<std::int32_t>(ids.size());
}
void kvbp_seed_release(void* pool, std::int32_t b) {
  static_cast<kvbp::SeedPool*>(pool)->release(b);
}
std::int64_t kvbp_seed_num_free(void* pool) {
  return static_cast<kvbp::SeedPool*>(pool)->num_free();
}
// handed out twice, allocated, released
void kvbp_seed_counters(void* pool, std::int64_t* out) {
  const auto* p = static_cast<kvbp::SeedPool*>(pool);
  out[0] = p->handed_out_twice();
  out[1] = p->allocated();
  out[2] = p->released();
}

}  // extern "C"
