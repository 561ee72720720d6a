// The contract's argument rules (docs/contract.md, "Errors") at the level of the CPython C API,
// written once for every compiled front end that includes it (packages/registry.json's `shares`
// says which); packages/python/_args.py is the same rules for the packages whose front end is
// Python. It compiles under the limited API, so nanobind's abi3 build uses it as is.
//
// Every function that can fail sets a Python exception and returns false; the binding raises
// it its own way (py::error_already_set, nb::python_error). What a rule decides:
//  - an int: a Python int or anything with __index__ (numpy ints), never a bool (numpy's
//    either), float, str or None (TypeError), and within int64 (OverflowError);
//  - eps: a real number (numbers.Real), never a bool, str, None or an array, 0-d included;
//  - tokens: lists and tuples copied element by element as ints; arrays read in place when
//    their buffer is native int32, int64 or (where the function compares it exactly) uint64
//    with whole-element strides, converted to int64 otherwise; type before shape;
//  - floats: float32 in either byte order, read in place, or as a native copy where the core
//    cannot read it (byte-swapped, strides that are not whole elements); type before shape;
//  - out=: a float32 numpy array (TypeError), writeable and C-contiguous (ValueError).
// Every object held here is released in a destructor, which runs with the GIL held: the
// bindings keep these values alive around their gil_scoped_release blocks, never inside them.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "kvbridge/rmsnorm.hpp"
#include "kvbridge/tokens.hpp"

namespace kvbridge::args {

// A new reference, released when it goes.
struct Ref {
  PyObject* ptr = nullptr;
  Ref() = default;
  explicit Ref(PyObject* p) : ptr(p) {}
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  Ref(Ref&& other) noexcept : ptr(other.ptr) { other.ptr = nullptr; }
  Ref& operator=(Ref&& other) noexcept {
    std::swap(ptr, other.ptr);
    return *this;
  }
  ~Ref() { Py_XDECREF(ptr); }
  explicit operator bool() const { return ptr != nullptr; }
};

// A Py_buffer held until it goes.
struct Buffer {
  Py_buffer view{};
  bool held = false;
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { release(); }
  void release() {
    if (held) PyBuffer_Release(&view);
    held = false;
  }
  bool get(PyObject* obj, int flags) {
    held = PyObject_GetBuffer(obj, &view, flags) == 0;
    return held;
  }
};

// What the rules look up once, at module init (`init`), and keep for the process's life.
struct Names {
  PyObject* numpy_bool = nullptr;     // numpy.bool_
  PyObject* ndarray = nullptr;        // numpy.ndarray
  PyObject* asarray = nullptr;        // numpy.asarray
  PyObject* ascontiguous = nullptr;   // numpy.ascontiguousarray
  PyObject* empty = nullptr;          // numpy.empty
  PyObject* int64 = nullptr;          // numpy.int64
  PyObject* float32 = nullptr;        // numpy.float32
  PyObject* float32_dtype = nullptr;  // numpy.dtype("float32")
  PyObject* real = nullptr;           // numbers.Real
};
inline Names& names() {
  static Names n;
  return n;
}

inline bool init() {
  Ref numpy(PyImport_ImportModule("numpy")), numbers(PyImport_ImportModule("numbers"));
  if (!numpy || !numbers) return false;
  Names& n = names();
  n.numpy_bool = PyObject_GetAttrString(numpy.ptr, "bool_");
  n.ndarray = PyObject_GetAttrString(numpy.ptr, "ndarray");
  n.asarray = PyObject_GetAttrString(numpy.ptr, "asarray");
  n.ascontiguous = PyObject_GetAttrString(numpy.ptr, "ascontiguousarray");
  n.empty = PyObject_GetAttrString(numpy.ptr, "empty");
  n.int64 = PyObject_GetAttrString(numpy.ptr, "int64");
  n.float32 = PyObject_GetAttrString(numpy.ptr, "float32");
  n.real = PyObject_GetAttrString(numbers.ptr, "Real");
  Ref dtype(PyObject_GetAttrString(numpy.ptr, "dtype"));
  if (dtype) n.float32_dtype = PyObject_CallFunction(dtype.ptr, "s", "float32");
  return n.numpy_bool && n.ndarray && n.asarray && n.ascontiguous && n.empty && n.int64 &&
         n.float32 && n.real && n.float32_dtype;
}

// --- messages ------------------------------------------------------------------------------

// str(obj) as UTF-8 ("" if even that fails: a message must not raise).
inline std::string text(PyObject* obj) {
  Ref s(PyObject_Str(obj));
  const char* c = s ? PyUnicode_AsUTF8AndSize(s.ptr, nullptr) : nullptr;
  if (c == nullptr) PyErr_Clear();
  return c != nullptr ? c : "";
}

inline std::string attr_text(PyObject* obj, const char* name) {
  Ref value(PyObject_GetAttrString(obj, name));
  if (!value) {
    PyErr_Clear();
    return "";
  }
  return text(value.ptr);
}

// A wrong value as every message names it: its type (qualified outside builtins) and repr.
inline std::string describe(PyObject* obj) {
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(obj));
  const std::string module = attr_text(type, "__module__"), name = attr_text(type, "__name__");
  Ref repr(PyObject_Repr(obj));
  const std::string shown = repr ? text(repr.ptr) : (PyErr_Clear(), std::string("?"));
  return (module == "builtins" ? name : module + "." + name) + ": " + shown;
}

inline bool fail(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  return false;
}

// --- ints and eps ------------------------------------------------------------------------------

inline bool is_bool(PyObject* obj) {
  return PyBool_Check(obj) || PyObject_IsInstance(obj, names().numpy_bool) == 1;
}

inline bool as_int64(PyObject* obj, std::int64_t* out) {
  int overflow = 0;
  if (PyLong_CheckExact(obj)) {  // the common case, first
    *out = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow == 0) return !(*out == -1 && PyErr_Occurred());
  }
  // numpy.bool_ too: its __index__ is deprecated in some numpy releases, an error in others.
  if (is_bool(obj) || !PyIndex_Check(obj)) {
    return fail(PyExc_TypeError, "expected an int, got " + describe(obj));
  }
  Ref index(PyNumber_Index(obj));
  if (!index) return false;
  *out = PyLong_AsLongLongAndOverflow(index.ptr, &overflow);
  if (overflow != 0) return fail(PyExc_OverflowError, text(index.ptr) + " does not fit in int64");
  return !(*out == -1 && PyErr_Occurred());
}

inline bool as_eps(PyObject* obj, double* out) {
  if (PyFloat_CheckExact(obj)) {  // the common case, first
    *out = PyFloat_AsDouble(obj);
    return true;
  }
  if (is_bool(obj) || PyObject_IsInstance(obj, names().real) != 1) {
    PyErr_Clear();
    return fail(PyExc_TypeError, "eps must be a float, got " + describe(obj));
  }
  *out = PyFloat_AsDouble(obj);
  return !(*out == -1.0 && PyErr_Occurred());
}

// --- arrays ----------------------------------------------------------------------------------

inline Ref call(PyObject* fn, PyObject* a, PyObject* b = nullptr) {
  return Ref(PyObject_CallFunctionObjArgs(fn, a, b, nullptr));
}

// numpy's view of an array argument, refusing what is not numeric data at all (None, str,
// arbitrary objects) before numpy turns it into an object array. Sets `kind` to dtype.kind.
inline Ref array_of(PyObject* obj, const char* name, const char* what, std::string& kind) {
  const std::string refused = std::string(name) + " must be " + what + ", got ";
  if (obj == Py_None || PyUnicode_Check(obj)) {
    fail(PyExc_TypeError, refused + describe(obj));
    return Ref();
  }
  Ref arr = call(names().asarray, obj);
  if (!arr) return Ref();
  Ref dtype(PyObject_GetAttrString(arr.ptr, "dtype"));
  if (!dtype) return Ref();
  kind = attr_text(dtype.ptr, "kind");
  if (kind == "O") {
    fail(PyExc_TypeError, refused + describe(obj));
    return Ref();
  }
  return arr;
}

inline std::string dtype_text(PyObject* arr) { return attr_text(arr, "dtype"); }

// A token argument ready for the core, with what keeps its memory alive.
struct Tokens {
  AnyTokens view;
  Buffer buffer;                     // the array read in place, or its int64 conversion
  Ref owner;                         // that array, where numpy made it
  std::vector<std::int64_t> copied;  // a list or tuple, copied element by element
};

// Views a buffer the core reads in place: 1-D native int32, int64 or (with `keep_uint64`)
// uint64 with whole-element strides. False for anything else, which is converted.
inline bool view_buffer(PyObject* arr, bool keep_uint64, Tokens& out) {
  if (!out.buffer.get(arr, PyBUF_RECORDS_RO)) {
    PyErr_Clear();
    return false;
  }
  const Py_buffer& v = out.buffer.view;
  // numpy writes native-order formats with no byte-order prefix: one character.
  if (v.ndim != 1 || v.format == nullptr || v.format[0] == 0 || v.format[1] != 0 ||
      v.strides[0] % v.itemsize != 0) {
    return false;
  }
  auto view = [&](auto* data) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(data)>>;
    out.view = TokenView<T>{data, v.shape[0], v.strides[0] / v.itemsize};
    return true;
  };
  const char c = v.format[0];
  if (c == 'i' && v.itemsize == 4) return view(static_cast<const std::int32_t*>(v.buf));
  if ((c == 'l' || c == 'q') && v.itemsize == 8) {
    return view(static_cast<const std::int64_t*>(v.buf));
  }
  if (keep_uint64 && (c == 'L' || c == 'Q') && v.itemsize == 8) {
    return view(static_cast<const std::uint64_t*>(v.buf));
  }
  return false;
}

inline bool to_tokens(PyObject* obj, const char* name, bool keep_uint64, Tokens& out) {
  if (Py_TYPE(obj) == reinterpret_cast<PyTypeObject*>(names().ndarray) &&
      view_buffer(obj, keep_uint64, out)) {
    return true;  // the per-call fast path: an array the core reads as it is
  }
  out.buffer.release();
  if (PyList_Check(obj) || PyTuple_Check(obj)) {
    Ref iter(PyObject_GetIter(obj));
    if (!iter) return false;
    while (PyObject* raw = PyIter_Next(iter.ptr)) {
      Ref item(raw);
      std::int64_t value;
      if (!as_int64(item.ptr, &value)) return false;
      out.copied.push_back(value);
    }
    if (PyErr_Occurred()) return false;
    out.view =
        TokenView<std::int64_t>{out.copied.data(), static_cast<std::int64_t>(out.copied.size()), 1};
    return true;
  }
  std::string kind;
  Ref arr = array_of(obj, name, "an integer array or sequence", kind);
  if (!arr) return false;
  if (kind != "i" && kind != "u") {  // type before shape
    return fail(PyExc_TypeError,
                std::string(name) + " must have an integer dtype, got " + dtype_text(arr.ptr));
  }
  const std::string ndim = attr_text(arr.ptr, "ndim");
  if (ndim != "1") {
    return fail(PyExc_ValueError,
                std::string(name) + " must be 1-D, got shape " + attr_text(arr.ptr, "shape"));
  }
  if (!view_buffer(arr.ptr, keep_uint64, out)) {
    out.buffer.release();
    Ref wide(PyObject_CallMethod(arr.ptr, "astype", "O", names().int64));
    if (!wide) return false;
    if (!view_buffer(wide.ptr, false, out)) {  // numpy's own int64: cannot happen
      return fail(PyExc_SystemError, std::string(name) + ": int64 conversion not readable");
    }
    arr = std::move(wide);
  }
  out.owner = std::move(arr);
  return true;
}

// allocate_many's counts: a token argument (named "counts"), read into int64 values.
inline bool to_counts(PyObject* obj, std::vector<std::int64_t>& out) {
  Tokens input;
  if (!to_tokens(obj, "counts", false, input)) return false;
  std::visit(
      [&](const auto& view) {
        for (std::int64_t i = 0; i < view.size; ++i) {
          out.push_back(static_cast<std::int64_t>(view.data[i * view.stride]));
        }
      },
      input.view);
  return true;
}

// Where the core reads a token argument from (the _testing hook data_address).
inline std::uintptr_t address_of(const Tokens& tokens) {
  return std::visit([](const auto& v) { return reinterpret_cast<std::uintptr_t>(v.data); },
                    tokens.view);
}

// A float32 argument as the core's view, with what keeps its memory alive.
struct Floats {
  FloatArrayView view{nullptr, {}, {}};
  Buffer buffer;
  Ref owner;
};

// A float32 in native byte order, however the exporter spells it: numpy writes "f" for an
// aligned array and "=f" (native order, no alignment) for a view at a byte offset, which the
// core reads byte for byte.
inline bool is_native_float32(const char* format) {
  if (format == nullptr) return false;
  const char native = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? '<' : '>';
  if (*format == '@' || *format == '=' || *format == native) ++format;
  return format[0] == 'f' && format[1] == 0;
}

inline bool float_buffer(PyObject* arr, Floats& out) {
  if (!out.buffer.get(arr, PyBUF_RECORDS_RO)) return false;
  const Py_buffer& v = out.buffer.view;
  if (!is_native_float32(v.format)) return false;
  for (int d = 0; d < v.ndim; ++d) {
    if (v.strides[d] % 4 != 0) return false;
  }
  out.view.data = static_cast<const float*>(v.buf);
  for (int d = 0; d < v.ndim; ++d) {
    out.view.shape.push_back(v.shape[d]);
    out.view.strides.push_back(v.strides[d] / 4);
  }
  return true;
}

inline bool to_floats(PyObject* obj, const char* name, Floats& out) {
  // The per-call fast path: an exact ndarray whose buffer the core reads as it is. Anything
  // else, and every refusal, takes the rules below (their attribute lookups cost microseconds).
  if (Py_TYPE(obj) == reinterpret_cast<PyTypeObject*>(names().ndarray)) {
    if (float_buffer(obj, out)) return true;
    PyErr_Clear();
    out.buffer.release();
  }
  std::string kind;
  Ref arr = array_of(obj, name, "a float32 array", kind);
  if (!arr) return false;
  Ref itemsize(PyObject_GetAttrString(arr.ptr, "itemsize"));
  if (!itemsize) return false;
  if (kind != "f" || PyLong_AsLong(itemsize.ptr) != 4) {  // float32 in either byte order
    return fail(PyExc_TypeError,
                std::string(name) + " must be float32, got " + dtype_text(arr.ptr));
  }
  if (!float_buffer(arr.ptr, out)) {  // byte-swapped, or strides of part of an element
    PyErr_Clear();
    out.buffer.release();
    Ref native = call(names().ascontiguous, arr.ptr, names().float32);
    if (!native || !float_buffer(native.ptr, out)) {
      // Every native float32 numpy makes is read above: say so rather than leave no error.
      if (PyErr_Occurred() == nullptr) fail(PyExc_TypeError, std::string(name) + " is unreadable");
      return false;
    }
    arr = std::move(native);
  }
  out.owner = std::move(arr);
  return true;
}

// rmsnorm's out=: its type and dtype, checked with every other argument's type.
// The per-call fast path for out=: an exact ndarray with a writeable C-contiguous native float32
// buffer, which is everything check_out_type and out_buffer ask. False (nothing set, nothing
// held) sends it through them, for their messages.
inline bool fast_out(PyObject* out, Buffer& buffer) {
  if (Py_TYPE(out) != reinterpret_cast<PyTypeObject*>(names().ndarray)) return false;
  if (!buffer.get(out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND)) {
    PyErr_Clear();
    return false;
  }
  const char* format = buffer.view.format;
  if (format != nullptr && format[0] == 'f' && format[1] == 0) return true;
  buffer.release();
  return false;
}

inline bool check_out_type(PyObject* out) {
  if (PyObject_IsInstance(out, names().ndarray) != 1) {
    PyErr_Clear();
    return fail(PyExc_TypeError, "out must be a numpy.ndarray, got " + describe(out));
  }
  Ref dtype(PyObject_GetAttrString(out, "dtype"));
  if (!dtype) return false;
  const int same = PyObject_RichCompareBool(dtype.ptr, names().float32_dtype, Py_EQ);
  if (same != 1)
    return same < 0 ? false : fail(PyExc_TypeError, "out must be float32, got " + text(dtype.ptr));
  return true;
}

// ...and its layout, after every type: the buffer the kernel writes.
inline bool out_buffer(PyObject* out, Buffer& buffer) {
  if (!buffer.get(out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_ND)) {
    PyErr_Clear();
    return fail(PyExc_ValueError, "out must be a writeable C-contiguous array");
  }
  return true;
}

inline std::vector<std::int64_t> shape_of(const Py_buffer& v) {
  return std::vector<std::int64_t>(v.shape, v.shape + v.ndim);
}

}  // namespace kvbridge::args
