#include "kvbridge/block_pool.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "kvbridge/errors.hpp"

namespace kvbridge {
namespace {

std::atomic<std::int64_t> g_live_pools{0};

std::int32_t checked_num_blocks(std::int64_t num_blocks) {
  if (num_blocks < 0) {
    throw std::invalid_argument("num_blocks must be >= 0, got " + std::to_string(num_blocks));
  }
  return checked_int32(num_blocks, "num_blocks");
}

// Validates a count before the pool is touched: negative -> ValueError, above int32 ->
// OverflowError.
std::int32_t checked_count(std::int64_t n, const std::string& name) {
  if (n < 0) throw std::invalid_argument(name + " must be >= 0, got " + std::to_string(n));
  return checked_int32(n, name);
}

}  // namespace

std::int64_t live_pools() noexcept { return g_live_pools.load(std::memory_order_relaxed); }

BlockPool::BlockPool(std::int64_t num_blocks)
    : num_blocks_(checked_num_blocks(num_blocks)),
      refcounts_(new std::atomic<std::int32_t>[static_cast<std::size_t>(num_blocks_)]),
      num_free_(num_blocks_) {
  for (std::int32_t b = 0; b < num_blocks_; ++b) refcounts_[b].store(0, std::memory_order_relaxed);
  free_list_.reserve(num_blocks_);
  // Highest id first, so the back of the LIFO list is block 0.
  for (std::int32_t b = num_blocks_ - 1; b >= 0; --b) free_list_.push_back(b);
  g_live_pools.fetch_add(1, std::memory_order_relaxed);
}

BlockPool::~BlockPool() { g_live_pools.fetch_sub(1, std::memory_order_relaxed); }

std::vector<BlockId> BlockPool::take_locked(std::int32_t n) {
  std::vector<BlockId> blocks(free_list_.end() - n, free_list_.end());
  std::reverse(blocks.begin(), blocks.end());  // hand out the back of the list first
  free_list_.resize(free_list_.size() - n);
  num_free_.store(static_cast<std::int32_t>(free_list_.size()), std::memory_order_relaxed);
  for (BlockId b : blocks) refcounts_[b].store(1, std::memory_order_relaxed);
  stats_.allocated_total.fetch_add(n, std::memory_order_relaxed);
  return blocks;
}

void BlockPool::note_in_use_locked() {
  const std::int64_t in_use = num_blocks_ - static_cast<std::int64_t>(free_list_.size());
  if (in_use > stats_.peak_in_use.load(std::memory_order_relaxed)) {
    stats_.peak_in_use.store(in_use, std::memory_order_relaxed);
  }
}

std::optional<std::vector<BlockId>> BlockPool::allocate(std::int64_t n) {
  const std::int32_t count = checked_count(n, "n");
  std::lock_guard<std::mutex> lock(mutex_);
  if (static_cast<std::size_t>(count) > free_list_.size()) return std::nullopt;
  auto blocks = take_locked(count);
  note_in_use_locked();
  return blocks;
}

std::optional<std::vector<std::vector<BlockId>>> BlockPool::allocate_many(
    const std::int64_t* counts, std::size_t num_requests) {
  // Validate every entry first: a bad entry late in the batch must leave the pool unchanged.
  std::vector<std::int32_t> checked(num_requests);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < num_requests; ++i) {
    checked[i] = checked_count(counts[i], "counts[" + std::to_string(i) + "]");
    total += checked[i];  // at most 2^31 * num_requests: no int64 overflow for any real batch
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (total > static_cast<std::int64_t>(free_list_.size())) return std::nullopt;
  std::vector<std::vector<BlockId>> result;
  result.reserve(num_requests);
  for (std::int32_t c : checked) result.push_back(take_locked(c));
  note_in_use_locked();
  return result;
}

BlockId BlockPool::checked_block(std::int64_t block) const {
  const std::int32_t id = checked_int32(block, "block");
  if (id < 0 || id >= num_blocks_) {
    throw std::out_of_range("block " + std::to_string(id) + " is out of range [0, " +
                            std::to_string(num_blocks_) + ")");
  }
  return id;
}

void BlockPool::require_allocated_locked(BlockId id, const char* verb) const {
  if (refcounts_[id].load(std::memory_order_relaxed) == 0) {
    throw std::runtime_error(std::string("cannot ") + verb + " block " + std::to_string(id) +
                             ": it is not allocated (refcount 0)");
  }
}

void BlockPool::retain(std::int64_t block) {
  const BlockId id = checked_block(block);
  std::lock_guard<std::mutex> lock(mutex_);
  require_allocated_locked(id, "retain");
  const std::int32_t count = refcounts_[id].load(std::memory_order_relaxed);
  if (count == std::numeric_limits<std::int32_t>::max()) {
    throw std::overflow_error("cannot retain block " + std::to_string(id) +
                              ": refcount would exceed int32");
  }
  refcounts_[id].store(count + 1, std::memory_order_relaxed);
}

void BlockPool::release(std::int64_t block) {
  const BlockId id = checked_block(block);
  std::lock_guard<std::mutex> lock(mutex_);
  require_allocated_locked(id, "release");
  const std::int32_t count = refcounts_[id].load(std::memory_order_relaxed) - 1;
  refcounts_[id].store(count, std::memory_order_relaxed);
  if (count == 0) {
    free_list_.push_back(id);
    num_free_.store(static_cast<std::int32_t>(free_list_.size()), std::memory_order_relaxed);
    stats_.released_total.fetch_add(1, std::memory_order_relaxed);
  }
}

std::int32_t BlockPool::refcount(std::int64_t block) const {
  return refcounts_[checked_block(block)].load(std::memory_order_relaxed);
}

std::unique_ptr<Buffer<std::int32_t>> BlockPool::refcounts() const {
  auto buffer = std::make_unique<Buffer<std::int32_t>>(static_cast<std::size_t>(num_blocks_));
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::int32_t b = 0; b < num_blocks_; ++b) {
    buffer->data()[b] = refcounts_[b].load(std::memory_order_relaxed);
  }
  return buffer;
}

std::string PoolStats::repr() const {
  return "<PoolStats allocated_total=" + std::to_string(allocated_total.load()) +
         " released_total=" + std::to_string(released_total.load()) +
         " peak_in_use=" + std::to_string(peak_in_use.load()) + ">";
}

std::string BlockPool::repr() const {
  return "<BlockPool free=" + std::to_string(num_free()) + "/" + std::to_string(num_blocks_) + ">";
}

}  // namespace kvbridge
