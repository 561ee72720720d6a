// The store policy of large out= writes (stores.hpp): the rule, and this machine's answer; and
// the fault-in of a fresh output's pages (fault_in_fresh_output and its parts).
#include "kvbridge/stores.hpp"

#include <sys/mman.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

#include "kvbridge/threads.hpp"

namespace kvbridge {
namespace {

// Outputs from here up are timed both ways whatever the cache's size: the cache the kernel
// describes is the whole socket's, and on a VM slice (or beside busy neighbours) far less of it
// is this process's. A 480 MiB L3 Xeon slice streamed a 32 MiB float32 out= faster than it
// cached it; only a measurement can say.
constexpr std::int64_t kTimedFromAtMost = std::int64_t{8} << 20;
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

std::string mib(std::int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

int size_class(std::int64_t bytes) {  // floor(log2(bytes)), bytes > 0
  int k = 0;
  while ((bytes >> (k + 1)) > 0) ++k;
  return k;
}

// "32 MiB" for 2^25 bytes, "512 KiB" for 2^19
std::string power_text(int k) {
  return k >= 20 ? std::to_string(std::int64_t{1} << (k - 20)) + " MiB"
                 : std::to_string(std::int64_t{1} << (k - 10)) + " KiB";
}

std::string ms(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g ms", seconds * 1e3);
  return text;
}

// "32768K" -> bytes (the kernel's cache size format), 0 when it is not one.
std::int64_t parse_size(const std::string& text) {
  std::size_t used = 0;
  std::int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    return 0;
  }
  const char unit = used < text.size() ? text[used] : ' ';
  return unit == 'K' ? value << 10 : unit == 'M' ? value << 20 : value;
}

// The largest data or unified cache the kernel describes for CPU 0: the one it shares with the
// CPUs this process runs on (on a VM slice, its slice; sysconf may report the whole package's).
std::int64_t last_level_cache_bytes() {
  std::int64_t largest = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream type_file(dir + "/type"), size_file(dir + "/size");
    std::string type, size;
    if (!(type_file >> type) || !(size_file >> size)) break;
    if (type != "Instruction") largest = std::max(largest, parse_size(size));
  }
#ifdef _SC_LEVEL3_CACHE_SIZE
  if (largest == 0) largest = std::max<long>(0, sysconf(_SC_LEVEL3_CACHE_SIZE));
#endif
  return largest;
}

}  // namespace

StoreChoice choose_stores(StorePolicy asked, std::int64_t last_level_bytes) {
  std::int64_t from = kTimedFromAtMost;  // also where the cache is not described
  if (last_level_bytes > 0) from = std::min(last_level_bytes / 4, kTimedFromAtMost);
  if (asked == StorePolicy::kStream) from = 0;
  if (asked == StorePolicy::kCache) from = kNever;
  return {asked, last_level_bytes, from};
}

StorePolicy parse_store_policy(const std::string& text) {
  if (text == "auto") return StorePolicy::kAuto;
  if (text == "stream") return StorePolicy::kStream;
  if (text == "cache") return StorePolicy::kCache;
  throw std::invalid_argument("KVBRIDGE_STORES='" + text + "' is not auto, stream or cache");
}

std::string StoreChoice::describe() const {
  if (policy == StorePolicy::kStream) return "stream (KVBRIDGE_STORES): every out= streamed";
  if (policy == StorePolicy::kCache) return "cache (KVBRIDGE_STORES): no out= streamed";
  std::string why = "the last-level cache is not described here";
  if (last_level_bytes > 0 && last_level_bytes / 4 <= kTimedFromAtMost) {
    why = "a quarter of a " + mib(last_level_bytes) + " last-level cache";
  } else if (last_level_bytes > 0) {
    why = "at most " + mib(kTimedFromAtMost) + ", whatever the cache: the " +
          mib(last_level_bytes) + " last-level cache described may be mostly others'";
  }
  return "auto: outputs under " + mib(timed_from_bytes) + " (" + why +
         ") written to the cache; each larger one timed both ways at the first call of its size "
         "(a power of two), format and thread count, and written the faster way";
}

void StoreTimings::write(const StoreChoice& choice, const char* format, std::int64_t bytes,
                         std::int64_t threads, const std::function<void(bool)>& write_out) {
  if (choice.policy != StorePolicy::kAuto || bytes < choice.timed_from_bytes) {
    write_out(bytes >= choice.timed_from_bytes);  // stream: from 0; cache: from never
    return;
  }
  const Key key{format, size_class(bytes), threads};
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (const auto found = timed_.find(key); found != timed_.end()) {
      write_out(found->second.streams);
      return;
    }
  }
  // Best of three each way, in turn, so a slow moment of the machine lands on both.
  double best[2] = {std::numeric_limits<double>::infinity(),
                    std::numeric_limits<double>::infinity()};
  for (int round = 0; round < 3; ++round) {
    for (const bool streamed : {false, true}) {
      const auto start = std::chrono::steady_clock::now();
      write_out(streamed);
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      best[streamed] = std::min(best[streamed], took.count());
    }
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  timed_.emplace(key, Timed{best[1] < best[0], best[1], best[0]});
}

bool StoreTimings::timed(const char* format, std::int64_t bytes, std::int64_t threads,
                         bool* streams) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto found = timed_.find(Key{format, size_class(bytes), threads});
  if (found == timed_.end()) return false;
  *streams = found->second.streams;
  return true;
}

std::string StoreTimings::describe() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::string text;
  for (const auto& [key, t] : timed_) {
    const auto& [format, k, threads] = key;
    text += (text.empty() ? "; timed here: " : ", ") + format + " " + power_text(k) + "-" +
            power_text(k + 1) + " at " + std::to_string(threads) +
            (threads == 1 ? " thread: " : " threads: ") +
            (t.streams ? "streamed (" + ms(t.stream_s) + "; " + ms(t.cache_s) + " to the cache)"
                       : "to the cache (" + ms(t.cache_s) + "; " + ms(t.stream_s) + " streamed)");
  }
  return text;
}

StoreTimings& store_timings() {
  static StoreTimings timings;
  return timings;
}

std::string describe_stores() { return store_choice().describe() + store_timings().describe(); }

const StoreChoice& store_choice() {
  // A function-local static: made once, thread-safely; a throw leaves it unmade, so a bad
  // KVBRIDGE_STORES fails every call that needs it, with the same message.
  static const StoreChoice choice = [] {
    const char* asked = std::getenv("KVBRIDGE_STORES");
    return choose_stores(asked == nullptr ? StorePolicy::kAuto : parse_store_policy(asked),
                         last_level_cache_bytes());
  }();
  return choice;
}

namespace {
#if defined(__linux__)
std::uintptr_t base_page() noexcept {
  static const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// The whole pages of size `page` inside [p, p + bytes): [first, end), empty (end == first) where
// there are none.
struct WholePages {
  std::uintptr_t first, end, page;
};
WholePages whole_pages(const void* p, std::int64_t bytes,
                       std::uintptr_t page = base_page()) noexcept {
  const auto begin = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t first = (begin + page - 1) / page * page;
  if (bytes <= 0) return {first, first, page};
  const std::uintptr_t end = (begin + static_cast<std::uintptr_t>(bytes)) / page * page;
  return {first, std::max(first, end), page};
}
#endif
}  // namespace

std::int64_t huge_page_bytes() noexcept {
#if defined(__linux__)
  static const std::int64_t bytes = [] {
    long long value = 0;
    std::FILE* size = std::fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "r");
    if (size == nullptr) return std::int64_t{0};
    const bool read = std::fscanf(size, "%lld", &value) == 1;
    std::fclose(size);
    return read && value > 0 ? static_cast<std::int64_t>(value) : std::int64_t{0};
  }();
  return bytes;
#else
  return 0;
#endif
}

bool advise_huge_pages(void* p, std::int64_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const std::int64_t huge = huge_page_bytes();
  if (huge == 0) return false;
  const WholePages whole = whole_pages(p, bytes, static_cast<std::uintptr_t>(huge));
  return whole.end > whole.first &&
         madvise(reinterpret_cast<void*>(whole.first), whole.end - whole.first, MADV_HUGEPAGE) == 0;
#else
  (void)p;
  (void)bytes;
  return false;
#endif
}

bool ends_resident(const void* p, std::int64_t bytes) noexcept {
#if defined(__linux__)
  const WholePages whole = whole_pages(p, bytes);
  if (whole.end == whole.first) return false;
  unsigned char head = 0, tail = 0;
  return mincore(reinterpret_cast<void*>(whole.first), whole.page, &head) == 0 && (head & 1) &&
         mincore(reinterpret_cast<void*>(whole.end - whole.page), whole.page, &tail) == 0 &&
         (tail & 1);
#else
  (void)p;
  (void)bytes;
  return false;
#endif
}

bool populate_for_writing(void* p, std::int64_t bytes) noexcept {
#if defined(__linux__)
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;  // the kernel's value, where libc's headers predate it
#endif
  const WholePages whole = whole_pages(p, bytes);
  if (whole.end == whole.first) return true;
  return madvise(reinterpret_cast<void*>(whole.first), whole.end - whole.first,
                 MADV_POPULATE_WRITE) == 0;
#else
  (void)p;
  (void)bytes;
  return false;
#endif
}

bool thp_setting_takes_advice(const std::string& enabled_text) noexcept {
  const auto open = enabled_text.find('[');
  const auto close = enabled_text.find(']', open);
  if (open == std::string::npos || close == std::string::npos) return false;
  const std::string chosen = enabled_text.substr(open + 1, close - open - 1);
  return chosen == "always" || chosen == "madvise";
}

bool huge_pages_on_advice() noexcept {
#if defined(__linux__)
  static const bool setting = [] {
    std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string text;
    return std::getline(enabled, text) && thp_setting_takes_advice(text);
  }();
  return setting && huge_page_bytes() > 0 && prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) == 0;
#else
  return false;
#endif
}

namespace {
// Where a fresh output's pages are faulted in up front (fault_in_fresh_output), and in pieces
// of this size across the threads.
constexpr std::int64_t kFaultInFromBytes = std::int64_t{1} << 20;
constexpr std::int64_t kFaultInPieceBytes = std::int64_t{1} << 20;

void populate_in_pieces(char* base, std::int64_t bytes) {
  parallel_for((bytes + kFaultInPieceBytes - 1) / kFaultInPieceBytes, 1,
               [&](std::int64_t first, std::int64_t last) {
                 const std::int64_t end = std::min(bytes, last * kFaultInPieceBytes);
                 const std::int64_t begin = first * kFaultInPieceBytes;
                 populate_for_writing(base + begin, end - begin);
               });
}
}  // namespace

void fault_in_fresh_output(void* out, std::int64_t bytes) {
  if (bytes < kFaultInFromBytes || ends_resident(out, bytes)) return;
  char* const base = static_cast<char*>(out);
  if (!advise_huge_pages(out, bytes) || !huge_pages_on_advice()) {  // 4 KiB pages: all of it
    populate_in_pieces(base, bytes);
    return;
  }
#if defined(__linux__)  // huge_pages_on_advice() is false elsewhere
  const WholePages huge =
      whole_pages(out, bytes, static_cast<std::uintptr_t>(huge_page_bytes()));  // advised: some
  const auto begin = reinterpret_cast<std::uintptr_t>(out);
  populate_for_writing(base, static_cast<std::int64_t>(huge.first - begin));  // the ends only
  populate_for_writing(base + (huge.end - begin),
                       static_cast<std::int64_t>(begin + bytes - huge.end));
#endif
}

}  // namespace kvbridge
