/* The hardware floors the kernels are compared against, at a stated thread count:
 *   copy(dst, src, threads)  copies src's bytes into dst (what rmsnorm out= must at least do);
 *   read(src, threads)       reads every byte once (what count_eos and common_prefix must do);
 *   rmsnorm(out, x, w, eps, threads, stream)
 *                            a plain float32 RMSNorm written for the check: per row, the sum of
 *                            squares, then the scaled row stored, with ordinary stores or (stream
 *                            true) non-temporal ones. What this machine attains for the same
 *                            work without kvbridge's code: where kvbridge is behind it, the gap
 *                            is kvbridge's; where it is behind the copy, the machine's.
 * Threads come from OpenMP's persistent pool, like the kernels' own pool: no thread is started
 * per call on either side of a ratio; read at one thread enters no parallel region, so a small
 * input's floor is the read, not the region's cost (count_eos's rows are one thread). Loops are
 * cloned for AVX2/AVX-512 like the core's. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

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

// --- the RMSNorm loop ---------------------------------------------------------------------------
// Sixteen independent lanes: the compiler vectorizes them (no reassociation needed) at each
// clone's width.
CLONES static float sum_squares(const float* x, Py_ssize_t n) {
  float lanes[16] = {0};
  Py_ssize_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int l = 0; l < 16; ++l) lanes[l] += x[i + l] * x[i + l];
  }
  for (; i < n; ++i) lanes[0] += x[i] * x[i];
  float sum = 0;
  for (int l = 0; l < 16; ++l) sum += lanes[l];
  return sum;
}

CLONES static void scale_row(float* y, const float* x, const float* w, float inv, Py_ssize_t n) {
  for (Py_ssize_t i = 0; i < n; ++i) y[i] = x[i] * inv * w[i];
}

#if defined(__x86_64__) && defined(__GNUC__)
// Non-temporal stores from the first 64-byte line of y on (the lines before it, and the tail,
// ordinary): at AVX-512 width where the CPU has it, else SSE's, which every x86-64 has (the
// write-combining buffers join 16-byte streams into whole lines all the same).
__attribute__((target("avx512f"))) static void stream_row_avx512(float* y, const float* x,
                                                                 const float* w, float inv,
                                                                 Py_ssize_t n) {
  Py_ssize_t i = 0;
  for (; i < n && ((uintptr_t)(y + i) & 63) != 0; ++i) y[i] = x[i] * inv * w[i];
  const __m512 s = _mm512_set1_ps(inv);
  for (; i + 16 <= n; i += 16) {
    _mm512_stream_ps(
        y + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), s), _mm512_loadu_ps(w + i)));
  }
  for (; i < n; ++i) y[i] = x[i] * inv * w[i];
}

static void stream_row_sse(float* y, const float* x, const float* w, float inv, Py_ssize_t n) {
  Py_ssize_t i = 0;
  for (; i < n && ((uintptr_t)(y + i) & 15) != 0; ++i) y[i] = x[i] * inv * w[i];
  const __m128 s = _mm_set1_ps(inv);
  for (; i + 4 <= n; i += 4) {
    _mm_stream_ps(y + i, _mm_mul_ps(_mm_mul_ps(_mm_loadu_ps(x + i), s), _mm_loadu_ps(w + i)));
  }
  for (; i < n; ++i) y[i] = x[i] * inv * w[i];
}
#endif

typedef void (*row_writer)(float*, const float*, const float*, float, Py_ssize_t);

static void rmsnorm_rows(float* y, const float* x, const float* w, float eps, Py_ssize_t rows,
                         Py_ssize_t width, row_writer write) {
  for (Py_ssize_t r = 0; r < rows; ++r) {
    const float* xr = x + r * width;
    const float inv = 1.0f / sqrtf(sum_squares(xr, width) / (float)width + eps);
    write(y + r * width, xr, w, inv, width);
  }
}

static int is_float32(const Py_buffer* view) {
  return view->itemsize == 4 && view->format != NULL && strcmp(view->format, "f") == 0;
}

static PyObject* rmsnorm(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  Py_buffer out, x, w;
  if (nargs != 6) return PyErr_Format(PyExc_TypeError, "rmsnorm(out, x, w, eps, threads, stream)");
  const double eps = PyFloat_AsDouble(args[3]);
  const long threads = PyLong_AsLong(args[4]);
  const int stream = PyObject_IsTrue(args[5]);
  if (PyErr_Occurred()) return NULL;
  if (threads < 1) return PyErr_Format(PyExc_ValueError, "threads must be >= 1, got %ld", threads);
  const int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT;
  if (PyObject_GetBuffer(args[0], &out, flags | PyBUF_WRITABLE) < 0) return NULL;
  if (PyObject_GetBuffer(args[1], &x, flags) < 0) {
    PyBuffer_Release(&out);
    return NULL;
  }
  if (PyObject_GetBuffer(args[2], &w, flags) < 0) {
    PyBuffer_Release(&x);
    PyBuffer_Release(&out);
    return NULL;
  }
  PyObject* result = NULL;
  const Py_ssize_t width = w.len / 4;
  if (!is_float32(&out) || !is_float32(&x) || !is_float32(&w) || width == 0 || x.len != out.len ||
      x.len % w.len != 0) {
    PyErr_Format(PyExc_ValueError, "rmsnorm: float32 out and x of one size, rows of len(w)");
    goto done;
  }
  row_writer write = scale_row;
#if defined(__x86_64__) && defined(__GNUC__)
  if (stream) write = __builtin_cpu_supports("avx512f") ? stream_row_avx512 : stream_row_sse;
#else
  if (stream) {
    PyErr_SetString(PyExc_NotImplementedError, "rmsnorm: no streamed stores on this CPU");
    goto done;
  }
#endif
  {
    float* y = out.buf;
    const float* xs = x.buf;
    const float* ws = w.buf;
    const Py_ssize_t rows = x.len / w.len;
    Py_BEGIN_ALLOW_THREADS if (threads == 1)
        rmsnorm_rows(y, xs, ws, (float)eps, rows, width, write);
    else {
#pragma omp parallel num_threads(threads)
      {
        const int t = omp_get_thread_num(), k = omp_get_num_threads();
        const Py_ssize_t begin = rows * t / k, end = rows * (t + 1) / k;
        rmsnorm_rows(y + begin * width, xs + begin * width, ws, (float)eps, end - begin, width,
                     write);
      }
    }
#if defined(__x86_64__) && defined(__GNUC__)
    if (stream) _mm_sfence();  // the streamed lines are visible before the call returns
#endif
    Py_END_ALLOW_THREADS
  }
  result = Py_NewRef(Py_None);
done:
  PyBuffer_Release(&w);
  PyBuffer_Release(&x);
  PyBuffer_Release(&out);
  return result;
}

static PyMethodDef methods[] = {
    {"copy", (PyCFunction)(void (*)(void))copy_all, METH_FASTCALL, "copy(dst, src, threads)"},
    {"read", (PyCFunction)(void (*)(void))read_all, METH_FASTCALL, "read(src, threads) -> xor"},
    {"rmsnorm", (PyCFunction)(void (*)(void))rmsnorm, METH_FASTCALL,
     "rmsnorm(out, x, w, eps, threads, stream)"},
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
