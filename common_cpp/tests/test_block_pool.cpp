#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

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

// Every mutating operation racing on the same memory: four threads retain and release the same
// shared blocks (each keeps its own count of them), while four others allocate, allocate_many
// and release blocks of their own. Without any one operation's lock ThreadSanitizer sees the
// race at once (the tsan env; make mutants' pool-retain-without-lock); a plain build may lose
// an update, which the counts below catch: a shared block's refcount off by the lost
// increments, or dropped to 0 and freed under its holders (then release throws).
TEST_CASE(every_mutation_races_on_the_same_blocks_and_the_counts_add_up) {
  constexpr int kShared = 4, kRounds = 20000, kTotal = 256;
  BlockPool pool(kTotal);
  const auto shared = *pool.allocate(kShared);  // refcount 1 each, held by this thread
  std::atomic<bool> failed{false};
  std::vector<std::vector<int>> owned(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, &shared, &failed, t] {
      try {
        for (int i = 0; i < kRounds; ++i) {
          const int b = shared[(i + t) % kShared];
          pool.retain(b);
          pool.retain(b);
          pool.release(b);
          pool.release(b);
        }
      } catch (const std::exception&) {
        failed = true;  // a block freed under its holders: a lost update
      }
    });
    threads.emplace_back([&pool, &owned, &failed, t] {
      try {
        for (int i = 0; i < kRounds / 4; ++i) {
          if (i % 2 == 0) {
            if (auto got = pool.allocate(1 + i % 3)) {
              for (int b : *got) owned[t].push_back(b);
            }
          } else {
            const std::int64_t counts[] = {1, i % 2 + 1};
            if (auto got = pool.allocate_many(counts, 2)) {
              for (const auto& request : *got) {
                for (int b : request) owned[t].push_back(b);
              }
            }
          }
          while (owned[t].size() > 12) {  // hand some back so the free list churns
            pool.release(owned[t].back());
            owned[t].pop_back();
          }
        }
      } catch (const std::exception&) {
        failed = true;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(!failed.load());
  for (int b : shared) CHECK(pool.refcount(b) == 1);  // every retain met by its release
  std::set<int> seen(shared.begin(), shared.end());
  std::size_t held = shared.size();
  for (const auto& list : owned) {
    held += list.size();
    seen.insert(list.begin(), list.end());
  }
  CHECK(seen.size() == held);  // no block handed out twice
  CHECK(pool.num_free() == kTotal - static_cast<int>(held));
  CHECK(pool.stats().allocated_total - pool.stats().released_total ==
        static_cast<std::int64_t>(held));
}

HARNESS_MAIN()
