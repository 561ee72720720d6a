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

HARNESS_MAIN()
