// Token-sequence kernels: read a 1-D integer array in place, given pointer, length and stride
// (in elements). A stride of 1 takes a contiguous fast path that the compiler vectorises.
#pragma once

#include <cstdint>
#include <variant>

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

// A token array of any dtype a binding reads in place, and the two kernels over it: what every
// binding that sorts arrays by dtype at run time calls. common_prefix takes int32 and int64
// only: uint64 values above 2^63 have no int64 to compare with, so bindings convert uint64 to
// int64 for it (docs/contract.md) and a uint64 view here is std::invalid_argument.
using AnyTokens =
    std::variant<TokenView<std::int32_t>, TokenView<std::int64_t>, TokenView<std::uint64_t>>;
std::int64_t common_prefix(const AnyTokens& a, const AnyTokens& b);
std::int64_t count_eos(const AnyTokens& tokens, std::int64_t eos) noexcept;

}  // namespace kvbridge
