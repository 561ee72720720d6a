// pybind11 on a free-threaded Python: the seed pool bound with pybind11's defaults, and with
// py::scoped_critical_section, its per-object lock. Built twice: KVBP_DECLARE declares
// py::mod_gil_not_used(); without it the module declares nothing.
#include <pybind11/critical_section.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "seed_pool.hpp"

namespace py = pybind11;
using kvbp::LockedPool;
using kvbp::SeedPool;

namespace {
template <class Pool, class Class>
void counters(Class& c) {
  c.def_property_readonly("num_free", &Pool::num_free)
      .def_property_readonly("num_blocks", &Pool::num_blocks)
      .def("counters", [](const Pool& p) {
        return py::make_tuple(p.handed_out_twice(), p.allocated(), p.released());
      });
}

void define(py::module_& m) {
  m.def("noop", [] {});
  py::class_<SeedPool> seed(m, "SeedPool");
  seed.def(py::init<std::int32_t>())
      .def("allocate", &SeedPool::allocate)
      .def("release", &SeedPool::release)
      .def("noop", [](const SeedPool&) {})
      .def("take_int64", [](const SeedPool&, std::int64_t x) { return x; });
  counters<SeedPool>(seed);
  py::class_<LockedPool> locked(m, "LockedPool");
  locked.def(py::init<std::int32_t>())
      .def("allocate",
           [](py::object self, std::int32_t n) {
             py::scoped_critical_section guard(self);
             return self.cast<LockedPool&>().allocate(n);
           })
      .def("release", [](py::object self, std::int32_t b) {
        py::scoped_critical_section guard(self);
        self.cast<LockedPool&>().release(b);
      });
  counters<LockedPool>(locked);
}
}  // namespace

#ifdef KVBP_DECLARE
PYBIND11_MODULE(ft_pybind, m, py::mod_gil_not_used()) { define(m); }
#else
PYBIND11_MODULE(ft_pybind_plain, m) { define(m); }
#endif
