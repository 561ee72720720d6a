// kvbridge_nanobind._core: the nanobind binding of the kvbridge core.
//
// Reads as a table of what is exposed; the argument rules are packages/args/args.hpp's (who
// shares them: packages/registry.json's `shares`). nanobind defaults that differ from the contract,
// and how this file handles them:
//  - a throw that is not a std::exception, and the standard exceptions nanobind has no entry for,
//    do not become the contract's types: one exception translator (registered at import, in
//    this module's own NB_DOMAIN so no other nanobind extension sees it) sorts every core
//    exception with the core's catch chain (kvbridge::caught_exception);
//  - int arguments: nanobind's caster refuses an overflowing int with a generic "incompatible
//    function arguments" TypeError and casters may not raise, so ints arrive as `Int` and eps
//    as `Float`, which accept any object (None too: `.none()`, else nanobind refuses it before
//    any caster runs), and args.hpp checks them in the body; nb::sig keeps the signatures and
//    stubs saying `int` and `float`;
//  - nb::ndarray refuses byte-swapped and unaligned data and never converts a dtype: arrays
//    are read through the buffer protocol by args.hpp, in place where the core can read them,
//    and converted otherwise;
//  - the GIL is held by default: the kernels release it with gil_scoped_release, after every
//    Python object they need has been read;
//  - `stats` returns a reference into the pool: rv_policy::reference_internal keeps the pool
//    alive; refcounts() hands numpy a capsule-owned buffer (no copy, freed once).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "args.hpp"
#include "kvbridge/kvbridge.hpp"
#include "kvbridge/testing.hpp"
#include "raise_caught.hpp"
#include "rmsnorm_call.hpp"

namespace nb = nanobind;
using namespace nb::literals;
namespace args = kvbridge::args;

namespace {

// The one line nanobind changes in every rule: a failed check has set the Python error.
void check(bool ok) {
  if (!ok) throw nb::python_error();
}

// An int argument, checked in the function body (casters cannot raise).
struct Int {
  nb::handle object;
  std::int64_t value() const {
    std::int64_t v;
    check(args::as_int64(object.ptr(), &v));
    return v;
  }
};

// eps, likewise.
struct Float {
  nb::handle object;
  double value() const {
    double v;
    check(args::as_eps(object.ptr(), &v));
    return v;
  }
};

}  // namespace

namespace nanobind::detail {
template <>
struct type_caster<Int> {
  NB_TYPE_CASTER(Int, const_name("int"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    value.object = src;
    return true;
  }
};
template <>
struct type_caster<Float> {
  NB_TYPE_CASTER(Float, const_name("float"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    value.object = src;
    return true;
  }
};
}  // namespace nanobind::detail

namespace {

// --- functions -------------------------------------------------------------------------------

std::int64_t common_prefix(nb::handle a, nb::handle b) {
  args::Tokens ta, tb;
  check(args::to_tokens(a.ptr(), "a", false, ta) && args::to_tokens(b.ptr(), "b", false, tb));
  nb::gil_scoped_release release;
  return kvbridge::common_prefix(ta.view, tb.view);
}

std::int64_t count_eos(nb::handle tokens, Int eos) {
  const std::int64_t target = eos.value();
  args::Tokens input;
  check(args::to_tokens(tokens.ptr(), "tokens", true, input));
  nb::gil_scoped_release release;
  return kvbridge::count_eos(input.view, target);
}

nb::object rmsnorm(nb::handle x, nb::handle weight, Float eps, nb::handle out) {
  PyObject* result = args::rmsnorm(x.ptr(), weight.ptr(), eps.value(), out.ptr());
  check(result != nullptr);
  return nb::steal(result);
}

// Adopts a C++ buffer without copying: the capsule owns it and deletes it exactly once, when the
// last array over it dies.
nb::object adopt(std::unique_ptr<kvbridge::Buffer<std::int32_t>> buffer) {
  auto* raw = buffer.get();
  nb::capsule owner(
      raw, [](void* p) noexcept { delete static_cast<kvbridge::Buffer<std::int32_t>*>(p); });
  buffer.release();  // the capsule owns it now
  return nb::cast(
      nb::ndarray<nb::numpy, std::int32_t, nb::ndim<1>>(raw->data(), {raw->size()}, owner));
}

std::vector<std::int64_t> to_counts(nb::handle counts) {
  std::vector<std::int64_t> out;
  check(args::to_counts(counts.ptr(), out));
  return out;
}

// --- errors ----------------------------------------------------------------------------------

// The module's one error path: every exception that is not already a Python error is sorted by
// the core's catch chain and raised as the contract's type with what() word for word.
void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const nb::python_error&) {
    throw;  // a Python error in flight: nanobind restores it
  } catch (const nb::builtin_exception&) {
    throw;  // nb::type_error etc. raised above: nanobind's own translator handles them
  } catch (...) {
    args::raise_caught();
  }
}

}  // namespace

// --- the module: BlockPool, functions, threads, _testing -------------------------------------

NB_MODULE(_core, m) {
  m.doc() = "kvbridge core bound with nanobind";
  check(args::init());
  nb::register_exception_translator(translate);
  m.attr("BACKEND") = "nanobind";

  nb::class_<kvbridge::PoolStats>(m, "PoolStats", "Live view of one pool's counters")
      .def_prop_ro("allocated_total",
                   [](const kvbridge::PoolStats& s) { return s.allocated_total.load(); })
      .def_prop_ro("released_total",
                   [](const kvbridge::PoolStats& s) { return s.released_total.load(); })
      .def_prop_ro("peak_in_use", [](const kvbridge::PoolStats& s) { return s.peak_in_use.load(); })
      .def("__repr__", &kvbridge::PoolStats::repr);

  nb::class_<kvbridge::BlockPool>(m, "BlockPool", "Ref-counted KV-cache block allocator")
      .def(
          "__init__",
          [](kvbridge::BlockPool* self, Int n) { new (self) kvbridge::BlockPool(n.value()); },
          "num_blocks"_a.none(), nb::sig("def __init__(self, num_blocks: int) -> None"))
      .def_prop_ro("num_blocks", &kvbridge::BlockPool::num_blocks)
      .def_prop_ro("num_free", &kvbridge::BlockPool::num_free)
      .def(
          "allocate", [](kvbridge::BlockPool& p, Int n) { return p.allocate(n.value()); },
          "n"_a.none(), nb::sig("def allocate(self, n: int) -> list[int] | None"))
      .def(
          "allocate_many",
          [](kvbridge::BlockPool& p, nb::handle counts) {
            const auto c = to_counts(counts);
            return p.allocate_many(c.data(), c.size());
          },
          "counts"_a)
      .def(
          "retain", [](kvbridge::BlockPool& p, Int b) { p.retain(b.value()); }, "block"_a.none(),
          nb::sig("def retain(self, block: int) -> None"))
      .def(
          "release", [](kvbridge::BlockPool& p, Int b) { p.release(b.value()); }, "block"_a.none(),
          nb::sig("def release(self, block: int) -> None"))
      .def(
          "refcount", [](const kvbridge::BlockPool& p, Int b) { return p.refcount(b.value()); },
          "block"_a.none(), nb::sig("def refcount(self, block: int) -> int"))
      .def("refcounts", [](const kvbridge::BlockPool& p) { return adopt(p.refcounts()); })
      .def_prop_ro("stats", &kvbridge::BlockPool::stats, nb::rv_policy::reference_internal)
      .def("__repr__", &kvbridge::BlockPool::repr);

  m.def("common_prefix", &common_prefix, "a"_a, "b"_a, "Length of the longest common prefix");
  m.def("count_eos", &count_eos, "tokens"_a, "eos"_a.none(),
        nb::sig("def count_eos(tokens: object, eos: int) -> int"), "How many tokens equal eos");
  m.def("rmsnorm", &rmsnorm, "x"_a, "weight"_a, "eps"_a.none() = 1e-6, nb::kw_only(),
        "out"_a = nb::none(),
        nb::sig("def rmsnorm(x: object, weight: object, eps: float = 1e-06, *, "
                "out: object | None = None) -> object"),
        "Fused RMSNorm over the last dimension");
  m.def("live_buffers", &kvbridge::live_buffers,
        "C++-allocated buffers now owned by Python objects");
  m.def("live_pools", &kvbridge::live_pools, "C++ BlockPool objects now alive");
  m.def(
      "set_num_threads", [](Int n) { kvbridge::set_num_threads(n.value()); }, "n"_a.none(),
      nb::sig("def set_num_threads(n: int) -> None"), "Threads a kernel call may use (n >= 1)");
  m.def("get_num_threads", &kvbridge::get_num_threads, "Threads a kernel call may use");
  // Called by __init__.py at import, so a malformed KVBRIDGE_NUM_THREADS fails the import with
  // the contract's ValueError (an exception in module init would become an ImportError).
  m.def("_default_num_threads", &kvbridge::default_num_threads);

  nb::module_ testing = m.def_submodule("_testing", "Hooks the conformance suite uses");
  testing.def(
      "throw",
      [](nb::handle kind) {
        if (!nb::isinstance<nb::str>(kind)) {
          throw nb::type_error(("kind must be a str, got " + args::describe(kind.ptr())).c_str());
        }
        kvbridge::testing::throw_kind(nb::cast<std::string>(kind));
      },
      "kind"_a);
  testing.def(
      "data_address",
      [](nb::handle tokens) {
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
