// torch operators written the plain way (TORCH_LIBRARY with a CPU kernel, as in PyTorch's custom
// operator tutorial), with no translation layer, for probe_semantics.py. Built by
// torch.utils.cpp_extension.load as users build them.
#include <ATen/ATen.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <atomic>

#include "kvbridge/testing.hpp"
#include "kvprobe_checks.hpp"

namespace {
std::atomic<int64_t> live_adopted{0};
const void* adopted_address = nullptr;

// The zero-copy return idiom of a torch op: from_blob over C++ memory, with a deleter.
at::Tensor adopted() {
  auto* data = new int32_t[4]{1, 1, 1, 1};
  adopted_address = data;
  ++live_adopted;
  return at::from_blob(
      data, {4},
      [](void* p) {
        delete[] static_cast<int32_t*>(p);
        --live_adopted;
      },
      at::TensorOptions().dtype(at::kInt));
}

struct Holder : torch::CustomClassHolder {
  int64_t value = 0;
};

at::Tensor scale_cpu(const at::Tensor& t) { return t * 2; }
at::Tensor& add_one_(at::Tensor& t) { return t.add_(1); }
at::Tensor twice_cpu(const at::Tensor& t) { return t * 2; }
}  // namespace

TORCH_LIBRARY(kvprobe, m) {
  m.class_<Holder>("Holder")
      .def(torch::init<>())
      .def("noop", [](const c10::intrusive_ptr<Holder>&) {})
      .def("take_int", [](const c10::intrusive_ptr<Holder>&, int64_t x) { return x; })
      .def("value", [](const c10::intrusive_ptr<Holder>& self) { return self->value; })
      .def("throw_kind", [](const c10::intrusive_ptr<Holder>&, const std::string& k) {
        kvbridge::testing::throw_kind(k);
      });
  m.def("noop() -> ()", [] {});
  m.def("throw_kind(str kind) -> ()",
        [](const std::string& k) { kvbridge::testing::throw_kind(k); });
  m.def("check(str kind) -> ()", &kvprobe::check);
  m.def("take_int(int x) -> int", [](int64_t x) { return x; });
  m.def("wait_for_python(int address, float timeout_s) -> bool",
        &kvbridge::testing::wait_for_python);
  m.def("numel_of(Tensor t) -> int", [](const at::Tensor& t) { return t.numel(); });
  m.def("numel_plus(Tensor t, int x) -> int",
        [](const at::Tensor& t, int64_t x) { return t.numel() + x; });
  m.def("numels_of(Tensor a, Tensor b) -> int",
        [](const at::Tensor& a, const at::Tensor& b) { return a.numel() + b.numel(); });
  // rmsnorm(out=)'s arguments: x, the weight, out, and eps.
  m.def("three_arrays(Tensor x, Tensor w, Tensor out, float eps) -> int",
        [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& out, double eps) {
          return x.numel() + w.numel() + out.numel() + (eps > 0);
        });
  m.def("address_of(Tensor t) -> int",
        [](const at::Tensor& t) { return reinterpret_cast<int64_t>(t.data_ptr()); });
  m.def("second_element(Tensor t) -> int", &kvprobe::second_element);
  m.def("count_eos_of_contiguous(Tensor t, int eos) -> int", &kvprobe::count_eos_of_contiguous);
  // An op that declares its write (Tensor(a!)) and makes it through .contiguous() of a view.
  m.def("fill_contiguous_(Tensor(a!) t) -> ()",
        [](const at::Tensor& t) { t.contiguous().fill_(7); });
  m.def("adopted() -> Tensor", &adopted);
  m.def("adopted_address() -> int",
        [] { return static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(adopted_address)); });
  m.def("live_adopted() -> int", [] { return live_adopted.load(); });
  // Schemas with a CPU kernel and nothing else (no fake kernel, no autograd).
  m.def("scale(Tensor t) -> Tensor");
  // A mutation the schema does not declare (it should read Tensor(a!)).
  m.def("add_one_(Tensor t) -> Tensor");
  m.def("twice(Tensor t) -> Tensor");
  // A composite op: m.def with an implementation registers it for every backend, in terms of
  // other ops (CompositeImplicitAutograd).
  m.def("composite(Tensor t) -> Tensor", [](const at::Tensor& t) { return t * 2 + 1; });
}

TORCH_LIBRARY_IMPL(kvprobe, CPU, m) {
  m.impl("scale", &scale_cpu);
  m.impl("add_one_", &add_one_);
  m.impl("twice", &twice_cpu);
}
