// Token-sequence kernels: read a 1-D integer array in place, given pointer, length and stride
// (in elements). A stride of 1 takes a contiguous fast path that the compiler vectorises.
#pragma once

#include <cstdint>

namespace kvbridge {

template <class T>
struct TokenView {
  const T* data;
  std::int64_t size;
  std::int64_t stride;  // in elements; may be negative or zero
};

// Length of the longest common prefix. Elements compare as int64 values, so an int32 sequence
// and an int64 sequence can be compared directly.
template <class A, class B>
std::int64_t common_prefix(TokenView<A> a, TokenView<B> b) noexcept;

// How many elements equal eos, compared exactly (an int32 array never matches an eos outside
// int32's range; nothing is truncated).
template <class T>
std::int64_t count_eos(TokenView<T> tokens, std::int64_t eos) noexcept;

}  // namespace kvbridge
