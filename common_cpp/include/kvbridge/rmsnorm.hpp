// RMSNorm: y = x / sqrt(mean(x^2 over the last dim) + eps) * weight, float32 in and out. Each
// row's sum of squares is accumulated in float32 over 32 independent lanes (vectorisable), and
// again in float64 for the rare rows where float32 overflowed or underflowed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kvbridge {

// A strided float32 array as every binding can describe it: strides are in elements and may be
// negative (numpy's [::-1]) or permuted (transposes).
struct FloatArrayView {
  const float* data;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

// Fused forward. Checks everything that does not depend on the binding's type system, with
// messages that name the value, once per call: x.ndim >= 1, weight 1-D of length x.shape[-1],
// eps finite and >= 0 (std::invalid_argument); out_shape equal to x.shape (std::invalid_argument);
// out not overlapping x or weight (std::invalid_argument). `out` is contiguous, allocated by the
// caller. Each row is read from memory once (its sum of squares keeps it in cache for the scale
// pass, which on x86-64-v3 CPUs also sums the next row's squares); large inputs run rows in
// parallel on the core's thread pool (threads.hpp).
//
// `from` says where out comes from, which decides how a large output is stored. An existing
// buffer (out=) is written with non-temporal stores: a normal store would first read each line
// from memory. A buffer the binding has just allocated is written normally: the first write to
// each fresh page faults it in zeroed and cached, and streaming past the cache would throw away
// the lines the kernel just filled (commit messages have the measurements).
enum class Out { kExisting, kFresh };
void rmsnorm(const FloatArrayView& x, const FloatArrayView& weight, double eps, float* out,
             const std::vector<std::int64_t>& out_shape, Out from = Out::kExisting);

// The same into a fresh output: `allocate(shape)` is called once, after every argument check has
// passed, with x's shape, and returns the contiguous memory the kernel then writes (Out::kFresh).
// So a binding allocates only for arguments the core accepts, and checks none of them itself. A
// binding that holds the GIL may release it inside `allocate`, once its array exists: the core
// touches no Python object.
template <class T>
using Allocate = std::function<T*(const std::vector<std::int64_t>& shape)>;
void rmsnorm(const FloatArrayView& x, const FloatArrayView& weight, double eps,
             const Allocate<float>& allocate);

// Every check rmsnorm() makes, without computing: the arguments, out's shape, and out's bytes
// overlapping neither input. The CUDA glue calls it with device pointers (one address space).
void check_rmsnorm_out(const FloatArrayView& x, const FloatArrayView& weight, double eps,
                       const float* out, const std::vector<std::int64_t>& out_shape);

// 16-bit float storage with float32 math (the torch package's bfloat16 and float16 on the CPU):
// the same checks and row math as rmsnorm(), bit for bit, rounded to nearest even on the way
// out. bfloat16 is widened in registers as it is read, and float16 too where the CPU has F16C
// (x86-64-v3 and later), so x is read from memory once; elsewhere, and for the rare row that
// float32 cannot sum (tiny or huge values), a row is widened into a scratch row first.
enum class Half { kBFloat16, kFloat16 };
struct HalfArrayView {
  const std::uint16_t* data;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // in elements
};
void rmsnorm_half(Half format, const HalfArrayView& x, const FloatArrayView& weight, double eps,
                  std::uint16_t* out, const std::vector<std::int64_t>& out_shape,
                  Out from = Out::kExisting);
void rmsnorm_half(Half format, const HalfArrayView& x, const FloatArrayView& weight, double eps,
                  const Allocate<std::uint16_t>& allocate);

// The hand-written kernel paths, narrowest first. KVBRIDGE_KERNELS caps them for the process
// (read once, at the first kernel call): "auto" (the default: the widest this CPU runs),
// "portable", "avx2" (with F16C), "avx512" or "avx512-bf16"; a cap above the CPU is the CPU's.
// So every path a CPU can run can be tested on it, and compared bit for bit with the portable
// one (ctest runs the kernels' tests once per cap). The compiler's clones (simd.hpp) follow the
// CPU whatever the cap. Any other value is std::invalid_argument naming it, at that call.
enum class KernelPaths { kPortable, kAvx2, kAvx512, kAvx512Bf16 };
KernelPaths parse_kernel_paths(const std::string& text);

// The paths the forward kernels take on this machine, as the same checks that choose them
// answer (for a contiguous row; the benchmarks' page quotes it), e.g. "float32: x86-64-v3
// clones, each row's scale pass summing the next row (AVX2); bfloat16: AVX2; float16: F16C".
std::string rmsnorm_paths();

// Backward of rmsnorm for contiguous float32 x, weight and grad_y ([rows, cols]).
// grad_x is [rows, cols]; grad_weight is [cols] (summed over rows). Either may be null.
void rmsnorm_backward(const float* x, const float* weight, const float* grad_y, std::int64_t rows,
                      std::int64_t cols, double eps, float* grad_x, float* grad_weight);

}  // namespace kvbridge
