#include "kvbridge/rmsnorm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#if defined(__SSE2__)
#include <immintrin.h>
#endif
#include <limits>
#include <stdexcept>
#include <string>

#include "kvbridge/simd.hpp"
#include "kvbridge/threads.hpp"

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

namespace kvbridge {
namespace {

// Below this many elements per chunk, handing work to another thread costs more than it saves.
constexpr std::int64_t kParallelMinElements = std::int64_t{1} << 16;

// %g, so eps=1e-06 reads as 1e-06 and NaN as nan (std::to_string would print 0.000001).
std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    text += std::to_string(shape[i]);
    if (i + 1 < shape.size() || shape.size() == 1) text += ",";
    if (i + 1 < shape.size()) text += " ";
  }
  return text + ")";
}

std::int64_t numel(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

// [lowest, one past highest] byte address an array touches; empty arrays touch nothing.
struct Extent {
  const char* begin;
  const char* end;
};
Extent extent_of(const void* data, const std::vector<std::int64_t>& shape,
                 const std::vector<std::int64_t>& strides, std::int64_t element_bytes) {
  const char* base = static_cast<const char*>(data);
  std::int64_t lo = 0, hi = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return {base, base};
    const std::int64_t span = (shape[d] - 1) * strides[d];
    (span < 0 ? lo : hi) += span;
  }
  return {base + lo * element_bytes, base + (hi + 1) * element_bytes};
}
bool overlaps(Extent a, Extent b) { return a.begin < b.end && b.begin < a.end; }

// Sum of squares over 32 independent float32 lanes: vectorisable without reassociation (the
// lanes are explicit), several independent vector accumulators at every SIMD width, and twice
// the elements per vector of float64.
KVBRIDGE_SIMD_CLONES float sum_of_squares_f32(const float* x, std::int64_t cols) noexcept {
  constexpr int kLanes = 32;
  float lanes[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= cols; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += x[i + l] * x[i + l];
  }
  float tail = 0;
  for (; i < cols; ++i) tail += x[i] * x[i];
  for (int width = kLanes / 2; width > 0; width /= 2) {  // pairwise, like the lanes themselves
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0] + tail;
}

// The same sum in float64, for the rows float32 cannot hold: a float32 x^2 underflows for
// |x| < 1e-23 and overflows for |x| > 1e19, so rows of tiny or huge values would come out NaN or
// zero where the float64 reference is finite (found by the property tests).
double sum_of_squares_f64(const float* x, std::int64_t cols) noexcept {
  double sum = 0;
  for (std::int64_t i = 0; i < cols; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

// Every row pays float32; only a row whose float32 sum came out infinite, zero or subnormal (so
// some squares may have overflowed or underflowed) is summed again in float64.
bool is_normal_float32(double value) noexcept {
  return value >= std::numeric_limits<float>::min() && value <= std::numeric_limits<float>::max();
}

double sum_of_squares(const float* x, std::int64_t cols) noexcept {
  const float sum = sum_of_squares_f32(x, cols);
  return is_normal_float32(sum) ? sum : sum_of_squares_f64(x, cols);
}

double inverse_rms(double sum_of_squares, std::int64_t cols, double eps) noexcept {
  return 1.0 / std::sqrt(sum_of_squares / static_cast<double>(cols) + eps);
}

KVBRIDGE_SIMD_CLONES void scale_row(const float* x, const float* w, std::int64_t cols, float scale,
                                    float* y) noexcept {
  for (std::int64_t i = 0; i < cols; ++i) y[i] = x[i] * scale * w[i];
}

void normalize_row(const float* x, const float* w, std::int64_t cols, double eps,
                   float* y) noexcept {
  const double inv_rms = inverse_rms(sum_of_squares(x, cols), cols, eps);
  if (is_normal_float32(inv_rms)) {
    scale_row(x, w, cols, static_cast<float>(inv_rms), y);
    return;
  }
  // The scale itself is outside float32's normal range (rows of denormals with eps = 0, or an
  // all-zero row): scale in float64 so the result matches the reference instead of inf/NaN.
  for (std::int64_t i = 0; i < cols; ++i) y[i] = static_cast<float>(x[i] * inv_rms * w[i]);
}

// Offset of row r's first element: unravel r over the leading dims (works for any strides).
std::int64_t row_offset(const std::vector<std::int64_t>& shape,
                        const std::vector<std::int64_t>& strides, std::int64_t r) noexcept {
  std::int64_t offset = 0;
  for (std::size_t d = shape.size() - 1; d-- > 0;) {
    offset += (r % shape[d]) * strides[d];
    r /= shape[d];
  }
  return offset;
}

// Outputs larger than this bypass the caches on their way to memory (non-temporal stores): a
// normal store first reads the line it writes (write-allocate), one extra pass over the output
// that a copy (glibc's memcpy streams large copies) does not pay. Smaller outputs stay in cache
// for the next layer to read, and so do freshly allocated ones (Out::kFresh, rmsnorm.hpp).
constexpr std::int64_t kStreamingMinBytes = std::int64_t{8} << 20;

// Non-temporal stores of whole 64-byte lines: one store per line where the CPU has AVX-512,
// four 16-byte stores elsewhere: the single store made every dtype's kernel faster (commit
// 4feb28b has the measurements).
#if defined(__SSE2__)
void stream_lines_sse2(const char* src, char* dst, std::int64_t lines) noexcept {
  for (std::int64_t i = 0; i < lines * 64; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
  }
}
#endif
#ifdef KVBRIDGE_X86_DISPATCH
bool cpu_has_avx512f() noexcept {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

// One line of a row: past the cache (non-temporal) or into it.
__attribute__((target("avx512f"))) inline void store_line(void* dst, __m512i line,
                                                          bool stream) noexcept {
  if (stream) {
    _mm512_stream_si512(static_cast<__m512i*>(dst), line);
  } else {
    _mm512_storeu_si512(dst, line);
  }
}

__attribute__((target("avx512f"))) void stream_lines_avx512(const char* src, char* dst,
                                                            std::int64_t lines) noexcept {
  for (std::int64_t i = 0; i < lines * 64; i += 64) {
    store_line(dst + i, _mm512_loadu_si512(src + i), true);
  }
}
#endif

// Copies a finished row (in L1) to its place in memory with non-temporal stores: float32 rows,
// and 16-bit rows whose scale pass cannot stream them itself (HalfPasses::streams).
void stream_row(const void* src_row, void* dst_row, std::int64_t bytes) noexcept {
  const char* src = static_cast<const char*>(src_row);
  char* dst = static_cast<char*>(dst_row);
  std::int64_t i = 0;
#if defined(__SSE2__)
  const std::int64_t head = (64 - (reinterpret_cast<std::uintptr_t>(dst) & 63)) & 63;
  if (head <= bytes) {
    std::memcpy(dst, src, head);
    const std::int64_t lines = (bytes - head) / 64;
    auto* stream_lines = stream_lines_sse2;
#ifdef KVBRIDGE_X86_DISPATCH
    if (cpu_has_avx512f()) stream_lines = stream_lines_avx512;
#endif
    stream_lines(src + head, dst + head, lines);
    i = head + lines * 64;
  }
#endif
  std::memcpy(dst + i, src + i, bytes - i);
}

void stream_fence() noexcept {
#if defined(__SSE2__)
  _mm_sfence();  // streamed stores are visible before the chunk counts as done
#endif
}

struct RowPlan {
  const FloatArrayView& x;
  const float* weight;  // contiguous
  std::int64_t rows;
  std::int64_t cols;
  double eps;
  float* out;
  bool streaming;  // see kStreamingMinBytes

  void run(std::int64_t first, std::int64_t last) const {
    const std::int64_t col_stride = x.strides.back();
    std::vector<float> gathered(col_stride == 1 ? 0 : cols), finished(streaming ? cols : 0);
    for (std::int64_t r = first; r < last; ++r) {
      const float* row = x.data + row_offset(x.shape, x.strides, r);
      if (col_stride != 1) {  // strided rows are gathered once, then take the same fast path
        for (std::int64_t c = 0; c < cols; ++c) gathered[c] = row[c * col_stride];
        row = gathered.data();
      }
      if (streaming) {
        normalize_row(row, weight, cols, eps, finished.data());
        stream_row(finished.data(), out + r * cols, cols * 4);
      } else {
        normalize_row(row, weight, cols, eps, out + r * cols);
      }
    }
    if (streaming) stream_fence();
  }
};

// x, weight and eps: every check that needs no output.
void check_args(const std::vector<std::int64_t>& x_shape, const FloatArrayView& weight,
                double eps) {
  if (x_shape.empty()) {
    throw std::invalid_argument("x must have at least 1 dimension, got a 0-d array");
  }
  if (weight.shape.size() != 1) {
    throw std::invalid_argument("weight must be 1-D, got shape " + shape_text(weight.shape));
  }
  if (weight.shape[0] != x_shape.back()) {
    throw std::invalid_argument("weight has length " + std::to_string(weight.shape[0]) +
                                ", expected x.shape[-1] = " + std::to_string(x_shape.back()));
  }
  if (!(eps >= 0) || std::isinf(eps)) {  // !(eps >= 0) also catches NaN
    throw std::invalid_argument("eps must be finite and >= 0, got " + number_text(eps));
  }
}

// check_rmsnorm_out for x of any element size (float32, or 16-bit floats).
void check_out(const void* x_data, const std::vector<std::int64_t>& x_shape,
               const std::vector<std::int64_t>& x_strides, std::int64_t element_bytes,
               const FloatArrayView& weight, double eps, const void* out,
               const std::vector<std::int64_t>& out_shape) {
  check_args(x_shape, weight, eps);
  if (out_shape != x_shape) {
    throw std::invalid_argument("out has shape " + shape_text(out_shape) + ", expected " +
                                shape_text(x_shape));
  }
  const std::int64_t total = numel(x_shape);
  if (total == 0) return;
  // Overlapping bytes, not shared storage: two disjoint halves of one buffer are fine.
  const char* out_begin = static_cast<const char*>(out);
  const Extent out_extent{out_begin, out_begin + total * element_bytes};
  if (overlaps(out_extent, extent_of(x_data, x_shape, x_strides, element_bytes)) ||
      overlaps(out_extent, extent_of(weight.data, weight.shape, weight.strides, 4))) {
    throw std::invalid_argument("out overlaps an input; rmsnorm needs a separate output buffer");
  }
}

// A contiguous float32 copy of weight when it is strided (one row: negligible).
const float* contiguous_weight(const FloatArrayView& weight, std::vector<float>& copy) {
  if (weight.strides[0] == 1) return weight.data;
  copy.resize(weight.shape[0]);
  for (std::int64_t c = 0; c < weight.shape[0]; ++c) copy[c] = weight.data[c * weight.strides[0]];
  return copy.data();
}

// Chunks of whole rows, each worth handing to another thread; small inputs run right here.
std::int64_t row_grain(std::int64_t cols) {
  return std::max<std::int64_t>(1, kParallelMinElements / std::max<std::int64_t>(1, cols));
}

// float16 <-> float32 eight at a time with F16C (x86-64-v3 and later), chosen at run time like
// the clones: GCC vectorises bfloat16's integer conversion below, but converts _Float16 one
// element per instruction, which made float16 several times slower than bfloat16.
#ifdef KVBRIDGE_X86_DISPATCH
bool cpu_has_f16c() noexcept {
  static const bool has = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return has;
}

__attribute__((target("avx,f16c"))) void widen_f16c(const std::uint16_t* x, std::int64_t n,
                                                    float* y) noexcept {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) y[i] = _cvtsh_ss(x[i]);
}

__attribute__((target("avx,f16c"))) void narrow_f16c(const float* y, std::int64_t n,
                                                     std::uint16_t* out) noexcept {
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(y + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = _cvtss_sh(y[i], _MM_FROUND_TO_NEAREST_INT);
}
#endif

// 16-bit floats to and from float32. bfloat16 is the top half of a float32 (narrowed with
// round-to-nearest-even, NaN kept quiet); float16 goes through F16C where the CPU has it, and
// the compiler's _Float16 otherwise.
inline float bf16_to_float(std::uint16_t h) noexcept {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline std::uint16_t float_to_bf16(float f) noexcept {
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
  const std::uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  return static_cast<std::uint16_t>(nan ? (bits >> 16) | 0x40u : rounded);
}

KVBRIDGE_SIMD_CLONES void widen_contiguous(Half format, const std::uint16_t* x, std::int64_t n,
                                           float* y) noexcept {
  if (format == Half::kBFloat16) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = bf16_to_float(x[i]);
    return;
  }
#ifdef KVBRIDGE_X86_DISPATCH
  if (cpu_has_f16c()) return widen_f16c(x, n, y);
#endif
  const auto* h = reinterpret_cast<const _Float16*>(x);
  for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(h[i]);
}

KVBRIDGE_SIMD_CLONES void narrow(Half format, const float* y, std::int64_t n,
                                 std::uint16_t* out) noexcept {
  if (format == Half::kBFloat16) {
    for (std::int64_t i = 0; i < n; ++i) out[i] = float_to_bf16(y[i]);
    return;
  }
#ifdef KVBRIDGE_X86_DISPATCH
  if (cpu_has_f16c()) return narrow_f16c(y, n, out);
#endif
  auto* h = reinterpret_cast<_Float16*>(out);
  for (std::int64_t i = 0; i < n; ++i) h[i] = static_cast<_Float16>(y[i]);
}

// bfloat16: the two passes of normalize_row straight from 16-bit storage, each value widened in
// a register, so no float32 copy of the row is written and read back (two passes over L1
// instead of five). The lanes, the order of the sums
// and the float32 arithmetic are sum_of_squares_f32's and scale_row's, so the result is theirs
// bit for bit (the C++ test checks it). float16 does the same through F16C (below); an integer
// float16 conversion written like bfloat16's did not vectorise and was slower.
KVBRIDGE_SIMD_CLONES float sum_of_squares_bf16(const std::uint16_t* x, std::int64_t cols) noexcept {
  constexpr int kLanes = 32;
  float lanes[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= cols; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float v = bf16_to_float(x[i + l]);
      lanes[l] += v * v;
    }
  }
  float tail = 0;
  for (; i < cols; ++i) {
    const float v = bf16_to_float(x[i]);
    tail += v * v;
  }
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0] + tail;
}

// The scale passes of the 16-bit formats also fetch the next row (`next`, or this row again when
// there is none) into L1, a line for every line they read. Their arithmetic per byte is twice
// float32's, and a large array took about the copy's time plus the in-cache time of the
// arithmetic, as if reading a row and computing it did not overlap; fetching ahead overlaps them
// (commit b469626 has the measurements). The same prefetch in float32's scale pass made it
// slower, so float32 has none.
inline void prefetch_line(const std::uint16_t* p) noexcept {
#if defined(__SSE2__)
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
#else
  (void)p;
#endif
}

KVBRIDGE_SIMD_CLONES void scale_row_bf16_portable(const std::uint16_t* x, const float* w,
                                                  std::int64_t cols, float scale,
                                                  std::uint16_t* y) noexcept {
  for (std::int64_t i = 0; i < cols; ++i) y[i] = float_to_bf16(bf16_to_float(x[i]) * scale * w[i]);
}

#ifdef KVBRIDGE_X86_DISPATCH
// The narrowing above is a dozen integer instructions per vector (round, NaN check, pack); CPUs
// with AVX512-BF16 (Cooper Lake, Sapphire Rapids, Zen 4) round and pack 32 values in one. That
// instruction flushes subnormals to zero, so a block holding a subnormal or a NaN is narrowed by
// the portable code instead: the result stays bit for bit the same.
bool cpu_has_avx512_bf16() noexcept {
  static const bool has = __builtin_cpu_supports("avx512bf16") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  return has;
}

KVBRIDGE_AVX512_WARNINGS_OFF
__attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16"))) void scale_row_bf16_native(
    const std::uint16_t* x, const float* w, std::int64_t cols, float scale, std::uint16_t* y,
    const std::uint16_t* next, bool stream) noexcept {
  const __m512 s = _mm512_set1_ps(scale);
  constexpr int kSubnormalOrNaN = 0x01 | 0x20 | 0x80;  // vfpclassps: QNaN, denormal, SNaN
  std::int64_t i = 0;
  for (; i + 32 <= cols; i += 32) {
    const __m512i h = _mm512_loadu_si512(x + i);
    prefetch_line(next + i);  // 32 values: one line
    const __m512i lo_bits = _mm512_cvtepu16_epi32(_mm512_castsi512_si256(h));
    const __m512i hi_bits = _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1));
    const __m512 lo = _mm512_castsi512_ps(_mm512_slli_epi32(lo_bits, 16));
    const __m512 hi = _mm512_castsi512_ps(_mm512_slli_epi32(hi_bits, 16));
    const __m512 y_lo = _mm512_mul_ps(_mm512_mul_ps(lo, s), _mm512_loadu_ps(w + i));
    const __m512 y_hi = _mm512_mul_ps(_mm512_mul_ps(hi, s), _mm512_loadu_ps(w + i + 16));
    if ((_mm512_fpclass_ps_mask(y_lo, kSubnormalOrNaN) |
         _mm512_fpclass_ps_mask(y_hi, kSubnormalOrNaN)) != 0) {
      scale_row_bf16_portable(x + i, w + i, 32, scale, y + i);
      continue;
    }
    const __m512i narrowed = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(y_hi, y_lo));
    store_line(y + i, narrowed, stream);
  }
  scale_row_bf16_portable(x + i, w + i, cols - i, scale, y + i);
}
KVBRIDGE_AVX512_WARNINGS_ON
#endif

// bfloat16's scale pass where the CPU lacks AVX512-BF16: it neither fetches ahead nor streams.
void scale_row_bf16(const std::uint16_t* x, const float* w, std::int64_t cols, float scale,
                    std::uint16_t* y, const std::uint16_t* /*next*/, bool /*stream*/) noexcept {
  scale_row_bf16_portable(x, w, cols, scale, y);
}

#if defined(KVBRIDGE_X86_DISPATCH) && defined(KVBRIDGE_HAS_SIMD_CLONES)
// float16 straight from its storage too, through F16C eight values at a time. The sums are
// sum_of_squares_f32's lanes and order with the fused multiply-adds GCC uses for it in the
// x86-64-v3/v4 clones, so on a CPU that runs those clones the result is the float32 kernel's bit
// for bit (test_rmsnorm.cpp); elsewhere float16 rows are widened first.
bool cpu_runs_v3_clones() noexcept {
  static const bool has = __builtin_cpu_supports("x86-64-v3");
  return has;
}

__attribute__((target("avx2,fma,f16c"))) inline __m256 load_f16c(const std::uint16_t* x) noexcept {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
}

__attribute__((target("avx2,fma,f16c"))) float sum_of_squares_f16c(const std::uint16_t* x,
                                                                   std::int64_t cols) noexcept {
  __m256 lanes0 = _mm256_setzero_ps(), lanes1 = lanes0, lanes2 = lanes0, lanes3 = lanes0;
  std::int64_t i = 0;
  for (; i + 32 <= cols; i += 32) {  // lanes 0-7, 8-15, 16-23, 24-31
    const __m256 v0 = load_f16c(x + i), v1 = load_f16c(x + i + 8);
    const __m256 v2 = load_f16c(x + i + 16), v3 = load_f16c(x + i + 24);
    lanes0 = _mm256_fmadd_ps(v0, v0, lanes0);
    lanes1 = _mm256_fmadd_ps(v1, v1, lanes1);
    lanes2 = _mm256_fmadd_ps(v2, v2, lanes2);
    lanes3 = _mm256_fmadd_ps(v3, v3, lanes3);
  }
  float tail = 0;
  for (; i < cols; ++i) {
    const float v = _cvtsh_ss(x[i]);
    tail = std::fma(v, v, tail);
  }
  // The pairwise reduction of sum_of_squares_f32: 32 -> 16 -> 8 -> 4 -> 2 -> 1.
  const __m256 eight = _mm256_add_ps(_mm256_add_ps(lanes0, lanes2), _mm256_add_ps(lanes1, lanes3));
  const __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
  const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  const __m128 one = _mm_add_ss(two, _mm_shuffle_ps(two, two, 1));
  return _mm_cvtss_f32(one) + tail;
}

__attribute__((target("avx2,fma,f16c"))) void scale_row_f16c(const std::uint16_t* x, const float* w,
                                                             std::int64_t cols, float scale,
                                                             std::uint16_t* y,
                                                             const std::uint16_t* next,
                                                             bool /*stream*/) noexcept {
  const __m256 s = _mm256_set1_ps(scale);
  std::int64_t i = 0;
  for (; i + 8 <= cols; i += 8) {
    if (i % 32 == 0) prefetch_line(next + i);  // 32 values: one line
    const __m256 v = load_f16c(x + i);
    const __m256 r = _mm256_mul_ps(_mm256_mul_ps(v, s), _mm256_loadu_ps(w + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < cols; ++i) y[i] = _cvtss_sh(_cvtsh_ss(x[i]) * scale * w[i], _MM_FROUND_TO_NEAREST_INT);
}

// The same scale pass 32 values (one line) at a time where the CPU has AVX-512, so that a
// streamed row's lines leave with one non-temporal store each: the same products and the same
// rounding, so the same bits.
KVBRIDGE_AVX512_WARNINGS_OFF
__attribute__((target("avx512f,avx2,fma,f16c"))) void scale_row_f16_avx512(
    const std::uint16_t* x, const float* w, std::int64_t cols, float scale, std::uint16_t* y,
    const std::uint16_t* next, bool stream) noexcept {
  const __m512 s = _mm512_set1_ps(scale);
  std::int64_t i = 0;
  for (; i + 32 <= cols; i += 32) {
    prefetch_line(next + i);  // 32 values: one line
    const __m512 lo = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    const __m512 hi =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 16)));
    const __m512 y_lo = _mm512_mul_ps(_mm512_mul_ps(lo, s), _mm512_loadu_ps(w + i));
    const __m512 y_hi = _mm512_mul_ps(_mm512_mul_ps(hi, s), _mm512_loadu_ps(w + i + 16));
    const __m512i narrowed =
        _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(y_lo, _MM_FROUND_TO_NEAREST_INT)),
                           _mm512_cvtps_ph(y_hi, _MM_FROUND_TO_NEAREST_INT), 1);
    store_line(y + i, narrowed, stream);
  }
  scale_row_f16c(x + i, w + i, cols - i, scale, y + i, next + i, false);
}
KVBRIDGE_AVX512_WARNINGS_ON
#endif

// A 16-bit format's two passes read from its storage, or none: rows are then widened first.
// `streams`: given `stream`, the scale pass writes whole 64-byte lines of a line-aligned `y`
// with non-temporal stores itself, so a streamed row is not written to L1 and copied out again
// by stream_row: from the scale pass the stores overlap the arithmetic instead of leaving in a
// burst of their own (commit 9891bf5 has the profile and the measurements). float32, whose
// arithmetic per byte is half theirs, gained nothing from the same change, so its rows keep
// stream_row.
struct HalfPasses {
  float (*sum_of_squares)(const std::uint16_t*, std::int64_t) noexcept;
  void (*scale_row)(const std::uint16_t*, const float*, std::int64_t, float, std::uint16_t*,
                    const std::uint16_t* next, bool stream) noexcept;
  bool streams;
};

HalfPasses half_passes(Half format) noexcept {
  if (format == Half::kBFloat16) {
#ifdef KVBRIDGE_X86_DISPATCH
    if (cpu_has_avx512_bf16()) return {sum_of_squares_bf16, scale_row_bf16_native, true};
#endif
    return {sum_of_squares_bf16, scale_row_bf16, false};
  }
#if defined(KVBRIDGE_X86_DISPATCH) && defined(KVBRIDGE_HAS_SIMD_CLONES)
  if (cpu_runs_v3_clones() && cpu_has_avx512f()) {
    return {sum_of_squares_f16c, scale_row_f16_avx512, true};
  }
  if (cpu_runs_v3_clones()) return {sum_of_squares_f16c, scale_row_f16c, false};
#endif
  return {nullptr, nullptr, false};
}

// One contiguous 16-bit row. Rows float32 cannot sum or scale take the float32 path with its
// float64 fallbacks, through a widened copy (rare: tiny or huge rows), as do all rows of a
// format without passes of its own.
void normalize_half_row(Half format, HalfPasses passes, const std::uint16_t* x, const float* w,
                        std::int64_t cols, double eps, std::uint16_t* y, const std::uint16_t* next,
                        bool stream, std::vector<float>& spare) noexcept {
  if (passes.sum_of_squares != nullptr) {
    const float sum = passes.sum_of_squares(x, cols);
    const double inv_rms = inverse_rms(sum, cols, eps);
    if (is_normal_float32(sum) && is_normal_float32(inv_rms)) {
      return passes.scale_row(x, w, cols, static_cast<float>(inv_rms), y, next, stream);
    }
  }
  spare.resize(2 * cols);
  widen_contiguous(format, x, cols, spare.data());
  normalize_row(spare.data(), w, cols, eps, spare.data() + cols);
  narrow(format, spare.data() + cols, cols, y);
}

void rmsnorm_half_rows(Half format, const HalfArrayView& x, const float* w, double eps,
                       std::uint16_t* out, std::int64_t rows, std::int64_t cols, bool streaming) {
  const std::int64_t col_stride = x.strides.back();
  parallel_for(rows, row_grain(cols), [&](std::int64_t first, std::int64_t last) {
    std::vector<std::uint16_t> gathered(col_stride == 1 ? 0 : cols), finished(streaming ? cols : 0);
    std::vector<float> spare;
    const HalfPasses passes = half_passes(format);
    for (std::int64_t r = first; r < last; ++r) {
      const std::uint16_t* row = x.data + row_offset(x.shape, x.strides, r);
      if (col_stride != 1) {  // strided rows are gathered once, then take the same path
        for (std::int64_t c = 0; c < cols; ++c) gathered[c] = row[c * col_stride];
        row = gathered.data();
      }
      // The row the scale pass fetches ahead: the next one when it is contiguous, else this one.
      const std::uint16_t* next =
          r + 1 < last && col_stride == 1 ? x.data + row_offset(x.shape, x.strides, r + 1) : row;
      // A streamed row goes to memory straight from the scale pass where it can (a line-aligned
      // row, a pass that streams), else through `finished` and stream_row.
      std::uint16_t* const dst = out + r * cols;
      const bool direct =
          streaming && passes.streams && (reinterpret_cast<std::uintptr_t>(dst) & 63) == 0;
      std::uint16_t* y = streaming && !direct ? finished.data() : dst;
      normalize_half_row(format, passes, row, w, cols, eps, y, next, direct, spare);
      if (streaming && !direct) stream_row(y, dst, cols * 2);
    }
    if (streaming) stream_fence();
  });
}

}  // namespace

void check_rmsnorm_out(const FloatArrayView& x, const FloatArrayView& weight, double eps,
                       const float* out, const std::vector<std::int64_t>& out_shape) {
  check_out(x.data, x.shape, x.strides, 4, weight, eps, out, out_shape);
}

namespace {

// The kernels, on arguments already checked.
void run(const FloatArrayView& x, const FloatArrayView& weight, double eps, float* out, Out from) {
  const std::int64_t total = numel(x.shape);
  if (total == 0) return;
  const std::int64_t cols = x.shape.back();
  std::vector<float> weight_copy;
  const RowPlan plan{x,
                     contiguous_weight(weight, weight_copy),
                     total / cols,
                     cols,
                     eps,
                     out,
                     from == Out::kExisting && total * 4 >= kStreamingMinBytes};
  parallel_for(plan.rows, row_grain(cols),
               [&plan](std::int64_t first, std::int64_t last) { plan.run(first, last); });
}

void run_half(Half format, const HalfArrayView& x, const FloatArrayView& weight, double eps,
              std::uint16_t* out, Out from) {
  const std::int64_t total = numel(x.shape);
  if (total == 0) return;
  const std::int64_t cols = x.shape.back();
  std::vector<float> weight_copy;
  const float* w = contiguous_weight(weight, weight_copy);
  const bool streaming = from == Out::kExisting && total * 2 >= kStreamingMinBytes;
  rmsnorm_half_rows(format, x, w, eps, out, total / cols, cols, streaming);
}

}  // namespace

void rmsnorm(const FloatArrayView& x, const FloatArrayView& weight, double eps, float* out,
             const std::vector<std::int64_t>& out_shape, Out from) {
  check_rmsnorm_out(x, weight, eps, out, out_shape);
  run(x, weight, eps, out, from);
}

void rmsnorm(const FloatArrayView& x, const FloatArrayView& weight, double eps,
             const Allocate<float>& allocate) {
  check_args(x.shape, weight, eps);  // fresh memory has x's shape and overlaps nothing
  run(x, weight, eps, allocate(x.shape), Out::kFresh);
}

void rmsnorm_half(Half format, const HalfArrayView& x, const FloatArrayView& weight, double eps,
                  std::uint16_t* out, const std::vector<std::int64_t>& out_shape, Out from) {
  check_out(x.data, x.shape, x.strides, 2, weight, eps, out, out_shape);
  run_half(format, x, weight, eps, out, from);
}

void rmsnorm_half(Half format, const HalfArrayView& x, const FloatArrayView& weight, double eps,
                  const Allocate<std::uint16_t>& allocate) {
  check_args(x.shape, weight, eps);
  run_half(format, x, weight, eps, allocate(x.shape), Out::kFresh);
}

void rmsnorm_backward(const float* x, const float* weight, const float* grad_y, std::int64_t rows,
                      std::int64_t cols, double eps, float* grad_x, float* grad_weight) {
  // y = x * r * w with r = (mean(x^2) + eps)^-1/2, so
  //   dL/dw_j = sum_rows g_j x_j r
  //   dL/dx_j = r g_j w_j - (r^3 / cols) x_j sum_k g_k w_k x_k
  // accumulated in double: gradients are compared with the reference at 1e-4.
  std::vector<double> grad_w_acc(grad_weight ? cols : 0, 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* gr = grad_y + r * cols;
    double sum_sq = 0, dot = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      sum_sq += static_cast<double>(xr[c]) * xr[c];
      dot += static_cast<double>(gr[c]) * weight[c] * xr[c];
    }
    const double inv_rms = inverse_rms(sum_sq, cols, eps);
    const double coeff = inv_rms * inv_rms * inv_rms * dot / static_cast<double>(cols);
    for (std::int64_t c = 0; c < cols; ++c) {
      if (grad_x) {
        grad_x[r * cols + c] = static_cast<float>(inv_rms * gr[c] * weight[c] - coeff * xr[c]);
      }
      if (grad_weight) grad_w_acc[c] += static_cast<double>(gr[c]) * xr[c] * inv_rms;
    }
  }
  if (grad_weight) {
    for (std::int64_t c = 0; c < cols; ++c) grad_weight[c] = static_cast<float>(grad_w_acc[c]);
  }
}

}  // namespace kvbridge
