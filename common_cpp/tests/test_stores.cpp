// The store policy's rule (stores.hpp), on simulated caches: the answer must not depend on the
// machine CI runs on.
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "harness.hpp"
#include "kvbridge/stores.hpp"

using kvbridge::choose_stores;
using kvbridge::StorePolicy;

namespace {
constexpr std::int64_t MiB = std::int64_t{1} << 20;

bool streams(StorePolicy policy, std::int64_t cache, std::int64_t output) {
  return output >= choose_stores(policy, cache).stream_from_bytes;
}
}  // namespace

TEST_CASE(a_small_last_level_cache_streams_large_outputs) {
  // A 2-vCPU slice's 32 MiB L3: a 2048x4096 float32 out= (32 MiB) is streamed, a decode
  // step's (512 KiB) is not.
  CHECK(streams(StorePolicy::kAuto, 32 * MiB, 32 * MiB));
  CHECK(streams(StorePolicy::kAuto, 32 * MiB, 8 * MiB));
  CHECK(!streams(StorePolicy::kAuto, 32 * MiB, MiB / 2));
}

TEST_CASE(a_cache_larger_than_the_data_does_not_stream_it) {
  // A 300 MiB L3: the same 32 MiB output stays in cache; a 256 MiB one is streamed.
  CHECK(!streams(StorePolicy::kAuto, 300 * MiB, 32 * MiB));
  CHECK(!streams(StorePolicy::kAuto, 300 * MiB, 8 * MiB));
  CHECK(streams(StorePolicy::kAuto, 300 * MiB, 256 * MiB));
}

TEST_CASE(a_forced_policy_wins) {
  CHECK(streams(StorePolicy::kStream, 300 * MiB, 64));
  CHECK(!streams(StorePolicy::kCache, 32 * MiB, std::numeric_limits<std::int64_t>::max() - 1));
}

TEST_CASE(an_undescribed_cache_keeps_eight_mib) {
  CHECK(choose_stores(StorePolicy::kAuto, 0).stream_from_bytes == 8 * MiB);
}

TEST_CASE(the_environment_names_a_policy_or_is_refused) {
  CHECK(kvbridge::parse_store_policy("auto") == StorePolicy::kAuto);
  CHECK(kvbridge::parse_store_policy("stream") == StorePolicy::kStream);
  CHECK(kvbridge::parse_store_policy("cache") == StorePolicy::kCache);
  CHECK_THROWS(std::invalid_argument, "KVBRIDGE_STORES='fast' is not auto, stream or cache",
               kvbridge::parse_store_policy("fast"));
}

TEST_CASE(the_choice_says_what_it_chose_and_why) {
  CHECK(choose_stores(StorePolicy::kAuto, 32 * MiB).describe() ==
        "auto: outputs of 8 MiB and more streamed (a quarter of a 32 MiB last-level cache)");
}

HARNESS_MAIN()
