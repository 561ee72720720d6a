// torch's typed checks, one per kind: what a user's kernel raises for bad input, and the two
// array kernels as a torch extension writes them. Shared by the torch probes (an operator, and
// a pybind11 function in a torch extension) so both ask torch the same question.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <string>

namespace kvprobe {
inline void check(const std::string& kind) {
  if (kind == "TORCH_CHECK") TORCH_CHECK(false, "TORCH_CHECK failed");
  if (kind == "TORCH_CHECK_VALUE") TORCH_CHECK_VALUE(false, "TORCH_CHECK_VALUE failed");
  if (kind == "TORCH_CHECK_INDEX") TORCH_CHECK_INDEX(false, "TORCH_CHECK_INDEX failed");
  if (kind == "TORCH_CHECK_TYPE") TORCH_CHECK_TYPE(false, "TORCH_CHECK_TYPE failed");
  if (kind == "TORCH_CHECK_NOT_IMPLEMENTED") {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "TORCH_CHECK_NOT_IMPLEMENTED failed");
  }
}

// A raw data_ptr loop, as a kernel that forgets strides reads a view.
inline int64_t second_element(const at::Tensor& t) { return t.data_ptr<int64_t>()[1]; }

// The idiom a torch extension writes for a kernel that needs dense memory: contiguous() copies a
// strided view, and the copy is held by name while the loop reads it. (Taking data_ptr from the
// unnamed temporary frees the copy at the end of that statement: a C++ lifetime error under
// any binding, not a property of torch.)
inline int64_t count_eos_of_contiguous(const at::Tensor& t, int64_t eos) {
  const at::Tensor dense = t.contiguous();
  const int64_t* data = dense.data_ptr<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < dense.numel(); ++i) count += data[i] == eos;
  return count;
}
}  // namespace kvprobe
