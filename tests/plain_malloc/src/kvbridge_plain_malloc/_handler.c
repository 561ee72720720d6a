/* A NEP 49 data allocator for numpy that is plain malloc/calloc/realloc/free, with no cache.
 *
 * numpy's default handler keeps small freed data blocks in a cache of its own and gives them to
 * the next array of the same size; under AddressSanitizer that hides a read of a freed array,
 * which then reads a live array's data. With this handler every free reaches free(), where ASan
 * poisons the block and keeps it out of reuse for a while, so such a read is reported. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_22_API_VERSION
#include <numpy/arrayobject.h>
#include <stdlib.h>

static void* plain_malloc(void* ctx, size_t size) {
  (void)ctx;
  return malloc(size);
}

static void* plain_calloc(void* ctx, size_t count, size_t size) {
  (void)ctx;
  return calloc(count, size);
}

static void* plain_realloc(void* ctx, void* ptr, size_t size) {
  (void)ctx;
  return realloc(ptr, size);
}

static void plain_free(void* ctx, void* ptr, size_t size) {
  (void)ctx;
  (void)size;
  free(ptr);
}

static PyDataMem_Handler plain_handler = {
    "kvbridge_plain_malloc",
    1,
    {NULL, plain_malloc, plain_calloc, plain_realloc, plain_free},
};

/* Make the handler current in the calling thread's context (numpy keeps it in a context
 * variable: a thread started later sees it only if it runs in a copy of this context). */
static PyObject* install(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  PyObject* capsule = PyCapsule_New(&plain_handler, "mem_handler", NULL);
  if (capsule == NULL) return NULL;
  PyObject* previous = PyDataMem_SetHandler(capsule);
  Py_DECREF(capsule);
  if (previous == NULL) return NULL;
  Py_DECREF(previous);
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"install", install, METH_NOARGS, "Make plain malloc/free numpy's data allocator here."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_handler", NULL, -1, methods};

PyMODINIT_FUNC PyInit__handler(void) {
  import_array();
  return PyModule_Create(&module);
}
