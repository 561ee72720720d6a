#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness.hpp"
#include "kvbridge/rmsnorm.hpp"

using kvbridge::FloatArrayView;

static std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w,
                                     std::int64_t rows, std::int64_t cols, double eps) {
  std::vector<double> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::int64_t c = 0; c < cols; ++c) ss += double(x[r * cols + c]) * x[r * cols + c];
    const double inv = 1.0 / std::sqrt(ss / cols + eps);
    for (std::int64_t c = 0; c < cols; ++c) y[r * cols + c] = x[r * cols + c] * inv * w[c];
  }
  return y;
}

// Input values over six decades, so that a different order of additions or products rounds
// differently.
static float six_decades(std::size_t i) {
  return static_cast<float>(std::sin(0.3 * i) * std::pow(10.0, static_cast<int>(i % 7) - 3));
}

static bool close(double got, double want) {
  return std::abs(got - want) <= 1e-5 + 1e-5 * std::abs(want);
}

TEST_CASE(matches_reference_serial_and_parallel) {
  for (std::int64_t rows : {3, 512}) {
    const std::int64_t cols = 1027;  // not a multiple of the 32 lanes
    std::vector<float> x(rows * cols), w(cols), y(rows * cols);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * i) * 3;
    for (std::int64_t c = 0; c < cols; ++c) w[c] = 0.5f + c % 7;
    kvbridge::rmsnorm({x.data(), {rows, cols}, {cols, 1}}, {w.data(), {cols}, {1}}, 1e-6, y.data(),
                      {rows, cols});
    const auto want = reference(x, w, rows, cols, 1e-6);
    bool ok = true;
    for (std::size_t i = 0; i < y.size(); ++i) ok = ok && close(y[i], want[i]);
    CHECK(ok);
  }
}

// A contiguous array's rows are normalized in one pass where the CPU allows (each scale pass
// also sums the next row): every row must come out as that row alone does, bit for bit, tails
// (cols not a multiple of the lanes), rows float32 cannot sum and zero rows (eps = 0) included.
TEST_CASE(rows_together_are_rows_alone) {
  for (std::int64_t cols : {1, 33, 300, 4096}) {
    const std::int64_t rows = 64;
    std::vector<float> x(rows * cols), w(cols), y(rows * cols), alone(cols);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = six_decades(i);
    for (std::int64_t c = 0; c < cols; ++c) w[c] = 0.5f + c % 5;
    for (std::int64_t c = 0; c < cols; ++c) {
      x[3 * cols + c] = 0;       // a zero row: its scale is no float32 (eps = 0)
      x[5 * cols + c] = 1e-30f;  // squares float32 cannot hold: summed again in float64
    }
    kvbridge::rmsnorm({x.data(), {rows, cols}, {cols, 1}}, {w.data(), {cols}, {1}}, 0.0, y.data(),
                      {rows, cols});
    bool same = true;
    for (std::int64_t r = 0; r < rows; ++r) {
      kvbridge::rmsnorm({x.data() + r * cols, {1, cols}, {cols, 1}}, {w.data(), {cols}, {1}}, 0.0,
                        alone.data(), {1, cols});
      same = same && std::memcmp(alone.data(), y.data() + r * cols, cols * sizeof(float)) == 0;
    }
    CHECK(same);
  }
}

// float32's bits, written down: the sum of squares in 32 lanes (lane l takes the elements at
// indices l modulo 32, a multiply then an add), the lanes added pairwise (32 -> 16 -> ... -> 1),
// then the tail; the scale 1/sqrt(sum/cols + eps) in float64, rounded to float32; each result
// (x * scale) * w. Every path (the clones, the one-pass loop, the AVX-512 scale pass: ctest runs
// this file once per KVBRIDGE_KERNELS cap) must give exactly these bits, whatever its vectors'
// width, streamed or not.
static std::vector<float> portable_bits(const std::vector<float>& x, const std::vector<float>& w,
                                        std::int64_t rows, std::int64_t cols, double eps) {
  std::vector<float> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * cols;
    float lanes[32] = {};
    std::int64_t i = 0;
    for (; i + 32 <= cols; i += 32) {
      for (int l = 0; l < 32; ++l) {
        const float square = row[i + l] * row[i + l];
        lanes[l] = lanes[l] + square;
      }
    }
    float tail = 0;
    for (; i < cols; ++i) {
      const float square = row[i] * row[i];
      tail = tail + square;
    }
    for (int width = 16; width > 0; width /= 2) {
      for (int l = 0; l < width; ++l) lanes[l] = lanes[l] + lanes[l + width];
    }
    const float sum = lanes[0] + tail;
    const float scale = static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(cols) + eps));
    for (std::int64_t c = 0; c < cols; ++c) {
      const float scaled = row[c] * scale;
      y[r * cols + c] = scaled * w[c];
    }
  }
  return y;
}

TEST_CASE(float32_rows_are_the_portable_bits) {
  // Values over six decades, so that a different order of additions or products rounds
  // differently; 1027 columns: a tail past the lanes, rows starting off a line.
  for (const std::int64_t cols : {1027, 4096}) {
    const std::int64_t rows = 2100;  // 8.6 MB at 1027 columns: large enough to be streamed
    std::vector<float> x(rows * cols), w(cols);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = six_decades(i);
    for (std::int64_t c = 0; c < cols; ++c) w[c] = static_cast<float>(0.5 + std::cos(0.7 * c));
    const auto want = portable_bits(x, w, rows, cols, 1e-6);
    std::vector<float> fresh(x.size()), existing(x.size() + 1);
    const FloatArrayView xv{x.data(), {rows, cols}, {cols, 1}}, wv{w.data(), {cols}, {1}};
    kvbridge::rmsnorm(xv, wv, 1e-6, fresh.data(), {rows, cols}, kvbridge::Out::kFresh);
    kvbridge::rmsnorm(xv, wv, 1e-6, existing.data() + 1, {rows, cols});  // skewed: a head
    CHECK(std::memcmp(fresh.data(), want.data(), want.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(existing.data() + 1, want.data(), want.size() * sizeof(float)) == 0);
  }
}

TEST_CASE(rows_read_wherever_their_arrays_start) {
  // x, the weights and out each start at every float of a 64-byte line, apart (numpy's arrays
  // start 16 bytes past one, a small weight anywhere): every path peels a row's elements before
  // out's first line, so x and the weights are read at every offset from the stores'. Each array
  // sits at the end of an allocation of exactly its size, so that a read past it is one the
  // sanitizer sees.
  const std::int64_t rows = 3, cols = 100;  // 6 lines a row and a tail
  std::vector<float> xs(rows * cols), ws(cols);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = six_decades(i);
  for (std::int64_t c = 0; c < cols; ++c) ws[c] = static_cast<float>(0.5 + std::cos(0.7 * c));
  const auto want = portable_bits(xs, ws, rows, cols, 1e-6);
  auto at_end = [](std::size_t count, int shift) {  // `count` floats, `shift` floats past a line
    void* base = nullptr;
    if (posix_memalign(&base, 64, (shift + count) * sizeof(float)) != 0) std::abort();
    return std::make_pair(base, static_cast<float*>(base) + shift);
  };
  int wrong = 0;
  for (int ox = 0; ox < 16; ++ox) {
    for (int ow = 0; ow < 16; ++ow) {
      for (int oy = 0; oy < 16; oy += 3) {
        auto [xb, x] = at_end(xs.size(), ox);
        auto [wb, w] = at_end(ws.size(), ow);
        auto [yb, y] = at_end(xs.size(), oy);
        std::memcpy(x, xs.data(), xs.size() * 4);
        std::memcpy(w, ws.data(), ws.size() * 4);
        kvbridge::rmsnorm({x, {rows, cols}, {cols, 1}}, {w, {cols}, {1}}, 1e-6, y, {rows, cols});
        wrong += std::memcmp(y, want.data(), want.size() * 4) != 0;
        std::free(xb);
        std::free(wb);
        std::free(yb);
      }
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE(transposed_input) {
  // x is the transpose of a 4x3 row-major buffer: shape (3, 4), strides (1, 3).
  std::vector<float> buf{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, w{1, 1, 1, 1}, y(12);
  kvbridge::rmsnorm({buf.data(), {3, 4}, {1, 3}}, {w.data(), {4}, {1}}, 0.0, y.data(), {3, 4});
  std::vector<float> xt{1, 4, 7, 10, 2, 5, 8, 11, 3, 6, 9, 12};
  const auto want = reference(xt, w, 3, 4, 0.0);
  bool ok = true;
  for (int i = 0; i < 12; ++i) ok = ok && close(y[i], want[i]);
  CHECK(ok);
}

// eps is part of the result, not only of the checks: rows small against eps come out scaled by
// 1/sqrt(mean(x^2) + eps), far from the unit-RMS rows they would be if eps were ignored.
TEST_CASE(eps_changes_the_result) {
  std::vector<float> x(8, 1e-3f), w(8, 1.0f), y(8);
  kvbridge::rmsnorm({x.data(), {8}, {1}}, {w.data(), {8}, {1}}, 1.0, y.data(), {8});
  CHECK(close(y[0], 1e-3 / std::sqrt(1e-6 + 1.0)));
  kvbridge::rmsnorm({x.data(), {8}, {1}}, {w.data(), {8}, {1}}, 0.0, y.data(), {8});
  CHECK(close(y[0], 1.0));
}

TEST_CASE(argument_checks_name_the_value) {
  std::vector<float> x(6), w(3), y(6);
  const FloatArrayView xv{x.data(), {2, 3}, {3, 1}};
  // A fresh output is allocated only once every check has passed.
  int allocations = 0;
  const kvbridge::Allocate<float> allocate = [&](const std::vector<std::int64_t>&) {
    ++allocations;
    return y.data();
  };
  CHECK_THROWS(std::invalid_argument, "0-d",
               kvbridge::rmsnorm({x.data(), {}, {}}, {w.data(), {3}, {1}}, 0, allocate));
  CHECK_THROWS(std::invalid_argument, "length 2, expected x.shape[-1] = 3",
               kvbridge::rmsnorm(xv, {w.data(), {2}, {1}}, 0, allocate));
  CHECK_THROWS(std::invalid_argument, "got -1",
               kvbridge::rmsnorm(xv, {w.data(), {3}, {1}}, -1, allocate));
  CHECK_THROWS(std::invalid_argument, "got nan",
               kvbridge::rmsnorm(xv, {w.data(), {3}, {1}}, NAN, allocate));
  CHECK(allocations == 0);
  kvbridge::rmsnorm(xv, {w.data(), {3}, {1}}, 0, [&](const std::vector<std::int64_t>& shape) {
    CHECK(shape == xv.shape);
    return allocate(shape);
  });
  CHECK(allocations == 1);
  CHECK_THROWS(std::invalid_argument, "out has shape (3, 2), expected (2, 3)",
               kvbridge::rmsnorm(xv, {w.data(), {3}, {1}}, 0, y.data(), {3, 2}));
  CHECK_THROWS(std::invalid_argument, "overlaps",
               kvbridge::rmsnorm(xv, {w.data(), {3}, {1}}, 0, x.data() + 1, {2, 3}));
}

// Every argument error of the float32 checks, for each 16-bit format, allocating and out=: the
// same message, nothing allocated, nothing written.
TEST_CASE(half_argument_checks_name_the_value) {
  for (const auto format : {kvbridge::Half::kBFloat16, kvbridge::Half::kFloat16}) {
    std::vector<std::uint16_t> x(6, 0x3f80), y(6, 0x7e00);
    std::vector<float> w(3, 1.0f);
    const kvbridge::HalfArrayView xv{x.data(), {2, 3}, {3, 1}};
    int allocations = 0;
    const kvbridge::Allocate<std::uint16_t> allocate = [&](const std::vector<std::int64_t>&) {
      ++allocations;
      return y.data();
    };
    const FloatArrayView short_w{w.data(), {2}, {1}}, flat_w{w.data(), {3}, {1}};
    const FloatArrayView square_w{w.data(), {1, 3}, {3, 1}};
    CHECK_THROWS(std::invalid_argument, "0-d",
                 kvbridge::rmsnorm_half(format, {x.data(), {}, {}}, flat_w, 0, allocate));
    CHECK_THROWS(std::invalid_argument, "0-d",
                 kvbridge::rmsnorm_half(format, {x.data(), {}, {}}, flat_w, 0, y.data(), {}));
    for (const bool fresh : {true, false}) {
      const auto call = [&](const FloatArrayView& weight, double eps) {
        if (fresh) {
          kvbridge::rmsnorm_half(format, xv, weight, eps, allocate);
        } else {
          kvbridge::rmsnorm_half(format, xv, weight, eps, y.data(), {2, 3});
        }
      };
      CHECK_THROWS(std::invalid_argument, "length 2, expected x.shape[-1] = 3", call(short_w, 0));
      CHECK_THROWS(std::invalid_argument, "weight must be 1-D, got shape (1, 3)",
                   call(square_w, 0));
      CHECK_THROWS(std::invalid_argument, "got -1", call(flat_w, -1));
      CHECK_THROWS(std::invalid_argument, "got nan", call(flat_w, NAN));
      CHECK_THROWS(std::invalid_argument, "got inf", call(flat_w, INFINITY));
    }
    CHECK(allocations == 0);
    CHECK(y == std::vector<std::uint16_t>(6, 0x7e00));  // nothing written
    CHECK_THROWS(std::invalid_argument, "out has shape (3, 2), expected (2, 3)",
                 kvbridge::rmsnorm_half(format, xv, flat_w, 0, y.data(), {3, 2}));
  }
}

TEST_CASE(backward_matches_finite_differences) {
  const std::int64_t rows = 2, cols = 5;
  std::vector<float> x{0.3f, -1.2f, 2.0f, 0.7f, -0.1f, 1.5f, 0.2f, -0.4f, 0.9f, 1.1f};
  std::vector<float> w{1.0f, 0.5f, -2.0f, 1.5f, 0.25f}, g(rows * cols, 1.0f);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = 0.1f * (i + 1);
  std::vector<float> gx(rows * cols), gw(cols);
  kvbridge::rmsnorm_backward(x.data(), w.data(), g.data(), rows, cols, 1e-6, gx.data(), gw.data());
  auto loss = [&](const std::vector<float>& xs, const std::vector<float>& ws) {
    std::vector<double> y = reference(xs, ws, rows, cols, 1e-6);
    double l = 0;
    for (std::size_t i = 0; i < y.size(); ++i) l += y[i] * g[i];
    return l;
  };
  bool ok = true;
  for (std::size_t i = 0; i < x.size(); ++i) {
    auto hi = x, lo = x;
    hi[i] += 1e-2f;
    lo[i] -= 1e-2f;
    const double fd = (loss(hi, w) - loss(lo, w)) / (double(hi[i]) - lo[i]);
    ok = ok && std::abs(fd - gx[i]) < 2e-3;
  }
  for (std::int64_t c = 0; c < cols; ++c) {
    auto hi = w, lo = w;
    hi[c] += 1e-2f;
    lo[c] -= 1e-2f;
    const double fd = (loss(x, hi) - loss(x, lo)) / (double(hi[c]) - lo[c]);
    ok = ok && std::abs(fd - gw[c]) < 2e-3;
  }
  CHECK(ok);
}

namespace {
std::uint16_t to_bf16(float f) {  // round to nearest even, as the kernel narrows
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
float from_bf16(std::uint16_t h) {
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
std::uint16_t to_fp16(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  std::uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}
float from_fp16(std::uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}
}  // namespace

// 16-bit storage is float32 math: the result is the float32 kernel's on the widened input,
// rounded to the format, bit for bit, for contiguous and transposed inputs alike.
TEST_CASE(half_formats_are_the_float32_kernel_rounded) {
  // Many rows of values over six decades: sums that a different order of additions would round
  // differently (a reordered reduction fails this test; checked).
  const std::int64_t rows = 64, cols = 300;
  for (const auto format : {kvbridge::Half::kBFloat16, kvbridge::Half::kFloat16}) {
    const auto to = format == kvbridge::Half::kBFloat16 ? to_bf16 : to_fp16;
    const auto from = format == kvbridge::Half::kBFloat16 ? from_bf16 : from_fp16;
    std::vector<std::uint16_t> x(rows * cols), y(rows * cols), yt(rows * cols);
    std::vector<float> xf(rows * cols), w(cols, 0.75f), want(rows * cols);
    for (std::size_t i = 0; i < x.size(); ++i) {
      x[i] = to(six_decades(i));
      xf[i] = from(x[i]);
    }
    kvbridge::rmsnorm({xf.data(), {rows, cols}, {cols, 1}}, {w.data(), {cols}, {1}}, 1e-6,
                      want.data(), {rows, cols});
    kvbridge::rmsnorm_half(format, {x.data(), {rows, cols}, {cols, 1}}, {w.data(), {cols}, {1}},
                           1e-6, y.data(), {rows, cols});
    bool same = true;
    for (std::size_t i = 0; i < y.size(); ++i) same = same && y[i] == to(want[i]);
    CHECK(same);
    // The same data as the transpose of a (cols, rows) array: strided rows.
    std::vector<std::uint16_t> xt(rows * cols);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) xt[c * rows + r] = x[r * cols + c];
    }
    kvbridge::rmsnorm_half(format, {xt.data(), {rows, cols}, {1, rows}}, {w.data(), {cols}, {1}},
                           1e-6, yt.data(), {rows, cols});
    CHECK(yt == y);
  }
}

// The AVX512-BF16 instruction flushes subnormals to zero; blocks holding them take the portable
// rounding, so subnormal results are rounded like every other (a weight of 3e-39 makes them).
TEST_CASE(bf16_subnormal_results_are_rounded_not_flushed) {
  const std::int64_t rows = 2, cols = 96;
  std::vector<std::uint16_t> x(rows * cols), y(rows * cols);
  std::vector<float> xf(rows * cols), w(cols), want(rows * cols);
  for (std::int64_t c = 0; c < cols; ++c) w[c] = c % 3 == 0 ? 3e-39f : 1.0f;
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = to_bf16(static_cast<float>(1 + std::cos(0.7 * i)));
    xf[i] = from_bf16(x[i]);
  }
  kvbridge::rmsnorm({xf.data(), {rows, cols}, {cols, 1}}, {w.data(), {cols}, {1}}, 1e-6,
                    want.data(), {rows, cols});
  kvbridge::rmsnorm_half(kvbridge::Half::kBFloat16, {x.data(), {rows, cols}, {cols, 1}},
                         {w.data(), {cols}, {1}}, 1e-6, y.data(), {rows, cols});
  bool same = true, subnormal_seen = false;
  for (std::size_t i = 0; i < y.size(); ++i) {
    same = same && y[i] == to_bf16(want[i]);
    subnormal_seen = subnormal_seen || ((y[i] & 0x7f80) == 0 && (y[i] & 0x7f) != 0);
  }
  CHECK(subnormal_seen);
  CHECK(same);
}

// Whether y (rows x w.size()) is a row of ones times w, each product narrowed to bfloat16 with
// round-to-nearest-even and NaNs kept quiet.
static bool narrowed_as_bf16_should(const std::vector<float>& w, std::int64_t rows,
                                    const std::uint16_t* y) {
  const std::int64_t cols = static_cast<std::int64_t>(w.size());
  bool same = true;
  for (std::int64_t i = 0; i < rows * cols; ++i) {
    volatile float one = 1.0f;
    const float product = one * one * w[i % cols];  // what the kernel narrows: NaNs made quiet
    std::uint32_t bits;
    std::memcpy(&bits, &product, 4);
    const bool nan = (bits & 0x7fffffffu) > 0x7f800000u;
    const std::uint16_t want =
        nan ? static_cast<std::uint16_t>((bits >> 16) | 0x40u) : to_bf16(product);
    same = same && y[i] == want;
  }
  return same;
}

// bfloat16's narrowing, on outputs chosen bit by bit: a row of ones with eps = 0 has a scale of
// exactly 1, so y is the weight. Ties go to even (both ways), NaNs stay NaN and quiet, a value
// past the largest bfloat16 rounds to infinity, subnormals round too; in the vector body and
// the tail alike (69 columns).
TEST_CASE(bf16_narrowing_rounds_ties_to_even_and_keeps_nans) {
  const std::int64_t rows = 6, cols = 69;  // 6: enough rows that the weights are asked once
  // ties on an even and an odd last bit, either sign; NaNs whose rounding would carry into the
  // sign or the exponent; the largest float32; infinity; subnormal ties
  const std::uint32_t chosen[] = {0x3f808000u, 0x3f818000u, 0xbf808000u, 0xbf818000u, 0x7fffffffu,
                                  0xffffffffu, 0x7f80ffffu, 0x7fc00001u, 0x7f7fffffu, 0x7f800000u,
                                  0x00018000u, 0x00028000u, 0x80018000u, 0x3f80ffffu};
  const std::int64_t n = std::size(chosen);
  std::vector<float> w(cols);
  std::uint32_t state = 12345;
  for (std::int64_t c = 0; c < cols; ++c) {
    state = state * 1664525u + 1013904223u;
    // every pattern in the vector body, five of them again in the tail; else a finite value
    const std::uint32_t bits = c < n     ? chosen[c]
                               : c >= 64 ? chosen[(3 * (c - 64) + 1) % n]
                                         : (state & 0xbfffffffu) | 0x00800000u;
    std::memcpy(&w[c], &bits, 4);
  }
  // out on a line and off it: a streamed row writes its elements before its first line one at a
  // time, so on a line is where the patterns reach the vector body's stores.
  std::vector<std::uint16_t> x(rows * cols, to_bf16(1.0f)), padded(rows * cols + 64);
  std::uint16_t* y = padded.data();
  while (reinterpret_cast<std::uintptr_t>(y) % 64 != 0) ++y;
  bool same = true;
  for (const std::int64_t skew : {0, 1, 31}) {
    kvbridge::rmsnorm_half(kvbridge::Half::kBFloat16, {x.data(), {rows, cols}, {cols, 1}},
                           {w.data(), {cols}, {1}}, 0.0, y + skew, {rows, cols});
    same = same && narrowed_as_bf16_should(w, rows, y + skew);
  }
  CHECK(same);
}

// Streamed outputs (ctest's cap runs stream every large out=; auto's first call of a size writes
// it both ways) are written with non-temporal stores (one-pass rows, float32's and the AVX2,
// F16C and AVX512-BF16 16-bit paths', straight from the pass, the row's elements before its
// first line by ordinary stores; the two-pass AVX-512 16-bit rows from the scale pass where a row
// starts on a line, else through a copy in L1 with the rest of the row by memcpy); a fresh output
// is written in place. Both must hold the same bits in every element, with out `skew` elements past
// a line boundary (1: every row has a head and a tail), and out filled with a pattern first so an
// element left unwritten shows.
template <class T, class Run>
static bool streamed_matches_cached(std::int64_t rows, std::int64_t cols, std::int64_t skew, T fill,
                                    Run run) {
  std::vector<T> streamed(rows * cols + 64, fill), cached(rows * cols, fill);
  T* out = streamed.data();
  while (reinterpret_cast<std::uintptr_t>(out) % 64 != 0) ++out;
  out += skew;
  run(out, kvbridge::Out::kExisting);
  run(cached.data(), kvbridge::Out::kFresh);
  return std::memcmp(out, cached.data(), cached.size() * sizeof(T)) == 0;
}

TEST_CASE(streamed_outputs_are_the_cached_outputs) {
  // 8.6 MB of 16-bit output, 17 MB of float32. 1027 columns: most rows start off a line, a few
  // on one; 1024: every row starts on a line when out does.
  for (const std::int64_t cols : {1027, 1024}) {
    const std::int64_t rows = 4200;
    std::vector<float> xf(rows * cols), w(cols);
    for (std::size_t i = 0; i < xf.size(); ++i) xf[i] = static_cast<float>(std::sin(0.37 * i) * 3);
    // Values whose outputs are subnormal, in rows that are otherwise normal: the 16-bit scale
    // passes narrow such blocks separately.
    for (std::size_t i = 5; i < xf.size(); i += 7919) xf[i] = 1e-38f;
    for (std::int64_t c = 0; c < cols; ++c) w[c] = 0.5f + c % 7;
    const FloatArrayView wv{w.data(), {cols}, {1}};
    for (const std::int64_t skew : {0, 1}) {
      CHECK(streamed_matches_cached(rows, cols, skew, -1.0f, [&](float* out, kvbridge::Out from) {
        kvbridge::rmsnorm({xf.data(), {rows, cols}, {cols, 1}}, wv, 1e-6, out, {rows, cols}, from);
      }));
      for (const auto format : {kvbridge::Half::kBFloat16, kvbridge::Half::kFloat16}) {
        const auto to = format == kvbridge::Half::kBFloat16 ? to_bf16 : to_fp16;
        std::vector<std::uint16_t> x(rows * cols);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = to(xf[i]);
        CHECK(streamed_matches_cached(
            rows, cols, skew, std::uint16_t{0xffff}, [&](std::uint16_t* out, kvbridge::Out from) {
              kvbridge::rmsnorm_half(format, {x.data(), {rows, cols}, {cols, 1}}, wv, 1e-6, out,
                                     {rows, cols}, from);
            }));
      }
    }
  }
}

TEST_CASE(half_out_overlap_counts_two_byte_elements) {
  // x and out are the two halves of one buffer: adjacent, not overlapping.
  std::vector<std::uint16_t> buffer(2 * 8, to_bf16(1.0f));
  std::vector<float> w(8, 1.0f);
  kvbridge::rmsnorm_half(kvbridge::Half::kBFloat16, {buffer.data(), {8}, {1}}, {w.data(), {8}, {1}},
                         0.0, buffer.data() + 8, {8});
  CHECK(from_bf16(buffer[8]) == 1.0f);
  CHECK_THROWS(std::invalid_argument, "overlaps",
               kvbridge::rmsnorm_half(kvbridge::Half::kBFloat16, {buffer.data(), {8}, {1}},
                                      {w.data(), {8}, {1}}, 0.0, buffer.data() + 7, {8}));
}

// KVBRIDGE_KERNELS caps the hand-written paths (ctest runs this file once per cap): the paths
// rmsnorm_paths() names are the ones asked for, where the CPU has them, so a run meant for one
// path cannot silently take another.
TEST_CASE(kernel_paths_are_the_ones_asked) {
  CHECK(kvbridge::parse_kernel_paths("auto") == kvbridge::KernelPaths::kAvx512Bf16);
  CHECK(kvbridge::parse_kernel_paths("avx2") == kvbridge::KernelPaths::kAvx2);
  CHECK_THROWS(std::invalid_argument,
               "KVBRIDGE_KERNELS='fast' is not auto, portable, avx2, avx512 or avx512-bf16",
               kvbridge::parse_kernel_paths("fast"));
  const char* env = std::getenv("KVBRIDGE_KERNELS");
  const std::string asked = env == nullptr ? "auto" : env, paths = kvbridge::rmsnorm_paths();
  const auto says = [&](const char* part) { return paths.find(part) != std::string::npos; };
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(KVBRIDGE_NO_SIMD_CLONES)
  const bool v3 = __builtin_cpu_supports("x86-64-v3"), v4 = __builtin_cpu_supports("avx512f");
  if (asked == "portable") {
    CHECK(says("bfloat16: portable") && says("float16: widened") && !says("next row") &&
          !says("pass AVX-512"));
  }
  if (asked == "avx2" && v3) {
    CHECK(says("summing the next row (AVX2); bfloat16: AVX2") && says("float16: F16C") &&
          !says("AVX-512"));
  }
  if (asked == "avx512" && v4) {
    CHECK(says("scale pass AVX-512; bfloat16: AVX2") && says("float16: F16C, each row"));
  }
#endif
  CHECK(says("bfloat16: ") && says("float16: "));
}

HARNESS_MAIN()
