// The seed's BlockPool as it was before kvbridge gave it a mutex: a free list and refcounts,
// correct only while one thread at a time calls it, which the GIL used to guarantee. The
// free-threading probes bind it with each technology's defaults and call it from 4 threads.
#pragma once

#include <cstdint>
#include <vector>

namespace kvbp {

class SeedPool {
 public:
  explicit SeedPool(std::int32_t num_blocks) : refcounts_(num_blocks, 0) {
    for (std::int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
  }

  // n free blocks, or none (an empty list) when fewer than n are free.
  std::vector<std::int32_t> allocate(std::int32_t n) {
    std::vector<std::int32_t> out;
    if (n < 0 || static_cast<std::size_t>(n) > free_.size()) return out;
    for (std::int32_t i = 0; i < n; ++i) {
      const std::int32_t b = free_.back();
      free_.pop_back();
      if (refcounts_[b]++ != 0) ++handed_out_twice_;  // another caller holds this block
      out.push_back(b);
    }
    allocated_ += n;
    return out;
  }

  void release(std::int32_t b) {
    if (b < 0 || static_cast<std::size_t>(b) >= refcounts_.size()) return;
    if (--refcounts_[b] == 0) free_.push_back(b);
    ++released_;
  }

  std::int64_t num_free() const { return static_cast<std::int64_t>(free_.size()); }
  std::int64_t num_blocks() const { return static_cast<std::int64_t>(refcounts_.size()); }
  std::int64_t handed_out_twice() const { return handed_out_twice_; }
  std::int64_t allocated() const { return allocated_; }
  std::int64_t released() const { return released_; }

 private:
  std::vector<std::int32_t> refcounts_;
  std::vector<std::int32_t> free_;
  std::int64_t handed_out_twice_ = 0, allocated_ = 0, released_ = 0;
};

// The same pool, bound with the technology's per-object lock (a distinct type, so that one
// module can bind both).
struct LockedPool : SeedPool {
  using SeedPool::SeedPool;
};

}  // namespace kvbp
