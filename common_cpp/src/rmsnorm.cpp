#include "kvbridge/rmsnorm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>

#include "kvbridge/simd.hpp"
#include "kvbridge/testing.hpp"
#include "kvbridge/threads.hpp"
#include "one_pass.hpp"
#include "rmsnorm_parts.hpp"

// The checks, the float32 kernel and every entry point. The 16-bit rows are rmsnorm_half.cpp's
// and the line stores line_stores.cpp's; rmsnorm_parts.hpp declares what the three share.
namespace kvbridge {

namespace rmsnorm_parts {
namespace {

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

KVBRIDGE_SIMD_CLONES void scale_row(const float* x, const float* w, std::int64_t cols, float scale,
                                    float* y) noexcept {
  for (std::int64_t i = 0; i < cols; ++i) y[i] = x[i] * scale * w[i];
}

// The scale of a row whose float32 sum of squares is `sum` (summed again in float64 where
// float32 could not hold it).
double row_inverse_rms(const float* x, float sum, std::int64_t cols, double eps) noexcept {
  return inverse_rms(is_normal_float32(sum) ? sum : sum_of_squares_f64(x, cols), cols, eps);
}

// A scale outside float32's normal range (rows of denormals with eps = 0, or an all-zero
// row): scaled in float64, so the result matches the reference instead of inf/NaN.
void scale_row_f64(const float* x, const float* w, std::int64_t cols, double inv_rms,
                   float* y) noexcept {
  for (std::int64_t i = 0; i < cols; ++i) y[i] = static_cast<float>(x[i] * inv_rms * w[i]);
}

// scale_row by `inv_rms` where it is a normal float32, else scale_row_f64.
void scale_row_by(const float* x, const float* w, std::int64_t cols, double inv_rms,
                  float* y) noexcept {
  if (is_normal_float32(inv_rms)) {
    scale_row(x, w, cols, static_cast<float>(inv_rms), y);
  } else {
    scale_row_f64(x, w, cols, inv_rms, y);
  }
}

#ifdef KVBRIDGE_X86_DISPATCH
// scale_row where the CPU has AVX-512: one 64-byte line of 16 products at a time, from the
// row's first line on (the elements before it, and its tail, by scale_row: `y` must hold whole
// floats), streamed or not. A streamed row leaves with one non-temporal store per line straight
// from this pass; a cached one writes each line with one store, where stores off the lines
// wrote every line twice (numpy's arrays start 16 bytes past a line: the decode shape's rows ran
// slower there, commit message: the measurements). The same products in the same order, so the
// same bits. With the row summed by sum_of_squares_f32's AVX-512 clone just before (the row is
// then in L1), this two-pass row is the float32 path of AVX-512 CPUs: on one (AMD EPYC) it ran
// nearer the copy of the same bytes in cache than the one-pass loop below, and as near
// streamed; fetching the next row ahead made it slower in cache and no faster streamed (commit
// message: the measurements).
KVBRIDGE_AVX512_WARNINGS_OFF
__attribute__((target("avx512f"))) void scale_row_avx512(const float* x, const float* w,
                                                         std::int64_t cols, float scale, float* y,
                                                         bool stream) noexcept {
  const std::int64_t head = elements_before_line(y, cols, sizeof(float));
  scale_row(x, w, head, scale, y);
  const __m512 s = _mm512_set1_ps(scale);
  std::int64_t i = head;
  for (; i + 16 <= cols; i += 16) {
    const __m512 v =
        _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), s), _mm512_loadu_ps(w + i));
    store_line(y + i, _mm512_castps_si512(v), stream);
  }
  scale_row(x + i, w + i, cols - i, scale, y + i);  // the tail
}
KVBRIDGE_AVX512_WARNINGS_ON
#endif

#if defined(KVBRIDGE_X86_DISPATCH) && defined(KVBRIDGE_HAS_SIMD_CLONES)
// float32 in the one-pass loop (one_pass.hpp).
struct Float32Format : InOrder<Float32Format, float> {
  __attribute__((target("avx2"))) static __m256 load(const float* p) noexcept {
    return _mm256_loadu_ps(p);
  }
  static float widen(float v) noexcept { return v; }
  static float narrow(float v) noexcept { return v; }
  template <bool Stream>
  __attribute__((target("avx2"))) static void store32(float* y, const __m256 (&v)[4]) noexcept {
    for (int k = 0; k < 4; ++k) {
      if constexpr (Stream) {
        _mm256_stream_ps(y + 8 * k, v[k]);
      } else {
        _mm256_storeu_ps(y + 8 * k, v[k]);
      }
    }
  }
};
#endif

}  // namespace

void normalize_row(const float* x, const float* w, std::int64_t cols, double eps,
                   float* y) noexcept {
  scale_row_by(x, w, cols, row_inverse_rms(x, sum_of_squares_f32(x, cols), cols, eps), y);
}

KernelPaths kernel_paths_cap() {
  // A function-local static: parsed once, thread-safely; a throw leaves it unparsed, so a bad
  // KVBRIDGE_KERNELS fails every call that needs it, with the same message.
  static const KernelPaths cap = [] {
    const char* asked = std::getenv("KVBRIDGE_KERNELS");
    return asked == nullptr ? KernelPaths::kAvx512Bf16 : parse_kernel_paths(asked);
  }();
  return cap;
}

bool kernel_paths_allow(KernelPaths paths) noexcept {
  try {
    return kernel_paths_cap() >= paths;
  } catch (...) {
    return false;  // unreachable after check_args; the portable paths in any case
  }
}

#if defined(KVBRIDGE_X86_DISPATCH) && defined(KVBRIDGE_HAS_SIMD_CLONES)
bool cpu_runs_v3_clones() noexcept {
  static const bool has =
      __builtin_cpu_supports("x86-64-v3") && kernel_paths_allow(KernelPaths::kAvx2);
  return has;
}
#endif

}  // namespace rmsnorm_parts

namespace {

using namespace rmsnorm_parts;

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

struct RowPlan {
  const FloatArrayView& x;
  const float* weight;  // contiguous
  std::int64_t rows;
  std::int64_t cols;
  double eps;
  float* out;
  bool streaming;  // see streams()

  void run(std::int64_t first, std::int64_t last) const {
    const std::int64_t col_stride = x.strides.back();
    const bool avx512 = scales_avx512();
    const bool x_aligned = is_aligned<float>(x.data);
    const bool one_pass = col_stride == 1 && x_aligned && !avx512 && summing_next();
    // An out= at an address that is not a multiple of 4 (a view at a byte offset, which numpy
    // allows) cannot be stored to as floats: its rows are finished in `finished` and copied there
    // byte for byte (streamed from their first whole line where the policy streams).
    const bool out_aligned = is_aligned<float>(out);
    std::vector<float> gathered(col_stride == 1 && x_aligned ? 0 : cols);
    std::vector<float> finished(streaming || !out_aligned ? cols : 0);
    float sum = 0;  // with one_pass: this row's sum of squares, summed by the row before
    for (std::int64_t r = first; r < last; ++r) {
      const float* row = x.data + row_offset(x.shape, x.strides, r);
      if (col_stride != 1 || !x_aligned) {  // gathered once, then the same fast path
        gather_row(row, col_stride, cols, gathered.data());
        row = gathered.data();
      }
      // A streamed row goes to memory straight from the one-pass loop or the AVX-512 scale pass,
      // else through `finished` and stream_row; a cached row straight, unless out is misaligned.
      float* const dst = out + r * cols;
      const bool direct = streaming && (one_pass || avx512) && out_aligned;
      float* const y = row_target(dst, finished.data(), direct, streaming, out_aligned);
      if (one_pass) {
        if (r == first) sum = sum_of_squares_f32(row, cols);
        const float* next = r + 1 < last ? x.data + row_offset(x.shape, x.strides, r + 1) : nullptr;
        sum = normalize_summing_next(row, sum, y, next, direct);
      } else if (avx512) {
        normalize_row_avx512(row, y, direct);
      } else {
        normalize_row(row, weight, cols, eps, y);
      }
      copy_row(y, dst, cols * 4, streaming);
    }
    if (streaming) stream_fence();
  }

  // Whether a row's scale pass can also sum the next row's squares with the clones' bits.
  static bool summing_next() noexcept {
#if defined(KVBRIDGE_X86_DISPATCH) && defined(KVBRIDGE_HAS_SIMD_CLONES)
    return cpu_runs_v3_clones();
#else
    return false;
#endif
  }

  // Whether rows take two passes, the scale pass scale_row_avx512 (the float32 path of CPUs
  // with AVX-512 the cap allows).
  static bool scales_avx512() noexcept {
#if defined(KVBRIDGE_X86_DISPATCH) && defined(KVBRIDGE_HAS_SIMD_CLONES)
    return cpu_runs_v3_clones() && cpu_has_avx512f();
#else
    return false;
#endif
  }

  // normalize_row with its scale pass scale_row_avx512. Only called where scales_avx512().
  void normalize_row_avx512(const float* row, float* y, bool stream) const noexcept {
    const double inv_rms = row_inverse_rms(row, sum_of_squares_f32(row, cols), cols, eps);
    if (!is_normal_float32(inv_rms)) return scale_row_f64(row, weight, cols, inv_rms, y);
#if defined(KVBRIDGE_X86_DISPATCH) && defined(KVBRIDGE_HAS_SIMD_CLONES)
    scale_row_avx512(row, weight, cols, static_cast<float>(inv_rms), y, stream);
#else
    (void)stream;  // unreachable: scales_avx512() is false
#endif
  }

  // normalize_row for a row whose float32 sum of squares is `sum`; returns the next row's (or
  // 0 without one). `stream`: y's stores go past the cache. Only called
  // where summing_next().
  float normalize_summing_next(const float* row, float sum, float* y, const float* next,
                               bool stream) const noexcept {
    const double inv_rms = row_inverse_rms(row, sum, cols, eps);
    const float* const summed = next == nullptr ? row : next;  // the last row sums itself, unused
    if (!is_normal_float32(inv_rms)) {
      scale_row_f64(row, weight, cols, inv_rms, y);
      return next == nullptr ? 0 : sum_of_squares_f32(next, cols);
    }
#if defined(KVBRIDGE_X86_DISPATCH) && defined(KVBRIDGE_HAS_SIMD_CLONES)
    const float scale = static_cast<float>(inv_rms);
    const float next_sum =
        scale_summing_next<Float32Format>(row, weight, cols, scale, y, summed, stream);
    return next == nullptr ? 0 : next_sum;
#else
    return 0;  // unreachable: summing_next() is false
#endif
  }
};

// x, weight and eps: every check that needs no output.
void check_args(const std::vector<std::int64_t>& x_shape, const FloatArrayView& weight,
                double eps) {
  kernel_paths_cap();  // a bad KVBRIDGE_KERNELS is refused here, before any kernel asks it
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

// A contiguous, aligned float32 copy of weight when it is strided or misaligned (one row:
// negligible).
const float* contiguous_weight(const FloatArrayView& weight, std::vector<float>& copy) {
  if (weight.strides[0] == 1 && is_aligned<float>(weight.data)) return weight.data;
  copy.resize(weight.shape[0]);
  gather_row(weight.data, weight.strides[0], weight.shape[0], copy.data());
  return copy.data();
}

}  // namespace

void check_rmsnorm_out(const FloatArrayView& x, const FloatArrayView& weight, double eps,
                       const float* out, const std::vector<std::int64_t>& out_shape) {
  check_out(x.data, x.shape, x.strides, 4, weight, eps, out, out_shape);
}

namespace {

// The kernels, on arguments already checked.
void run(const FloatArrayView& x, const FloatArrayView& weight, double eps, float* out, Out from) {
  testing::wait_at_gate();  // the GIL tests' proof that this runs without the GIL
  const std::int64_t total = numel(x.shape);
  if (total == 0) return;
  const std::int64_t cols = x.shape.back();
  std::vector<float> weight_copy;
  const float* w = contiguous_weight(weight, weight_copy);
  write_output("float32", out, total * 4, from == Out::kExisting, [&](bool streaming) {
    const RowPlan plan{x, w, total / cols, cols, eps, out, streaming};
    parallel_for(plan.rows, row_grain(cols),
                 [&plan](std::int64_t first, std::int64_t last) { plan.run(first, last); });
  });
}

void run_half(Half format, const HalfArrayView& x, const FloatArrayView& weight, double eps,
              std::uint16_t* out, Out from) {
  testing::wait_at_gate();
  const std::int64_t total = numel(x.shape);
  if (total == 0) return;
  const std::int64_t cols = x.shape.back();
  std::vector<float> weight_copy;
  const float* w = contiguous_weight(weight, weight_copy);
  write_output(format == Half::kBFloat16 ? "bfloat16" : "float16", out, total * 2,
               from == Out::kExisting, [&](bool streaming) {
                 rmsnorm_half_rows(format, x, w, eps, out, total / cols, cols, streaming);
               });
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

KernelPaths parse_kernel_paths(const std::string& text) {
  if (text == "auto" || text == "avx512-bf16") return KernelPaths::kAvx512Bf16;
  if (text == "avx512") return KernelPaths::kAvx512;
  if (text == "avx2") return KernelPaths::kAvx2;
  if (text == "portable") return KernelPaths::kPortable;
  throw std::invalid_argument("KVBRIDGE_KERNELS='" + text +
                              "' is not auto, portable, avx2, avx512 or avx512-bf16");
}

std::string rmsnorm_paths() {
  // float32's clones (simd.hpp): the copy the loader picks is the widest the CPU supports,
  // whatever KVBRIDGE_KERNELS says of the hand-written paths
#if defined(KVBRIDGE_X86_DISPATCH) && defined(KVBRIDGE_HAS_SIMD_CLONES)
  std::string float32 = __builtin_cpu_supports("x86-64-v4")   ? "x86-64-v4 clones"
                        : __builtin_cpu_supports("x86-64-v3") ? "x86-64-v3 clones"
                                                              : "baseline x86-64 clones";
#else
  std::string float32 = "portable (no run-time dispatch)";
#endif
  if (RowPlan::scales_avx512()) {
    float32 += ", each row's scale pass AVX-512";
  } else if (RowPlan::summing_next()) {
    float32 += ", each row's scale pass summing the next row (AVX2)";
  }
  const char* asked = std::getenv("KVBRIDGE_KERNELS");
  const std::string capped =
      asked == nullptr
          ? ""
          : " (hand-written paths capped by KVBRIDGE_KERNELS=" + std::string(asked) + ")";
  return "float32: " + float32 + "; bfloat16: " + half_path(Half::kBFloat16) +
         "; float16: " + half_path(Half::kFloat16) + capped;
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
