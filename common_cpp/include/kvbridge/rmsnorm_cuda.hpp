// RMSNorm on an NVIDIA GPU: plain CUDA with no torch headers, so nvcc can compile-check it on
// any machine and the torch package only adds dispatch glue. Pointers are device pointers; the
// header needs no CUDA include (streams travel as void*).
#pragma once

#include <cstdint>

namespace kvbridge::cuda {

enum class DType { kFloat32, kBFloat16, kFloat16 };

// y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * weight, float32 math.
// x rows are `x_row_stride` elements apart with contiguous columns; weight and y are contiguous.
// Throws std::runtime_error naming the CUDA error if a launch fails.
void rmsnorm_forward(DType dtype, const void* x, std::int64_t x_row_stride, const void* weight,
                     void* y, std::int64_t rows, std::int64_t cols, float eps, void* stream);

// grad_x (dtype, contiguous rows x cols) and grad_weight (float32, cols) from grad_y and x
// (both contiguous rows x cols). `workspace` holds rows floats (the per-row inverse RMS).
void rmsnorm_backward(DType dtype, const void* grad_y, const void* x, const void* weight,
                      void* grad_x, float* grad_weight, float* workspace, std::int64_t rows,
                      std::int64_t cols, float eps, void* stream);

}  // namespace kvbridge::cuda
