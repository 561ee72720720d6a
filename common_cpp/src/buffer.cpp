#include "kvbridge/buffer.hpp"

namespace kvbridge {
namespace {
std::atomic<std::int64_t> g_live_buffers{0};
}  // namespace

namespace detail {
void note_buffer_created() noexcept { g_live_buffers.fetch_add(1, std::memory_order_relaxed); }
void note_buffer_destroyed() noexcept { g_live_buffers.fetch_sub(1, std::memory_order_relaxed); }
}  // namespace detail

std::int64_t live_buffers() noexcept { return g_live_buffers.load(std::memory_order_relaxed); }

}  // namespace kvbridge
