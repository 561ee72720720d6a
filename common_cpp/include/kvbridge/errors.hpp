// Error helpers shared by the core and every binding.
//
// The core reports bad input with standard exceptions; each binding maps them to Python the same
// way (CONTRACT §2): invalid_argument -> ValueError, out_of_range -> IndexError,
// overflow_error -> OverflowError, runtime_error -> RuntimeError. Messages name the value.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <utility>

namespace kvbridge {

// Narrows a 64-bit argument to int32 (block ids and counts are int32, as in an engine's block
// table), throwing std::overflow_error "<name>=<value> does not fit in int32" otherwise.
std::int32_t checked_int32(std::int64_t value, std::string_view name);

// Throws the standard C++ exception named by `kind` (CONTRACT §2's 15 kinds), so that every
// binding's translation of C++ exceptions can be tested against the same table. An unknown kind
// throws std::invalid_argument naming it.
[[noreturn]] void throw_kind(std::string_view kind);

// The class thrown for kind "custom": derived from std::exception only.
class CustomError : public std::exception {
 public:
  explicit CustomError(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

}  // namespace kvbridge
