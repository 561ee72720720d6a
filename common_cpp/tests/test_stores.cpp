// The store policy (stores.hpp): its rule on simulated caches, so the answer does not depend on
// the machine CI runs on, and auto's timing with simulated writers, one way slow on purpose; and
// how a fresh output's pages are had (populated, resident, advised huge pages) on fresh mappings.
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness.hpp"
#include "kvbridge/rmsnorm.hpp"
#include "kvbridge/stores.hpp"

using kvbridge::choose_stores;
using kvbridge::StorePolicy;

namespace {
constexpr std::int64_t MiB = std::int64_t{1} << 20;

// Whether `output` is written the auto way (timed) or, forced, streamed: what the rule says
// before any timing.
bool streams(StorePolicy policy, std::int64_t cache, std::int64_t output) {
  return output >= choose_stores(policy, cache).timed_from_bytes;
}

// A writer whose one way spins for `slow_ms` and the other returns at once; counts its calls.
struct Writer {
  bool slow_way;
  int calls = 0;
  int streamed_calls = 0;
  void operator()(bool streamed) {
    ++calls;
    streamed_calls += streamed;
    if (streamed != slow_way) return;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
    while (std::chrono::steady_clock::now() < until) {
    }
  }
};
}  // namespace

TEST_CASE(a_small_last_level_cache_times_large_outputs) {
  // A 16 MiB L3: outputs from 4 MiB (a quarter of it) are timed both ways, a decode step's
  // (512 KiB) is written to the cache.
  CHECK(streams(StorePolicy::kAuto, 16 * MiB, 32 * MiB));
  CHECK(streams(StorePolicy::kAuto, 16 * MiB, 4 * MiB));
  CHECK(!streams(StorePolicy::kAuto, 16 * MiB, MiB / 2));
}

TEST_CASE(a_large_cache_is_timed_from_eight_mib_all_the_same) {
  // A 480 MiB L3 (a Xeon socket's, of which a 2-vCPU slice has little): a 32 MiB output is
  // timed both ways, as a 32 MiB L3's is; under 8 MiB is written to the cache.
  CHECK(streams(StorePolicy::kAuto, 480 * MiB, 32 * MiB));
  CHECK(streams(StorePolicy::kAuto, 480 * MiB, 8 * MiB));
  CHECK(streams(StorePolicy::kAuto, 32 * MiB, 8 * MiB));
  CHECK(!streams(StorePolicy::kAuto, 480 * MiB, 4 * MiB));
}

TEST_CASE(a_forced_policy_wins) {
  CHECK(streams(StorePolicy::kStream, 300 * MiB, 64));
  CHECK(!streams(StorePolicy::kCache, 32 * MiB, std::numeric_limits<std::int64_t>::max() - 1));
}

TEST_CASE(an_undescribed_cache_keeps_eight_mib) {
  CHECK(choose_stores(StorePolicy::kAuto, 0).timed_from_bytes == 8 * MiB);
}

TEST_CASE(the_environment_names_a_policy_or_is_refused) {
  CHECK(kvbridge::parse_store_policy("auto") == StorePolicy::kAuto);
  CHECK(kvbridge::parse_store_policy("stream") == StorePolicy::kStream);
  CHECK(kvbridge::parse_store_policy("cache") == StorePolicy::kCache);
  CHECK_THROWS(std::invalid_argument, "KVBRIDGE_STORES='fast' is not auto, stream or cache",
               kvbridge::parse_store_policy("fast"));
}

TEST_CASE(the_choice_says_what_it_chose_and_why) {
  CHECK(choose_stores(StorePolicy::kAuto, 16 * MiB).describe() ==
        "auto: outputs under 4 MiB (a quarter of a 16 MiB last-level cache) written to the cache; "
        "each larger one timed both ways at the first call of its size (a power of two), format "
        "and thread count, and written the faster way");
  CHECK(choose_stores(StorePolicy::kAuto, 480 * MiB).describe() ==
        "auto: outputs under 8 MiB (at most 8 MiB, whatever the cache: the 480 MiB last-level "
        "cache described may be mostly others') written to the cache; each larger one timed both "
        "ways at the first call of its size (a power of two), format and thread count, and "
        "written the faster way");
}

TEST_CASE(auto_keeps_the_faster_way_per_size_format_and_threads) {
  const auto choice = choose_stores(StorePolicy::kAuto, 32 * MiB);
  kvbridge::StoreTimings timings;
  bool streams = false;
  Writer slow_streams{true};
  timings.write(choice, "float32", 32 * MiB, 1, std::ref(slow_streams));
  CHECK(slow_streams.calls == 6 && slow_streams.streamed_calls == 3);  // three each way
  CHECK(timings.timed("float32", 40 * MiB, 1, &streams) && !streams);  // one class: 32-64 MiB
  Writer slow_cache{false};
  timings.write(choice, "float32", 64 * MiB, 1, std::ref(slow_cache));  // the next class
  CHECK(timings.timed("float32", 64 * MiB, 1, &streams) && streams);
  // Timed once: later calls of a class write once, the way it chose.
  Writer later{true};
  timings.write(choice, "float32", 33 * MiB, 1, std::ref(later));
  CHECK(later.calls == 1 && later.streamed_calls == 0);
  // Another format or thread count is another class; small outputs are never timed.
  CHECK(!timings.timed("bfloat16", 32 * MiB, 1, &streams));
  CHECK(!timings.timed("float32", 32 * MiB, 2, &streams));
  Writer small{false};
  timings.write(choice, "float32", 4 * MiB, 1, std::ref(small));
  CHECK(small.calls == 1 && small.streamed_calls == 0 &&
        !timings.timed("float32", 4 * MiB, 1, &streams));
  const std::string said = timings.describe();
  CHECK(said.find("; timed here: float32 32 MiB-64 MiB at 1 thread: to the cache (") == 0);
  CHECK(said.find(", float32 64 MiB-128 MiB at 1 thread: streamed (") != std::string::npos);
}

TEST_CASE(a_forced_policy_is_never_timed) {
  kvbridge::StoreTimings timings;
  bool streams = false;
  for (const auto policy : {StorePolicy::kStream, StorePolicy::kCache}) {
    Writer once{true};
    timings.write(choose_stores(policy, 32 * MiB), "float32", 32 * MiB, 1, std::ref(once));
    CHECK(once.calls == 1 && once.streamed_calls == (policy == StorePolicy::kStream));
  }
  CHECK(!timings.timed("float32", 32 * MiB, 1, &streams) && timings.describe().empty());
}

// `size` bytes of fresh anonymous memory of its own, none of its pages faulted in yet, unmapped
// at the end of the test.
struct FreshMapping {
  const std::size_t size;
  char* const bytes;
  explicit FreshMapping(std::size_t bytes_wanted)
      : size(bytes_wanted),
        bytes(static_cast<char*>(
            mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))) {
    CHECK(bytes != MAP_FAILED);
  }
  ~FreshMapping() {
    if (bytes != MAP_FAILED) munmap(bytes, size);
  }
  FreshMapping(const FreshMapping&) = delete;
  FreshMapping& operator=(const FreshMapping&) = delete;
};

// 64 fresh pages (far below a huge page); the ranges the page tests pass run from the middle of
// page 1 to the middle of page 61, so pages 2 to 60 are whole.
struct FreshPages {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t pages = 64;
  const FreshMapping mapping{pages * page};
  const std::size_t size = mapping.size;
  char* const bytes = mapping.bytes;
  char* const from = bytes + page + page / 2;
  const std::int64_t length = static_cast<std::int64_t>(60 * page);
};

// A fresh output's pages are faulted in up front (the allocating RMSNorm calls it): the whole
// pages inside the range become resident, the partial ones at either end are left to the
// stores, and the memory still reads as the zeros it held.
TEST_CASE(populate_for_writing_faults_in_the_whole_pages_of_its_range) {
  const FreshPages fresh;
  const std::size_t page = fresh.page;
  char* const bytes = fresh.bytes;
  std::vector<unsigned char> resident(fresh.pages);
  const auto resident_pages = [&] {
    CHECK(mincore(bytes, fresh.size, resident.data()) == 0);
    std::size_t n = 0;
    for (const unsigned char r : resident) n += r & 1;
    return n;
  };
  CHECK(resident_pages() == 0);
  if (kvbridge::populate_for_writing(fresh.from, fresh.length)) {
    CHECK(resident_pages() == 59 && resident[2] && resident[60] && !resident[1] && !resident[61]);
    bool zeros = true;
    for (std::size_t i = 2 * page; i < 61 * page; ++i) zeros = zeros && bytes[i] == 0;
    CHECK(zeros);
  } else {  // not on this OS or kernel: nothing may have changed
    std::printf("populate_for_writing: unsupported here (Linux 5.14+ has MADV_POPULATE_WRITE)\n");
    CHECK(resident_pages() == 0);
  }
  CHECK(kvbridge::populate_for_writing(bytes + 1, 10));  // no whole page: nothing to do
}

// Memory an allocator handed out again has its pages already: ends_resident says so from the
// whole pages at both ends of the range, so a fresh output is populated only where it is fresh.
TEST_CASE(ends_resident_reads_the_whole_pages_at_both_ends_of_its_range) {
  const FreshPages fresh;
  const std::size_t page = fresh.page;
  char* const bytes = fresh.bytes;
  char* const from = fresh.from;  // pages 2 and 60 are its ends
  const std::int64_t length = fresh.length;
  CHECK(!kvbridge::ends_resident(from, length));  // fresh: nothing resident
  bytes[1 * page] = bytes[61 * page] = 1;         // the partial pages are not its ends
  CHECK(!kvbridge::ends_resident(from, length));
  for (std::size_t i = 0; i < fresh.size; i += page) bytes[i] = 1;
#if defined(__linux__)
  CHECK(kvbridge::ends_resident(from, length));  // reused: every page there
  for (const std::size_t end : {std::size_t{2}, std::size_t{60}}) {
    CHECK(madvise(bytes + end * page, page, MADV_DONTNEED) == 0);  // that end fresh again
    CHECK(!kvbridge::ends_resident(from, length));
    bytes[end * page] = 1;
    CHECK(kvbridge::ends_resident(from, length));
  }
#endif
  CHECK(!kvbridge::ends_resident(bytes + 1, 10));  // no whole page
}

// The mapping of this process that holds `p` (/proc/self/smaps): its first and last byte + 1, and
// whether it is advised for huge pages (its VmFlags hold `hg`, what MADV_HUGEPAGE sets).
struct Mapping {
  std::uintptr_t start = 0, end = 0;
  bool huge = false;
};
Mapping mapping_of(const void* p) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  Mapping found, current;
  for (std::string line; std::getline(smaps, line);) {
    unsigned long long start = 0, end = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &start, &end) == 2 && line.find('-') < 16) {
      current = {static_cast<std::uintptr_t>(start), static_cast<std::uintptr_t>(end), false};
    } else if (line.rfind("VmFlags:", 0) == 0 && current.start <= at && at < current.end) {
      current.huge = (line + " ").find(" hg ") != std::string::npos;
      found = current;
    }
  }
  return found;
}

// Six huge pages' worth of fresh memory, where the kernel has huge pages (the tests ask first);
// `first` is its first huge-page boundary, so [first + huge / 2, first + 3.5 huge) holds exactly
// two whole huge pages (first + huge to first + 3 huge) and half of one at either end.
struct FreshHugePages {
  const std::int64_t huge = kvbridge::huge_page_bytes();
  const FreshMapping mapping{static_cast<std::size_t>(6 * huge)};
  char* const first = reinterpret_cast<char*>(
      (reinterpret_cast<std::uintptr_t>(mapping.bytes) + huge - 1) / huge * huge);
  char* const from = first + huge / 2;
  const std::int64_t length = 3 * huge;
  // Whether exactly the two whole huge pages inside [from, from + length) are advised.
  bool whole_ones_advised() const {
    const Mapping inside = mapping_of(first + huge), head = mapping_of(from),
                  tail = mapping_of(from + length - 1);
    return inside.huge && inside.start == reinterpret_cast<std::uintptr_t>(first + huge) &&
           inside.end == reinterpret_cast<std::uintptr_t>(first + 3 * huge) && !head.huge &&
           !tail.huge;
  }
  bool none_advised() const {
    return !mapping_of(mapping.bytes).huge && !mapping_of(first + huge).huge &&
           !mapping_of(mapping.bytes + mapping.size - 1).huge;
  }
};

// A fresh output is backed by huge pages where whole ones fit inside it, and nowhere else: the
// advice covers exactly its whole huge pages, never the memory around it.
TEST_CASE(advise_huge_pages_asks_for_the_whole_huge_pages_of_its_range_only) {
  if (kvbridge::huge_page_bytes() == 0) {  // no transparent huge pages here: nothing to ask for
    std::printf("advise_huge_pages: this kernel has no transparent huge pages\n");
    char somewhere[64];
    CHECK(!kvbridge::advise_huge_pages(somewhere, sizeof somewhere));
    return;
  }
  const FreshHugePages fresh;
  CHECK(fresh.none_advised());
  CHECK(!kvbridge::advise_huge_pages(fresh.from, fresh.huge));  // no whole huge page inside
  CHECK(fresh.none_advised());
  if (kvbridge::advise_huge_pages(fresh.from, fresh.length)) {
    CHECK(fresh.whole_ones_advised());
  } else {  // the kernel refused the advice: nothing may have changed
    std::printf("advise_huge_pages: the kernel refused MADV_HUGEPAGE here\n");
    CHECK(fresh.none_advised());
  }
}

// Whether this kernel takes MADV_HUGEPAGE (asked on a mapping of its own).
bool kernel_takes_the_advice() {
  if (kvbridge::huge_page_bytes() == 0) return false;
  const FreshHugePages probe;
  return kvbridge::advise_huge_pages(probe.from, probe.length);
}

// The allocating RMSNorm (Out::kFresh) asks for huge pages for its output before writing it; an
// existing output (out=) is the caller's memory, whose policy is the caller's: left as it was.
TEST_CASE(a_fresh_rmsnorm_output_is_advised_huge_pages_and_an_existing_one_is_not) {
  if (kvbridge::huge_page_bytes() == 0) return;  // printed by the test above
  const std::int64_t cols = 1024;
  for (const auto from : {kvbridge::Out::kExisting, kvbridge::Out::kFresh}) {
    const FreshHugePages fresh;
    const std::int64_t rows = fresh.length / static_cast<std::int64_t>(cols * sizeof(float));
    std::vector<float> x(static_cast<std::size_t>(rows * cols), 1.0f), w(cols, 2.0f);
    const kvbridge::FloatArrayView xv{x.data(), {rows, cols}, {cols, 1}}, wv{w.data(), {cols}, {1}};
    float* const out = reinterpret_cast<float*>(fresh.from);
    kvbridge::rmsnorm(xv, wv, 0.0, out, {rows, cols}, from);
    CHECK(out[0] == 2.0f && out[rows * cols - 1] == 2.0f);
    const bool advised = from == kvbridge::Out::kFresh && kernel_takes_the_advice();
    CHECK(advised ? fresh.whole_ones_advised() : fresh.none_advised());
  }
}

// The kernel's transparent_hugepage `enabled` file names its setting in brackets; only `always`
// and `madvise` back advised memory with huge pages.
TEST_CASE(the_thp_setting_takes_advice_under_always_and_madvise_only) {
  CHECK(kvbridge::thp_setting_takes_advice("always [madvise] never"));
  CHECK(kvbridge::thp_setting_takes_advice("[always] madvise never"));
  CHECK(!kvbridge::thp_setting_takes_advice("always madvise [never]"));
  CHECK(!kvbridge::thp_setting_takes_advice("always madvise never"));  // no bracket: unknown
  CHECK(!kvbridge::thp_setting_takes_advice(""));
}

// Which of [from, from + bytes)'s whole 4 KiB pages are resident: all, none, or some.
enum class Resident { kAll, kNone, kSome };
Resident residency(const char* from, std::int64_t bytes) {
  const auto page = static_cast<std::int64_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in(static_cast<std::size_t>(bytes / page));
  CHECK(bytes % page == 0 && reinterpret_cast<std::uintptr_t>(from) % page == 0);
  CHECK(mincore(const_cast<char*>(from), static_cast<std::size_t>(bytes), in.data()) == 0);
  std::size_t n = 0;
  for (const unsigned char r : in) n += r & 1;
  return n == in.size() ? Resident::kAll : n == 0 ? Resident::kNone : Resident::kSome;
}

// A fresh output of 1 MiB or more is made ready before its first store: where its whole huge
// pages will be huge, they are left to its stores (each zeroed just before it is written, still
// in the cache), and only the 4 KiB pages at its ends are faulted in; where none will be, all of
// it is faulted in up front. A smaller one is left to its stores.
TEST_CASE(a_fresh_output_leaves_its_huge_pages_to_its_stores_and_faults_in_the_rest) {
  if (kvbridge::huge_page_bytes() == 0) return;  // printed by the tests above
  const FreshHugePages fresh;
  const std::int64_t huge = fresh.huge;
  char* const head_end = fresh.first + huge;  // [from, head_end): half a huge page of 4 KiB ones
  char* const tail = fresh.first + 3 * huge;  // [tail, from + length): the other half
  kvbridge::fault_in_fresh_output(fresh.from, fresh.length);
  if (kernel_takes_the_advice() && kvbridge::huge_pages_on_advice()) {
    CHECK(residency(fresh.from, head_end - fresh.from) == Resident::kAll);
    CHECK(residency(head_end, 2 * huge) == Resident::kNone);
    CHECK(residency(tail, fresh.from + fresh.length - tail) == Resident::kAll);
  } else {
    std::printf("fault_in_fresh_output: no huge pages on advice here: all of it faulted in\n");
    CHECK(residency(fresh.from, fresh.length) == Resident::kAll);
  }
  const FreshHugePages small;
  kvbridge::fault_in_fresh_output(small.from, (std::int64_t{1} << 20) - 4096);
  CHECK(residency(small.from, (std::int64_t{1} << 20) - 4096) == Resident::kNone);
}

HARNESS_MAIN()
