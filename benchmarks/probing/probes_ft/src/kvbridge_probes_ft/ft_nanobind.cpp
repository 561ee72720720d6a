// nanobind on a free-threaded Python: the seed pool bound with nanobind's defaults, and with
// nb::lock_self(), its per-object lock. Built twice: nanobind_add_module(... FREE_THREADED)
// declares the module free-threaded; without it the module declares nothing.
#include <nanobind/nanobind.h>
#include <nanobind/stl/vector.h>

#include "seed_pool.hpp"

namespace nb = nanobind;
using kvbp::LockedPool;
using kvbp::SeedPool;

namespace {
template <class Pool, class Class>
void counters(Class& c) {
  c.def_prop_ro("num_free", &Pool::num_free)
      .def_prop_ro("num_blocks", &Pool::num_blocks)
      .def("counters", [](const Pool& p) {
        return nb::make_tuple(p.handed_out_twice(), p.allocated(), p.released());
      });
}

void define(nb::module_& m) {
  m.def("noop", [] {});
  nb::class_<SeedPool> seed(m, "SeedPool");
  seed.def(nb::init<std::int32_t>())
      .def("allocate", &SeedPool::allocate)
      .def("release", &SeedPool::release)
      .def("noop", [](const SeedPool&) {})
      .def("take_int64", [](const SeedPool&, std::int64_t x) { return x; });
  counters<SeedPool>(seed);
  nb::class_<LockedPool> locked(m, "LockedPool");
  locked.def(nb::init<std::int32_t>())
      .def("allocate", &LockedPool::allocate, nb::lock_self())
      .def("release", &LockedPool::release, nb::lock_self());
  counters<LockedPool>(locked);
}
}  // namespace

NB_MODULE(KVBP_MODULE, m) { define(m); }
