/* The hardware floors the kernels are compared against, at a stated thread count:
 *   copy(dst, src, threads)  copies src's bytes into dst (what rmsnorm out= must at least do);
 *   read(src, threads)       reads every byte once (what count_eos and common_prefix must do);
 *   rmsnorm(out, x, w, eps, threads, stream, dtype="float32")
 *                            a plain RMSNorm written for the check: per row, the sum of squares,
 *                            then the scaled row stored, with ordinary stores or (stream true)
 *                            non-temporal ones; dtype "bfloat16" or "float16" takes 2-byte
 *                            buffers of that format (x, w and out alike; any 2-byte buffer
 *                            format, as numpy has no bfloat16) with float32 math, as
 *                            kvbridge_torch's 16-bit kernel does. What this machine attains for
 *                            the same work without kvbridge's code: where kvbridge is behind it,
 *                            the gap is kvbridge's; where it is behind the copy, the machine's.
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
// LANES independent lanes: the compiler vectorizes them (no reassociation needed) at each
// clone's width, as several vectors of sums, so that the multiply-adds are not one chain waiting
// on its own latency (16 lanes, one or two vectors, held an AVX-512 Xeon's loop to 4 cycles a
// vector).
#define LANES 64

CLONES static float sum_squares(const float* x, Py_ssize_t n) {
  float lanes[LANES] = {0};
  Py_ssize_t i = 0;
  for (; i + LANES <= n; i += LANES) {
    for (int l = 0; l < LANES; ++l) lanes[l] += x[i + l] * x[i + l];
  }
  for (; i < n; ++i) lanes[0] += x[i] * x[i];
  float sum = 0;
  for (int l = 0; l < LANES; ++l) sum += lanes[l];
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

// --- the same loop over 16-bit rows -------------------------------------------------------------
// Each element widened to float32, the math in float32, the result narrowed with round-to-
// nearest-even: bfloat16 as the top half of a float32 (integer operations, which the compiler
// vectorizes), float16 through the compiler's _Float16; where the CPU has them, the native
// conversions below replace both. A streamed row is finished a 64-byte line at a time in a local
// line and sent with SSE2's non-temporal stores (every x86-64 has them; the write-combining buffers
// join the four 16-byte stores into one line).
static inline float bf16_widen(uint16_t h) {
  const uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static inline uint16_t bf16_narrow(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  return (uint16_t)((bits & 0x7fffffffu) > 0x7f800000u ? (bits >> 16) | 0x40u : rounded);
}

#ifdef __FLT16_MAX__
static inline float fp16_widen(uint16_t h) {
  _Float16 v;
  memcpy(&v, &h, 2);
  return (float)v;
}

static inline uint16_t fp16_narrow(float f) {
  const _Float16 v = (_Float16)f;
  uint16_t h;
  memcpy(&h, &v, 2);
  return h;
}
#endif

typedef float (*half_summer)(const uint16_t*, Py_ssize_t);
typedef void (*half_writer)(uint16_t*, const uint16_t*, const float*, float, Py_ssize_t);

#define LINE_VALUES 32 /* 16-bit values in a 64-byte line */

#if defined(__x86_64__) && defined(__GNUC__)
static void stream_line(uint16_t* dst, const uint16_t* line) {
  for (int q = 0; q < 4; ++q) {
    _mm_stream_si128((__m128i*)dst + q, _mm_load_si128((const __m128i*)line + q));
  }
}
#define HALF_STREAMER(name)                                                                       \
  CLONES static void stream_row_##name(uint16_t* y, const uint16_t* x, const float* w, float inv, \
                                       Py_ssize_t n) {                                            \
    Py_ssize_t i = 0;                                                                             \
    for (; i < n && ((uintptr_t)(y + i) & 63) != 0; ++i)                                          \
      y[i] = name##_narrow(name##_widen(x[i]) * inv * w[i]);                                      \
    for (; i + LINE_VALUES <= n; i += LINE_VALUES) {                                              \
      uint16_t line[LINE_VALUES] __attribute__((aligned(64)));                                    \
      for (int l = 0; l < LINE_VALUES; ++l)                                                       \
        line[l] = name##_narrow(name##_widen(x[i + l]) * inv * w[i + l]);                         \
      stream_line(y + i, line);                                                                   \
    }                                                                                             \
    for (; i < n; ++i) y[i] = name##_narrow(name##_widen(x[i]) * inv * w[i]);                     \
  }
#else
#define HALF_STREAMER(name)
#endif

#define HALF_LOOP(name)                                                                          \
  CLONES static float sum_squares_##name(const uint16_t* x, Py_ssize_t n) {                      \
    float lanes[LANES] = {0};                                                                    \
    Py_ssize_t i = 0;                                                                            \
    for (; i + LANES <= n; i += LANES) {                                                         \
      for (int l = 0; l < LANES; ++l) {                                                          \
        const float v = name##_widen(x[i + l]);                                                  \
        lanes[l] += v * v;                                                                       \
      }                                                                                          \
    }                                                                                            \
    for (; i < n; ++i) lanes[0] += name##_widen(x[i]) * name##_widen(x[i]);                      \
    float sum = 0;                                                                               \
    for (int l = 0; l < LANES; ++l) sum += lanes[l];                                             \
    return sum;                                                                                  \
  }                                                                                              \
  CLONES static void scale_row_##name(uint16_t* y, const uint16_t* x, const float* w, float inv, \
                                      Py_ssize_t n) {                                            \
    for (Py_ssize_t i = 0; i < n; ++i) y[i] = name##_narrow(name##_widen(x[i]) * inv * w[i]);    \
  }                                                                                              \
  HALF_STREAMER(name)

HALF_LOOP(bf16)
#ifdef __FLT16_MAX__
HALF_LOOP(fp16)
#endif

#if defined(__x86_64__) && defined(__GNUC__)
// float16 where the CPU has F16C (every x86-64-v3 CPU): GCC converts _Float16 one value per
// instruction, which left the loop above several times slower than the copy, so here the loop
// converts eight values at a time itself, with eight sums in flight as above.
#define F16C_TARGET __attribute__((target("avx2,fma,f16c")))

F16C_TARGET static __m256 fp16_load8(const uint16_t* x) {
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)x));
}

F16C_TARGET static __m128i fp16_scaled8(const uint16_t* x, const float* w, __m256 inv) {
  const __m256 r = _mm256_mul_ps(_mm256_mul_ps(fp16_load8(x), inv), _mm256_loadu_ps(w));
  return _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT);
}

F16C_TARGET static float sum_squares_f16c(const uint16_t* x, Py_ssize_t n) {
  __m256 sums[8];
  for (int k = 0; k < 8; ++k) sums[k] = _mm256_setzero_ps();
  Py_ssize_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 8; ++k) {
      const __m256 v = fp16_load8(x + i + 8 * k);
      sums[k] = _mm256_fmadd_ps(v, v, sums[k]);
    }
  }
  float lanes[8], sum = 0;
  for (int k = 1; k < 8; ++k) sums[0] = _mm256_add_ps(sums[0], sums[k]);
  _mm256_storeu_ps(lanes, sums[0]);
  for (int l = 0; l < 8; ++l) sum += lanes[l];
  for (; i < n; ++i) sum += _cvtsh_ss(x[i]) * _cvtsh_ss(x[i]);
  return sum;
}

F16C_TARGET static void scale_row_f16c(uint16_t* y, const uint16_t* x, const float* w, float inv,
                                       Py_ssize_t n) {
  const __m256 s = _mm256_set1_ps(inv);
  Py_ssize_t i = 0;
  for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i*)(y + i), fp16_scaled8(x + i, w + i, s));
  for (; i < n; ++i) y[i] = _cvtss_sh(_cvtsh_ss(x[i]) * inv * w[i], _MM_FROUND_TO_NEAREST_INT);
}

F16C_TARGET static void stream_row_f16c(uint16_t* y, const uint16_t* x, const float* w, float inv,
                                        Py_ssize_t n) {
  const __m256 s = _mm256_set1_ps(inv);
  Py_ssize_t i = 0;
  for (; i < n && ((uintptr_t)(y + i) & 63) != 0; ++i) {
    y[i] = _cvtss_sh(_cvtsh_ss(x[i]) * inv * w[i], _MM_FROUND_TO_NEAREST_INT);
  }
  for (; i + LINE_VALUES <= n; i += LINE_VALUES) {
    for (int q = 0; q < 4; ++q) {
      _mm_stream_si128((__m128i*)(y + i) + q, fp16_scaled8(x + i + 8 * q, w + i + 8 * q, s));
    }
  }
  for (; i < n; ++i) y[i] = _cvtss_sh(_cvtsh_ss(x[i]) * inv * w[i], _MM_FROUND_TO_NEAREST_INT);
}

// bfloat16 where the CPU has AVX512-BF16 (Cooper Lake, Sapphire Rapids, Zen 4): the integer
// narrowing above is a dozen instructions a vector, and left the loop compute-bound at twice the
// copy's time on such a Xeon; the instruction the kernels use rounds and packs 32 values in one.
// (It flushes subnormal results to zero, which the kernel's exact path avoids; a floor need not.)
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

BF16_TARGET static __m512 bf16_load16(const uint16_t* x) {
  const __m512i bits = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)x));
  return _mm512_castsi512_ps(_mm512_slli_epi32(bits, 16));
}

BF16_TARGET static __m512i bf16_scaled32(const uint16_t* x, const float* w, __m512 inv) {
  const __m512 lo = _mm512_mul_ps(_mm512_mul_ps(bf16_load16(x), inv), _mm512_loadu_ps(w));
  const __m512 hi = _mm512_mul_ps(_mm512_mul_ps(bf16_load16(x + 16), inv), _mm512_loadu_ps(w + 16));
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

BF16_TARGET static float sum_squares_bf16_native(const uint16_t* x, Py_ssize_t n) {
  __m512 sums[4];
  for (int k = 0; k < 4; ++k) sums[k] = _mm512_setzero_ps();
  Py_ssize_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 4; ++k) {
      const __m512 v = bf16_load16(x + i + 16 * k);
      sums[k] = _mm512_fmadd_ps(v, v, sums[k]);
    }
  }
  float sum = _mm512_reduce_add_ps(
      _mm512_add_ps(_mm512_add_ps(sums[0], sums[1]), _mm512_add_ps(sums[2], sums[3])));
  for (; i < n; ++i) sum += bf16_widen(x[i]) * bf16_widen(x[i]);
  return sum;
}

BF16_TARGET static void bf16_native_row(uint16_t* y, const uint16_t* x, const float* w, float inv,
                                        Py_ssize_t n, int stream) {
  const __m512 s = _mm512_set1_ps(inv);
  Py_ssize_t i = 0;
  for (; stream && i < n && ((uintptr_t)(y + i) & 63) != 0; ++i) {
    y[i] = bf16_narrow(bf16_widen(x[i]) * inv * w[i]);
  }
  for (; i + LINE_VALUES <= n; i += LINE_VALUES) {
    const __m512i line = bf16_scaled32(x + i, w + i, s);
    if (stream) {
      _mm512_stream_si512((void*)(y + i), line);
    } else {
      _mm512_storeu_si512(y + i, line);
    }
  }
  for (; i < n; ++i) y[i] = bf16_narrow(bf16_widen(x[i]) * inv * w[i]);
}

static void scale_row_bf16_native(uint16_t* y, const uint16_t* x, const float* w, float inv,
                                  Py_ssize_t n) {
  bf16_native_row(y, x, w, inv, n, 0);
}

static void stream_row_bf16_native(uint16_t* y, const uint16_t* x, const float* w, float inv,
                                   Py_ssize_t n) {
  bf16_native_row(y, x, w, inv, n, 1);
}
#endif

static void half_rows(uint16_t* y, const uint16_t* x, const float* w, float eps, Py_ssize_t rows,
                      Py_ssize_t width, half_summer sum, half_writer write) {
  for (Py_ssize_t r = 0; r < rows; ++r) {
    const uint16_t* xr = x + r * width;
    const float inv = 1.0f / sqrtf(sum(xr, width) / (float)width + eps);
    write(y + r * width, xr, w, inv, width);
  }
}

static void rmsnorm_rows(float* y, const float* x, const float* w, float eps, Py_ssize_t rows,
                         Py_ssize_t width, row_writer write) {
  for (Py_ssize_t r = 0; r < rows; ++r) {
    const float* xr = x + r * width;
    const float inv = 1.0f / sqrtf(sum_squares(xr, width) / (float)width + eps);
    write(y + r * width, xr, w, inv, width);
  }
}

// The work of one call, split into row ranges across the threads: float32 rows (`write`) or
// 16-bit ones (`sum16`, `write16`, with the weights already widened to float32 in `w`).
typedef struct {
  void* y;
  const void* x;
  const float* w;
  float eps;
  Py_ssize_t rows, width;
  row_writer write;
  float (*widen16)(uint16_t);  // a 16-bit weight to float32
  half_summer sum16;
  half_writer write16;
} rows_call;

static void run_rows(const rows_call* c, Py_ssize_t begin, Py_ssize_t end) {
  const Py_ssize_t at = begin * c->width;
  if (c->write16 != NULL) {
    half_rows((uint16_t*)c->y + at, (const uint16_t*)c->x + at, c->w, c->eps, end - begin, c->width,
              c->sum16, c->write16);
  } else {
    rmsnorm_rows((float*)c->y + at, (const float*)c->x + at, c->w, c->eps, end - begin, c->width,
                 c->write);
  }
}

// Points `call` at the loop for `dtype` and `stream`; 0, or -1 with an exception set. The
// portable loops first, then, on x86-64, the native conversions where the CPU has them and the
// non-temporal stores where asked.
static int choose_loop(rows_call* call, const char* dtype, int stream) {
  const int bf16 = strcmp(dtype, "bfloat16") == 0, fp16 = strcmp(dtype, "float16") == 0;
  if (strcmp(dtype, "float32") != 0 && !bf16 && !fp16) {
    PyErr_Format(PyExc_ValueError, "rmsnorm: dtype '%s' is not float32, bfloat16 or float16",
                 dtype);
    return -1;
  }
#ifndef __FLT16_MAX__
  if (fp16) {
    PyErr_SetString(PyExc_NotImplementedError, "rmsnorm: this compiler has no _Float16");
    return -1;
  }
#endif
#if !(defined(__x86_64__) && defined(__GNUC__))
  if (stream) {
    PyErr_SetString(PyExc_NotImplementedError, "rmsnorm: no streamed stores on this CPU");
    return -1;
  }
#endif
  call->write = scale_row;
  call->widen16 = NULL;
  call->sum16 = NULL;
  call->write16 = NULL;
  if (bf16) {
    call->widen16 = bf16_widen;
    call->sum16 = sum_squares_bf16;
    call->write16 = scale_row_bf16;
  }
#ifdef __FLT16_MAX__
  if (fp16) {
    call->widen16 = fp16_widen;
    call->sum16 = sum_squares_fp16;
    call->write16 = scale_row_fp16;
  }
#endif
#if defined(__x86_64__) && defined(__GNUC__)
  if (bf16 && __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw")) {
    call->sum16 = sum_squares_bf16_native;
    call->write16 = stream ? stream_row_bf16_native : scale_row_bf16_native;
  } else if (bf16 && stream) {
    call->write16 = stream_row_bf16;
  }
  if (fp16 && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma")) {
    call->sum16 = sum_squares_f16c;
    call->write16 = stream ? stream_row_f16c : scale_row_f16c;
  }
#ifdef __FLT16_MAX__
  else if (fp16 && stream) {
    call->write16 = stream_row_fp16;
  }
#endif
  if (stream && !bf16 && !fp16) {
    call->write = __builtin_cpu_supports("avx512f") ? stream_row_avx512 : stream_row_sse;
  }
#endif
  return 0;
}

static PyObject* rmsnorm(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  Py_buffer out, x, w;
  if (nargs != 6 && nargs != 7) {
    return PyErr_Format(PyExc_TypeError, "rmsnorm(out, x, w, eps, threads, stream, dtype)");
  }
  const double eps = PyFloat_AsDouble(args[3]);
  const long threads = PyLong_AsLong(args[4]);
  const int stream = PyObject_IsTrue(args[5]);
  const char* dtype = nargs == 7 ? PyUnicode_AsUTF8(args[6]) : "float32";
  if (PyErr_Occurred()) return NULL;
  if (threads < 1) return PyErr_Format(PyExc_ValueError, "threads must be >= 1, got %ld", threads);
  rows_call call;
  if (choose_loop(&call, dtype, stream) < 0) return NULL;
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
  float* widened = NULL;
  const int half = call.write16 != NULL;
  const Py_ssize_t item = half ? 2 : 4, width = w.len / item;
  const int items_right = half ? out.itemsize == 2 && x.itemsize == 2 && w.itemsize == 2
                               : strcmp(out.format, "f") == 0 && strcmp(x.format, "f") == 0 &&
                                     strcmp(w.format, "f") == 0 && out.itemsize == 4;
  if (!items_right || width == 0 || x.len != out.len || x.len % w.len != 0) {
    PyErr_Format(PyExc_ValueError,
                 "rmsnorm: %s out and x of one size, rows of len(w); got out '%s' of %zd bytes, "
                 "x '%s' of %zd, w '%s' of %zd",
                 dtype, out.format, out.len, x.format, x.len, w.format, w.len);
    goto done;
  }
  call.y = out.buf;
  call.x = x.buf;
  call.w = w.buf;
  call.eps = (float)eps;
  call.rows = x.len / w.len;
  call.width = width;
  if (half) {  // the weights widened once a call, as the kernel does
    widened = PyMem_RawMalloc((size_t)width * sizeof(float));
    if (widened == NULL) {
      PyErr_NoMemory();
      goto done;
    }
    for (Py_ssize_t i = 0; i < width; ++i) widened[i] = call.widen16(((const uint16_t*)w.buf)[i]);
    call.w = widened;
  }
  Py_BEGIN_ALLOW_THREADS if (threads == 1) run_rows(&call, 0, call.rows);
  else {
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), k = omp_get_num_threads();
      run_rows(&call, call.rows * t / k, call.rows * (t + 1) / k);
    }
  }
#if defined(__x86_64__) && defined(__GNUC__)
  if (stream) _mm_sfence();  // the streamed lines are visible before the call returns
#endif
  Py_END_ALLOW_THREADS result = Py_NewRef(Py_None);
done:
  PyMem_RawFree(widened);
  PyBuffer_Release(&w);
  PyBuffer_Release(&x);
  PyBuffer_Release(&out);
  return result;
}

static PyMethodDef methods[] = {
    {"copy", (PyCFunction)(void (*)(void))copy_all, METH_FASTCALL, "copy(dst, src, threads)"},
    {"read", (PyCFunction)(void (*)(void))read_all, METH_FASTCALL, "read(src, threads) -> xor"},
    {"rmsnorm", (PyCFunction)(void (*)(void))rmsnorm, METH_FASTCALL,
     "rmsnorm(out, x, w, eps, threads, stream, dtype='float32')"},
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
