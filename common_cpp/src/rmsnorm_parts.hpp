// What rmsnorm.cpp (the checks, float32 and the entry points), rmsnorm_half.cpp (the 16-bit
// conversions and their ISA variants) and line_stores.cpp (the non-temporal line stores and the
// CPU-feature test they need) share. Internal to the core: nothing here is installed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "kvbridge/rmsnorm.hpp"
#include "kvbridge/simd.hpp"

// x86-64 built by GCC or Clang: the CPU's features can be asked at run time
// (__builtin_cpu_supports) and single functions compiled for a wider target than the build's.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KVBRIDGE_X86_DISPATCH 1
#endif

// GCC 12 warns inside its own AVX-512 headers (their _mm512_undefined_* placeholders); the
// functions that use those headers' conversions are compiled between these two.
#if defined(__GNUC__) && !defined(__clang__)
#define KVBRIDGE_AVX512_WARNINGS_OFF \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")
#define KVBRIDGE_AVX512_WARNINGS_ON _Pragma("GCC diagnostic pop")
#else
#define KVBRIDGE_AVX512_WARNINGS_OFF
#define KVBRIDGE_AVX512_WARNINGS_ON
#endif

namespace kvbridge::rmsnorm_parts {

// Below this many elements per chunk, handing work to another thread costs more than it saves.
constexpr std::int64_t kParallelMinElements = std::int64_t{1} << 16;

// Writes an output `out` of `bytes` of `format` ("float32", "bfloat16", "float16") by calling
// write(streamed): with non-temporal stores or not, as this machine's store policy says for an
// existing out= (stores.hpp: auto times a large one both ways at first); a fresh output never,
// made ready first (fault_in_fresh_output, stores.hpp).
void write_output(const char* format, void* out, std::int64_t bytes, bool existing,
                  const std::function<void(bool streamed)>& write);

// Every row pays float32; only a row whose float32 sum came out infinite, zero or subnormal (so
// some squares may have overflowed or underflowed) is summed again in float64.
inline bool is_normal_float32(double value) noexcept {
  return value >= std::numeric_limits<float>::min() && value <= std::numeric_limits<float>::max();
}

inline double inverse_rms(double sum_of_squares, std::int64_t cols, double eps) noexcept {
  return 1.0 / std::sqrt(sum_of_squares / static_cast<double>(cols) + eps);
}

// Offset of row r's first element: unravel r over the leading dims (works for any strides).
inline std::int64_t row_offset(const std::vector<std::int64_t>& shape,
                               const std::vector<std::int64_t>& strides, std::int64_t r) noexcept {
  std::int64_t offset = 0;
  for (std::size_t d = shape.size() - 1; d-- > 0;) {
    offset += (r % shape[d]) * strides[d];
    r /= shape[d];
  }
  return offset;
}

// How many of a row's `cols` elements, each `element_bytes` wide, lie before the first 64-byte
// line boundary at or after `y`: the head the float32 paths write element by element, so that
// the rest of the row is stored in whole lines (streamed or not). `y` holds whole elements.
inline std::int64_t elements_before_line(const void* y, std::int64_t cols,
                                         std::int64_t element_bytes) noexcept {
  const auto line_offset = static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(y) & 63);
  return std::min(cols, ((64 - line_offset) & 63) / element_bytes);
}

// Chunks of whole rows, each worth handing to another thread; small inputs run right here.
inline std::int64_t row_grain(std::int64_t cols) {
  return std::max<std::int64_t>(1, kParallelMinElements / std::max<std::int64_t>(1, cols));
}

// One contiguous float32 row, its float64 fallbacks included (rmsnorm.cpp).
void normalize_row(const float* x, const float* w, std::int64_t cols, double eps,
                   float* y) noexcept;

// The stores (line_stores.cpp).
// Copies a finished row (in L1) to its place in memory with non-temporal stores: float32 rows,
// and 16-bit rows whose scale pass cannot stream them itself (HalfPasses::streams).
void stream_row(const void* src_row, void* dst_row, std::int64_t bytes) noexcept;
void stream_fence() noexcept;
// Whether an array's elements can be read or written as T where they lie: its first element is
// aligned to T (its strides are whole elements, so then every element is). A view at a byte
// offset, which numpy allows, is not: its rows are gathered (gather_row) and written (copy_row)
// byte for byte instead, since a T access there is undefined behaviour (UBSan's report).
template <class T>
bool is_aligned(const void* p) noexcept {
  return reinterpret_cast<std::uintptr_t>(p) % alignof(T) == 0;
}

// A row of `cols` elements `stride` elements apart, copied into `to` byte for byte: a strided
// row, or one whose address is not aligned to T (a 4-byte memcpy is one load where it is).
template <class T>
void gather_row(const T* row, std::int64_t stride, std::int64_t cols, T* to) noexcept {
  const char* from = reinterpret_cast<const char*>(row);
  if (stride == 1) {
    std::memcpy(to, from, static_cast<std::size_t>(cols) * sizeof(T));
    return;
  }
  for (std::int64_t c = 0; c < cols; ++c) {
    std::memcpy(to + c, from + c * stride * static_cast<std::int64_t>(sizeof(T)), sizeof(T));
  }
}

// Where a row is written: straight to `dst` when the pass stores it there itself (`direct`) or
// when cached stores can (out= aligned), else to `finished`, which copy_row then puts in place.
template <class T>
T* row_target(T* dst, T* finished, bool direct, bool streaming, bool out_aligned) noexcept {
  return direct || (!streaming && out_aligned) ? dst : finished;
}

// A row finished in a buffer of its own put in its place in memory: streamed where the policy
// streams, else copied byte for byte (an out= whose elements are misaligned, which a kernel
// cannot store to as its element type). Nothing to do for a row written in place.
inline void copy_row(const void* finished, void* dst, std::int64_t bytes, bool streaming) noexcept {
  if (finished == dst) return;
  if (streaming) {
    stream_row(finished, dst, bytes);
  } else {
    std::memcpy(dst, finished, static_cast<std::size_t>(bytes));
  }
}
// The widest hand-written path KVBRIDGE_KERNELS allows (rmsnorm.hpp), read once: check_args
// asks it first, so a bad value is refused at the entry point; the kernels' own questions
// below, asked only after, never throw.
KernelPaths kernel_paths_cap();
bool kernel_paths_allow(KernelPaths paths) noexcept;
#ifdef KVBRIDGE_X86_DISPATCH
// The CPU has AVX-512F and the cap allows the AVX-512 paths.
bool cpu_has_avx512f() noexcept;
#endif
#if defined(KVBRIDGE_X86_DISPATCH) && defined(KVBRIDGE_HAS_SIMD_CLONES)
// Whether the clones run their x86-64-v3 (or v4) copies here, so AVX2 (and F16C) can be used
// by hand: sums written in the clones' lanes, order and operations give their bits. False too
// where the cap keeps the hand-written paths portable.
bool cpu_runs_v3_clones() noexcept;
// Adds the squares of 32 values, held in four vectors, to sum_of_squares_f32's lanes 0-7, 8-15,
// 16-23 and 24-31 with its operations: a multiply, then an add.
__attribute__((target("avx2"))) inline void add_squares_avx2(__m256 (&lanes)[4],
                                                             const __m256 (&v)[4]) noexcept {
  for (int k = 0; k < 4; ++k) lanes[k] = _mm256_add_ps(lanes[k], _mm256_mul_ps(v[k], v[k]));
}
// sum_of_squares_f32's pairwise reduction (32 -> 16 -> 8 -> 4 -> 2 -> 1) of its lanes held in
// four vectors (lanes 0-7, 8-15, 16-23, 24-31), then its tail.
__attribute__((target("avx2"))) inline float reduce_lanes_avx2(const __m256 (&lanes)[4],
                                                               float tail) noexcept {
  const __m256 eight =
      _mm256_add_ps(_mm256_add_ps(lanes[0], lanes[2]), _mm256_add_ps(lanes[1], lanes[3]));
  const __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
  const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  const __m128 one = _mm_add_ss(two, _mm_shuffle_ps(two, two, 1));
  return _mm_cvtss_f32(one) + tail;
}
#endif
#ifdef KVBRIDGE_X86_DISPATCH

// One line of a row: past the cache (non-temporal) or into it.
__attribute__((target("avx512f"))) inline void store_line(void* dst, __m512i line,
                                                          bool stream) noexcept {
  if (stream) {
    _mm512_stream_si512(static_cast<__m512i*>(dst), line);
  } else {
    _mm512_storeu_si512(dst, line);
  }
}

#endif

// The name of the passes a 16-bit format's rows take here (rmsnorm_half.cpp).
const char* half_path(Half format) noexcept;

// The 16-bit rows (rmsnorm_half.cpp), on arguments already checked.
void rmsnorm_half_rows(Half format, const HalfArrayView& x, const float* w, double eps,
                       std::uint16_t* out, std::int64_t rows, std::int64_t cols, bool streaming);

}  // namespace kvbridge::rmsnorm_parts
