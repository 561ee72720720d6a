/* The cheapest calls CPython offers an extension, written by hand: METH_FASTCALL for no
 * argument, METH_O for one (an int converted to int64, or any object left as it is). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject* noop(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  (void)args;
  (void)nargs;
  Py_RETURN_NONE;
}

static PyObject* take_int64(PyObject* self, PyObject* arg) {
  (void)self;
  const long long value = PyLong_AsLongLong(arg);
  if (value == -1 && PyErr_Occurred()) return NULL;
  return PyLong_FromLongLong(value);
}

static PyObject* noop_object(PyObject* self, PyObject* arg) {
  (void)self;
  (void)arg;
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {{"noop", (PyCFunction)(void (*)(void))noop, METH_FASTCALL, NULL},
                                {"take_int64", take_int64, METH_O, NULL},
                                {"noop_object", noop_object, METH_O, NULL},
                                {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "probe_capi", NULL, -1, methods};

PyMODINIT_FUNC PyInit_probe_capi(void) { return PyModule_Create(&module); }
