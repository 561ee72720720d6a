// BlockPool: a ref-counted KV-cache block allocator.
//
// Thread-safe with its own mutex: the torch binding calls it with the GIL released, so the core
// cannot lean on the GIL. The pool never calls back into Python, so it never takes the GIL while
// holding its lock (no lock-order inversion is possible).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kvbridge/buffer.hpp"

namespace kvbridge {

using BlockId = std::int32_t;

// The pool's counters. Written under the pool's lock, read lock-free, so a binding can expose
// them as a live view (no copy, always current) that is safe to read from any thread.
struct PoolStats {
  std::atomic<std::int64_t> allocated_total{0};  // blocks ever handed out
  std::atomic<std::int64_t> released_total{0};   // blocks ever returned to the free list
  std::atomic<std::int64_t> peak_in_use{0};      // most blocks in use at once

  // "<PoolStats allocated_total=3 released_total=1 peak_in_use=2>": every package's repr.
  std::string repr() const;
};

// Number of BlockPool objects alive in this process.
std::int64_t live_pools() noexcept;

class BlockPool {
 public:
  // Arguments are int64 so that the core, not each binding, decides what is out of range:
  // negative -> std::invalid_argument, above int32 -> std::overflow_error.
  explicit BlockPool(std::int64_t num_blocks);
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  std::int32_t num_blocks() const noexcept { return num_blocks_; }
  // Lock-free: the cheapest call a binding can make, so it measures the binding, not a mutex.
  std::int32_t num_free() const noexcept { return num_free_.load(std::memory_order_relaxed); }

  // All or nothing: n blocks, or nullopt (pool unchanged) when fewer than n are free.
  std::optional<std::vector<BlockId>> allocate(std::int64_t n);
  // All or nothing over the whole batch. Every count is validated before anything changes.
  std::optional<std::vector<std::vector<BlockId>>> allocate_many(const std::int64_t* counts,
                                                                 std::size_t num_requests);

  void retain(std::int64_t block);
  void release(std::int64_t block);
  // Lock-free, like num_free: a call an engine makes per block, so it costs a binding's call
  // and a range check, not a mutex (the value read is one that a locked writer stored).
  std::int32_t refcount(std::int64_t block) const;

  // A snapshot of every block's refcount in a buffer that Python adopts without a copy.
  std::unique_ptr<Buffer<std::int32_t>> refcounts() const;

  const PoolStats& stats() const noexcept { return stats_; }
  std::string repr() const;  // "<BlockPool free=5/8>"

 private:
  BlockId checked_block(std::int64_t block) const;  // IndexError-style range check
  void require_allocated_locked(BlockId id, const char* verb) const;  // RuntimeError if free
  std::vector<BlockId> take_locked(std::int32_t n);  // caller holds mutex_ and checked n <= free
  void note_in_use_locked();

  const std::int32_t num_blocks_;
  mutable std::mutex mutex_;
  // Written under mutex_, read lock-free by refcount(): atomics, so that read is no data race.
  std::unique_ptr<std::atomic<std::int32_t>[]> refcounts_;
  // LIFO free list: the back is handed out next. Filled so that a fresh pool hands out 0, 1, 2...
  // and a released block is reused before any never-used block.
  std::vector<BlockId> free_list_;
  std::atomic<std::int32_t> num_free_;  // free_list_.size(), written under mutex_
  PoolStats stats_;
};

}  // namespace kvbridge
