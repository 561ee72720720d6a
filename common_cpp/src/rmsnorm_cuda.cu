// RMSNorm CUDA kernels. The forward is bandwidth-bound: each row is read from global memory once
// into registers as 16-byte vectors (streaming loads: x is touched once), reduced in the block,
// then scaled and written with streaming stores. Only the weight, reused by every row, is left
// to the caches. Rows whose width or alignment rules out 16-byte vectors take a scalar kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kvbridge/rmsnorm_cuda.hpp"

namespace kvbridge::cuda {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  }
}

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half(v);
}

// Sum over the block; every thread gets the result. `scratch` holds one float per warp.
__device__ float block_sum(float value, float* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(0xffffffff, value, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  value = lane < warps ? scratch[lane] : 0.f;
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(0xffffffff, value, offset);
  return value;
}

// One block per row; each thread keeps kVecs 16-byte vectors of the row in registers.
template <class T, int kVecs>
__global__ void rmsnorm_vec_kernel(const T* __restrict__ x, std::int64_t x_row_stride,
                                   const T* __restrict__ weight, T* __restrict__ y, int cols,
                                   float eps) {
  constexpr int kPerVec = 16 / sizeof(T);
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const int4* xr = reinterpret_cast<const int4*>(x + row * x_row_stride);
  const int4* wr = reinterpret_cast<const int4*>(weight);
  int4* yr = reinterpret_cast<int4*>(y + row * static_cast<std::int64_t>(cols));
  const int num_vecs = cols / kPerVec;

  int4 regs[kVecs];
  float sum_sq = 0.f;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int v = threadIdx.x + i * blockDim.x;
    if (v < num_vecs) {
      regs[i] = __ldcs(xr + v);  // streaming: x is read once
      const T* e = reinterpret_cast<const T*>(&regs[i]);
#pragma unroll
      for (int k = 0; k < kPerVec; ++k) sum_sq += to_float(e[k]) * to_float(e[k]);
    }
  }
  const float scale = rsqrtf(block_sum(sum_sq, scratch) / cols + eps);
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int v = threadIdx.x + i * blockDim.x;
    if (v < num_vecs) {
      const int4 wv = __ldg(wr + v);  // weight: shared by every row, kept in cache
      const T* e = reinterpret_cast<const T*>(&regs[i]);
      const T* we = reinterpret_cast<const T*>(&wv);
      int4 out;
      T* oe = reinterpret_cast<T*>(&out);
#pragma unroll
      for (int k = 0; k < kPerVec; ++k)
        oe[k] = from_float<T>(to_float(e[k]) * scale * to_float(we[k]));
      __stcs(yr + v, out);  // streaming store: y is not read back here
    }
  }
}

// Any width and alignment: two passes over the row (the second mostly from L2).
template <class T>
__global__ void rmsnorm_scalar_kernel(const T* __restrict__ x, std::int64_t x_row_stride,
                                      const T* __restrict__ weight, T* __restrict__ y, int cols,
                                      float eps) {
  __shared__ float scratch[32];
  const T* xr = x + blockIdx.x * x_row_stride;
  T* yr = y + blockIdx.x * static_cast<std::int64_t>(cols);
  float sum_sq = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) sum_sq += to_float(xr[c]) * to_float(xr[c]);
  const float scale = rsqrtf(block_sum(sum_sq, scratch) / cols + eps);
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    yr[c] = from_float<T>(to_float(xr[c]) * scale * to_float(weight[c]));
  }
}

template <class T>
void launch_forward(const T* x, std::int64_t x_row_stride, const T* weight, T* y, std::int64_t rows,
                    std::int64_t cols, float eps, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  if (rows > 2147483647 || cols > 2147483647)
    throw std::invalid_argument("rmsnorm: tensor too large for one launch");
  constexpr int kPerVec = 16 / sizeof(T);
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const bool vectorisable = cols % kPerVec == 0 && x_row_stride % kPerVec == 0 && aligned(x) &&
                            aligned(weight) && aligned(y);
  const int num_vecs = static_cast<int>(cols / kPerVec);
  const dim3 grid(static_cast<unsigned>(rows));
  if (vectorisable && num_vecs <= 8 * 1024) {
    // Enough threads that each holds at most 1, 2, 4 or 8 vectors; fewer than 1024 when rows
    // are short, so small widths don't leave most of a block idle.
    const int vecs_per_thread = num_vecs <= 1024   ? 1
                                : num_vecs <= 2048 ? 2
                                : num_vecs <= 4096 ? 4
                                                   : 8;
    int threads = (num_vecs + vecs_per_thread - 1) / vecs_per_thread;
    threads = ((threads + 31) / 32) * 32;
    switch (vecs_per_thread) {
      case 1:
        rmsnorm_vec_kernel<T, 1>
            <<<grid, threads, 0, stream>>>(x, x_row_stride, weight, y, static_cast<int>(cols), eps);
        break;
      case 2:
        rmsnorm_vec_kernel<T, 2>
            <<<grid, threads, 0, stream>>>(x, x_row_stride, weight, y, static_cast<int>(cols), eps);
        break;
      case 4:
        rmsnorm_vec_kernel<T, 4>
            <<<grid, threads, 0, stream>>>(x, x_row_stride, weight, y, static_cast<int>(cols), eps);
        break;
      default:
        rmsnorm_vec_kernel<T, 8>
            <<<grid, threads, 0, stream>>>(x, x_row_stride, weight, y, static_cast<int>(cols), eps);
        break;
    }
  } else {
    rmsnorm_scalar_kernel<T>
        <<<grid, 256, 0, stream>>>(x, x_row_stride, weight, y, static_cast<int>(cols), eps);
  }
  check(cudaGetLastError(), "rmsnorm forward launch");
}

// Backward, pass 1 (one block per row): inv_rms[r], then
//   grad_x = inv_rms * g * w - inv_rms^3 / cols * x * sum(g * w * x).
template <class T>
__global__ void rmsnorm_backward_rows(const T* __restrict__ g, const T* __restrict__ x,
                                      const T* __restrict__ w, T* __restrict__ grad_x,
                                      float* __restrict__ inv_rms_out, int cols, float eps) {
  __shared__ float scratch[32];
  const std::int64_t base = blockIdx.x * static_cast<std::int64_t>(cols);
  float sum_sq = 0.f, dot = 0.f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float xv = to_float(x[base + c]);
    sum_sq += xv * xv;
    dot += to_float(g[base + c]) * to_float(w[c]) * xv;
  }
  sum_sq = block_sum(sum_sq, scratch);
  __syncthreads();  // scratch is reused by the second reduction
  dot = block_sum(dot, scratch);
  const float inv_rms = rsqrtf(sum_sq / cols + eps);
  const float coeff = inv_rms * inv_rms * inv_rms * dot / cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    const float xv = to_float(x[base + c]);
    grad_x[base + c] = from_float<T>(inv_rms * to_float(g[base + c]) * to_float(w[c]) - coeff * xv);
  }
  if (threadIdx.x == 0) inv_rms_out[blockIdx.x] = inv_rms;
}

// Backward, pass 2: grad_w[c] = sum over rows of g * x * inv_rms, one thread per column
// (neighbouring threads read neighbouring columns: coalesced).
template <class T>
__global__ void rmsnorm_backward_weight(const T* __restrict__ g, const T* __restrict__ x,
                                        const float* __restrict__ inv_rms,
                                        float* __restrict__ grad_w, std::int64_t rows, int cols) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float acc = 0.f;
  for (std::int64_t r = 0; r < rows; ++r) {
    acc += to_float(g[r * cols + c]) * to_float(x[r * cols + c]) * inv_rms[r];
  }
  grad_w[c] = acc;
}

template <class T>
void launch_backward(const T* g, const T* x, const T* w, T* grad_x, float* grad_w, float* workspace,
                     std::int64_t rows, std::int64_t cols, float eps, cudaStream_t stream) {
  if (cols == 0) return;
  if (rows > 0) {
    rmsnorm_backward_rows<T><<<static_cast<unsigned>(rows), 256, 0, stream>>>(
        g, x, w, grad_x, workspace, static_cast<int>(cols), eps);
    check(cudaGetLastError(), "rmsnorm backward launch");
  }
  rmsnorm_backward_weight<T><<<static_cast<unsigned>((cols + 255) / 256), 256, 0, stream>>>(
      g, x, workspace, grad_w, rows, static_cast<int>(cols));
  check(cudaGetLastError(), "rmsnorm backward (weight) launch");
}

}  // namespace

void rmsnorm_forward(DType dtype, const void* x, std::int64_t x_row_stride, const void* weight,
                     void* y, std::int64_t rows, std::int64_t cols, float eps, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DType::kFloat32:
      return launch_forward(static_cast<const float*>(x), x_row_stride,
                            static_cast<const float*>(weight), static_cast<float*>(y), rows, cols,
                            eps, s);
    case DType::kBFloat16:
      return launch_forward(static_cast<const __nv_bfloat16*>(x), x_row_stride,
                            static_cast<const __nv_bfloat16*>(weight),
                            static_cast<__nv_bfloat16*>(y), rows, cols, eps, s);
    case DType::kFloat16:
      return launch_forward(static_cast<const __half*>(x), x_row_stride,
                            static_cast<const __half*>(weight), static_cast<__half*>(y), rows, cols,
                            eps, s);
  }
}

void rmsnorm_backward(DType dtype, const void* grad_y, const void* x, const void* weight,
                      void* grad_x, float* grad_weight, float* workspace, std::int64_t rows,
                      std::int64_t cols, float eps, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DType::kFloat32:
      return launch_backward(static_cast<const float*>(grad_y), static_cast<const float*>(x),
                             static_cast<const float*>(weight), static_cast<float*>(grad_x),
                             grad_weight, workspace, rows, cols, eps, s);
    case DType::kBFloat16:
      return launch_backward(
          static_cast<const __nv_bfloat16*>(grad_y), static_cast<const __nv_bfloat16*>(x),
          static_cast<const __nv_bfloat16*>(weight), static_cast<__nv_bfloat16*>(grad_x),
          grad_weight, workspace, rows, cols, eps, s);
    case DType::kFloat16:
      return launch_backward(static_cast<const __half*>(grad_y), static_cast<const __half*>(x),
                             static_cast<const __half*>(weight), static_cast<__half*>(grad_x),
                             grad_weight, workspace, rows, cols, eps, s);
  }
}

}  // namespace kvbridge::cuda
