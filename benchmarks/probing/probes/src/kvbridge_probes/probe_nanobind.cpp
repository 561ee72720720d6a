// nanobind with its defaults: no translator, no GIL release, default casters and rv_policy.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "kvbridge/testing.hpp"

namespace nb = nanobind;

namespace {
std::atomic<int> g_live_owners{0};
std::atomic<int> g_live_adopted{0};
const void* g_adopted_address = nullptr;
struct Counters {
  std::int64_t value = 0;
};
struct Owner {
  Owner() { ++g_live_owners; }
  ~Owner() { --g_live_owners; }
  Counters counters;
  const Counters& get_counters() const { return counters; }
};
}  // namespace

NB_MODULE(probe_nanobind, m) {
  m.def("noop", [] {});
  m.def("noop_object", [](const nb::object&) {});
  m.def("throw_kind", [](const std::string& kind) { kvbridge::testing::throw_kind(kind); });
  m.def("take_int32", [](std::int32_t x) { return x; });
  m.def("take_int64", [](std::int64_t x) { return x; });
  // The plainest typed array parameter: int64, 1-D, any strides, on the CPU; const, as a user
  // spells a parameter it only reads (a non-const one refuses a read-only array).
  m.def("array_address", [](nb::ndarray<const std::int64_t, nb::ndim<1>, nb::device::cpu> a) {
    return reinterpret_cast<std::uintptr_t>(a.data());
  });
  m.def("array_and_int",
        [](nb::ndarray<const std::int64_t, nb::ndim<1>, nb::device::cpu> a, std::int64_t x) {
          return reinterpret_cast<std::uintptr_t>(a.data()) ^ static_cast<std::uintptr_t>(x);
        });
  m.def("arrays_address", [](nb::ndarray<const std::int64_t, nb::ndim<1>, nb::device::cpu> a,
                             nb::ndarray<const std::int64_t, nb::ndim<1>, nb::device::cpu> b) {
    return reinterpret_cast<std::uintptr_t>(a.data()) ^ reinterpret_cast<std::uintptr_t>(b.data());
  });
  // rmsnorm(out=)'s arguments: x and out 2-D, the weight 1-D, all float32, and eps.
  m.def("three_arrays", [](nb::ndarray<const float, nb::ndim<2>, nb::device::cpu> x,
                           nb::ndarray<const float, nb::ndim<1>, nb::device::cpu> w,
                           nb::ndarray<float, nb::ndim<2>, nb::device::cpu> out, double eps) {
    return reinterpret_cast<std::uintptr_t>(x.data()) ^ reinterpret_cast<std::uintptr_t>(w.data()) ^
           reinterpret_cast<std::uintptr_t>(out.data()) ^ static_cast<std::uintptr_t>(eps > 0);
  });
  // The opt-in for a kernel that needs contiguous memory: nb::c_contig.
  m.def("array_address_contiguous",
        [](nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> a) {
          return reinterpret_cast<std::uintptr_t>(a.data());
        });
  // Any array nanobind can import (numpy, or a torch.Tensor through DLPack): its element count.
  m.def("numel_of", [](nb::ndarray<> a) { return a.size(); });
  // A raw data() loop, as a kernel that forgets strides reads a view (an ndarray without
  // nb::c_contig passes a strided view on as it is).
  m.def("second_element", [](nb::ndarray<const std::int64_t, nb::ndim<1>, nb::device::cpu> a) {
    return a.data()[1];
  });
  m.def("wait_for_python", &kvbridge::testing::wait_for_python);
  m.def("returned_vector", [] { return std::vector<std::int32_t>(4, 1); });
  m.def("take_vector", [](const std::vector<std::int64_t>& v) { return v.size(); });
  // The zero-copy return idiom: an nb::ndarray over C++ memory, owned by an nb::capsule.
  m.def("adopted", [] {
    auto* data = new std::int32_t[4]{1, 1, 1, 1};
    g_adopted_address = data;
    ++g_live_adopted;
    nb::capsule owner(data, [](void* p) noexcept {
      delete[] static_cast<std::int32_t*>(p);
      --g_live_adopted;
    });
    return nb::ndarray<nb::numpy, std::int32_t, nb::ndim<1>>(data, {4}, owner);
  });
  m.def("adopted_address", [] { return reinterpret_cast<std::uintptr_t>(g_adopted_address); });
  m.def("live_adopted", [] { return g_live_adopted.load(); });
  nb::class_<Counters>(m, "Counters").def_ro("value", &Counters::value);
  nb::class_<Owner>(m, "Owner")
      .def(nb::init<>())
      .def_ro("counters", &Owner::counters)       // a property: its default rv_policy
      .def("get_counters", &Owner::get_counters)  // a method returning const&: its default
      .def("counters_ref", &Owner::get_counters, nb::rv_policy::reference)
      .def("bump", [](Owner& o) { ++o.counters.value; })
      .def("noop", [](const Owner&) {})  // the floor for a method: it must load `self`
      .def("take_int64", [](const Owner&, std::int64_t x) { return x; })  // ... and one int
      .def_prop_ro("value", [](const Owner& o) { return o.counters.value; });
  m.def("live_owners", [] { return g_live_owners.load(); });
}
