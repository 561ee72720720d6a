// A hand-written pybind11 module next to torch code, as most torch extensions bind their
// functions (PYBIND11_MODULE in a file built by torch.utils.cpp_extension.load), with pybind11's
// defaults. probe_semantics.py builds it; packages/torch/tests checks its exception mapping.
#include <torch/extension.h>

#include "kvbridge/testing.hpp"
#include "kvprobe_checks.hpp"

namespace {
// A name of this module's own: load_inline(functions=["wait_for_python", ...]) binds it by that
// name.
bool wait_for_python(std::int64_t address, double timeout_s) {
  return kvbridge::testing::wait_for_python(address, timeout_s);
}

// load_inline binds these by name too.
using kvprobe::check;
using kvprobe::count_eos_of_contiguous;
using kvprobe::second_element;
}  // namespace

void throw_kind(const std::string& kind) { kvbridge::testing::throw_kind(kind); }
int32_t take_int32(int32_t x) { return x; }
int64_t take_int64(int64_t x) { return x; }
void noop() {}
at::Tensor scale(const at::Tensor& t) { return t * 2; }
// A .contiguous() copy of a view, written to: the view never sees the write.
void fill_contiguous(const at::Tensor& t) { t.contiguous().fill_(7); }

// load_inline(functions=[...]) writes its own module for the functions above: it compiles this
// file with KVPROBE_NO_MODULE.
#ifndef KVPROBE_NO_MODULE
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("throw_kind", &throw_kind);
  m.def("check", &check);
  m.def("take_int32", &take_int32);
  m.def("take_int64", &take_int64);
  m.def("wait_for_python", &wait_for_python);
  m.def("noop", &noop);
  m.def("scale", &scale);
  m.def("fill_contiguous", &fill_contiguous);
  m.def("second_element", &second_element);
  m.def("count_eos_of_contiguous", &count_eos_of_contiguous);
}
#endif
