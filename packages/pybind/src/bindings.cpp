// kvbridge_pybind._core: the pybind11 binding of the kvbridge core.
//
// Reads as a table of what is exposed; the argument rules are packages/args/args.hpp's (who
// shares them: packages/registry.json's `shares`). pybind11 defaults that differ from
// docs/contract.md, and how this file handles them:
//  - an int that overflows is a TypeError by default, and a bool or a 0-d array passes as a
//    number: `Int64` and `Eps` casters apply the contract's rules (args.hpp) instead, and raise
//    its exception rather than pybind11's generic "incompatible function arguments";
//  - py::array_t's forcecast copies silently: arrays come in as objects and are read through
//    the buffer protocol by args.hpp (int32/int64 read in place, other integer dtypes
//    converted);
//  - the GIL is held by default: the kernels release it with gil_scoped_release, after every
//    Python object they need has been read;
//  - `stats` returns a reference into the pool: reference_internal keeps the pool alive;
//  - on a free-threaded Python every call through `kv.<function>` writes the function's reference
//    count, shared by all calling threads: the module's functions are made immortal at import
//    (packages/args/immortal.hpp). pybind11's dispatcher also takes its internals lock on every
//    call (pybind11 3.x); nothing short of leaving pybind11's dispatcher avoids that.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "args.hpp"
#include "immortal.hpp"
#include "kvbridge/kvbridge.hpp"
#include "kvbridge/testing.hpp"
#include "rmsnorm_call.hpp"

namespace py = pybind11;
using namespace pybind11::literals;
namespace args = kvbridge::args;

namespace {

// The one line pybind11 changes in every rule: a failed check has set the Python error.
void check(bool ok) {
  if (!ok) throw py::error_already_set();
}

struct Int64 {
  std::int64_t value = 0;
};
struct Eps {
  double value = 0;
};

}  // namespace

namespace pybind11::detail {
// Throwing (rather than returning false) gives the contract's exception and message instead of
// pybind11's generic "incompatible function arguments" TypeError.
template <>
struct type_caster<Int64> {
  PYBIND11_TYPE_CASTER(Int64, const_name("int"));
  bool load(handle src, bool /*convert*/) {
    check(kvbridge::args::as_int64(src.ptr(), &value.value));
    return true;
  }
};
template <>
struct type_caster<Eps> {
  PYBIND11_TYPE_CASTER(Eps, const_name("float"));
  bool load(handle src, bool /*convert*/) {
    check(kvbridge::args::as_eps(src.ptr(), &value.value));
    return true;
  }
};
}  // namespace pybind11::detail

namespace {

// --- functions -------------------------------------------------------------------------------

std::int64_t common_prefix(py::handle a, py::handle b) {
  args::Tokens ta, tb;
  check(args::to_tokens(a.ptr(), "a", false, ta) && args::to_tokens(b.ptr(), "b", false, tb));
  py::gil_scoped_release release;
  return kvbridge::common_prefix(ta.view, tb.view);
}

std::int64_t count_eos(py::handle tokens, Int64 eos) {
  args::Tokens input;
  check(args::to_tokens(tokens.ptr(), "tokens", true, input));
  py::gil_scoped_release release;
  return kvbridge::count_eos(input.view, eos.value);
}

py::array rmsnorm(py::handle x, py::handle weight, Eps eps, py::handle out) {
  PyObject* result = args::rmsnorm(x.ptr(), weight.ptr(), eps.value, out.ptr());
  check(result != nullptr);
  return py::reinterpret_steal<py::array>(result);
}

// Adopts a C++ buffer without copying: the capsule owns it and deletes it exactly once, when the
// last array over it dies.
py::array adopt(std::unique_ptr<kvbridge::Buffer<std::int32_t>> buffer) {
  auto* raw = buffer.get();
  py::capsule owner(raw, [](void* p) { delete static_cast<kvbridge::Buffer<std::int32_t>*>(p); });
  buffer.release();  // the capsule owns it now
  return py::array_t<std::int32_t>({static_cast<py::ssize_t>(raw->size())}, raw->data(), owner);
}

std::vector<std::int64_t> to_counts(py::handle counts) {
  std::vector<std::int64_t> out;
  check(args::to_counts(counts.ptr(), out));
  return out;
}

}  // namespace

// --- the module: BlockPool, functions, threads, _testing -------------------------------------

// mod_gil_not_used: the module declares it runs without the GIL, so importing it on a
// free-threaded Python leaves the GIL off (without it the interpreter turns the GIL back on for
// the whole process). What makes that true: the core's own locks, and no state here but
// args.hpp's names, set once at import.
PYBIND11_MODULE(_core, m, py::mod_gil_not_used()) {
  m.doc() = "kvbridge core bound with pybind11";
  check(args::init());
  m.attr("BACKEND") = "pybind";
  m.attr("__version__") = KVBRIDGE_VERSION;

  py::class_<kvbridge::PoolStats>(m, "PoolStats", "Live view of one pool's counters")
      .def_property_readonly("allocated_total",
                             [](const kvbridge::PoolStats& s) { return s.allocated_total.load(); })
      .def_property_readonly("released_total",
                             [](const kvbridge::PoolStats& s) { return s.released_total.load(); })
      .def_property_readonly("peak_in_use",
                             [](const kvbridge::PoolStats& s) { return s.peak_in_use.load(); })
      .def("__repr__", &kvbridge::PoolStats::repr);

  py::class_<kvbridge::BlockPool>(m, "BlockPool", "Ref-counted KV-cache block allocator")
      .def(py::init([](Int64 n) { return new kvbridge::BlockPool(n.value); }), "num_blocks"_a)
      .def_property_readonly("num_blocks", &kvbridge::BlockPool::num_blocks)
      .def_property_readonly("num_free", &kvbridge::BlockPool::num_free)
      .def(
          "allocate", [](kvbridge::BlockPool& p, Int64 n) { return p.allocate(n.value); }, "n"_a)
      .def(
          "allocate_many",
          [](kvbridge::BlockPool& p, py::handle counts) {
            const auto c = to_counts(counts);
            return p.allocate_many(c.data(), c.size());
          },
          "counts"_a)
      .def(
          "retain", [](kvbridge::BlockPool& p, Int64 b) { p.retain(b.value); }, "block"_a)
      .def(
          "release", [](kvbridge::BlockPool& p, Int64 b) { p.release(b.value); }, "block"_a)
      .def(
          "refcount", [](const kvbridge::BlockPool& p, Int64 b) { return p.refcount(b.value); },
          "block"_a)
      .def("refcounts", [](const kvbridge::BlockPool& p) { return adopt(p.refcounts()); })
      .def_property_readonly("stats", &kvbridge::BlockPool::stats,
                             py::return_value_policy::reference_internal)
      .def("__repr__", &kvbridge::BlockPool::repr);

  m.def("common_prefix", &common_prefix, "a"_a, "b"_a, "Length of the longest common prefix");
  m.def("count_eos", &count_eos, "tokens"_a, "eos"_a, "How many tokens equal eos");
  m.def("rmsnorm", &rmsnorm, "x"_a, "weight"_a, "eps"_a = 1e-6, py::kw_only(), "out"_a = py::none(),
        "Fused RMSNorm over the last dimension");
  m.def("live_buffers", &kvbridge::live_buffers,
        "C++-allocated buffers now owned by Python objects");
  m.def("live_pools", &kvbridge::live_pools, "C++ BlockPool objects now alive");
  m.def(
      "set_num_threads", [](Int64 n) { kvbridge::set_num_threads(n.value); }, "n"_a,
      "Threads a kernel call may use (n >= 1)");
  m.def("get_num_threads", &kvbridge::get_num_threads, "Threads a kernel call may use");
  // Called by __init__.py at import, so a malformed KVBRIDGE_NUM_THREADS fails the import with
  // the contract's ValueError (an exception in module init would become an ImportError).
  m.def("_default_num_threads", &kvbridge::default_num_threads);
  // After the last m.def: every function the module defines (pybind11 makes each a builtin).
  for (auto item : py::reinterpret_borrow<py::dict>(PyModule_GetDict(m.ptr()))) {
    if (PyCFunction_Check(item.second.ptr())) args::make_immortal(item.second.ptr());
  }

  py::module_ testing = m.def_submodule("_testing", "Hooks the conformance suite uses");
  testing.def(
      "throw", [](const std::string& kind) { kvbridge::testing::throw_kind(kind); }, "kind"_a);
  testing.def(
      "data_address",
      [](py::handle tokens) {
        args::Tokens input;
        check(args::to_tokens(tokens.ptr(), "tokens", true, input));
        return args::address_of(input);
      },
      "tokens"_a, "Address count_eos's C++ code reads tokens from");
  testing.def("last_num_threads", &kvbridge::last_num_threads,
              "Threads the last kernel call from this thread ran on");
  testing.def("arm_gate", &kvbridge::testing::arm_gate, "timeout_s"_a,
              "The next kernel call waits at the GIL gate until another thread opens it");
  testing.def("open_gate", &kvbridge::testing::open_gate,
              "Opens the GIL gate if a kernel waits at it; the gate's state");
  testing.def("close_gate", &kvbridge::testing::close_gate,
              "Disarms the GIL gate; the state it had");
}
