// Cython's `except +handler` for every core declaration.
//
// Cython's built-in `except +` maps five standard exceptions differently from pybind11, nanobind
// and torch (length_error -> RuntimeError, range_error and underflow_error -> ArithmeticError,
// bad_cast -> TypeError, ios_base::failure -> OSError). CONTRACT §2 follows the other three, so
// this handler, called by Cython inside its catch block, rethrows and sets the contract's Python
// exception with what() word for word. Most-derived types come first.
#pragma once

#include <Python.h>

#include <ios>
#include <new>
#include <stdexcept>
#include <system_error>
#include <typeinfo>

namespace kvbridge_cython {

inline void translate_exception() {
  try {
    throw;
  } catch (const std::bad_alloc& e) {
    PyErr_SetString(PyExc_MemoryError, e.what());
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::domain_error& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::length_error& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::out_of_range& e) {
    PyErr_SetString(PyExc_IndexError, e.what());
  } catch (const std::range_error& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::overflow_error& e) {
    PyErr_SetString(PyExc_OverflowError, e.what());
  } catch (const std::exception& e) {  // underflow, bad_cast, ios/system errors, logic, custom
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {  // not derived from std::exception (`throw 42`)
    PyErr_SetString(PyExc_RuntimeError, "Caught an unknown exception!");
  }
}

}  // namespace kvbridge_cython
