#include "kvbridge/threads.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kvbridge {
namespace {

using Clock = std::chrono::steady_clock;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// The pool: `chunks` equal chunks of a job, chunk 0 on the calling thread and chunk k on the
// k-th worker to wake (a static schedule: a call asked to use n threads uses exactly n, and the
// rows of a kernel are equal work). One job at a time: a second caller that finds the pool busy
// runs its job on its own thread rather than wait (two Python threads calling at once still
// overlap, and nothing can deadlock on the pool).
//
// Waiting spins before it sleeps, on both sides: a worker for the next job, the caller for the
// workers' chunks. Waking a thread that sleeps costs a round trip through the OS scheduler (on
// a virtual machine whose other CPU went idle, also the hypervisor's), which can exceed a small
// kernel call's whole work; a caller that calls again soon, as a decode loop does, finds the
// worker still spinning. Each side spins for as long as that round trip took when the pool
// started (spin_ns_), then sleeps: a wait never burns more CPU than one sleep and wake-up took.
// OpenMP's runtimes (the copy floor's, torch's) spin before they sleep too.
class Pool {
 public:
  explicit Pool(std::int64_t workers) { resize(workers); }

  void resize(std::int64_t workers) {
    std::lock_guard<std::mutex> busy(job_mutex_);  // never while a job runs
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    stop_ = false;
    spin_ns_ = 0;
    for (std::int64_t i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
    if (workers > 0) spin_ns_ = std::chrono::nanoseconds(wake_round_trip()).count();
  }

  std::int64_t workers() const noexcept { return static_cast<std::int64_t>(threads_.size()); }

  // Runs body over [0, n) in `chunks` chunks (chunks <= workers() + 1). Returns false, having
  // run nothing, if the pool is busy with another caller's job.
  bool run(std::int64_t n, std::int64_t chunks, const ChunkBody& body) {
    std::unique_lock<std::mutex> busy(job_mutex_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    dispatch(n, chunks, body);
    return true;
  }

 private:
  // One job, job_mutex_ held.
  void dispatch(std::int64_t n, std::int64_t chunks, const ChunkBody& body) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = &body;
      n_ = n;
      chunks_ = chunks;
      claimed_ = 1;  // chunk 0 is the caller's
      done_ = 0;
      ++generation_;
    }
    wake_.notify_all();  // no system call when every worker is still spinning
    body(0, n / chunks);
    const auto finished = [&] { return done_ == chunks - 1; };
    spin_until(finished);
    std::unique_lock<std::mutex> lock(mutex_);  // also orders the workers' writes before ours
    finished_.wait(lock, finished);
    body_ = nullptr;
  }

  // The median of a few round trips to a worker that sleeps: a job of two empty chunks, each
  // after a pause long enough for the worker to fall asleep and its CPU to go idle.
  Clock::duration wake_round_trip() {
    const ChunkBody nothing = [](std::int64_t, std::int64_t) {};
    std::vector<Clock::duration> trips;
    for (int i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const auto start = Clock::now();
      dispatch(2, 2, nothing);
      trips.push_back(Clock::now() - start);
    }
    std::sort(trips.begin(), trips.end());
    return trips[trips.size() / 2];
  }

  // Spins until ready() or for spin_ns_, whichever comes first.
  template <typename Ready>
  void spin_until(const Ready& ready) const {
    const std::int64_t spin = spin_ns_.load(std::memory_order_relaxed);
    if (spin == 0) return;
    const auto until = Clock::now() + std::chrono::nanoseconds(spin);
    for (unsigned i = 1; !ready(); ++i) {
      cpu_relax();
      if (i % 64 == 0) {  // the clock read is not free either
        if (Clock::now() >= until) return;
        std::this_thread::yield();  // to a thread that waits for this CPU (more than CPUs run)
      }
    }
  }

  void work() {
    // Named, so that a profiler, top -H or a test (test_threads.cpp, idle_workers_sleep) can
    // tell the pool's threads from the rest of the process.
    pthread_setname_np(pthread_self(), "kvbridge-pool");
    std::uint64_t seen = 0;
    const auto woken = [&] { return stop_ || generation_ != seen; };
    for (;;) {
      spin_until(woken);
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, woken);
      if (stop_) return;
      seen = generation_;
      if (body_ == nullptr || claimed_ >= chunks_) continue;  // a job with no chunk left for us
      const std::int64_t c = claimed_++;
      const ChunkBody& body = *body_;
      lock.unlock();
      body(n_ * c / chunks_, n_ * (c + 1) / chunks_);
      lock.lock();
      if (++done_ == chunks_ - 1) finished_.notify_all();
    }
  }

  std::mutex job_mutex_;  // held for the length of one job (or a resize)
  std::mutex mutex_;      // guards the fields below; the atomic ones are also read spinning
  std::condition_variable wake_, finished_;
  std::vector<std::thread> threads_;
  std::atomic<std::int64_t> spin_ns_{0};  // how long a wait spins: set by resize
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> generation_{0};
  const ChunkBody* body_ = nullptr;
  std::int64_t n_ = 0, chunks_ = 0, claimed_ = 0;
  std::atomic<std::int64_t> done_{0};
};

std::int64_t affinity_count() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::mutex g_config_mutex;                   // set_num_threads against itself and first use
std::atomic<std::int64_t> g_num_threads{0};  // 0: not yet initialised
Pool* g_pool = nullptr;  // leaked on purpose: workers must not be joined during static destruction
std::atomic<ParallelBackend> g_backend{nullptr};
thread_local std::int64_t t_last_threads = 1;

// A forked child has none of the parent's workers (fork copies only the calling thread): give
// it a fresh, empty pool; the parent's objects are leaked, since their threads do not exist here.
void reset_after_fork() {
  new (&g_config_mutex) std::mutex();
  g_pool = nullptr;
}

Pool& pool_for(std::int64_t threads) {
  std::lock_guard<std::mutex> lock(g_config_mutex);
  if (g_pool == nullptr) {
    static const int registered = pthread_atfork(nullptr, nullptr, reset_after_fork);
    (void)registered;
    g_pool = new Pool(threads - 1);
  } else if (g_pool->workers() != threads - 1) {
    g_pool->resize(threads - 1);
  }
  return *g_pool;
}

}  // namespace

std::int64_t default_num_threads() {
  const char* text = std::getenv("KVBRIDGE_NUM_THREADS");
  if (text == nullptr || *text == '\0') return affinity_count();
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (*end != '\0' || value < 1) {
    throw std::invalid_argument(std::string("KVBRIDGE_NUM_THREADS must be an integer >= 1, got '") +
                                text + "'");
  }
  return value;
}

std::int64_t check_num_threads(std::int64_t n) {
  if (n < 1) throw std::invalid_argument("num_threads must be >= 1, got " + std::to_string(n));
  return n;
}

void set_num_threads(std::int64_t n) {
  g_num_threads.store(check_num_threads(n));
  pool_for(n);  // workers start (or stop) now, not in the next kernel call
}

std::int64_t get_num_threads() noexcept {
  std::int64_t n = g_num_threads.load();
  if (n == 0) {
    try {
      n = default_num_threads();
    } catch (const std::invalid_argument&) {
      n = affinity_count();  // bindings report a malformed variable at import
    }
    std::int64_t expected = 0;
    g_num_threads.compare_exchange_strong(expected, n);
    n = g_num_threads.load();
  }
  return n;
}

void set_parallel_backend(ParallelBackend backend) noexcept { g_backend.store(backend); }

std::int64_t last_num_threads() noexcept { return t_last_threads; }

void parallel_for(std::int64_t n, std::int64_t grain, const ChunkBody& body) {
  if (n <= 0) return;
  if (const ParallelBackend backend = g_backend.load()) {
    // Count the framework's threads as they run: the suite checks the thread count it set.
    std::mutex seen_mutex;
    std::vector<std::thread::id> seen;
    backend(n, grain, [&](std::int64_t begin, std::int64_t end) {
      {
        std::lock_guard<std::mutex> lock(seen_mutex);
        if (std::find(seen.begin(), seen.end(), std::this_thread::get_id()) == seen.end()) {
          seen.push_back(std::this_thread::get_id());
        }
      }
      body(begin, end);
    });
    t_last_threads = std::max<std::int64_t>(1, static_cast<std::int64_t>(seen.size()));
    return;
  }
  const std::int64_t threads = get_num_threads();
  const std::int64_t chunks =
      std::min(threads, std::max<std::int64_t>(1, n / std::max<std::int64_t>(1, grain)));
  if (chunks <= 1) {
    body(0, n);
    t_last_threads = 1;
    return;
  }
  if (!pool_for(threads).run(n, chunks, body)) {  // busy with another caller's job: run it here
    body(0, n);
    t_last_threads = 1;
    return;
  }
  t_last_threads = chunks;
}

}  // namespace kvbridge
