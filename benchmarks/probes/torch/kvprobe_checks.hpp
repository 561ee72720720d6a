// torch's typed checks, one per kind: what a user's kernel raises for bad input. Shared by the
// torch probes (an operator, and a pybind11 function in a torch extension) so both ask torch the
// same question.
#pragma once

#include <c10/util/Exception.h>

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
}  // namespace kvprobe
