// Which stores a large existing out= is written with, chosen on the machine it runs on; and, at
// the end, how a fresh output's pages are faulted in before it is written.
//
// A normal store first reads the line it writes (write-allocate): for an output that will not
// stay in the last-level cache, that is one extra pass over memory, which non-temporal stores
// skip. An output the cache holds is better written normally: it is still there for whatever
// reads it next, and streaming it costs a full trip to memory. Which wins for a given size is the
// machine's to say, not a rule's: a threshold of a quarter of the last-level cache streamed
// outputs that one AVX-512 EPYC wrote faster to the cache, and cached 32-64 MiB outputs that a
// Xeon with a 480 MiB L3 (the socket's, mostly not this VM's) streamed faster. So under `auto` an
// output smaller than a quarter of the last-level cache, and than 8 MiB, is written to the cache,
// untimed (the next op finds it there), and each larger one is timed both ways at the first call
// of its size (a power of two), format and thread count, and written the faster way from then on.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace kvbridge {

enum class StorePolicy { kAuto, kStream, kCache };

struct StoreChoice {
  StorePolicy policy;             // asked for: KVBRIDGE_STORES, or auto
  std::int64_t last_level_bytes;  // the cache it was chosen from (0: not described)
  std::int64_t timed_from_bytes;  // auto: outputs this large or larger are timed both ways
  // e.g. "auto: outputs under 4 MiB (a quarter of a 16 MiB last-level cache) written to the
  // cache; each larger ... " (the rule; StoreTimings::describe adds what was timed)
  std::string describe() const;
};

// The rule, for any machine (tests give it simulated caches): timed from a quarter of the
// last-level cache, or 8 MiB where that is less (an undescribed cache: 8 MiB).
StoreChoice choose_stores(StorePolicy asked, std::int64_t last_level_bytes);

// "auto", "stream" or "cache" (KVBRIDGE_STORES's values); std::invalid_argument otherwise.
StorePolicy parse_store_policy(const std::string& text);

// This process's choice, made once: KVBRIDGE_STORES (unset: auto) and the last-level cache the
// OS describes for CPU 0 (/sys/devices/system/cpu/cpu0/cache; else sysconf). A bad
// KVBRIDGE_STORES is a std::invalid_argument from the first call that needs the choice.
const StoreChoice& store_choice();

// What auto timed: per size class, format and thread count, the faster way. Thread-safe; two
// first calls of one class at once may both time it, and the first to finish is kept.
class StoreTimings {
 public:
  // Writes an existing out= of `bytes` as `choice` says: write(streamed) once, or, for an
  // output auto has not timed yet, three times each way in turn (the output is whole after any
  // one of them), keeping the faster way by the best of each. `format`: "float32", "bfloat16"
  // or "float16".
  void write(const StoreChoice& choice, const char* format, std::int64_t bytes,
             std::int64_t threads, const std::function<void(bool streamed)>& write_out);
  // Whether auto has timed this class, and streams it (tests).
  bool timed(const char* format, std::int64_t bytes, std::int64_t threads, bool* streams) const;
  // "; timed here: float32 32-64 MiB at 1 thread: streamed (4.1 ms; 6.3 ms to the cache), ..."
  // or "" when nothing was timed.
  std::string describe() const;

 private:
  struct Timed {
    bool streams;
    double stream_s, cache_s;
  };
  using Key = std::tuple<std::string, int, std::int64_t>;  // format, log2(bytes), threads
  mutable std::mutex mutex_;
  std::map<Key, Timed> timed_;
};

// This process's timings (the kernels' and the description's).
StoreTimings& store_timings();

// store_choice().describe() and what this process timed so far.
std::string describe_stores();

// A fresh output (memory just allocated, about to be written whole) has its pages faulted in
// by the first store to each: one trap into the kernel per 4 KiB page, most of the time of an
// allocating call on a large array (a 32 MiB float32 RMSNorm took 13 ms where out= took 2.7).
// Asking the kernel to fault in a range at once (Linux's MADV_POPULATE_WRITE, 5.14 and later)
// does the same work without the traps (about 5.6 ms for 32 MiB where touching each page took
// 8.5, same Xeon); the memory's contents are left as they were. This faults in the whole pages
// inside [p, p + bytes); true where the kernel did (or there are none), false where it cannot
// (another OS, an older kernel): the stores then fault them in as before.
bool populate_for_writing(void* p, std::int64_t bytes) noexcept;

// Whether the whole pages at both ends of [p, p + bytes) are resident already: memory an
// allocator handed out again (glibc serves a freed block of up to 32 MiB from its heap, its
// pages still there), with nothing left to fault in, where populate_for_writing would walk every
// page for nothing (29 us per resident 4 MiB, Xeon). Two pages are asked, not all: a block is
// reused or fresh as a whole, or fresh at its end where the heap grew. False where it cannot
// tell (another OS) or where the range holds no whole page.
bool ends_resident(const void* p, std::int64_t bytes) noexcept;

// The size of a transparent huge page here (2 MiB on x86-64), 0 where the kernel has none.
std::int64_t huge_page_bytes() noexcept;

// Asks the kernel to back the whole huge pages inside [p, p + bytes) with huge pages when they
// are faulted in (madvise MADV_HUGEPAGE, what numpy's allocator asks for every array of 4 MiB or
// more, and torch's with THP_MEM_ALLOC_ENABLE=1): a fresh output then costs one fault and one
// page-table entry per 2 MiB, not per 4 KiB. torch's allocator does not ask by default, and on a
// virtual machine each 4 KiB fault is dear: populating a fresh 32 MiB from torch.empty
// took 8 ms with 4 KiB pages, 2 ms with huge pages (256 MiB: 67 ms, 32 ms; Xeon VM). Called
// only on a fresh output about to be written whole, so nothing is backed that would not be
// written anyway; only its whole huge pages are advised, never a byte outside it. The kernel's
// own settings still decide (transparent_hugepage `never`, or prctl(PR_SET_THP_DISABLE) in
// the process, turns it off). True where the kernel took the advice; false where the range
// holds no whole huge page or the kernel has none.
bool advise_huge_pages(void* p, std::int64_t bytes) noexcept;

// Whether memory advised MADV_HUGEPAGE gets huge pages when it is faulted in here: the
// kernel's transparent_hugepage setting is `always` or `madvise` (its `enabled` file's bracketed
// word), not `never`, and this process has not turned them off (prctl PR_SET_THP_DISABLE).
// False where it cannot tell. `enabled_text` is that file's text (the tests' simulated kernels).
bool huge_pages_on_advice() noexcept;
bool thp_setting_takes_advice(const std::string& enabled_text) noexcept;

// A fresh output (the allocating kernels': Out::kFresh) made ready to be written whole, before
// its first store. Nothing is done where its pages are there already (ends_resident: glibc's
// heap hands a freed block of up to 32 MiB back with its pages, as a loop of 256x4096 float32
// calls gets every call) or where it is under 1 MiB (mostly the allocator's own pages, and a
// system call costs more than the few traps it would save). Otherwise its whole huge pages are
// advised (advise_huge_pages), and where they will be huge, left to its stores: one fault per
// 2 MiB, each page zeroed right before its stores reach it, so they find its lines in the cache.
// Faulted in up front, a whole 32 MiB output was zeroed before its first row was written, and a
// 32 MiB L3 had lost most of those lines again: the stores read them back from memory (AMD EPYC
// with AVX-512: an allocating 2048x4096 float32 RMSNorm at 1.59x numpy's x.copy(); the commit
// has the before and after). The rest, its 4 KiB pages (all of it, where no huge page fits or
// none will be huge), is faulted in up front (populate_for_writing), a piece per chunk across
// the threads that will write it: one system call, not one trap per page.
void fault_in_fresh_output(void* out, std::int64_t bytes);

}  // namespace kvbridge
