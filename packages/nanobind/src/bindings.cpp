// kvbridge_nanobind._core: the nanobind binding of the kvbridge core.
//
// Reads as a table of what is exposed; the only logic here is turning Python objects into the
// core's views. nanobind defaults that differ from the contract, and how this file handles them:
//  - a throw that is not a std::exception, and the standard exceptions nanobind has no entry for,
//    do not become the contract's types: one exception translator (registered at import, in
//    this module's own NB_DOMAIN so no other nanobind extension sees it) sorts every core
//    exception with the core's catch chain (kvbridge::caught_exception);
//  - int arguments: nanobind's caster refuses an overflowing int with a generic "incompatible
//    function arguments" TypeError and casters may not raise, so ints arrive as `Int`, which
//    accepts any object (None too: `.none()`, else nanobind refuses it before any caster runs),
//    and `to_int64` checks them in the body (TypeError for non-ints and bools, OverflowError
//    past int64); nb::sig keeps the signatures and stubs saying `int`;
//  - nb::ndarray refuses byte-swapped and unaligned data and never converts a dtype: arrays
//    are inspected through numpy first, read in place through nb::ndarray where the core can
//    read them (int32/int64 tokens with their strides), and converted otherwise;
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

#include "kvbridge/kvbridge.hpp"
#include "kvbridge/testing.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// --- conversions ---------------------------------------------------------------------------

// numpy, imported once at module init and never released: a static nb::object would be
// decref'd by its destructor after the interpreter has shut down.
nb::handle g_numpy;
nb::handle g_ndarray;  // numpy.ndarray

std::string describe(nb::handle obj) {
  // nb::type_name, not tp_name: PyTypeObject is opaque under the stable ABI.
  return std::string(nb::type_name(obj.type()).c_str()) + ": " + nb::repr(obj).c_str();
}

bool is_bool(nb::handle obj) {
  return PyBool_Check(obj.ptr()) || nb::isinstance(obj, g_numpy.attr("bool_"));
}

// An int argument as the contract reads it: int or __index__ (numpy ints), never a bool,
// float, str or None (TypeError), and within int64 (OverflowError).
std::int64_t to_int64(nb::handle obj) {
  if (is_bool(obj) || !PyIndex_Check(obj.ptr())) {
    throw nb::type_error(("expected an int, got " + describe(obj)).c_str());
  }
  const nb::object index = nb::steal(PyNumber_Index(obj.ptr()));
  if (!index.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) {
    PyErr_SetString(PyExc_OverflowError,
                    (std::string(nb::str(index).c_str()) + " does not fit in int64").c_str());
    throw nb::python_error();
  }
  return value;
}

// An int argument, checked in the function body by `to_int64` (casters cannot raise).
struct Int {
  nb::handle object;
  std::int64_t value() const { return to_int64(object); }
};

// eps, likewise: any object here, checked in rmsnorm (`float` in signatures and stubs).
struct Float {
  nb::handle object;
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

using kvbridge::TokenView;
using AnyTokens =
    std::variant<TokenView<std::int32_t>, TokenView<std::int64_t>, TokenView<std::uint64_t>>;
using Array1D = nb::ndarray<nb::ro, nb::ndim<1>, nb::device::cpu>;

// A Py_buffer held for the length of a call (released with the GIL held: TokenInput outlives the
// gil_scoped_release in every kernel).
struct HeldBuffer {
  Py_buffer view{};
  bool held = false;
  HeldBuffer() = default;
  HeldBuffer(const HeldBuffer&) = delete;
  HeldBuffer& operator=(const HeldBuffer&) = delete;
  ~HeldBuffer() {
    if (held) PyBuffer_Release(&view);
  }
};

// A 1-D integer sequence ready for the core, plus whatever keeps its memory alive. Built with
// the GIL held; the core reads `view` with the GIL released.
struct TokenInput {
  AnyTokens view;
  std::unique_ptr<HeldBuffer> buffer;  // the fast path's view of the caller's array
  nb::object owner;                    // the array read in place (or its converted copy)
  std::vector<std::int64_t> copied;    // a Python list/tuple, copied element by element
};

template <class T>
TokenView<T> view_of(const Array1D& a) {
  return {static_cast<const T*>(a.data()), static_cast<std::int64_t>(a.shape(0)), a.stride(0)};
}

// The per-call fast path, through the buffer protocol (what nb::ndarray's import does, without
// building an ndarray handle): a 1-D native int32/int64 array (uint64 when `keep_uint64`) with
// whole-element strides is read in place. Anything else returns false for the general path.
bool fast_tokens(nb::handle obj, bool keep_uint64, TokenInput& input) {
  auto held = std::make_unique<HeldBuffer>();
  if (PyObject_GetBuffer(obj.ptr(), &held->view, PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    return false;
  }
  held->held = true;
  const Py_buffer& v = held->view;
  if (v.ndim != 1 || v.format == nullptr || v.format[0] == 0 || v.format[1] != 0 ||
      v.strides[0] % v.itemsize != 0) {
    return false;
  }
  const char c = v.format[0];
  const std::int64_t size = v.shape[0], stride = v.strides[0] / v.itemsize;
  if (c == 'i' && v.itemsize == 4) {
    input.view = TokenView<std::int32_t>{static_cast<const std::int32_t*>(v.buf), size, stride};
  } else if ((c == 'l' || c == 'q') && v.itemsize == 8) {
    input.view = TokenView<std::int64_t>{static_cast<const std::int64_t*>(v.buf), size, stride};
  } else if (keep_uint64 && (c == 'L' || c == 'Q') && v.itemsize == 8) {
    input.view = TokenView<std::uint64_t>{static_cast<const std::uint64_t*>(v.buf), size, stride};
  } else {
    return false;
  }
  input.buffer = std::move(held);
  return true;
}

// int32 and int64 are read in place; uint64 too when `keep_uint64` (count_eos compares it
// exactly; converting would wrap values above 2^63). Every other integer dtype is converted.
TokenInput to_tokens(nb::handle obj, const char* name, bool keep_uint64) {
  TokenInput input;
  if (nb::isinstance<nb::list>(obj) || nb::isinstance<nb::tuple>(obj)) {
    for (nb::handle item : obj) input.copied.push_back(to_int64(item));
    input.view = TokenView<std::int64_t>{input.copied.data(),
                                         static_cast<std::int64_t>(input.copied.size()), 1};
    return input;
  }
  if (obj.type().is(g_ndarray) && fast_tokens(obj, keep_uint64, input)) return input;
  nb::object arr = g_numpy.attr("asarray")(obj);
  const nb::object dtype = arr.attr("dtype");
  const std::string kind = nb::cast<std::string>(dtype.attr("kind"));
  if (kind == "O") {
    throw nb::type_error(
        (std::string(name) + " must be an integer array or sequence, got " + describe(obj))
            .c_str());
  }
  if (kind != "i" && kind != "u") {  // type before shape, as in every package
    throw nb::type_error(
        (std::string(name) + " must have an integer dtype, got " + nb::str(dtype).c_str()).c_str());
  }
  if (nb::cast<int>(arr.attr("ndim")) != 1) {
    const nb::str shape = nb::str(nb::object(arr.attr("shape")));
    throw nb::value_error((std::string(name) + " must be 1-D, got shape " + shape.c_str()).c_str());
  }
  Array1D view;
  const auto size = nb::cast<int>(dtype.attr("itemsize"));
  const bool in_place_dtype =
      (kind == "i" && (size == 4 || size == 8)) || (kind == "u" && size == 8 && keep_uint64);
  // nb::ndarray takes native-order data with whole-element strides; anything else converts.
  if (!in_place_dtype || !nb::try_cast(arr, view)) {
    arr = arr.attr("astype")(g_numpy.attr("int64"));
    view = nb::cast<Array1D>(arr);
  }
  const nb::dlpack::dtype dt = view.dtype();
  if (dt.bits == 32) {
    input.view = view_of<std::int32_t>(view);
  } else if (dt.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt)) {
    input.view = view_of<std::uint64_t>(view);
  } else {
    input.view = view_of<std::int64_t>(view);
  }
  input.owner = arr;
  return input;
}

const void* data_address(const AnyTokens& tokens) {
  return std::visit([](const auto& v) -> const void* { return v.data; }, tokens);
}

// --- functions -------------------------------------------------------------------------------

std::int64_t common_prefix(nb::handle a, nb::handle b) {
  const TokenInput ta = to_tokens(a, "a", false), tb = to_tokens(b, "b", false);
  nb::gil_scoped_release release;
  return std::visit(
      [](const auto& va, const auto& vb) -> std::int64_t {
        using A = std::decay_t<decltype(*va.data)>;
        using B = std::decay_t<decltype(*vb.data)>;
        if constexpr (std::is_same_v<A, std::uint64_t> || std::is_same_v<B, std::uint64_t>) {
          return -1;  // unreachable: to_tokens converts uint64 when keep_uint64 is false
        } else {
          return kvbridge::common_prefix(va, vb);
        }
      },
      ta.view, tb.view);
}

std::int64_t count_eos(nb::handle tokens, Int eos) {
  const std::int64_t target = eos.value();
  const TokenInput input = to_tokens(tokens, "tokens", true);
  nb::gil_scoped_release release;
  return std::visit([&](const auto& v) { return kvbridge::count_eos(v, target); }, input.view);
}

using FloatArray = nb::ndarray<nb::ro, float, nb::device::cpu>;

// A float32 array as the core's view (element strides), with the object that owns its memory.
// Byte-swapped float32 and strides that are not whole elements are copied first.
struct FloatInput {
  kvbridge::FloatArrayView view;
  nb::object owner;
};

FloatInput to_floats(nb::handle obj, const char* name) {
  if (obj.is_none() || nb::isinstance<nb::str>(obj)) {
    throw nb::type_error(
        (std::string(name) + " must be a float32 array, got " + describe(obj)).c_str());
  }
  nb::object arr = g_numpy.attr("asarray")(obj);
  const nb::object dtype = arr.attr("dtype");
  const std::string kind = nb::cast<std::string>(dtype.attr("kind"));
  if (kind == "O") {
    throw nb::type_error(
        (std::string(name) + " must be a float32 array, got " + describe(obj)).c_str());
  }
  if (kind != "f" || nb::cast<int>(dtype.attr("itemsize")) != 4) {
    throw nb::type_error(
        (std::string(name) + " must be float32, got " + nb::str(dtype).c_str()).c_str());
  }
  FloatArray view;
  if (!nb::try_cast(arr, view)) {  // byte-swapped or misaligned float32: converted, not refused
    arr = g_numpy.attr("ascontiguousarray")(arr, g_numpy.attr("float32"));
    view = nb::cast<FloatArray>(arr);
  }
  FloatInput input{{view.data(), {}, {}}, arr};
  for (size_t d = 0; d < view.ndim(); ++d) {
    input.view.shape.push_back(static_cast<std::int64_t>(view.shape(d)));
    input.view.strides.push_back(view.stride(d));
  }
  return input;
}

nb::object rmsnorm(nb::handle x_obj, nb::handle weight_obj, Float eps_arg, nb::handle out_obj) {
  const nb::handle eps_obj = eps_arg.object;
  if (eps_obj.is_none() || nb::isinstance<nb::str>(eps_obj)) {
    throw nb::type_error(("eps must be a float, got " + describe(eps_obj)).c_str());
  }
  const double eps = nb::cast<double>(nb::float_(eps_obj));
  const FloatInput x = to_floats(x_obj, "x"), weight = to_floats(weight_obj, "weight");
  kvbridge::check_rmsnorm_args(x.view, weight.view, eps);
  nb::object out;
  const auto from = out_obj.is_none() ? kvbridge::Out::kFresh : kvbridge::Out::kExisting;
  if (out_obj.is_none()) {
    out = g_numpy.attr("empty")(nb::tuple(nb::cast(x.view.shape)), g_numpy.attr("float32"));
  } else {
    if (!nb::isinstance(out_obj, g_numpy.attr("ndarray"))) {
      throw nb::type_error(("out must be a numpy.ndarray, got " + describe(out_obj)).c_str());
    }
    out = nb::borrow(out_obj);
    const nb::object dtype = out.attr("dtype");
    if (!dtype.equal(g_numpy.attr("dtype")("float32"))) {
      throw nb::type_error(
          ("out must be float32, got " + std::string(nb::str(dtype).c_str())).c_str());
    }
    const nb::object flags = out.attr("flags");
    if (!nb::cast<bool>(flags.attr("c_contiguous")) || !nb::cast<bool>(flags.attr("writeable"))) {
      throw nb::value_error("out must be a writeable C-contiguous array");
    }
  }
  auto target = nb::cast<nb::ndarray<float, nb::c_contig, nb::device::cpu>>(out);
  std::vector<std::int64_t> out_shape;
  for (size_t d = 0; d < target.ndim(); ++d) out_shape.push_back(target.shape(d));
  float* out_data = target.data();
  {
    nb::gil_scoped_release release;
    kvbridge::rmsnorm(x.view, weight.view, eps, out_data, out_shape, from);
  }
  return out;
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
  const TokenInput input = to_tokens(counts, "counts", false);
  std::vector<std::int64_t> out;
  std::visit(
      [&](const auto& view) {
        for (std::int64_t i = 0; i < view.size; ++i) {
          out.push_back(static_cast<std::int64_t>(view.data[i * view.stride]));
        }
      },
      input.view);
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
    const kvbridge::CaughtException caught = kvbridge::caught_exception();
    PyObject* type =
        PyDict_GetItemString(PyEval_GetBuiltins(), kvbridge::python_exception_name(caught.status));
    PyErr_SetString(type != nullptr ? type : PyExc_RuntimeError, caught.message.c_str());
  }
}

}  // namespace

// --- the module: BlockPool, functions, threads, _testing -------------------------------------

NB_MODULE(_core, m) {
  m.doc() = "kvbridge core bound with nanobind";
  g_numpy = nb::module_::import_("numpy").release();
  g_ndarray = g_numpy.attr("ndarray").inc_ref();
  nb::register_exception_translator(translate);
  m.attr("BACKEND") = "nanobind";

  nb::class_<kvbridge::PoolStats>(m, "PoolStats", "Live view of one pool's counters")
      .def_prop_ro("allocated_total",
                   [](const kvbridge::PoolStats& s) { return s.allocated_total.load(); })
      .def_prop_ro("released_total",
                   [](const kvbridge::PoolStats& s) { return s.released_total.load(); })
      .def_prop_ro("peak_in_use", [](const kvbridge::PoolStats& s) { return s.peak_in_use.load(); })
      .def("__repr__", [](const kvbridge::PoolStats& s) {
        return "<PoolStats allocated_total=" + std::to_string(s.allocated_total.load()) +
               " released_total=" + std::to_string(s.released_total.load()) +
               " peak_in_use=" + std::to_string(s.peak_in_use.load()) + ">";
      });

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
          throw nb::type_error(("kind must be a str, got " + describe(kind)).c_str());
        }
        kvbridge::testing::throw_kind(nb::cast<std::string>(kind));
      },
      "kind"_a);
  testing.def(
      "data_address",
      [](nb::handle tokens) {
        return reinterpret_cast<std::uintptr_t>(
            data_address(to_tokens(tokens, "tokens", true).view));
      },
      "tokens"_a, "Address count_eos's C++ code reads tokens from");
  testing.def("last_num_threads", &kvbridge::last_num_threads,
              "Threads the last kernel call from this thread ran on");
}
