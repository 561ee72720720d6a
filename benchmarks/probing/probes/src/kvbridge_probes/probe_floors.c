/* The hardware floors the kernels are compared against, at a stated thread count:
 *   copy(dst, src, threads)  copies src's bytes into dst (what rmsnorm out= must at least do);
 *   read(src, threads)       reads every byte once (what count_eos and common_prefix must do).
 * Threads come from OpenMP's persistent pool, like the kernels' own pool: no thread is started
 * per call on either side of a ratio; read at one thread enters no parallel region, so a small
 * input's floor is the read, not the region's cost (count_eos's rows are one thread). Loops are
 * cloned for AVX2/AVX-512 like the core's. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CLONES
#endif

CLONES static uint64_t xor_words(const uint64_t* p, Py_ssize_t n) {
  uint64_t lanes[8] = {0};
  Py_ssize_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] ^= p[i + l];
  }
  for (; i < n; ++i) lanes[0] ^= p[i];
  return lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3] ^ lanes[4] ^ lanes[5] ^ lanes[6] ^ lanes[7];
}

static int get(PyObject* obj, Py_buffer* view, int writable) {
  return PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0));
}

static PyObject* copy_all(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  Py_buffer dst, src;
  if (nargs != 3) return PyErr_Format(PyExc_TypeError, "copy(dst, src, threads)");
  const long threads = PyLong_AsLong(args[2]);
  if (threads < 1) return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "threads");
  if (get(args[0], &dst, 1) < 0) return NULL;
  if (get(args[1], &src, 0) < 0) {
    PyBuffer_Release(&dst);
    return NULL;
  }
  const Py_ssize_t n = src.len < dst.len ? src.len : dst.len;
  char* d = dst.buf;
  const char* s = src.buf;
  Py_BEGIN_ALLOW_THREADS
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), k = omp_get_num_threads();
    const Py_ssize_t begin = n * t / k, end = n * (t + 1) / k;
    memcpy(d + begin, s + begin, (size_t)(end - begin));
  }
  Py_END_ALLOW_THREADS PyBuffer_Release(&src);
  PyBuffer_Release(&dst);
  Py_RETURN_NONE;
}

static PyObject* read_all(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  Py_buffer src;
  if (nargs != 2) return PyErr_Format(PyExc_TypeError, "read(src, threads)");
  const long threads = PyLong_AsLong(args[1]);
  if (threads < 1) return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_ValueError, "threads");
  if (get(args[0], &src, 0) < 0) return NULL;
  const Py_ssize_t words = src.len / 8;
  const uint64_t* p = src.buf;
  uint64_t result = 0;
  Py_BEGIN_ALLOW_THREADS if (threads == 1) { result = xor_words(p, words); }
  else {
#pragma omp parallel num_threads(threads) reduction(^ : result)
    {
      const int t = omp_get_thread_num(), k = omp_get_num_threads();
      const Py_ssize_t begin = words * t / k, end = words * (t + 1) / k;
      result ^= xor_words(p + begin, end - begin);
    }
  }
  Py_END_ALLOW_THREADS PyBuffer_Release(&src);
  return PyLong_FromUnsignedLongLong(result);
}

static PyMethodDef methods[] = {
    {"copy", (PyCFunction)(void (*)(void))copy_all, METH_FASTCALL, "copy(dst, src, threads)"},
    {"read", (PyCFunction)(void (*)(void))read_all, METH_FASTCALL, "read(src, threads) -> xor"},
    {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "probe_floors", NULL, -1, methods};

// Its functions keep no state and release the GIL: on a free-threaded Python it says it needs
// no GIL, or importing it would turn the GIL back on for the whole process.
PyMODINIT_FUNC PyInit_probe_floors(void) {
  PyObject* m = PyModule_Create(&module);
#ifdef Py_GIL_DISABLED
  if (m != NULL) PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED);
#endif
  return m;
}
