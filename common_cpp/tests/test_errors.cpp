#include <ios>
#include <new>
#include <stdexcept>
#include <system_error>
#include <typeinfo>

#include "harness.hpp"
#include "kvbridge/errors.hpp"

TEST_CASE(throw_kind_throws_the_named_type) {
  CHECK_THROWS(std::invalid_argument, "invalid_argument", kvbridge::throw_kind("invalid_argument"));
  CHECK_THROWS(std::domain_error, "domain_error", kvbridge::throw_kind("domain_error"));
  CHECK_THROWS(std::length_error, "length_error", kvbridge::throw_kind("length_error"));
  CHECK_THROWS(std::out_of_range, "out_of_range", kvbridge::throw_kind("out_of_range"));
  CHECK_THROWS(std::range_error, "range_error", kvbridge::throw_kind("range_error"));
  CHECK_THROWS(std::overflow_error, "overflow_error", kvbridge::throw_kind("overflow_error"));
  CHECK_THROWS(std::underflow_error, "underflow_error", kvbridge::throw_kind("underflow_error"));
  CHECK_THROWS(std::bad_alloc, "", kvbridge::throw_kind("bad_alloc"));
  CHECK_THROWS(std::bad_cast, "", kvbridge::throw_kind("bad_cast"));
  CHECK_THROWS(std::ios_base::failure, "ios_failure", kvbridge::throw_kind("ios_failure"));
  CHECK_THROWS(std::logic_error, "logic_error", kvbridge::throw_kind("logic_error"));
  CHECK_THROWS(std::runtime_error, "runtime_error", kvbridge::throw_kind("runtime_error"));
  CHECK_THROWS(std::system_error, "system_error", kvbridge::throw_kind("system_error"));
  CHECK_THROWS(kvbridge::CustomError, "custom", kvbridge::throw_kind("custom"));
  bool threw_int = false;
  try {
    kvbridge::throw_kind("non_std");
  } catch (int value) {
    threw_int = value == 42;
  }
  CHECK(threw_int);
  CHECK_THROWS(std::invalid_argument, "unknown exception kind: 'nope'",
               kvbridge::throw_kind("nope"));
}

TEST_CASE(checked_int32_bounds) {
  CHECK(kvbridge::checked_int32(2147483647, "n") == 2147483647);
  CHECK(kvbridge::checked_int32(-2147483648LL, "n") == -2147483647 - 1);
  CHECK_THROWS(std::overflow_error, "n=2147483648 does not fit in int32",
               kvbridge::checked_int32(2147483648LL, "n"));
}

HARNESS_MAIN()
