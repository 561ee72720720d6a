#include "kvbridge/testing.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ios>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <typeinfo>

namespace kvbridge::testing {
namespace {

// The gate's state: written under g_gate_mutex, read without it only by wait_at_gate's first
// look (a kernel that misses an arm made at that instant was not the call under test).
std::atomic<int> g_gate{static_cast<int>(GateState::kIdle)};
std::mutex g_gate_mutex;
std::condition_variable g_gate_opened;
std::chrono::duration<double> g_gate_timeout{0};

constexpr int state(GateState s) { return static_cast<int>(s); }

}  // namespace

void arm_gate(double timeout_s) {
  if (!(timeout_s > 0 && timeout_s <= 3600)) {
    throw std::invalid_argument("gate timeout must be in (0, 3600] seconds, got " +
                                std::to_string(timeout_s));
  }
  std::lock_guard<std::mutex> lock(g_gate_mutex);
  g_gate_timeout = std::chrono::duration<double>(timeout_s);
  g_gate.store(state(GateState::kArmed));
}

int open_gate() noexcept {
  std::lock_guard<std::mutex> lock(g_gate_mutex);
  if (g_gate.load() == state(GateState::kWaiting)) {
    g_gate.store(state(GateState::kOpened));
    g_gate_opened.notify_all();
  }
  return g_gate.load();
}

int close_gate() noexcept {
  std::lock_guard<std::mutex> lock(g_gate_mutex);
  return g_gate.exchange(state(GateState::kIdle));
}

void wait_at_gate() noexcept {
  if (g_gate.load(std::memory_order_relaxed) != state(GateState::kArmed)) return;
  std::unique_lock<std::mutex> lock(g_gate_mutex);
  if (g_gate.load() != state(GateState::kArmed)) return;  // another kernel took it first
  g_gate.store(state(GateState::kWaiting));
  const bool opened = g_gate_opened.wait_for(
      lock, g_gate_timeout, [] { return g_gate.load() == state(GateState::kOpened); });
  if (!opened) g_gate.store(state(GateState::kTimedOut));
}

void throw_kind(std::string_view kind) {
  const std::string message = "kvbridge test exception: " + std::string(kind);
  if (kind == "invalid_argument") throw std::invalid_argument(message);
  if (kind == "domain_error") throw std::domain_error(message);
  if (kind == "length_error") throw std::length_error(message);
  if (kind == "out_of_range") throw std::out_of_range(message);
  if (kind == "range_error") throw std::range_error(message);
  if (kind == "overflow_error") throw std::overflow_error(message);
  if (kind == "underflow_error") throw std::underflow_error(message);
  if (kind == "bad_alloc") throw std::bad_alloc();
  if (kind == "bad_cast") throw std::bad_cast();
  if (kind == "ios_failure") throw std::ios_base::failure(message);
  if (kind == "logic_error") throw std::logic_error(message);
  if (kind == "runtime_error") throw std::runtime_error(message);
  if (kind == "system_error") {
    throw std::system_error(std::make_error_code(std::errc::io_error), message);
  }
  if (kind == "custom") throw CustomError(message);
  if (kind == "non_std") throw 42;  // NOLINT: deliberately not a std::exception
  throw std::invalid_argument("unknown exception kind: '" + std::string(kind) + "'");
}

bool wait_for_python(std::int64_t address, double timeout_s) {
  // The caller's int32, seen as a lock-free atomic of the same size and representation.
  auto* flag = reinterpret_cast<std::atomic<std::int32_t>*>(static_cast<std::uintptr_t>(address));
  static_assert(sizeof(std::atomic<std::int32_t>) == sizeof(std::int32_t));
  flag->store(1);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (flag->load() != 2) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

}  // namespace kvbridge::testing
