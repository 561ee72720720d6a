#include "kvbridge/errors.hpp"

#include <ios>
#include <limits>
#include <new>
#include <stdexcept>
#include <system_error>
#include <typeinfo>

namespace kvbridge {

std::int32_t checked_int32(std::int64_t value, std::string_view name) {
  if (value < std::numeric_limits<std::int32_t>::min() ||
      value > std::numeric_limits<std::int32_t>::max()) {
    throw std::overflow_error(std::string(name) + "=" + std::to_string(value) +
                              " does not fit in int32");
  }
  return static_cast<std::int32_t>(value);
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

}  // namespace kvbridge
