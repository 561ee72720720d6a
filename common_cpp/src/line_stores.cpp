// Non-temporal stores of finished rows: when to use them (stores.hpp), and the CPU-feature test
// that picks their width.
#include <algorithm>
#include <cstring>

#include "kvbridge/stores.hpp"
#include "kvbridge/threads.hpp"
#include "rmsnorm_parts.hpp"

namespace kvbridge::rmsnorm_parts {
namespace {

// Non-temporal stores of whole 64-byte lines: one store per line where the CPU has AVX-512,
// four 16-byte stores elsewhere: the single store made every dtype's kernel faster (commit
// 4feb28b has the measurements).
#if defined(__SSE2__)
void stream_lines_sse2(const char* src, char* dst, std::int64_t lines) noexcept {
  for (std::int64_t i = 0; i < lines * 64; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
  }
}
#endif
#ifdef KVBRIDGE_X86_DISPATCH
__attribute__((target("avx512f"))) void stream_lines_avx512(const char* src, char* dst,
                                                            std::int64_t lines) noexcept {
  for (std::int64_t i = 0; i < lines * 64; i += 64) {
    store_line(dst + i, _mm512_loadu_si512(src + i), true);
  }
}
#endif

}  // namespace

#ifdef KVBRIDGE_X86_DISPATCH
bool cpu_has_avx512f() noexcept {
  static const bool has =
      __builtin_cpu_supports("avx512f") && kernel_paths_allow(KernelPaths::kAvx512);
  return has;
}
#endif

void write_output(const char* format, void* out, std::int64_t bytes, bool existing,
                  const std::function<void(bool)>& write) {
  if (!existing) {  // fresh memory is written in place, never streamed
    fault_in_fresh_output(out, bytes);
    return write(false);
  }
  store_timings().write(store_choice(), format, bytes, get_num_threads(), write);
}

// Copies a finished row (in L1) to its place in memory with non-temporal stores: float32 rows,
// and 16-bit rows whose scale pass cannot stream them itself (HalfPasses::streams).
void stream_row(const void* src_row, void* dst_row, std::int64_t bytes) noexcept {
  const char* src = static_cast<const char*>(src_row);
  char* dst = static_cast<char*>(dst_row);
  std::int64_t i = 0;
#if defined(__SSE2__)
  const std::int64_t head = (64 - (reinterpret_cast<std::uintptr_t>(dst) & 63)) & 63;
  if (head <= bytes) {
    std::memcpy(dst, src, head);
    const std::int64_t lines = (bytes - head) / 64;
    auto* stream_lines = stream_lines_sse2;
#ifdef KVBRIDGE_X86_DISPATCH
    if (cpu_has_avx512f()) stream_lines = stream_lines_avx512;
#endif
    stream_lines(src + head, dst + head, lines);
    i = head + lines * 64;
  }
#endif
  std::memcpy(dst + i, src + i, bytes - i);
}

void stream_fence() noexcept {
#if defined(__SSE2__)
  _mm_sfence();  // streamed stores are visible before the chunk counts as done
#endif
}

}  // namespace kvbridge::rmsnorm_parts
