// Test fixtures, not API: the throws behind every package's `_testing.throw(kind)`, so that each
// binding's translation of C++ exceptions is tested against the same table, and the GIL gate
// behind its `_testing.arm_gate`, `open_gate` and `close_gate`.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

namespace kvbridge::testing {

// Throws the standard C++ exception named by `kind` (the names of kvb_status_name()), a
// CustomError for "custom" and an int for "non_std". An unknown kind throws
// std::invalid_argument naming it.
[[noreturn]] void throw_kind(std::string_view kind);

// The GIL question for modules that carry none of kvbridge's hooks (the page's probe modules,
// each built with its technology's defaults, bind this one function): `address` is a 32-bit int
// in the caller's memory. The call stores 1 there, then waits until another thread stores 2, or
// until the timeout, and says whether that came. The thread that stores it is a Python thread,
// which can run only if the binding let go of the GIL: the same proof as the gate below, with
// the caller's own memory as the gate.
bool wait_for_python(std::int64_t address, double timeout_s);

// The GIL gate: whether a kernel ran with the GIL released, decided by what ran rather than by
// how long anything took. A test arms the gate; the next kernel call to reach it (count_eos,
// common_prefix or rmsnorm, on the calling thread, after its arguments are checked and before
// its work) waits there until another thread opens it, or until the timeout. The opener is a
// Python thread: if the binding kept the GIL, no Python thread can run while the kernel waits,
// so the gate times out and says so; if it released it, the opener needs only to be scheduled
// once within the timeout (seconds), which a loaded machine does as surely as an idle one.
// Unarmed, the gate costs a kernel call one relaxed atomic load.
enum class GateState : int { kIdle = 0, kArmed = 1, kWaiting = 2, kOpened = 3, kTimedOut = 4 };

// Arms the gate for the next kernel call. Throws std::invalid_argument, naming the value, unless
// 0 < timeout_s <= 3600.
void arm_gate(double timeout_s);
// Opens the gate if a kernel waits at it. Returns the state after the call: kOpened when this or
// an earlier call opened it, kArmed while no kernel has reached it yet.
int open_gate() noexcept;
// Disarms the gate and returns the state it had: kOpened (a kernel waited and was let through),
// kTimedOut (a kernel waited and nobody came), kArmed (no kernel reached it).
int close_gate() noexcept;
// What every kernel calls before its work: returns at once unless the gate is armed.
void wait_at_gate() noexcept;

// The class thrown for kind "custom": derived from std::exception only.
class CustomError : public std::exception {
 public:
  explicit CustomError(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

}  // namespace kvbridge::testing
