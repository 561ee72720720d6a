// Tensor checks shared by the CPU and CUDA glue: what torch's type system decides (dtypes ->
// TypeError through TORCH_CHECK_TYPE) and the layout the kernels can write (ValueError). Shapes,
// eps and overlap are the core's to check (kvbridge::check_rmsnorm_out), for every device.
#pragma once

#include <ATen/ATen.h>

#include <string>

namespace kvbridge_torch {

// "torch.float64": dtypes named as Python prints them, so messages match the numpy packages'.
inline std::string dtype_name(const at::Tensor& t) {
  return std::string("torch.") + std::string(c10::getDtypeNames(t.scalar_type()).first);
}

inline void check_float_tensor(const at::Tensor& t, const char* name) {
  TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16 ||
                       t.scalar_type() == at::kHalf,
                   name, " must be float32, bfloat16 or float16, got ", dtype_name(t));
}

inline void check_rmsnorm_out(const at::Tensor& x, const at::Tensor& weight,
                              const at::Tensor& out) {
  check_float_tensor(x, "x");
  check_float_tensor(weight, "weight");
  TORCH_CHECK_TYPE(out.scalar_type() == x.scalar_type(), "out must be ", dtype_name(x), ", got ",
                   dtype_name(out));
  TORCH_CHECK_VALUE(out.is_contiguous(), "out must be a writeable C-contiguous array");
}

}  // namespace kvbridge_torch
