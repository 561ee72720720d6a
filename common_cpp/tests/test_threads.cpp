// The core's pool: sized by the caller, never more threads than allowed, results independent of
// the thread count, and nothing lost when two callers use it at once.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "kvbridge/rmsnorm.hpp"
#include "kvbridge/threads.hpp"

namespace {

// Work large enough that the pool splits it: every index is visited exactly once.
bool covers_each_index_once(std::int64_t n) {
  std::vector<std::atomic<int>> visits(n);
  kvbridge::parallel_for(n, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) visits[i].fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // let every worker take a chunk
  });
  for (auto& v : visits) {
    if (v.load() != 1) return false;
  }
  return true;
}

std::vector<float> rmsnorm_of(std::int64_t rows, std::int64_t cols) {
  std::vector<float> x(rows * cols), w(cols, 1.5f), y(rows * cols);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.1 * i));
  kvbridge::rmsnorm({x.data(), {rows, cols}, {cols, 1}}, {w.data(), {cols}, {1}}, 1e-6, y.data(),
                    {rows, cols});
  return y;
}

// The scheduler's state of each of the pool's workers (Linux: /proc/self/task/<tid>/stat's third
// field: 'S' asleep, 'R' running or waiting for a CPU); empty where /proc is not.
std::vector<char> worker_states() {
  std::vector<char> states;
  std::error_code none;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", none)) {
    std::string name;
    std::getline(std::ifstream(task.path() / "comm"), name);
    if (name != "kvbridge-pool") continue;
    std::string stat;
    std::getline(std::ifstream(task.path() / "stat"), stat);
    const auto paren = stat.rfind(')');  // the name, in parentheses, may hold spaces
    if (paren != std::string::npos && paren + 2 < stat.size()) states.push_back(stat[paren + 2]);
  }
  return states;
}

}  // namespace

TEST_CASE(num_threads_is_the_callers) {
  CHECK(kvbridge::get_num_threads() >= 1);
  kvbridge::set_num_threads(3);
  CHECK(kvbridge::get_num_threads() == 3);
  CHECK_THROWS(std::invalid_argument, "num_threads must be >= 1, got 0",
               kvbridge::set_num_threads(0));
  CHECK(kvbridge::get_num_threads() == 3);  // a refused call changes nothing
}

TEST_CASE(one_thread_runs_on_the_caller_only) {
  kvbridge::set_num_threads(1);
  const auto caller = std::this_thread::get_id();
  bool elsewhere = false;
  kvbridge::parallel_for(1000, 1, [&](std::int64_t, std::int64_t) {
    elsewhere = elsewhere || std::this_thread::get_id() != caller;
  });
  CHECK(!elsewhere);
  CHECK(kvbridge::last_num_threads() == 1);
}

TEST_CASE(n_threads_use_at_most_n) {
  for (std::int64_t n : {2, 4}) {
    kvbridge::set_num_threads(n);
    CHECK(covers_each_index_once(64));
    CHECK(kvbridge::last_num_threads() >= 2 && kvbridge::last_num_threads() <= n);
  }
}

TEST_CASE(results_do_not_depend_on_the_thread_count) {
  kvbridge::set_num_threads(1);
  const auto one = rmsnorm_of(256, 1024);
  CHECK(kvbridge::last_num_threads() == 1);
  kvbridge::set_num_threads(4);
  const auto four = rmsnorm_of(256, 1024);
  CHECK(kvbridge::last_num_threads() > 1);
  CHECK(one == four);  // bit for bit: each row is summed the same way whoever runs it
}

TEST_CASE(concurrent_callers_each_get_their_work_done) {
  kvbridge::set_num_threads(2);
  std::atomic<bool> ok{true};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round) ok = ok && covers_each_index_once(16);
    });
  }
  for (auto& c : callers) c.join();
  CHECK(ok.load());
}

// Between jobs the workers sleep: after a job each spins for about one wake-up round trip, then
// blocks, so every one is soon seen asleep by the scheduler. One that spins forever is never
// seen asleep, however busy the machine: the check waits for a state, never times a duration.
TEST_CASE(idle_workers_sleep) {
#ifdef __linux__
  kvbridge::set_num_threads(3);
  CHECK(covers_each_index_once(64));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::vector<char> states = worker_states();
  while (std::count(states.begin(), states.end(), 'S') != 2 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    states = worker_states();
  }
  CHECK(states.size() == 2);  // set_num_threads(3): the caller and two workers
  CHECK(std::count(states.begin(), states.end(), 'S') == 2);
#endif
}

HARNESS_MAIN()
