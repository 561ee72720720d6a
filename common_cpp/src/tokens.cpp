#include "kvbridge/tokens.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "kvbridge/simd.hpp"
#include "kvbridge/testing.hpp"

namespace kvbridge {
namespace {

// Counters as wide as the element: an int32 compare then feeds 32-bit vector lanes instead of
// being widened to 64 bits, which halves the work per vector. Chunks keep them from overflowing.
template <class T>
using LaneCounter = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;
constexpr std::int64_t kCountChunk = std::int64_t{1} << 20;

// Contiguous fast path: a branch-free count the compiler turns into SIMD compares.
template <class T>
std::int64_t count_contiguous(const T* data, std::int64_t n, T eos) noexcept {
  std::int64_t total = 0;
  for (std::int64_t start = 0; start < n; start += kCountChunk) {
    const std::int64_t end = std::min(n, start + kCountChunk);
    LaneCounter<T> count = 0;
    for (std::int64_t i = start; i < end; ++i) count += (data[i] == eos);
    total += static_cast<std::int64_t>(count);
  }
  return total;
}

// Blocks compared without an early exit (vectorisable: the mismatch flags are OR-ed in lanes as
// wide as the elements), then the first mismatch is located inside the block that had one.
template <class A, class B>
std::int64_t prefix_contiguous(const A* a, const B* b, std::int64_t n) noexcept {
  using Wide = std::conditional_t<(sizeof(A) > sizeof(B)), A, B>;
  using Flag = std::make_unsigned_t<Wide>;
  constexpr std::int64_t kBlock = 128;
  std::int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    Flag mismatch = 0;
    for (std::int64_t j = 0; j < kBlock; ++j) {
      mismatch |= static_cast<Flag>(static_cast<Wide>(a[i + j]) != static_cast<Wide>(b[i + j]));
    }
    if (mismatch != 0) break;
  }
  for (; i < n; ++i) {
    if (static_cast<std::int64_t>(a[i]) != static_cast<std::int64_t>(b[i])) return i;
  }
  return n;
}

// One non-template entry point per element type, so each gets its SIMD clones.
KVBRIDGE_SIMD_CLONES std::int64_t count_i32(const std::int32_t* d, std::int64_t n,
                                            std::int32_t e) noexcept {
  return count_contiguous(d, n, e);
}
KVBRIDGE_SIMD_CLONES std::int64_t count_i64(const std::int64_t* d, std::int64_t n,
                                            std::int64_t e) noexcept {
  return count_contiguous(d, n, e);
}
KVBRIDGE_SIMD_CLONES std::int64_t count_u64(const std::uint64_t* d, std::int64_t n,
                                            std::uint64_t e) noexcept {
  return count_contiguous(d, n, e);
}
std::int64_t count_fast(const std::int32_t* d, std::int64_t n, std::int32_t e) noexcept {
  return count_i32(d, n, e);
}
std::int64_t count_fast(const std::int64_t* d, std::int64_t n, std::int64_t e) noexcept {
  return count_i64(d, n, e);
}
std::int64_t count_fast(const std::uint64_t* d, std::int64_t n, std::uint64_t e) noexcept {
  return count_u64(d, n, e);
}

KVBRIDGE_SIMD_CLONES std::int64_t prefix_i32_i32(const std::int32_t* a, const std::int32_t* b,
                                                 std::int64_t n) noexcept {
  return prefix_contiguous(a, b, n);
}
KVBRIDGE_SIMD_CLONES std::int64_t prefix_i64_i64(const std::int64_t* a, const std::int64_t* b,
                                                 std::int64_t n) noexcept {
  return prefix_contiguous(a, b, n);
}
KVBRIDGE_SIMD_CLONES std::int64_t prefix_i32_i64(const std::int32_t* a, const std::int64_t* b,
                                                 std::int64_t n) noexcept {
  return prefix_contiguous(a, b, n);
}
std::int64_t prefix_fast(const std::int32_t* a, const std::int32_t* b, std::int64_t n) noexcept {
  return prefix_i32_i32(a, b, n);
}
std::int64_t prefix_fast(const std::int64_t* a, const std::int64_t* b, std::int64_t n) noexcept {
  return prefix_i64_i64(a, b, n);
}
std::int64_t prefix_fast(const std::int32_t* a, const std::int64_t* b, std::int64_t n) noexcept {
  return prefix_i32_i64(a, b, n);
}
std::int64_t prefix_fast(const std::int64_t* a, const std::int32_t* b, std::int64_t n) noexcept {
  return prefix_i32_i64(b, a, n);
}

}  // namespace

template <class A, class B>
std::int64_t common_prefix(TokenView<A> a, TokenView<B> b) noexcept {
  testing::wait_at_gate();  // the GIL tests' proof that this runs without the GIL
  const std::int64_t n = std::min(a.size, b.size);
  if (a.stride == 1 && b.stride == 1) return prefix_fast(a.data, b.data, n);
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
  testing::wait_at_gate();  // the GIL tests' proof that this runs without the GIL
  // An eos outside T's range can equal no element; checking here keeps the comparison exact
  // instead of truncating eos to T.
  if constexpr (std::is_signed_v<T>) {
    if (eos < std::numeric_limits<T>::min() || eos > std::numeric_limits<T>::max()) return 0;
  } else {
    if (eos < 0 || static_cast<std::uint64_t>(eos) > std::numeric_limits<T>::max()) return 0;
  }
  const T target = static_cast<T>(eos);
  if (tokens.stride == 1) return count_fast(tokens.data, tokens.size, target);
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

std::int64_t common_prefix(const AnyTokens& a, const AnyTokens& b) {
  return std::visit(
      [](const auto& va, const auto& vb) -> std::int64_t {
        using A = std::decay_t<decltype(*va.data)>;
        using B = std::decay_t<decltype(*vb.data)>;
        if constexpr (std::is_same_v<A, std::uint64_t> || std::is_same_v<B, std::uint64_t>) {
          throw std::invalid_argument("common_prefix compares int32 and int64 tokens only");
        } else {
          return common_prefix(va, vb);
        }
      },
      a, b);
}

std::int64_t count_eos(const AnyTokens& tokens, std::int64_t eos) noexcept {
  return std::visit([eos](const auto& v) { return count_eos(v, eos); }, tokens);
}

}  // namespace kvbridge
