// The CUDA kernels against the CPU core, for every dtype and a padded (strided) input.
// Without a GPU it prints why and exits 77, which ctest reports as skipped.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "harness.hpp"
#include "kvbridge/rmsnorm.hpp"
#include "kvbridge/rmsnorm_cuda.hpp"

using kvbridge::cuda::DType;

template <class T>
T cast_to(float v);
template <>
float cast_to<float>(float v) {
  return v;
}
template <>
__nv_bfloat16 cast_to<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}
template <>
__half cast_to<__half>(float v) {
  return __float2half(v);
}
float cast_from(float v) { return v; }
float cast_from(__nv_bfloat16 v) { return __bfloat162float(v); }
float cast_from(__half v) { return __half2float(v); }

// Forward on the GPU for a rows x cols input stored with row stride `stride` >= cols.
template <class T>
bool forward_matches(DType dtype, int rows, int cols, int stride, float tol) {
  std::vector<T> x(static_cast<size_t>(rows) * stride), w(cols),
      y(static_cast<size_t>(rows) * cols);
  std::vector<float> xf(static_cast<size_t>(rows) * cols), wf(cols), want(xf.size());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const float v = std::sin(0.1f * (r * cols + c)) * 2;
      x[static_cast<size_t>(r) * stride + c] = cast_to<T>(v);
      xf[static_cast<size_t>(r) * cols + c] = cast_from(cast_to<T>(v));
    }
  for (int c = 0; c < cols; ++c) {
    w[c] = cast_to<T>(0.5f + (c % 5) * 0.25f);
    wf[c] = cast_from(w[c]);
  }
  kvbridge::rmsnorm({xf.data(), {rows, cols}, {cols, 1}}, {wf.data(), {cols}, {1}}, 1e-6,
                    want.data(), {rows, cols});
  T *dx, *dw, *dy;
  cudaMalloc(&dx, x.size() * sizeof(T));
  cudaMalloc(&dw, w.size() * sizeof(T));
  cudaMalloc(&dy, y.size() * sizeof(T));
  cudaMemcpy(dx, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemcpy(dw, w.data(), w.size() * sizeof(T), cudaMemcpyHostToDevice);
  kvbridge::cuda::rmsnorm_forward(dtype, dx, stride, dw, dy, rows, cols, 1e-6f, nullptr);
  cudaMemcpy(y.data(), dy, y.size() * sizeof(T), cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dw);
  cudaFree(dy);
  for (size_t i = 0; i < y.size(); ++i) {
    if (std::abs(cast_from(y[i]) - want[i]) > tol * (1 + std::abs(want[i]))) {
      std::printf("  mismatch at %zu: %f vs %f\n", i, cast_from(y[i]), want[i]);
      return false;
    }
  }
  return true;
}

TEST_CASE(float32_vectorised_and_scalar) {
  CHECK(forward_matches<float>(DType::kFloat32, 37, 4096, 4096, 1e-5f));
  CHECK(forward_matches<float>(DType::kFloat32, 5, 1027, 1030, 1e-5f));  // odd width: scalar path
  CHECK(forward_matches<float>(DType::kFloat32, 3, 64, 96, 1e-5f));      // padded rows
}

TEST_CASE(bfloat16_and_float16) {
  CHECK(forward_matches<__nv_bfloat16>(DType::kBFloat16, 64, 4096, 4096, 1e-2f));
  CHECK(forward_matches<__nv_bfloat16>(DType::kBFloat16, 7, 40000, 40000, 1e-2f));
  CHECK(forward_matches<__half>(DType::kFloat16, 9, 8192, 8200, 2e-3f));
}

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device (the kernel compiled; it runs where a GPU is present)\n");
    return 77;
  }
  return harness::run_all();
}
