#include "kvbridge/testing.hpp"

#include <chrono>
#include <ios>
#include <new>
#include <stdexcept>
#include <system_error>
#include <typeinfo>

namespace kvbridge::testing {

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

void spin(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
  }
}

}  // namespace kvbridge::testing
