#include "kvbridge/errors.hpp"

#include <ios>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
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

CaughtException caught_exception() noexcept {
  // Most-derived first: ios_base::failure is a system_error, which is a runtime_error.
  try {
    throw;
  } catch (const std::invalid_argument& e) {
    return {KVB_INVALID_ARGUMENT, e.what()};
  } catch (const std::domain_error& e) {
    return {KVB_DOMAIN_ERROR, e.what()};
  } catch (const std::length_error& e) {
    return {KVB_LENGTH_ERROR, e.what()};
  } catch (const std::out_of_range& e) {
    return {KVB_OUT_OF_RANGE, e.what()};
  } catch (const std::range_error& e) {
    return {KVB_RANGE_ERROR, e.what()};
  } catch (const std::overflow_error& e) {
    return {KVB_OVERFLOW_ERROR, e.what()};
  } catch (const std::underflow_error& e) {
    return {KVB_UNDERFLOW_ERROR, e.what()};
  } catch (const std::bad_alloc& e) {
    return {KVB_BAD_ALLOC, e.what()};
  } catch (const std::bad_cast& e) {
    return {KVB_BAD_CAST, e.what()};
  } catch (const std::ios_base::failure& e) {
    return {KVB_IOS_FAILURE, e.what()};
  } catch (const std::system_error& e) {
    return {KVB_SYSTEM_ERROR, e.what()};
  } catch (const std::logic_error& e) {
    return {KVB_LOGIC_ERROR, e.what()};
  } catch (const std::runtime_error& e) {
    return {KVB_RUNTIME_ERROR, e.what()};
  } catch (const std::exception& e) {
    return {KVB_STD_EXCEPTION, e.what()};
  } catch (...) {
    // pybind11's words for the same case, so every package says the same thing.
    return {KVB_UNKNOWN_EXCEPTION, "Caught an unknown exception!"};
  }
}

void rethrow_tagged() {
  const CaughtException caught = caught_exception();
  throw std::runtime_error(std::string("[") + python_exception_name(caught.status) + "] " +
                           caught.message);
}

const char* python_exception_name(kvb_status status) noexcept {
  switch (status) {
    case KVB_OK:
    case KVB_STATUS_COUNT:
      return nullptr;
    case KVB_INVALID_ARGUMENT:
    case KVB_DOMAIN_ERROR:
    case KVB_LENGTH_ERROR:
    case KVB_RANGE_ERROR:
      return "ValueError";
    case KVB_OUT_OF_RANGE:
      return "IndexError";
    case KVB_OVERFLOW_ERROR:
      return "OverflowError";
    case KVB_BAD_ALLOC:
      return "MemoryError";
    case KVB_UNDERFLOW_ERROR:
    case KVB_BAD_CAST:
    case KVB_IOS_FAILURE:
    case KVB_LOGIC_ERROR:
    case KVB_RUNTIME_ERROR:
    case KVB_SYSTEM_ERROR:
    case KVB_STD_EXCEPTION:
    case KVB_UNKNOWN_EXCEPTION:
      return "RuntimeError";
  }
  return nullptr;
}

}  // namespace kvbridge
