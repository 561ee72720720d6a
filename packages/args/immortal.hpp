// Module functions that threads can call together with the GIL off (packages/registry.json's
// `shares` says which front ends use it).
//
// Every call through a module attribute (`kv.count_eos(...)`) takes a reference to the function
// object and drops it again. On a free-threaded CPython a reference from any thread but the
// object's maker is counted on one shared atomic field, so two threads calling the same function
// write the same cache line on every call, and their calls barely scale. nanobind makes every
// function it creates immortal on a free-threaded build for this reason; pybind11 and Cython do
// not, so their front ends do it for their own module's functions, the way CPython makes an
// object immortal (untracked by the collector, owned by no thread, the local count at its
// immortal value): the interpreter then skips the count altogether. A module's functions live as
// long as the interpreter anyway. With the GIL a count is a plain integer: nothing to do.
#pragma once

#include <Python.h>

namespace kvbridge::args {

// Called at import, while the importing thread holds the only references.
inline void make_immortal(PyObject* op) {
#ifdef Py_GIL_DISABLED
  if (PyObject_IS_GC(op)) PyObject_GC_UnTrack(op);
  op->ob_tid = _Py_UNOWNED_TID;
  op->ob_ref_local = _Py_IMMORTAL_REFCNT_LOCAL;
  op->ob_ref_shared = 0;
#else
  (void)op;
#endif
}

}  // namespace kvbridge::args
