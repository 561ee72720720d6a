// torch operators written the plain way on the LibTorch stable ABI (STABLE_TORCH_LIBRARY with
// TORCH_BOX, as PyTorch's stable-ABI custom-op tutorial writes them), with no translation layer,
// for probe_semantics.py. Built by torch.utils.cpp_extension.load as users build them, with
// TORCH_TARGET_VERSION at 2.11 (ask_torch.py). There are no custom classes on the stable ABI: an
// object crosses as a handle, and the plain handle is the object's address as an int.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "kvbridge/testing.hpp"

namespace {
using torch::stable::Tensor;

std::atomic<int64_t> live_adopted{0};
const void* adopted_address_ = nullptr;

void noop() {}
void throw_kind(std::string kind) { kvbridge::testing::throw_kind(kind); }
// The stable ABI's one check macro (no typed TORCH_CHECK_VALUE, _INDEX, _TYPE there).
void check(std::string kind) { STD_TORCH_CHECK(kind != "TORCH_CHECK", "STD_TORCH_CHECK failed"); }
int64_t take_int(int64_t x) { return x; }
std::int64_t wait_for_python(std::int64_t address, double timeout_s) {
  return kvbridge::testing::wait_for_python(address, timeout_s);
}
int64_t numel_of(Tensor t) { return t.numel(); }
int64_t numels_of(Tensor a, Tensor b) { return a.numel() + b.numel(); }
int64_t numel_plus(Tensor t, int64_t x) { return t.numel() + x; }
// rmsnorm(out=)'s arguments: x, the weight, out, and eps.
int64_t three_arrays(Tensor x, Tensor w, Tensor out, double eps) {
  return x.numel() + w.numel() + out.numel() + (eps > 0);
}
int64_t address_of(Tensor t) { return reinterpret_cast<int64_t>(t.data_ptr()); }
// A raw data-pointer loop, through the stable ABI's typed accessor.
int64_t second_element(Tensor t) { return t.const_data_ptr<int64_t>()[1]; }
// A dense copy held by name while the loop reads it (kvprobe_checks.hpp says why by name).
int64_t count_eos_of_contiguous(Tensor t, int64_t eos) {
  const Tensor dense = torch::stable::contiguous(t);
  const int64_t* data = dense.const_data_ptr<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < dense.numel(); ++i) count += data[i] == eos;
  return count;
}
void fill_contiguous_(Tensor t) { torch::stable::fill_(torch::stable::contiguous(t), 7.0); }

// The zero-copy return idiom: from_blob over C++ memory, with a deleter (stable from 2.11).
Tensor adopted() {
  auto* data = new int32_t[4]{1, 1, 1, 1};
  adopted_address_ = data;
  ++live_adopted;
  const std::vector<int64_t> sizes{4}, strides{1};
  return torch::stable::from_blob(data, sizes, strides,
                                  torch::stable::Device(torch::headeronly::kCPU),
                                  torch::headeronly::ScalarType::Int, [](void* p) {
                                    delete[] static_cast<int32_t*>(p);
                                    --live_adopted;
                                  });
}
int64_t adopted_address() { return reinterpret_cast<int64_t>(adopted_address_); }
int64_t get_live_adopted() { return live_adopted.load(); }

// An object behind a handle: its address, as a user passes one through an int schema.
struct Counter {
  int64_t value = 41;
};
int64_t counter_create() { return reinterpret_cast<int64_t>(new Counter()); }
void counter_destroy(int64_t handle) { delete reinterpret_cast<Counter*>(handle); }
int64_t counter_value(int64_t handle) { return reinterpret_cast<Counter*>(handle)->value; }
void counter_noop(int64_t) {}
int64_t counter_take_int(int64_t, int64_t x) { return x; }

Tensor scale(Tensor t) {
  Tensor out = torch::stable::empty_like(t);
  torch::stable::copy_(out, t);
  return out;
}
}  // namespace

STABLE_TORCH_LIBRARY(kvprobe_stable, m) {
  m.def("noop() -> ()");
  m.def("throw_kind(str kind) -> ()");
  m.def("check(str kind) -> ()");
  m.def("take_int(int x) -> int");
  m.def("wait_for_python(int address, float timeout_s) -> int");
  m.def("numel_of(Tensor t) -> int");
  m.def("numels_of(Tensor a, Tensor b) -> int");
  m.def("numel_plus(Tensor t, int x) -> int");
  m.def("three_arrays(Tensor x, Tensor w, Tensor out, float eps) -> int");
  m.def("address_of(Tensor t) -> int");
  m.def("second_element(Tensor t) -> int");
  m.def("count_eos_of_contiguous(Tensor t, int eos) -> int");
  m.def("fill_contiguous_(Tensor(a!) t) -> ()");
  m.def("adopted() -> Tensor");
  m.def("adopted_address() -> int");
  m.def("live_adopted() -> int");
  m.def("counter_create() -> int");
  m.def("counter_destroy(int handle) -> ()");
  m.def("counter_value(int handle) -> int");
  m.def("counter_noop(int handle) -> ()");
  m.def("counter_take_int(int handle, int x) -> int");
  m.def("scale(Tensor t) -> Tensor");
}

// As the tutorial registers them: ops with no tensor for every key, tensor ops for the CPU.
STABLE_TORCH_LIBRARY_IMPL(kvprobe_stable, CompositeExplicitAutograd, m) {
  m.impl("noop", TORCH_BOX(&noop));
  m.impl("throw_kind", TORCH_BOX(&throw_kind));
  m.impl("check", TORCH_BOX(&check));
  m.impl("take_int", TORCH_BOX(&take_int));
  m.impl("wait_for_python", TORCH_BOX(&wait_for_python));
  m.impl("adopted", TORCH_BOX(&adopted));
  m.impl("adopted_address", TORCH_BOX(&adopted_address));
  m.impl("live_adopted", TORCH_BOX(&get_live_adopted));
  m.impl("counter_create", TORCH_BOX(&counter_create));
  m.impl("counter_destroy", TORCH_BOX(&counter_destroy));
  m.impl("counter_value", TORCH_BOX(&counter_value));
  m.impl("counter_noop", TORCH_BOX(&counter_noop));
  m.impl("counter_take_int", TORCH_BOX(&counter_take_int));
}

STABLE_TORCH_LIBRARY_IMPL(kvprobe_stable, CPU, m) {
  m.impl("numel_of", TORCH_BOX(&numel_of));
  m.impl("numels_of", TORCH_BOX(&numels_of));
  m.impl("numel_plus", TORCH_BOX(&numel_plus));
  m.impl("three_arrays", TORCH_BOX(&three_arrays));
  m.impl("address_of", TORCH_BOX(&address_of));
  m.impl("second_element", TORCH_BOX(&second_element));
  m.impl("count_eos_of_contiguous", TORCH_BOX(&count_eos_of_contiguous));
  m.impl("fill_contiguous_", TORCH_BOX(&fill_contiguous_));
  m.impl("scale", TORCH_BOX(&scale));
}
