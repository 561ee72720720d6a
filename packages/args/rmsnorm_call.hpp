// rmsnorm's call at the CPython C API level, for the compiled front ends (packages/registry.json's
// `shares` says which): its arguments read by args.hpp's rules, its output allocated as a numpy
// array with the GIL held, and its kernel run with the GIL released. A job of its own beside
// args.hpp, which only reads arguments.
#pragma once

#include "args.hpp"

namespace kvbridge::args {

// --- rmsnorm -----------------------------------------------------------------------------------

// The GIL, released by `release()` and taken back when this goes (also while an exception
// unwinds past it, so the binding's translator runs with the GIL held).
class Released {
 public:
  Released() = default;
  Released(const Released&) = delete;
  Released& operator=(const Released&) = delete;
  ~Released() {
    if (state_ != nullptr) PyEval_RestoreThread(state_);
  }
  void release() { state_ = PyEval_SaveThread(); }

 private:
  PyThreadState* state_ = nullptr;
};

// A Python error is set: leaves the core's allocation callback for rmsnorm_fresh to return.
struct PythonError {};

// rmsnorm into a fresh float32 numpy array: the core checks the arguments, then calls back to
// allocate (GIL held), and the kernel runs with the GIL released. A new reference, or nullptr
// with a Python error set; a core exception propagates with the GIL held again.
inline PyObject* rmsnorm_fresh(const FloatArrayView& x, const FloatArrayView& weight, double eps) {
  Ref out;
  Buffer target;
  try {
    Released gil;
    kvbridge::rmsnorm(x, weight, eps, [&](const std::vector<std::int64_t>& shape) -> float* {
      {  // every Python object made here goes before the GIL does
        Ref dims(PyTuple_New(static_cast<Py_ssize_t>(shape.size())));
        for (size_t d = 0; dims && d < shape.size(); ++d) {
          PyTuple_SetItem(dims.ptr, static_cast<Py_ssize_t>(d), PyLong_FromLongLong(shape[d]));
        }
        if (dims) out = call(names().empty, dims.ptr, names().float32);
      }
      if (!out || !target.get(out.ptr, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS)) throw PythonError{};
      gil.release();
      return static_cast<float*>(target.view.buf);
    });
  } catch (const PythonError&) {
    return nullptr;
  }
  PyObject* result = out.ptr;
  out.ptr = nullptr;
  return result;
}

// rmsnorm as the compiled front ends expose it: every type first (x, weight, out),
// then out's layout, then the core's checks, the kernel without the GIL. A new reference, or
// nullptr with a Python error set.
inline PyObject* rmsnorm(PyObject* x_obj, PyObject* weight_obj, double eps, PyObject* out) {
  Floats x, weight;
  if (!to_floats(x_obj, "x", x) || !to_floats(weight_obj, "weight", weight)) return nullptr;
  if (out == Py_None) return rmsnorm_fresh(x.view, weight.view, eps);
  Buffer target;
  if (!fast_out(out, target) && (!check_out_type(out) || !out_buffer(out, target))) return nullptr;
  {
    Released gil;
    gil.release();
    kvbridge::rmsnorm(x.view, weight.view, eps, static_cast<float*>(target.view.buf),
                      shape_of(target.view));
  }
  Py_INCREF(out);
  return out;
}

}  // namespace kvbridge::args
