// kvbridge_pybind._core: the pybind11 binding of the kvbridge core.
//
// Reads as a table of what is exposed; the only logic here is turning Python objects into the
// core's views. pybind11 defaults that differ from docs/contract.md, and how this file handles
// them:
//  - an int that overflows is a TypeError by default: the `Int64` caster raises OverflowError;
//  - py::array_t's forcecast copies silently: arrays come in as py::array and their dtype is
//    checked by hand (int32/int64 read in place, other integer dtypes converted);
//  - the GIL is held by default: the kernels release it with gil_scoped_release, after every
//    Python object they need has been read;
//  - `stats` returns a reference into the pool: reference_internal keeps the pool alive.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kvbridge/kvbridge.hpp"
#include "kvbridge/testing.hpp"

namespace py = pybind11;
using namespace pybind11::literals;

namespace {

// --- conversions -----------------------------------------------------------------------------

// An int argument as the contract reads it: a Python int or anything with __index__ (numpy
// integer scalars), never a bool, float, str or None (TypeError), and within int64
// (OverflowError). Narrower ranges (int32 ids and counts) are the core's to check.
struct Int64 {
  std::int64_t value = 0;
};

std::string describe(py::handle obj) {
  return std::string(Py_TYPE(obj.ptr())->tp_name) + ": " + py::repr(obj).cast<std::string>();
}

// numpy.bool_, looked up once at import: its __index__ is deprecated in some numpy releases
// (a warning) and an error in others, so it is refused here like Python's bool, consistently.
PyObject* g_numpy_bool = nullptr;

bool is_bool(py::handle obj) {
  return PyBool_Check(obj.ptr()) ||
         (g_numpy_bool != nullptr &&
          PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(g_numpy_bool)));
}

std::int64_t to_int64(py::handle obj) {
  if (is_bool(obj) || !PyIndex_Check(obj.ptr())) {
    throw py::type_error("expected an int, got " + describe(obj));
  }
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) {
    PyErr_SetString(PyExc_OverflowError,
                    (py::str(index).cast<std::string>() + " does not fit in int64").c_str());
    throw py::error_already_set();
  }
  return value;
}

}  // namespace

namespace pybind11::detail {
template <>
struct type_caster<Int64> {
  PYBIND11_TYPE_CASTER(Int64, const_name("int"));
  // Throwing (rather than returning false) gives the contract's exception and message instead
  // of pybind11's generic "incompatible function arguments" TypeError.
  bool load(handle src, bool /*convert*/) {
    value.value = to_int64(src);
    return true;
  }
};
}  // namespace pybind11::detail

namespace {

using kvbridge::TokenView;
using AnyTokens =
    std::variant<TokenView<std::int32_t>, TokenView<std::int64_t>, TokenView<std::uint64_t>>;

// A 1-D integer sequence ready for the core, plus whatever keeps its memory alive. Built with
// the GIL held; the core reads `view` with the GIL released.
struct TokenInput {
  AnyTokens view;
  py::object owner;                  // the array read in place (or its converted copy)
  std::vector<std::int64_t> copied;  // a Python list/tuple, copied element by element
};

std::string shape_of(const py::array& a) {
  return py::str(py::tuple(py::cast(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()))));
}

template <class T>
TokenView<T> view_of(const py::array& a) {
  return {static_cast<const T*>(a.data()), a.shape(0), a.strides(0) / a.itemsize()};
}

// int32 and int64 are read in place; uint64 too when `keep_uint64` (count_eos compares it
// exactly; converting would wrap values above 2^63). Every other integer dtype is converted.
TokenInput to_tokens(py::handle obj, const char* name, bool keep_uint64) {
  TokenInput input;
  if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    for (py::handle item : obj) input.copied.push_back(to_int64(item));
    input.view = TokenView<std::int64_t>{input.copied.data(),
                                         static_cast<std::int64_t>(input.copied.size()), 1};
    return input;
  }
  py::array arr = py::array::ensure(obj);
  if (!arr) {
    PyErr_Clear();
    throw py::type_error(std::string(name) + " must be an integer array or sequence, got " +
                         describe(obj));
  }
  // Type before shape: a float matrix is a TypeError, like a float vector.
  const char kind = arr.dtype().kind();
  if (kind == 'O') {  // numpy wrapped something that is not numeric data at all (None, objects)
    throw py::type_error(std::string(name) + " must be an integer array or sequence, got " +
                         describe(obj));
  }
  if (kind != 'i' && kind != 'u') {
    throw py::type_error(std::string(name) + " must have an integer dtype, got " +
                         py::str(arr.dtype()).cast<std::string>());
  }
  if (arr.ndim() != 1) {
    throw py::value_error(std::string(name) + " must be 1-D, got shape " + shape_of(arr));
  }
  // Byte-swapped arrays and strides that are not whole elements can't be read in place.
  const bool readable = arr.dtype().byteorder() != '>' && arr.strides(0) % arr.itemsize() == 0;
  if (readable && kind == 'i' && arr.itemsize() == 4) {
    input.view = view_of<std::int32_t>(arr);
  } else if (readable && kind == 'i' && arr.itemsize() == 8) {
    input.view = view_of<std::int64_t>(arr);
  } else if (readable && kind == 'u' && arr.itemsize() == 8 && keep_uint64) {
    input.view = view_of<std::uint64_t>(arr);
  } else {
    arr = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(arr);
    input.view = view_of<std::int64_t>(arr);
  }
  input.owner = arr;
  return input;
}

const void* data_address(const AnyTokens& tokens) {
  return std::visit([](const auto& v) -> const void* { return v.data; }, tokens);
}

// --- functions -------------------------------------------------------------------------------

std::int64_t common_prefix(py::handle a, py::handle b) {
  const TokenInput ta = to_tokens(a, "a", false), tb = to_tokens(b, "b", false);
  py::gil_scoped_release release;
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

std::int64_t count_eos(py::handle tokens, Int64 eos) {
  const TokenInput input = to_tokens(tokens, "tokens", true);
  py::gil_scoped_release release;
  return std::visit([&](const auto& v) { return kvbridge::count_eos(v, eos.value); }, input.view);
}

// A float32 numpy array as the core's view (element strides). Byte-swapped float32 and arrays
// whose byte strides are not whole elements (views into packed records) are copied first.
kvbridge::FloatArrayView float_view(py::array& arr, const char* name) {
  if (arr.dtype().kind() != 'f' || arr.itemsize() != 4) {
    throw py::type_error(std::string(name) + " must be float32, got " +
                         py::str(arr.dtype()).cast<std::string>());
  }
  if (arr.dtype().byteorder() == '>') {  // float32 in the other byte order: converted, not refused
    arr = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(arr);
  }
  kvbridge::FloatArrayView view{nullptr, {}, {}};
  for (py::ssize_t d = 0; d < arr.ndim(); ++d) {
    if (arr.strides(d) % 4 != 0) {
      arr = py::array_t<float, py::array::c_style>::ensure(arr);
      return float_view(arr, name);
    }
  }
  view.data = static_cast<const float*>(arr.data());
  for (py::ssize_t d = 0; d < arr.ndim(); ++d) {
    view.shape.push_back(arr.shape(d));
    view.strides.push_back(arr.strides(d) / 4);
  }
  return view;
}

py::array as_array(py::handle obj, const char* name) {
  py::array arr = py::array::ensure(obj);
  if (!arr) {
    PyErr_Clear();
    throw py::type_error(std::string(name) + " must be a float32 array, got " + describe(obj));
  }
  return arr;
}

py::array rmsnorm(py::handle x_obj, py::handle weight_obj, double eps, py::object out_obj) {
  py::array x = as_array(x_obj, "x"), weight = as_array(weight_obj, "weight");
  const kvbridge::FloatArrayView xv = float_view(x, "x"), wv = float_view(weight, "weight");
  kvbridge::check_rmsnorm_args(xv, wv, eps);
  py::array out;
  const auto from = out_obj.is_none() ? kvbridge::Out::kFresh : kvbridge::Out::kExisting;
  if (out_obj.is_none()) {
    out = py::array_t<float>(xv.shape);
  } else {
    if (!py::isinstance<py::array>(out_obj)) {
      throw py::type_error("out must be a numpy.ndarray, got " + describe(out_obj));
    }
    out = py::reinterpret_borrow<py::array>(out_obj);
    if (!out.dtype().is(py::dtype::of<float>())) {
      throw py::type_error("out must be float32, got " + py::str(out.dtype()).cast<std::string>());
    }
    if (!(out.flags() & py::array::c_style) || !out.writeable()) {
      throw py::value_error("out must be a writeable C-contiguous array");
    }
  }
  std::vector<std::int64_t> out_shape(out.shape(), out.shape() + out.ndim());
  float* out_data = static_cast<float*>(out.mutable_data());
  {
    py::gil_scoped_release release;
    kvbridge::rmsnorm(xv, wv, eps, out_data, out_shape, from);
  }
  return out;
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

}  // namespace

// --- the module: BlockPool, functions, threads, _testing -------------------------------------

PYBIND11_MODULE(_core, m) {
  m.doc() = "kvbridge core bound with pybind11";
  g_numpy_bool = py::object(py::module_::import("numpy").attr("bool_")).release().ptr();  // kept
  m.attr("BACKEND") = "pybind";
  m.attr("__version__") = KVBRIDGE_VERSION;

  py::class_<kvbridge::PoolStats>(m, "PoolStats", "Live view of one pool's counters")
      .def_property_readonly("allocated_total",
                             [](const kvbridge::PoolStats& s) { return s.allocated_total.load(); })
      .def_property_readonly("released_total",
                             [](const kvbridge::PoolStats& s) { return s.released_total.load(); })
      .def_property_readonly("peak_in_use",
                             [](const kvbridge::PoolStats& s) { return s.peak_in_use.load(); })
      .def("__repr__", [](const kvbridge::PoolStats& s) {
        return "<PoolStats allocated_total=" + std::to_string(s.allocated_total.load()) +
               " released_total=" + std::to_string(s.released_total.load()) +
               " peak_in_use=" + std::to_string(s.peak_in_use.load()) + ">";
      });

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

  py::module_ testing = m.def_submodule("_testing", "Hooks the conformance suite uses");
  testing.def(
      "throw", [](const std::string& kind) { kvbridge::testing::throw_kind(kind); }, "kind"_a);
  testing.def(
      "data_address",
      [](py::handle tokens) {
        return reinterpret_cast<std::uintptr_t>(
            data_address(to_tokens(tokens, "tokens", true).view));
      },
      "tokens"_a, "Address count_eos's C++ code reads tokens from");
  testing.def("last_num_threads", &kvbridge::last_num_threads,
              "Threads the last kernel call from this thread ran on");
}
