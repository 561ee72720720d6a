// Threads: how many a kernel call may use, and the one place that runs work on them.
//
// An inference engine decides its own parallelism (its scheduler thread must keep running; it
// may already use every core for other work), so the core never starts threads per call and
// never takes more than the caller allows. Work runs on one persistent pool of worker threads
// (plus the calling thread), sized by set_num_threads. A binding whose framework owns a thread
// pool instead routes the work there (set_parallel_backend): the torch package uses
// at::parallel_for, so torch.set_num_threads governs its kernels like every other torch op.
#pragma once

#include <cstdint>
#include <functional>

namespace kvbridge {

// Threads a kernel call may use, the calling thread included. Throws std::invalid_argument for
// n < 1 (check_num_threads, which a binding with its own pool calls too). Resizes the pool
// (workers start or stop here, never in a kernel call).
void set_num_threads(std::int64_t n);
std::int64_t get_num_threads() noexcept;
std::int64_t check_num_threads(std::int64_t n);

// The CPUs this process may run on (its affinity mask), or KVBRIDGE_NUM_THREADS when set; the
// initial get_num_threads(). Throws std::invalid_argument naming a malformed KVBRIDGE_NUM_THREADS,
// so a binding that calls it at import fails there, not in a later kernel call.
std::int64_t default_num_threads();

// Runs body(begin, end) over disjoint chunks covering [0, n), at least `grain` indices each
// (fewer chunks, down to one on the calling thread, when n is small), on at most
// get_num_threads() threads. Returns when every chunk is done. body must not throw.
using ChunkBody = std::function<void(std::int64_t begin, std::int64_t end)>;
void parallel_for(std::int64_t n, std::int64_t grain, const ChunkBody& body);

// A framework's own parallel_for, used instead of the core's pool (see above). It must run
// body over disjoint chunks covering [0, n) and return when all are done.
using ParallelBackend = void (*)(std::int64_t n, std::int64_t grain, const ChunkBody& body);
void set_parallel_backend(ParallelBackend backend) noexcept;

// How many distinct threads ran the last parallel_for called from this thread (1: all on the
// caller). The conformance suite reads it through _testing.last_num_threads().
std::int64_t last_num_threads() noexcept;

}  // namespace kvbridge
