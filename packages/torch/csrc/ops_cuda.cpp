// CUDA implementations of the rmsnorm ops: torch-side checks and dispatch only. The kernels are
// plain CUDA in the core (common_cpp/src/rmsnorm_cuda.cu), built when torch has CUDA.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "checks.hpp"
#include "kvbridge/rmsnorm.hpp"
#include "kvbridge/rmsnorm_cuda.hpp"

namespace {

kvbridge::cuda::DType kernel_dtype(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return kvbridge::cuda::DType::kFloat32;
    case at::kBFloat16:
      return kvbridge::cuda::DType::kBFloat16;
    default:
      return kvbridge::cuda::DType::kFloat16;
  }
}

// The kernel reads rows a fixed stride apart with contiguous columns. A tensor whose leading
// dims collapse into one such row dimension is read in place; anything else (a transpose) is
// made contiguous first, and the temporary outlives the kernel's use of its pointer because it
// is returned by value and held by the caller.
at::Tensor as_rows(const at::Tensor& x, int64_t& row_stride) {
  const int64_t nd = x.dim();
  bool rows_uniform = x.stride(nd - 1) == 1;
  for (int64_t d = 0; rows_uniform && d + 2 < nd; ++d) {
    rows_uniform = x.size(d) == 1 || x.stride(d) == x.stride(d + 1) * x.size(d + 1);
  }
  const at::Tensor rows = rows_uniform ? x : x.contiguous();
  row_stride = nd >= 2 ? rows.stride(nd - 2) : rows.size(0);
  if (nd >= 2 && rows.size(nd - 2) == 1) row_stride = rows.size(nd - 1);
  return rows;
}

// The kernel's view of a tensor for the core's checks: device pointers work there too, since the
// overlap check compares addresses in one (unified) address space.
kvbridge::FloatArrayView float_view(const at::Tensor& t) {
  return {static_cast<const float*>(t.const_data_ptr()), t.sizes().vec(), t.strides().vec()};
}

at::Tensor& rmsnorm_out_cuda(const at::Tensor& x, const at::Tensor& weight, double eps,
                             at::Tensor& out) {
  kvbridge_torch::check_rmsnorm_out(x, weight, out);
  TORCH_CHECK_VALUE(x.device() == weight.device() && x.device() == out.device(),
                    "x, weight and out must be on one device, got ", x.device(), ", ",
                    weight.device(), ", ", out.device());
  // The core's checks count elements of 4 bytes; bf16/fp16 extents are then overestimated,
  // which can only refuse an out that sits within 2x of an input's bytes, never accept overlap.
  kvbridge::check_rmsnorm_out(float_view(x), float_view(weight), eps,
                              static_cast<const float*>(out.const_data_ptr()), out.sizes().vec());
  const c10::cuda::CUDAGuard guard(x.device());
  int64_t row_stride = 0;
  const at::Tensor rows = as_rows(x, row_stride);
  const at::Tensor w = weight.to(x.scalar_type()).contiguous();
  const int64_t cols = x.size(-1);
  kvbridge::cuda::rmsnorm_forward(kernel_dtype(x), rows.const_data_ptr(), row_stride,
                                  w.const_data_ptr(), out.mutable_data_ptr(),
                                  cols == 0 ? 0 : x.numel() / cols, cols, static_cast<float>(eps),
                                  c10::cuda::getCurrentCUDAStream().stream());
  return out;
}

at::Tensor rmsnorm_cuda(const at::Tensor& x, const at::Tensor& weight, double eps) {
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  return rmsnorm_out_cuda(x, weight, eps, out);
}

std::tuple<at::Tensor, at::Tensor> rmsnorm_backward_cuda(const at::Tensor& grad,
                                                         const at::Tensor& x,
                                                         const at::Tensor& weight, double eps) {
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xc = x.contiguous(), gc = grad.to(x.scalar_type()).contiguous();
  const at::Tensor wc = weight.to(x.scalar_type()).contiguous();
  const int64_t cols = x.size(-1), rows = cols == 0 ? 0 : x.numel() / cols;
  at::Tensor grad_x = at::empty_like(xc);
  at::Tensor grad_w = at::empty({cols}, x.options().dtype(at::kFloat));
  at::Tensor workspace = at::empty({rows}, x.options().dtype(at::kFloat));
  kvbridge::cuda::rmsnorm_backward(
      kernel_dtype(x), gc.const_data_ptr(), xc.const_data_ptr(), wc.const_data_ptr(),
      grad_x.mutable_data_ptr(), grad_w.mutable_data_ptr<float>(),
      workspace.mutable_data_ptr<float>(), rows, cols, static_cast<float>(eps),
      c10::cuda::getCurrentCUDAStream().stream());
  return std::make_tuple(grad_x, grad_w.to(weight.scalar_type()));
}

}  // namespace

TORCH_LIBRARY_IMPL(kvbridge, CUDA, m) {
  m.impl("rmsnorm", kvbridge_torch::tagged(&rmsnorm_cuda));
  m.impl("rmsnorm.out", kvbridge_torch::tagged(&rmsnorm_out_cuda));
  m.impl("rmsnorm_backward", kvbridge_torch::tagged(&rmsnorm_backward_cuda));
}
