#include <limits>
#include <vector>

#include "harness.hpp"
#include "kvbridge/tokens.hpp"

using kvbridge::TokenView;

template <class T>
TokenView<T> view(const std::vector<T>& v) {
  return {v.data(), static_cast<std::int64_t>(v.size()), 1};
}

TEST_CASE(common_prefix_contiguous_and_mixed_types) {
  std::vector<std::int64_t> a(1000);
  std::vector<std::int32_t> b(700);
  for (int i = 0; i < 1000; ++i) a[i] = i;
  for (int i = 0; i < 700; ++i) b[i] = i;
  CHECK(kvbridge::common_prefix(view(a), view(b)) == 700);
  b[517] = -1;
  CHECK(kvbridge::common_prefix(view(a), view(b)) == 517);
  CHECK(kvbridge::common_prefix(view(b), view(b)) == 700);
  std::vector<std::int64_t> empty;
  CHECK(kvbridge::common_prefix(view(a), view(empty)) == 0);
}

TEST_CASE(common_prefix_compares_as_int64) {
  // 2^32 + 1 would equal 1 if either side were truncated to 32 bits.
  std::vector<std::int64_t> a{std::int64_t{1} << 32 | 1};
  std::vector<std::int32_t> b{1};
  CHECK(kvbridge::common_prefix(view(a), view(b)) == 0);
}

TEST_CASE(common_prefix_strided) {
  std::vector<std::int32_t> a{5, 0, 6, 0, 7, 0, 8};
  std::vector<std::int32_t> b{8, 7, 6, 5};
  const TokenView<std::int32_t> every_other{a.data(), 4, 2};
  const TokenView<std::int32_t> reversed{b.data() + 3, 4, -1};
  CHECK(kvbridge::common_prefix(every_other, reversed) == 4);
}

TEST_CASE(count_eos_exact) {
  std::vector<std::int64_t> t{2, 7, 2, (std::int64_t{1} << 32) + 2, 2};
  CHECK(kvbridge::count_eos(view(t), 2) == 3);
  CHECK(kvbridge::count_eos(view(t), (std::int64_t{1} << 32) + 2) == 1);
  std::vector<std::int32_t> s{2, 2, 2};
  CHECK(kvbridge::count_eos(view(s), (std::int64_t{1} << 32) + 2) == 0);
  const TokenView<std::int64_t> strided{t.data(), 3, 2};
  CHECK(kvbridge::count_eos(strided, 2) == 3);
}

TEST_CASE(count_eos_unsigned) {
  std::vector<std::uint64_t> t{std::numeric_limits<std::uint64_t>::max(), 5};
  CHECK(kvbridge::count_eos(view(t), -1) == 0);  // never wraps to 2^64 - 1
  CHECK(kvbridge::count_eos(view(t), 5) == 1);
}

// Counts past any counter a kernel might keep per chunk or per lane (16 bits, say): arrays where
// nearly every token matches, longer than two of the kernel's chunks and than 32 lanes of 16-bit
// counters could hold, each dtype, contiguous and strided.
template <class T>
void check_counts_past_counter_widths() {
  constexpr std::int64_t n = (std::int64_t{1} << 22) + 12345;
  std::vector<T> t(static_cast<std::size_t>(2 * n), T{7});
  std::int64_t misses = 0, strided_misses = 0;
  for (std::int64_t i = 0; i < 2 * n; i += 1009) {
    t[static_cast<std::size_t>(i)] = T{8};
    ++misses;
    strided_misses += (i % 2 == 0);
  }
  CHECK(kvbridge::count_eos(TokenView<T>{t.data(), 2 * n, 1}, 7) == 2 * n - misses);
  CHECK(kvbridge::count_eos(TokenView<T>{t.data(), n, 2}, 7) == n - strided_misses);
  const TokenView<T> reversed{t.data() + 2 * n - 1, 2 * n, -1};
  CHECK(kvbridge::count_eos(reversed, 7) == 2 * n - misses);
}

TEST_CASE(count_eos_counts_past_any_counter_width) {
  check_counts_past_counter_widths<std::int32_t>();
  check_counts_past_counter_widths<std::int64_t>();
  check_counts_past_counter_widths<std::uint64_t>();
}

// Mixed widths compared at 64 bits everywhere: int64 values that differ from the other side only
// above bit 31, at the first, a middle and the last position of arrays longer than any block the
// kernel compares at once, in both argument orders.
TEST_CASE(common_prefix_compares_high_bits_at_every_position) {
  constexpr std::int64_t n = 100003;
  std::vector<std::int32_t> narrow(n);
  std::vector<std::int64_t> wide(n), wide_too(n);
  for (std::int64_t i = 0; i < n; ++i) {
    narrow[i] = static_cast<std::int32_t>(i * 7 - 5);
    wide[i] = wide_too[i] = narrow[i];
  }
  for (const std::int64_t at : {std::int64_t{0}, n / 2 + 3, n - 1}) {
    wide[at] += std::int64_t{1} << 32;  // the same low 32 bits as narrow[at] and wide_too[at]
    CHECK(kvbridge::common_prefix(view(wide), view(narrow)) == at);
    CHECK(kvbridge::common_prefix(view(narrow), view(wide)) == at);
    CHECK(kvbridge::common_prefix(view(wide), view(wide_too)) == at);
    CHECK(kvbridge::common_prefix(view(wide_too), view(wide)) == at);
    wide[at] = narrow[at];
  }
  CHECK(kvbridge::common_prefix(view(wide), view(narrow)) == n);
}

HARNESS_MAIN()
