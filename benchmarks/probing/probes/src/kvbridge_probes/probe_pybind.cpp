// pybind11 with its defaults: no custom casters, no GIL release, default return policies.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "kvbridge/testing.hpp"

namespace py = pybind11;

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

PYBIND11_MODULE(probe_pybind, m) {
  m.def("noop", [] {});
  m.def("noop_object", [](const py::object&) {});
  m.def("throw_kind", [](const std::string& kind) { kvbridge::testing::throw_kind(kind); });
  m.def("take_int32", [](std::int32_t x) { return x; });
  m.def("take_int64", [](std::int64_t x) { return x; });
  // py::array_t<T> defaults to forcecast: another dtype or layout is converted silently.
  m.def("array_address",
        [](py::array_t<std::int64_t> a) { return reinterpret_cast<std::uintptr_t>(a.data()); });
  m.def("array_and_int", [](py::array_t<std::int64_t> a, std::int64_t x) {
    return reinterpret_cast<std::uintptr_t>(a.data()) ^ static_cast<std::uintptr_t>(x);
  });
  m.def("arrays_address", [](py::array_t<std::int64_t> a, py::array_t<std::int64_t> b) {
    return reinterpret_cast<std::uintptr_t>(a.data()) ^ reinterpret_cast<std::uintptr_t>(b.data());
  });
  // rmsnorm(out=)'s arguments: x and out 2-D, the weight 1-D, all float32, and eps.
  m.def("three_arrays", [](py::array_t<float> x, py::array_t<float> w, py::array_t<float> out,
                           double eps) {
    return reinterpret_cast<std::uintptr_t>(x.data()) ^ reinterpret_cast<std::uintptr_t>(w.data()) ^
           reinterpret_cast<std::uintptr_t>(out.mutable_data()) ^
           static_cast<std::uintptr_t>(eps > 0);
  });
  // A raw data() loop, as a kernel that forgets strides reads a view (array_t without c_style
  // passes a strided view on as it is).
  m.def("second_element", [](py::array_t<std::int64_t> a) { return a.data()[1]; });
  m.def("wait_for_python", &kvbridge::testing::wait_for_python);
  m.def("returned_vector", [] { return std::vector<std::int32_t>(4, 1); });
  // The chapter's idiom: py::array_t<T, c_style | forcecast> converts whatever it is given.
  m.def("array_address_contiguous",
        [](py::array_t<std::int64_t, py::array::c_style | py::array::forcecast> a) {
          return reinterpret_cast<std::uintptr_t>(a.data());
        });
  m.def("take_vector", [](const std::vector<std::int64_t>& v) { return v.size(); });
  // The zero-copy return idiom: a py::array over C++ memory, owned by a py::capsule.
  m.def("adopted", [] {
    auto* data = new std::int32_t[4]{1, 1, 1, 1};
    g_adopted_address = data;
    ++g_live_adopted;
    py::capsule owner(data, [](void* p) {
      delete[] static_cast<std::int32_t*>(p);
      --g_live_adopted;
    });
    return py::array_t<std::int32_t>({4}, data, owner);
  });
  m.def("adopted_address", [] { return reinterpret_cast<std::uintptr_t>(g_adopted_address); });
  m.def("live_adopted", [] { return g_live_adopted.load(); });
  py::class_<Counters>(m, "Counters").def_readonly("value", &Counters::value);
  py::class_<Owner>(m, "Owner")
      .def(py::init<>())
      .def_readonly("counters", &Owner::counters)  // a property: reference_internal by default
      .def("get_counters", &Owner::get_counters)   // a method returning const&: copied
      .def("counters_ref", &Owner::get_counters, py::return_value_policy::reference)
      .def("bump", [](Owner& o) { ++o.counters.value; })
      .def("noop", [](const Owner&) {})  // the floor for a method: it must load `self`
      .def("take_int64", [](const Owner&, std::int64_t x) { return x; })  // ... and one int
      .def_property_readonly("value", [](const Owner& o) { return o.counters.value; });
  m.def("live_owners", [] { return g_live_owners.load(); });
}
