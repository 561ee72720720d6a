// RMSNorm over 16-bit floats (bfloat16, float16) with float32 math: the conversions, their
// ISA variants chosen at run time, and the row loop.
#include <cstring>

#include "kvbridge/threads.hpp"
#include "one_pass.hpp"
#include "rmsnorm_parts.hpp"

namespace kvbridge::rmsnorm_parts {
namespace {

// float16 <-> float32 eight at a time with F16C (x86-64-v3 and later), chosen at run time like
// the clones: GCC vectorises bfloat16's integer conversion below, but converts _Float16 one
// element per instruction, which made float16 several times slower than bfloat16.
#ifdef KVBRIDGE_X86_DISPATCH
bool cpu_has_f16c() noexcept {
  static const bool has = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx") &&
                          kernel_paths_allow(KernelPaths::kAvx2);
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
// (commit b469626 has the measurements). Where a format has a one-pass loop (one_pass.hpp), its
// scale pass reads the next row itself instead, summing it, and fetches further ahead.
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
  static const bool has =
      __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && kernel_paths_allow(KernelPaths::kAvx512Bf16);
  return has;
}

KVBRIDGE_AVX512_WARNINGS_OFF
// 32 bfloat16 values widened: elements 0-15 in `low`, 16-31 in `high`.
__attribute__((target("avx512f,avx512bw"))) inline void widen_bf16x32(const std::uint16_t* p,
                                                                      __m512& low,
                                                                      __m512& high) noexcept {
  const __m512i h = _mm512_loadu_si512(p);
  low =
      _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
  high = _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
}

// y[0, 32) = narrow((x * s) * w) for one block, stored as one line (streamed when `stream`); a
// block holding a subnormal or NaN result is narrowed by the portable code instead.
__attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16"))) inline void scale_block_bf16_native(
    const std::uint16_t* x, const float* w, __m512 s, float scale, std::uint16_t* y,
    bool stream) noexcept {
  constexpr int kSubnormalOrNaN = 0x01 | 0x20 | 0x80;  // vfpclassps: QNaN, denormal, SNaN
  __m512 low, high;
  widen_bf16x32(x, low, high);
  const __m512 y_low = _mm512_mul_ps(_mm512_mul_ps(low, s), _mm512_loadu_ps(w));
  const __m512 y_high = _mm512_mul_ps(_mm512_mul_ps(high, s), _mm512_loadu_ps(w + 16));
  if ((_mm512_fpclass_ps_mask(y_low, kSubnormalOrNaN) |
       _mm512_fpclass_ps_mask(y_high, kSubnormalOrNaN)) != 0) {
    return scale_row_bf16_portable(x, w, 32, scale, y);
  }
  store_line(y, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(y_high, y_low)), stream);
}

__attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16"))) void scale_row_bf16_native(
    const std::uint16_t* x, const float* w, std::int64_t cols, float scale, std::uint16_t* y,
    const std::uint16_t* next, bool stream) noexcept {
  const __m512 s = _mm512_set1_ps(scale);
  std::int64_t i = 0;
  for (; i + 32 <= cols; i += 32) {
    prefetch_line(next + i);  // 32 values: one line
    scale_block_bf16_native(x + i, w + i, s, scale, y + i, stream);
  }
  scale_row_bf16_portable(x + i, w + i, cols - i, scale, y + i);
}
KVBRIDGE_AVX512_WARNINGS_ON
#if defined(KVBRIDGE_X86_DISPATCH) && defined(KVBRIDGE_HAS_SIMD_CLONES)
// scale_row_bf16_native's blocks in one_pass.hpp's one-pass structure: a contiguous row is
// scaled and narrowed by the instruction while the next row's squares are summed, in
// sum_of_squares_f32's lanes 0-15 and 16-31 (two vectors here, four there) with its operations,
// so both results are the two-pass functions' bit for bit (test_rmsnorm.cpp). Its stores start
// on a 64-byte line (the scale runs `head` elements behind the sum), streamed or not; its blocks
// are the two-pass path's (scale_block_bf16_native).
// On an AVX512-BF16 Xeon (480 MiB L3) the two-pass path ran bfloat16 out= at 1.37-1.58x the
// copy, the AVX2 one-pass loop (integer narrowing) ahead of it: the pass over memory saved is
// worth more there than the instruction (commit message: the figures).
KVBRIDGE_AVX512_WARNINGS_OFF
template <bool Stream>
__attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16,avx2"))) float
scale_row_bf16_native_summing_next(const std::uint16_t* x, const float* w, std::int64_t cols,
                                   float scale, std::uint16_t* y,
                                   const std::uint16_t* next) noexcept {
  constexpr std::int64_t kAheadBytes = 2048;  // one_pass.hpp's distance
  const __m512 s = _mm512_set1_ps(scale);
  __m512 low = _mm512_setzero_ps(), high = _mm512_setzero_ps();  // lanes 0-15, 16-31
  const std::int64_t head = elements_before_line(y, cols, sizeof(std::uint16_t));
  scale_row_bf16_portable(x, w, head, scale, y);
  std::int64_t scaled = head;  // y[0, scaled) written
  std::int64_t i = 0;
  for (; i + 32 <= cols; i += 32) {
    // an address, not a pointer: past the row's end it names memory no pointer may reach
    _mm_prefetch(
        reinterpret_cast<const char*>(reinterpret_cast<std::uintptr_t>(next + i) + kAheadBytes),
        _MM_HINT_T0);
    __m512 n_low, n_high;
    widen_bf16x32(next + i, n_low, n_high);
    low = _mm512_add_ps(low, _mm512_mul_ps(n_low, n_low));
    high = _mm512_add_ps(high, _mm512_mul_ps(n_high, n_high));
    if (scaled + 32 > cols) continue;
    scale_block_bf16_native(x + scaled, w + scaled, s, scale, y + scaled, Stream);
    scaled += 32;
  }
  scale_row_bf16_portable(x + scaled, w + scaled, cols - scaled, scale, y + scaled);
  float tail = 0;
  for (; i < cols; ++i) {
    const float v = bf16_to_float(next[i]);
    tail += v * v;
  }
  alignas(64) float sums[32];  // through memory: GCC 12's 512-to-256 casts warn (-Wuninitialized)
  _mm512_store_ps(sums, low);
  _mm512_store_ps(sums + 16, high);
  const __m256 lanes[4] = {_mm256_load_ps(sums), _mm256_load_ps(sums + 8),
                           _mm256_load_ps(sums + 16), _mm256_load_ps(sums + 24)};
  return reduce_lanes_avx2(lanes, tail);
}
KVBRIDGE_AVX512_WARNINGS_ON

float scale_row_bf16_native_summing_next(const std::uint16_t* x, const float* w, std::int64_t cols,
                                         float scale, std::uint16_t* y, const std::uint16_t* next,
                                         bool stream) noexcept {
  return stream ? scale_row_bf16_native_summing_next<true>(x, w, cols, scale, y, next)
                : scale_row_bf16_native_summing_next<false>(x, w, cols, scale, y, next);
}
#endif
#endif

// bfloat16's scale pass where the CPU lacks AVX512-BF16: it neither fetches ahead nor streams.
void scale_row_bf16(const std::uint16_t* x, const float* w, std::int64_t cols, float scale,
                    std::uint16_t* y, const std::uint16_t* /*next*/, bool /*stream*/) noexcept {
  scale_row_bf16_portable(x, w, cols, scale, y);
}

#if defined(KVBRIDGE_X86_DISPATCH) && defined(KVBRIDGE_HAS_SIMD_CLONES)
// bfloat16's passes written with AVX2 for the CPUs without AVX512-BF16: GCC's vectorisation of
// the portable narrowing ran at about half float16's speed through F16C (the page's 16-bit
// table). The widening, the products and float_to_bf16's integer steps are the portable code's,
// eight values at a time, and the sums are sum_of_squares_f32's lanes (as float16's below), so
// the bits are the portable code's (test_rmsnorm.cpp); no block needs narrowing apart.
__attribute__((target("avx2"))) inline __m256 load_bf16_avx2(const std::uint16_t* x) noexcept {
  const __m256i bits = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(bits, 16));
}

// float_to_bf16's rounding of eight values that are not NaN, before the shift: each result in
// the high half of its 32-bit lane, the low half left over.
__attribute__((target("avx2"))) inline __m256i rounded_high_bf16_avx2(__m256 y) noexcept {
  const __m256i bits = _mm256_castps_si256(y);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));
  return rounded;
}

// The same, each result in the low half of its 32-bit lane.
__attribute__((target("avx2"))) inline __m256i round_bf16_avx2(__m256 y) noexcept {
  return _mm256_srli_epi32(rounded_high_bf16_avx2(y), 16);
}

// float_to_bf16 on eight values, NaN included: each result in the low half of its 32-bit lane.
__attribute__((target("avx2"))) inline __m256i narrow_bf16_avx2(__m256 y) noexcept {
  const __m256i bits = _mm256_castps_si256(y);
  const __m256i high = _mm256_srli_epi32(bits, 16);
  // |bits| > infinity's bits: both sides fit in 31 bits, so the signed compare is the unsigned one
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(round_bf16_avx2(y), _mm256_or_si256(high, _mm256_set1_epi32(0x40)),
                            nan);
}

// Sixteen results narrowed by `Narrow` and packed in order.
template <__m256i (*Narrow)(__m256) noexcept>
__attribute__((target("avx2"))) inline __m256i pack_bf16_avx2(__m256 lo, __m256 hi) noexcept {
  // packus interleaves the two halves by 128-bit lane; the permute puts them back in order
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(Narrow(lo), Narrow(hi)), 0xd8);
}

__attribute__((target("avx2"))) void scale_row_bf16_avx2(const std::uint16_t* x, const float* w,
                                                         std::int64_t cols, float scale,
                                                         std::uint16_t* y,
                                                         const std::uint16_t* next,
                                                         bool /*stream*/) noexcept {
  const __m256 s = _mm256_set1_ps(scale);
  std::int64_t i = 0;
  for (; i + 16 <= cols; i += 16) {
    if (i % 32 == 0) prefetch_line(next + i);  // 32 values: one line
    const __m256 lo =
        _mm256_mul_ps(_mm256_mul_ps(load_bf16_avx2(x + i), s), _mm256_loadu_ps(w + i));
    const __m256 hi =
        _mm256_mul_ps(_mm256_mul_ps(load_bf16_avx2(x + i + 8), s), _mm256_loadu_ps(w + i + 8));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        pack_bf16_avx2<narrow_bf16_avx2>(lo, hi));
  }
  scale_row_bf16_portable(x + i, w + i, cols - i, scale, y + i);
}

// float16 straight from its storage too, through F16C eight values at a time. The sums are
// sum_of_squares_f32's lanes, order and operations (a multiply, then an add: the core is built
// without contraction), so the result is the float32 kernel's bit for bit (test_rmsnorm.cpp);
// on a CPU without x86-64-v3 float16 rows are widened first.
__attribute__((target("avx2,f16c"))) inline __m256 load_f16c(const std::uint16_t* x) noexcept {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
}

__attribute__((target("f16c"))) inline float f16_to_float(std::uint16_t h) noexcept {
  return _cvtsh_ss(h);
}

// A 16-bit row's sum of squares in sum_of_squares_f32's lanes, order and operations, each value
// widened eight at a time by `Load` (the tail one at a time by `Widen`): bfloat16's and
// float16's sums, alike but for their widening.
template <__m256 (*Load)(const std::uint16_t*) noexcept, float (*Widen)(std::uint16_t) noexcept>
__attribute__((target("avx2,fma,f16c"))) float sum_of_squares_16(const std::uint16_t* x,
                                                                 std::int64_t cols) noexcept {
  __m256 lanes[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
  std::int64_t i = 0;
  for (; i + 32 <= cols; i += 32) {
    const __m256 v[4] = {Load(x + i), Load(x + i + 8), Load(x + i + 16), Load(x + i + 24)};
    add_squares_avx2(lanes, v);
  }
  float tail = 0;
  for (; i < cols; ++i) {
    const float v = Widen(x[i]);
    tail += v * v;
  }
  return reduce_lanes_avx2(lanes, tail);
}
constexpr auto sum_of_squares_bf16_avx2 = sum_of_squares_16<load_bf16_avx2, bf16_to_float>;
constexpr auto sum_of_squares_f16c = sum_of_squares_16<load_f16c, f16_to_float>;

// 32 bytes stored at y: streamed (y on a 32-byte boundary) or not.
template <bool Stream>
__attribute__((target("avx2"))) inline void store_256(std::uint16_t* y, __m256i v) noexcept {
  if constexpr (Stream) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(y), v);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), v);
  }
}

// bfloat16 and float16 in the one-pass loop (one_pass.hpp): read and rounded as the scale passes
// above and below read and round them, so the bits are theirs.
struct BFloat16Format : InOrder<BFloat16Format, std::uint16_t> {
  __attribute__((target("avx2"))) static __m256 load(const std::uint16_t* p) noexcept {
    return load_bf16_avx2(p);
  }
  static float widen(std::uint16_t h) noexcept { return bf16_to_float(h); }
  static std::uint16_t narrow(float f) noexcept { return float_to_bf16(f); }
  template <bool Stream>
  __attribute__((target("avx2"))) static void store32(std::uint16_t* y,
                                                      const __m256 (&v)[4]) noexcept {
    // NaN is asked once for the 32: the narrowing's own NaN steps for each eight were a quarter
    // of the loop's instructions (commit message).
    __m256 unordered = _mm256_cmp_ps(v[0], v[0], _CMP_UNORD_Q);
    for (int k = 1; k < 4; ++k) {
      unordered = _mm256_or_ps(unordered, _mm256_cmp_ps(v[k], v[k], _CMP_UNORD_Q));
    }
    const bool any_nan = !_mm256_testz_ps(unordered, unordered);
    for (int k = 0; k < 2; ++k) {
      const __m256i packed = any_nan ? pack_bf16_avx2<narrow_bf16_avx2>(v[2 * k], v[2 * k + 1])
                                     : pack_bf16_avx2<round_bf16_avx2>(v[2 * k], v[2 * k + 1]);
      store_256<Stream>(y + 16 * k, packed);
    }
  }
};

// bfloat16 with finite weights, where no result can be NaN: a row that reaches the one-pass
// loop has a normal float32 sum of squares, so x holds no NaN and no infinity, and x * scale
// stays within sqrt(cols) of the row's scale, so a result is NaN only where a weight is NaN or
// infinite (infinity times a zero x). Its vectors hold the even- and the odd-indexed values of
// 16 in turn: a bfloat16 is the top half of a float32, so the odd ones are the 32-bit words with
// their low halves cleared and the even ones the words shifted up, one instruction per eight
// where widening in order takes two, and the results go back the same way, rounded ones merged
// by one OR where in order they take a pack and a permute. The arithmetic per element and every
// lane's sum are BFloat16Format's, so the bits are. `w` is the weights followed by their even-
// and odd-indexed halves (split_weights).
struct BFloat16EvenOdd {
  using T = std::uint16_t;
  static float widen(std::uint16_t h) noexcept { return bf16_to_float(h); }
  static std::uint16_t narrow(float f) noexcept { return float_to_bf16(f); }
  __attribute__((target("avx2"))) static void load32(const std::uint16_t* p,
                                                     __m256 (&v)[4]) noexcept {
    const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    for (int k = 0; k < 2; ++k) {
      const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * k));
      v[2 * k] = _mm256_castsi256_ps(_mm256_slli_epi32(words, 16));       // p[16k + 2j]
      v[2 * k + 1] = _mm256_castsi256_ps(_mm256_and_si256(words, high));  // p[16k + 2j + 1]
    }
  }
  __attribute__((target("avx2"))) static void scale32(const std::uint16_t* x, const float* w,
                                                      std::int64_t cols, std::int64_t at, __m256 s,
                                                      __m256 (&v)[4]) noexcept {
    const float* even = w + cols;              // w[0], w[2], ...
    const float* odd = even + (cols + 1) / 2;  // w[1], w[3], ...
    // the weights of x[at], x[at + 2], ... and of x[at + 1], x[at + 3], ...
    const float* first = at % 2 == 0 ? even + at / 2 : odd + at / 2;
    const float* second = at % 2 == 0 ? odd + at / 2 : even + at / 2 + 1;
    load32(x + at, v);
    for (int k = 0; k < 2; ++k) {  // scale_row's (x * scale) * w
      v[2 * k] = _mm256_mul_ps(_mm256_mul_ps(v[2 * k], s), _mm256_loadu_ps(first + 8 * k));
      v[2 * k + 1] = _mm256_mul_ps(_mm256_mul_ps(v[2 * k + 1], s), _mm256_loadu_ps(second + 8 * k));
    }
  }
  template <bool Stream>
  __attribute__((target("avx2"))) static void store32(std::uint16_t* y,
                                                      const __m256 (&v)[4]) noexcept {
    const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    for (int k = 0; k < 2; ++k) {
      // the even results in the low halves, the odd ones in the high halves (no NaN: see above)
      const __m256i odd = _mm256_and_si256(rounded_high_bf16_avx2(v[2 * k + 1]), high);
      store_256<Stream>(y + 16 * k, _mm256_or_si256(round_bf16_avx2(v[2 * k]), odd));
    }
  }
  // Lanes {0, 2, ..., 14}, {1, ..., 15}, {16, ..., 30}, {17, ..., 31} back to 0-7, 8-15, ...
  __attribute__((target("avx2"))) static void canonical_lanes(__m256 (&lanes)[4]) noexcept {
    for (int k = 0; k < 4; k += 2) {
      const __m256 low = _mm256_unpacklo_ps(lanes[k], lanes[k + 1]);   // 0-3 | 8-11
      const __m256 high = _mm256_unpackhi_ps(lanes[k], lanes[k + 1]);  // 4-7 | 12-15
      lanes[k] = _mm256_permute2f128_ps(low, high, 0x20);
      lanes[k + 1] = _mm256_permute2f128_ps(low, high, 0x31);
    }
  }
};

struct Float16Format : InOrder<Float16Format, std::uint16_t> {
  __attribute__((target("avx2,f16c"))) static __m256 load(const std::uint16_t* p) noexcept {
    return load_f16c(p);
  }
  __attribute__((target("f16c"))) static float widen(std::uint16_t h) noexcept {
    return _cvtsh_ss(h);
  }
  __attribute__((target("f16c"))) static std::uint16_t narrow(float f) noexcept {
    return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
  }
  template <bool Stream>
  __attribute__((target("avx2,f16c"))) static void store32(std::uint16_t* y,
                                                           const __m256 (&v)[4]) noexcept {
    for (int k = 0; k < 2; ++k) {
      const __m256i halves =
          _mm256_set_m128i(_mm256_cvtps_ph(v[2 * k + 1], _MM_FROUND_TO_NEAREST_INT),
                           _mm256_cvtps_ph(v[2 * k], _MM_FROUND_TO_NEAREST_INT));
      store_256<Stream>(y + 16 * k, halves);
    }
  }
};

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

#endif

// A 16-bit format's two passes read from its storage, or none: rows are then widened first.
// `streams`: given `stream`, the scale pass writes whole 64-byte lines of a line-aligned `y`
// with non-temporal stores itself, so a streamed row is not written to L1 and copied out again
// by stream_row: from the scale pass the stores overlap the arithmetic instead of leaving in a
// burst of their own (commit 9891bf5 has the profile and the measurements). The AVX2 and F16C
// passes go further, as float32's do: a contiguous row is scaled while the next is summed, and
// streamed from that loop whatever its alignment (one_pass.hpp, `scale_summing_next`).
struct HalfPasses {
  float (*sum_of_squares)(const std::uint16_t*, std::int64_t) noexcept;
  void (*scale_row)(const std::uint16_t*, const float*, std::int64_t, float, std::uint16_t*,
                    const std::uint16_t* next, bool stream) noexcept;
  bool streams;
  // The scale pass summing the next row's squares as it goes, streaming or not (one_pass.hpp,
  // and bfloat16's AVX512-BF16 loop in its structure), returning that sum; null where this
  // format has none here. `..._finite_weights`: the same, bits alike, for
  // weights that are all finite, given as split_weights lays them out (bfloat16's even-odd loop
  // reads the halves; float16's takes the weights at the front).
  using SummingNext = float (*)(const std::uint16_t*, const float*, std::int64_t, float,
                                std::uint16_t*, const std::uint16_t* next, bool stream) noexcept;
  SummingNext scale_summing_next;
  SummingNext scale_summing_next_finite_weights;
  const char* name;  // for rmsnorm_paths()
};

HalfPasses half_passes(Half format) noexcept {
  if (format == Half::kBFloat16) {
#ifdef KVBRIDGE_X86_DISPATCH
#if defined(KVBRIDGE_HAS_SIMD_CLONES)
    if (cpu_has_avx512_bf16() && cpu_runs_v3_clones()) {
      return {sum_of_squares_bf16,
              scale_row_bf16_native,
              true,
              scale_row_bf16_native_summing_next,
              scale_row_bf16_native_summing_next,
              "AVX512-BF16, each row's scale pass summing the next row"};
    }
#endif
    if (cpu_has_avx512_bf16()) {
      return {sum_of_squares_bf16, scale_row_bf16_native, true, nullptr, nullptr, "AVX512-BF16"};
    }
#endif
#if defined(KVBRIDGE_X86_DISPATCH) && defined(KVBRIDGE_HAS_SIMD_CLONES)
    if (cpu_runs_v3_clones()) {
      return {sum_of_squares_bf16_avx2,
              scale_row_bf16_avx2,
              false,
              scale_summing_next<BFloat16Format>,
              scale_summing_next<BFloat16EvenOdd>,
              "AVX2, each row's scale pass summing the next row"};
    }
#endif
    return {sum_of_squares_bf16, scale_row_bf16, false, nullptr, nullptr, "portable"};
  }
#if defined(KVBRIDGE_X86_DISPATCH) && defined(KVBRIDGE_HAS_SIMD_CLONES)
  // float16 takes the one-pass loop on AVX-512 CPUs too: against a two-pass AVX-512 scale pass
  // streaming whole lines (commit 9891bf5, which predates the one-pass loop) it ran at 1.05-1.17x
  // the copy where that pass took 1.22-1.36x, 4096x4096 and 2048x4096 at 1 and 2 threads, on an
  // AVX-512 Xeon with a 480 MiB L3. bfloat16 has its one-pass loop with the AVX512-BF16
  // narrowing (above); its two-pass passes remain for rows read apart (strided, misaligned).
  if (cpu_runs_v3_clones()) {
    return {sum_of_squares_f16c,
            scale_row_f16c,
            false,
            scale_summing_next<Float16Format>,
            scale_summing_next<Float16Format>,
            "F16C, each row's scale pass summing the next row"};
  }
#endif
  return {nullptr, nullptr, false, nullptr, nullptr, "widened to float32 rows first"};
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

constexpr std::int64_t kRowsToCheckWeights = 4;

// The weights followed by their even- and odd-indexed halves: BFloat16EvenOdd's `w`.
std::vector<float> split_weights(const float* w, std::int64_t cols) {
  std::vector<float> split(w, w + cols);
  split.reserve(2 * cols);
  for (std::int64_t start = 0; start < 2; ++start) {
    for (std::int64_t c = start; c < cols; c += 2) split.push_back(w[c]);
  }
  return split;
}

// Whether every weight is finite (no NaN, no infinity).
KVBRIDGE_SIMD_CLONES bool all_finite(const float* w, std::int64_t cols) noexcept {
  bool finite = true;
  for (std::int64_t c = 0; c < cols; ++c) finite &= std::isfinite(w[c]);
  return finite;
}

// normalize_half_row for a contiguous row whose sum of squares is `sum`, through the pass that
// also sums the next row's (passes.scale_summing_next); returns that sum (0 without a next row).
float normalize_half_summing_next(Half format, HalfPasses passes,
                                  HalfPasses::SummingNext scale_summing_next,
                                  const std::uint16_t* x, float sum, const float* w,
                                  std::int64_t cols, double eps, std::uint16_t* y,
                                  const std::uint16_t* next, bool stream,
                                  std::vector<float>& spare) noexcept {
  const double inv_rms = inverse_rms(sum, cols, eps);
  if (!is_normal_float32(sum) || !is_normal_float32(inv_rms)) {  // the float32 path's fallbacks
    normalize_half_row(format, passes, x, w, cols, eps, y, x, false, spare);
    return next == nullptr ? 0 : passes.sum_of_squares(next, cols);
  }
  const float next_sum = scale_summing_next(x, w, cols, static_cast<float>(inv_rms), y,
                                            next == nullptr ? x : next, stream);
  return next == nullptr ? 0 : next_sum;  // the last row sums itself, unused
}

}  // namespace

const char* half_path(Half format) noexcept { return half_passes(format).name; }

void rmsnorm_half_rows(Half format, const HalfArrayView& x, const float* w, double eps,
                       std::uint16_t* out, std::int64_t rows, std::int64_t cols, bool streaming) {
  const std::int64_t col_stride = x.strides.back();
  parallel_for(rows, row_grain(cols), [&](std::int64_t first, std::int64_t last) {
    // An out= at an odd address cannot be stored to as 16-bit values: its rows are finished in
    // `finished` and copied there byte for byte (streamed where the policy streams).
    const bool out_aligned = is_aligned<std::uint16_t>(out);
    const bool x_aligned = is_aligned<std::uint16_t>(x.data);
    std::vector<std::uint16_t> gathered(col_stride == 1 && x_aligned ? 0 : cols);
    std::vector<std::uint16_t> finished(streaming || !out_aligned ? cols : 0);
    std::vector<float> spare;
    const HalfPasses passes = half_passes(format);
    const bool one_pass = col_stride == 1 && x_aligned && passes.scale_summing_next != nullptr;
    // Weights all finite: no result can be NaN (BFloat16EvenOdd). Asked once per chunk, where
    // the chunk has rows enough to pay for reading the weights and laying them out again.
    const bool finite = one_pass && last - first >= kRowsToCheckWeights && all_finite(w, cols);
    const std::vector<float> split = finite ? split_weights(w, cols) : std::vector<float>();
    const HalfPasses::SummingNext summing_next =
        finite ? passes.scale_summing_next_finite_weights : passes.scale_summing_next;
    const float* const weights = finite ? split.data() : w;
    float sum = 0;  // with one_pass: this row's sum of squares, summed by the row before
    for (std::int64_t r = first; r < last; ++r) {
      const std::uint16_t* row = x.data + row_offset(x.shape, x.strides, r);
      std::uint16_t* const dst = out + r * cols;
      if (one_pass) {  // streamed straight from the one-pass loop (one_pass.hpp)
        if (r == first) sum = passes.sum_of_squares(row, cols);
        const std::uint16_t* next =
            r + 1 < last ? x.data + row_offset(x.shape, x.strides, r + 1) : nullptr;
        const bool direct = streaming && out_aligned;
        std::uint16_t* const y = row_target(dst, finished.data(), direct, streaming, out_aligned);
        sum = normalize_half_summing_next(format, passes, summing_next, row, sum, weights, cols,
                                          eps, y, next, direct, spare);
        copy_row(y, dst, cols * 2, streaming);
        continue;
      }
      if (col_stride != 1 || !x_aligned) {  // gathered once, then the same path
        gather_row(row, col_stride, cols, gathered.data());
        row = gathered.data();
      }
      // The row the scale pass fetches ahead: the next one when it is read in place, else this.
      const std::uint16_t* next = r + 1 < last && col_stride == 1 && x_aligned
                                      ? x.data + row_offset(x.shape, x.strides, r + 1)
                                      : row;
      // A streamed row goes to memory straight from the scale pass where it can (a line-aligned
      // row, a pass that streams), else through `finished` and stream_row.
      const bool direct =
          streaming && passes.streams && (reinterpret_cast<std::uintptr_t>(dst) & 63) == 0;
      std::uint16_t* const y = row_target(dst, finished.data(), direct, streaming, out_aligned);
      normalize_half_row(format, passes, row, w, cols, eps, y, next, direct, spare);
      copy_row(y, dst, cols * 2, streaming);
    }
    if (streaming) stream_fence();
  });
}

}  // namespace kvbridge::rmsnorm_parts
