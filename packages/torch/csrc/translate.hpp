// Shared by the CPU and CUDA glue: exception translation and dtype checks.
//
// torch turns a std::exception thrown by an op into RuntimeError, and has no OverflowError or
// MemoryError of its own, so `translated` rethrows core exceptions as c10's typed errors where
// one exists (ValueError, IndexError) and otherwise tags the message with the contract's Python
// type, which ops.py turns back into that type with the message unchanged.
#pragma once

#include <ATen/ATen.h>

#include <new>
#include <stdexcept>
#include <string>

namespace kvbridge_torch {

[[noreturn]] inline void throw_tagged(const char* python_type, const std::string& message) {
  TORCH_CHECK(false, "[kvbridge:", python_type, "] ", message);
  throw std::logic_error("unreachable");  // TORCH_CHECK(false) always throws
}

[[noreturn]] inline void throw_value_error(const char* message) {
  TORCH_CHECK_VALUE(false, message);
  throw std::logic_error("unreachable");  // TORCH_CHECK_VALUE(false) always throws
}

[[noreturn]] inline void throw_index_error(const char* message) {
  TORCH_CHECK_INDEX(false, message);
  throw std::logic_error("unreachable");
}

template <class F>
auto translated(F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const c10::Error&) {
    throw;  // already a torch error (e.g. from a TORCH_CHECK_TYPE below)
  } catch (const std::bad_alloc& e) {
    throw_tagged("MemoryError", e.what());
  } catch (const std::invalid_argument& e) {
    throw_value_error(e.what());
  } catch (const std::domain_error& e) {
    throw_value_error(e.what());
  } catch (const std::length_error& e) {
    throw_value_error(e.what());
  } catch (const std::out_of_range& e) {
    throw_index_error(e.what());
  } catch (const std::range_error& e) {
    throw_value_error(e.what());
  } catch (const std::overflow_error& e) {
    throw_tagged("OverflowError", e.what());
  } catch (const std::exception& e) {
    throw_tagged("RuntimeError", e.what());
  } catch (...) {
    throw_tagged("RuntimeError", "Caught an unknown exception!");
  }
}

inline void check_float_tensor(const at::Tensor& t, const char* name) {
  TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16 ||
                       t.scalar_type() == at::kHalf,
                   name, " must be float32, bfloat16 or float16, got ", t.scalar_type());
}

// The checks rmsnorm.out shares on every device: dtypes torch's type system decides (TypeError)
// and an output layout the kernels can write (ValueError). Shapes are the core's to check.
inline void check_rmsnorm_out(const at::Tensor& x, const at::Tensor& weight,
                              const at::Tensor& out) {
  check_float_tensor(x, "x");
  check_float_tensor(weight, "weight");
  TORCH_CHECK_TYPE(out.scalar_type() == x.scalar_type(), "out must be ", x.scalar_type(), ", got ",
                   out.scalar_type());
  TORCH_CHECK_VALUE(out.is_contiguous(), "out must be a contiguous tensor");
}

}  // namespace kvbridge_torch
