// The one-pass row loop of x86-64-v3 CPUs without a format's AVX-512 path (rmsnorm.cpp's
// float32 where the CPU lacks AVX-512F; rmsnorm_half.cpp's bfloat16 where it lacks AVX512-BF16,
// float16 on every one): a row's scale pass also sums the next row's squares.
// Internal to the core: nothing here is installed.
#pragma once

#include "rmsnorm_parts.hpp"

#if defined(KVBRIDGE_X86_DISPATCH) && defined(KVBRIDGE_HAS_SIMD_CLONES)

namespace kvbridge::rmsnorm_parts {

// scale_row while summing the squares of the next row in sum_of_squares_f32's lanes, order and
// operations (a multiply, then an add: the core is built without contraction, CMakeLists.txt),
// so both results are the two-pass functions' bit for bit in every build (test_rmsnorm.cpp). One
// pass over memory where there were two: the next row's read overlaps this row's arithmetic and
// stores, which in separate passes cost about a copy's time plus the sum pass's, even in cache
// (commit messages: the measurements). With `Stream` the stores go past the cache, straight from
// this loop: written to L1 first and then streamed out (stream_row), a row took longer than the
// copy of its bytes, and far longer once a row and its weights filled L1 (8192 float32 columns);
// 16-bit rows likewise (commit message). The scale runs `head` elements behind the sum's index so
// that its stores start on a 64-byte line, streamed or not: stores off the lines write each line
// twice (the sum's lanes are tied to the index; the scale's elements are independent). The next
// row is fetched ahead.
//
// `Format` says how its elements are read and written: `T`, the storage type; `widen(v)` and
// `narrow(f)`, one value each way, rounded as `store32` rounds; `load32(p, v)`, 32 values widened
// into four vectors, in an order of the format's choosing (each lane always holds the same
// index modulo 32); `scale32(x, w, cols, at, s, v)`, the products (x * s) * w of elements
// [at, at + 32), in that order; `store32<Stream>(y, v)`, those 32 results stored at y (on a
// 64-byte line when Stream); `canonical_lanes(lanes)`, the sums put back in
// sum_of_squares_f32's lane order. InOrder below is the order of memory.
template <class Format, bool Stream>
__attribute__((target("avx2,f16c"))) float scale_row_summing_next(
    const typename Format::T* x, const float* w, std::int64_t cols, float scale,
    typename Format::T* y, const typename Format::T* next) noexcept {
  using T = typename Format::T;
  constexpr std::int64_t kAheadBytes = 2048;  // how far ahead of the sum's loads to fetch
  const __m256 s = _mm256_set1_ps(scale);
  __m256 lanes[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
  const std::int64_t head = elements_before_line(y, cols, sizeof(T));
  for (std::int64_t j = 0; j < head; ++j) y[j] = Format::narrow(Format::widen(x[j]) * scale * w[j]);
  std::int64_t scaled = head;  // y[0, scaled) written
  std::int64_t i = 0;
  for (; i + 32 <= cols; i += 32) {
    // an address, not a pointer: past the row's end it names memory no pointer may reach
    const std::uintptr_t ahead = reinterpret_cast<std::uintptr_t>(next + i) + kAheadBytes;
    for (std::uintptr_t line = 0; line < 32 * sizeof(T); line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead + line), _MM_HINT_T0);
    }
    __m256 n[4];
    Format::load32(next + i, n);
    add_squares_avx2(lanes, n);
    if (scaled + 32 > cols) continue;
    __m256 v[4];
    Format::scale32(x, w, cols, scaled, s, v);
    Format::template store32<Stream>(y + scaled, v);
    scaled += 32;
  }
  for (std::int64_t j = scaled; j < cols; ++j) {
    y[j] = Format::narrow(Format::widen(x[j]) * scale * w[j]);
  }
  float tail = 0;
  for (; i < cols; ++i) {
    const float v = Format::widen(next[i]);
    tail += v * v;
  }
  Format::canonical_lanes(lanes);
  return reduce_lanes_avx2(lanes, tail);
}

// scale_row_summing_next, its stores streamed or not as `stream` says.
template <class Format>
float scale_summing_next(const typename Format::T* x, const float* w, std::int64_t cols,
                         float scale, typename Format::T* y, const typename Format::T* next,
                         bool stream) noexcept {
  return stream ? scale_row_summing_next<Format, true>(x, w, cols, scale, y, next)
                : scale_row_summing_next<Format, false>(x, w, cols, scale, y, next);
}

// A format whose vectors hold eight consecutive values (`Format::load(p)`: eight widened), its
// weights read as they lie: the base of every format but bfloat16's even-odd one.
template <class Format, class Element>
struct InOrder {
  using T = Element;
  __attribute__((target("avx2,f16c"))) static void load32(const T* p, __m256 (&v)[4]) noexcept {
    for (int k = 0; k < 4; ++k) v[k] = Format::load(p + 8 * k);
  }
  __attribute__((target("avx2,f16c"))) static void scale32(const T* x, const float* w,
                                                           std::int64_t /*cols*/, std::int64_t at,
                                                           __m256 s, __m256 (&v)[4]) noexcept {
    for (int k = 0; k < 4; ++k, at += 8) {  // scale_row's (x * scale) * w
      v[k] = _mm256_mul_ps(_mm256_mul_ps(Format::load(x + at), s), _mm256_loadu_ps(w + at));
    }
  }
  static void canonical_lanes(__m256 (&)[4]) noexcept {}
};

}  // namespace kvbridge::rmsnorm_parts

#endif
