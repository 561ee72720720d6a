#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>

#include "harness.hpp"
#include "kvbridge/block_pool.hpp"

using kvbridge::BlockPool;

TEST_CASE(fresh_pool_hands_out_ids_in_order) {
  BlockPool pool(8);
  CHECK(pool.num_blocks() == 8 && pool.num_free() == 8);
  auto blocks = pool.allocate(3);
  CHECK(blocks && *blocks == (std::vector<int>{0, 1, 2}));
  CHECK(pool.num_free() == 5);
  CHECK(pool.repr() == "<BlockPool free=5/8>");
}

TEST_CASE(released_block_is_reused_first) {
  BlockPool pool(8);
  pool.allocate(3);
  pool.release(1);
  CHECK(*pool.allocate(2) == (std::vector<int>{1, 3}));
}

TEST_CASE(allocate_is_all_or_nothing) {
  BlockPool pool(4);
  CHECK(pool.allocate(3));
  CHECK(!pool.allocate(2));
  CHECK(pool.num_free() == 1);
  CHECK(pool.allocate(0)->empty());
}

TEST_CASE(allocate_many_is_all_or_nothing) {
  BlockPool pool(5);
  const std::int64_t fits[] = {2, 0, 3};
  auto got = pool.allocate_many(fits, 3);
  CHECK(got && (*got)[0] == (std::vector<int>{0, 1}) && (*got)[1].empty() &&
        (*got)[2] == (std::vector<int>{2, 3, 4}));
  BlockPool other(5);
  const std::int64_t too_many[] = {2, 4};
  CHECK(!other.allocate_many(too_many, 2));
  CHECK(other.num_free() == 5 && other.stats().allocated_total == 0);
}

TEST_CASE(allocate_many_validates_before_changing_anything) {
  BlockPool pool(5);
  const std::int64_t bad[] = {1, -2};
  CHECK_THROWS(std::invalid_argument, "counts[1] must be >= 0, got -2", pool.allocate_many(bad, 2));
  const std::int64_t huge[] = {1, std::int64_t{1} << 40};
  CHECK_THROWS(std::overflow_error, "counts[1]=1099511627776", pool.allocate_many(huge, 2));
  CHECK(pool.num_free() == 5);
}

TEST_CASE(refcounting) {
  BlockPool pool(4);
  pool.allocate(1);
  pool.retain(0);
  CHECK(pool.refcount(0) == 2);
  pool.release(0);
  CHECK(pool.num_free() == 3);
  pool.release(0);
  CHECK(pool.num_free() == 4 && pool.refcount(0) == 0);
  CHECK_THROWS(std::runtime_error, "block 0", pool.release(0));
  CHECK_THROWS(std::runtime_error, "block 0", pool.retain(0));
}

TEST_CASE(bad_arguments_name_the_value) {
  CHECK_THROWS(std::invalid_argument, "got -1", BlockPool(-1));
  CHECK_THROWS(std::overflow_error, "num_blocks=1099511627776", BlockPool(std::int64_t{1} << 40));
  BlockPool pool(8);
  CHECK_THROWS(std::invalid_argument, "got -3", pool.allocate(-3));
  CHECK_THROWS(std::out_of_range, "block 8 is out of range [0, 8)", pool.retain(8));
  CHECK_THROWS(std::out_of_range, "block -1", pool.refcount(-1));
  CHECK_THROWS(std::overflow_error, "block=1099511627776", pool.release(std::int64_t{1} << 40));
}

TEST_CASE(stats_and_refcounts_snapshot) {
  BlockPool pool(4);
  pool.allocate(3);
  pool.release(2);
  pool.allocate(1);
  CHECK(pool.stats().allocated_total == 4 && pool.stats().released_total == 1);
  CHECK(pool.stats().peak_in_use == 3);
  auto snapshot = pool.refcounts();
  CHECK(snapshot->size() == 4 && snapshot->data()[0] == 1 && snapshot->data()[3] == 0);
}

TEST_CASE(live_pool_count) {
  const auto before = kvbridge::live_pools();
  {
    BlockPool a(1), b(2);
    CHECK(kvbridge::live_pools() == before + 2);
  }
  CHECK(kvbridge::live_pools() == before);
}

TEST_CASE(concurrent_allocation_never_hands_a_block_out_twice) {
  BlockPool pool(1000);
  std::vector<std::vector<int>> owned(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, &owned, t] {
      for (int i = 0; i < 2000; ++i) {
        if (auto got = pool.allocate(1 + i % 3)) {
          for (int b : *got) owned[t].push_back(b);
        }
        if (owned[t].size() > 20) {  // hand some back so the pool churns
          pool.release(owned[t].back());
          owned[t].pop_back();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<int> seen;
  std::size_t held = 0;
  for (auto& list : owned) {
    held += list.size();
    seen.insert(list.begin(), list.end());
  }
  CHECK(seen.size() == held);
  CHECK(pool.num_free() == 1000 - static_cast<int>(held));
  CHECK(pool.stats().allocated_total - pool.stats().released_total ==
        static_cast<std::int64_t>(held));
}

HARNESS_MAIN()
