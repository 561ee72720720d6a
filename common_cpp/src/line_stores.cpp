// Non-temporal stores of finished rows: when to use them (stores.hpp), and the CPU-feature test
// that picks their width; a fresh output's pages faulted in before it is written.
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

// A fresh output's pages faulted in before it is written (populate_for_writing, stores.hpp), as
// huge pages where whole ones fit (advise_huge_pages), a piece per chunk across the threads that
// will write it, as their stores would have, unless the allocator handed out memory whose pages
// are there already (ends_resident, two pages asked): an allocating 256x4096 float32 RMSNorm into
// a block glibc's heap kept took 0.36 ms populating it, 0.31 ms not (C++ over the core, Xeon),
// and a Python loop of kvbridge_torch's calls at that shape gets such a block back every call (no
// page fault in 200 calls). Smaller outputs are left to their stores: their pages are often the
// allocator's, already there, and a system call costs more than the few traps it would save.
constexpr std::int64_t kPopulateFromBytes = std::int64_t{1} << 20;
constexpr std::int64_t kPopulatePieceBytes = std::int64_t{1} << 20;

void populate_fresh(void* out, std::int64_t bytes) {
  if (bytes < kPopulateFromBytes || ends_resident(out, bytes)) return;
  advise_huge_pages(out, bytes);  // before any of its pages is faulted in
  char* const base = static_cast<char*>(out);
  parallel_for((bytes + kPopulatePieceBytes - 1) / kPopulatePieceBytes, 1,
               [&](std::int64_t first, std::int64_t last) {
                 const std::int64_t end = std::min(bytes, last * kPopulatePieceBytes);
                 const std::int64_t begin = first * kPopulatePieceBytes;
                 populate_for_writing(base + begin, end - begin);
               });
}

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
    populate_fresh(out, bytes);
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
