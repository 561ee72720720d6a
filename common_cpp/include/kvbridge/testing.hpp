// Test fixtures, not API: the throws behind every package's `_testing.throw(kind)`, so that each
// binding's translation of C++ exceptions is tested against the same table.
#pragma once

#include <exception>
#include <string>
#include <string_view>
#include <utility>

namespace kvbridge::testing {

// Throws the standard C++ exception named by `kind` (the names of kvb_status_name()), a
// CustomError for "custom" and an int for "non_std". An unknown kind throws
// std::invalid_argument naming it.
[[noreturn]] void throw_kind(std::string_view kind);

// Busy C++ work for `seconds` that never touches Python: what every GIL probe runs to see
// whether another Python thread got to run meanwhile.
void spin(double seconds);

// The class thrown for kind "custom": derived from std::exception only.
class CustomError : public std::exception {
 public:
  explicit CustomError(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

}  // namespace kvbridge::testing
