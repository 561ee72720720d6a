// The store policy of large out= writes (stores.hpp): the rule, and this machine's answer.
#include "kvbridge/stores.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

namespace kvbridge {
namespace {

constexpr std::int64_t kUndescribedStreamFrom = std::int64_t{8} << 20;
constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

std::string mib(std::int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

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
  std::int64_t from = last_level_bytes > 0 ? last_level_bytes / 4 : kUndescribedStreamFrom;
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
  if (last_level_bytes == 0) {
    return "auto: outputs of " + mib(stream_from_bytes) +
           " and more streamed (the last-level cache is not described here)";
  }
  return "auto: outputs of " + mib(stream_from_bytes) + " and more streamed (a quarter of a " +
         mib(last_level_bytes) + " last-level cache)";
}

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

}  // namespace kvbridge
