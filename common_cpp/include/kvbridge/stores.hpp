// Which stores a large existing out= is written with, chosen for the machine it runs on.
//
// A normal store first reads the line it writes (write-allocate): for an output that will not
// stay in the last-level cache, that is one extra pass over memory, which non-temporal stores
// skip. An output the cache holds is better written normally: it is still there for whatever
// reads it next, and streaming it costs a full trip to memory. So the threshold scales with the
// last-level cache this CPU reads from: outputs of a quarter of it and more are streamed (the
// output's input is as large again, and the next layer's weights share the cache). On a 2-vCPU
// EPYC slice with a 32 MiB L3 that is 8 MiB, the fixed threshold this replaced; on a Xeon with a
// 300 MiB L3, where a streamed 32 MiB output ran at half the copy's speed, it is 75 MiB.
#pragma once

#include <cstdint>
#include <string>

namespace kvbridge {

enum class StorePolicy { kAuto, kStream, kCache };

struct StoreChoice {
  StorePolicy policy;              // asked for: KVBRIDGE_STORES, or auto
  std::int64_t last_level_bytes;   // the cache it was chosen from (0: not described)
  std::int64_t stream_from_bytes;  // outputs this large or larger are streamed
  // e.g. "auto: outputs of 8 MiB and more streamed (a quarter of a 32 MiB last-level cache)"
  std::string describe() const;
};

// The rule, for any machine (tests give it simulated caches). An undescribed cache keeps 8 MiB.
StoreChoice choose_stores(StorePolicy asked, std::int64_t last_level_bytes);

// "auto", "stream" or "cache" (KVBRIDGE_STORES's values); std::invalid_argument otherwise.
StorePolicy parse_store_policy(const std::string& text);

// This process's choice, made once: KVBRIDGE_STORES (unset: auto) and the last-level cache the
// OS describes for CPU 0 (/sys/devices/system/cpu/cpu0/cache; else sysconf). A bad
// KVBRIDGE_STORES is a std::invalid_argument from the first call that needs the choice.
const StoreChoice& store_choice();

}  // namespace kvbridge
