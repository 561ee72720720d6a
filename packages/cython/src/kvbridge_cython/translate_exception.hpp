// Cython's `except +handler` for every core declaration.
//
// Cython's built-in `except +` maps five standard exceptions differently from pybind11 and
// torch (length_error -> RuntimeError, range_error and underflow_error -> ArithmeticError,
// bad_cast -> TypeError, ios_base::failure -> OSError). The contract follows the other two, so
// this handler, called by Cython inside its catch block, sorts the exception with the core's one
// catch chain and raises the contract's Python type with what() word for word.
#pragma once

#include <Python.h>

#include "kvbridge/errors.hpp"

namespace kvbridge_cython {

inline void translate_exception() {
  const kvbridge::CaughtException caught = kvbridge::caught_exception();
  // Borrowed from the builtins module: the names are the built-in exception classes.
  PyObject* type =
      PyDict_GetItemString(PyEval_GetBuiltins(), kvbridge::python_exception_name(caught.status));
  PyErr_SetString(type != nullptr ? type : PyExc_RuntimeError, caught.message.c_str());
}

}  // namespace kvbridge_cython
