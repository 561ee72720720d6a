// Tensor checks shared by the CPU and CUDA glue: what torch's type system decides (dtypes ->
// TypeError through TORCH_CHECK_TYPE) and the layout the kernels can write (ValueError). Shapes,
// eps and overlap are the core's to check (kvbridge::check_rmsnorm_out), for every device.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>

#include "kvbridge/errors.hpp"

namespace kvbridge_torch {

// Every kernel and op is registered through tagged(): torch 2.13 and 2.14 mapped a standard
// exception out of a kernel to the Python type the contract names, torch 2.15 turns it into
// RuntimeError (seen: torch-torch2150). So what the core throws leaves tagged with its Python
// type (kvbridge::rethrow_tagged) and the front end raises that type on every torch
// (_torch_glue.typed); c10's own typed errors (TORCH_CHECK_TYPE, _VALUE) pass untouched, since
// torch maps those itself.
template <typename F, typename R, typename... A>
auto tagged_as(F f, R (F::*)(A...) const) {
  return [f](A... args) -> R {
    try {
      return f(std::forward<A>(args)...);
    } catch (const c10::Error&) {
      throw;
    } catch (...) {
      kvbridge::rethrow_tagged();
    }
  };
}

template <typename F>
auto tagged(F f) {
  return tagged_as(f, &F::operator());
}

template <typename R, typename... A>
auto tagged(R (*f)(A...)) {
  return tagged([f](A... args) -> R { return f(std::forward<A>(args)...); });
}

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
