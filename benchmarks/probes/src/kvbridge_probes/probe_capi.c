/* The cheapest call CPython offers an extension: METH_FASTCALL, no argument parsing. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject* noop(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  (void)args;
  (void)nargs;
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {{"noop", (PyCFunction)(void (*)(void))noop, METH_FASTCALL, NULL},
                                {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "probe_capi", NULL, -1, methods};

PyMODINIT_FUNC PyInit_probe_capi(void) { return PyModule_Create(&module); }
