#include "kvbridge/tokens.hpp"

#include <algorithm>
#include <limits>

namespace kvbridge {
namespace {

// Contiguous fast path: a branch-free count the compiler turns into SIMD compares.
template <class T>
std::int64_t count_contiguous(const T* data, std::int64_t n, T eos) noexcept {
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < n; ++i) count += (data[i] == eos);
  return count;
}

// Blocks of 64 elements compared without an early exit (vectorisable), then the first mismatch
// is located inside the block that had one.
template <class A, class B>
std::int64_t prefix_contiguous(const A* a, const B* b, std::int64_t n) noexcept {
  constexpr std::int64_t kBlock = 64;
  std::int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    int mismatches = 0;
    for (std::int64_t j = 0; j < kBlock; ++j) {
      mismatches += static_cast<std::int64_t>(a[i + j]) != static_cast<std::int64_t>(b[i + j]);
    }
    if (mismatches != 0) break;
  }
  for (; i < n; ++i) {
    if (static_cast<std::int64_t>(a[i]) != static_cast<std::int64_t>(b[i])) return i;
  }
  return n;
}

}  // namespace

template <class A, class B>
std::int64_t common_prefix(TokenView<A> a, TokenView<B> b) noexcept {
  const std::int64_t n = std::min(a.size, b.size);
  if (a.stride == 1 && b.stride == 1) return prefix_contiguous(a.data, b.data, n);
  for (std::int64_t i = 0; i < n; ++i) {
    if (static_cast<std::int64_t>(a.data[i * a.stride]) !=
        static_cast<std::int64_t>(b.data[i * b.stride])) {
      return i;
    }
  }
  return n;
}

template <class T>
std::int64_t count_eos(TokenView<T> tokens, std::int64_t eos) noexcept {
  // An eos outside T's range can equal no element; checking here keeps the comparison exact
  // instead of truncating eos to T.
  if constexpr (std::is_signed_v<T>) {
    if (eos < std::numeric_limits<T>::min() || eos > std::numeric_limits<T>::max()) return 0;
  } else {
    if (eos < 0 || static_cast<std::uint64_t>(eos) > std::numeric_limits<T>::max()) return 0;
  }
  const T target = static_cast<T>(eos);
  if (tokens.stride == 1) return count_contiguous(tokens.data, tokens.size, target);
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < tokens.size; ++i)
    count += (tokens.data[i * tokens.stride] == target);
  return count;
}

// The element types every binding reads in place.
template std::int64_t common_prefix(TokenView<std::int32_t>, TokenView<std::int32_t>) noexcept;
template std::int64_t common_prefix(TokenView<std::int32_t>, TokenView<std::int64_t>) noexcept;
template std::int64_t common_prefix(TokenView<std::int64_t>, TokenView<std::int32_t>) noexcept;
template std::int64_t common_prefix(TokenView<std::int64_t>, TokenView<std::int64_t>) noexcept;
template std::int64_t count_eos(TokenView<std::int32_t>, std::int64_t) noexcept;
template std::int64_t count_eos(TokenView<std::int64_t>, std::int64_t) noexcept;
template std::int64_t count_eos(TokenView<std::uint64_t>, std::int64_t) noexcept;

}  // namespace kvbridge
