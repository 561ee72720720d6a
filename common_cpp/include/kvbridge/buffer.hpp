// A C++-allocated array that a binding hands to Python without copying.
//
// Every binding adopts a Buffer (a capsule, an owner object, a from_blob deleter) and deletes
// it when the last Python reference dies. The process-wide live count lets the conformance suite
// prove each buffer is freed exactly once: a double free would drive it below its baseline, a
// leak would leave it above.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace kvbridge {

namespace detail {
void note_buffer_created() noexcept;
void note_buffer_destroyed() noexcept;
}  // namespace detail

// Number of Buffer objects alive in this process (all element types together).
std::int64_t live_buffers() noexcept;

template <class T>
class Buffer {
 public:
  explicit Buffer(std::size_t size) : data_(new T[size]()), size_(size) {
    detail::note_buffer_created();
  }
  ~Buffer() { detail::note_buffer_destroyed(); }

  // Not copyable or movable: one Buffer is one counted allocation, adopted by pointer.
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  T* data() noexcept { return data_.get(); }
  const T* data() const noexcept { return data_.get(); }
  std::size_t size() const noexcept { return size_; }

 private:
  std::unique_ptr<T[]> data_;
  std::size_t size_;
};

}  // namespace kvbridge
