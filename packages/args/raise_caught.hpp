// The one error path of the compiled front ends whose technology leaves a C++ exception to a
// handler of theirs (packages/registry.json's `shares` says which): called inside a catch block,
// it sorts the exception in flight with the core's one catch chain (errors.cpp) and sets the
// contract's Python type with what() word for word.
#pragma once

#include <Python.h>

#include "kvbridge/errors.hpp"

namespace kvbridge::args {

inline void raise_caught() {
  const kvbridge::CaughtException caught = kvbridge::caught_exception();
  // Borrowed from the builtins module: the names are the built-in exception classes.
  PyObject* type =
      PyDict_GetItemString(PyEval_GetBuiltins(), kvbridge::python_exception_name(caught.status));
  PyErr_SetString(type != nullptr ? type : PyExc_RuntimeError, caught.message.c_str());
}

}  // namespace kvbridge::args
