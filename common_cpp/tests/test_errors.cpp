#include <ios>
#include <new>
#include <stdexcept>
#include <system_error>
#include <typeinfo>

#include "harness.hpp"
#include "kvbridge/errors.hpp"
#include "kvbridge/testing.hpp"

TEST_CASE(throw_kind_throws_the_named_type) {
  CHECK_THROWS(std::invalid_argument, "invalid_argument",
               kvbridge::testing::throw_kind("invalid_argument"));
  CHECK_THROWS(std::domain_error, "domain_error", kvbridge::testing::throw_kind("domain_error"));
  CHECK_THROWS(std::length_error, "length_error", kvbridge::testing::throw_kind("length_error"));
  CHECK_THROWS(std::out_of_range, "out_of_range", kvbridge::testing::throw_kind("out_of_range"));
  CHECK_THROWS(std::range_error, "range_error", kvbridge::testing::throw_kind("range_error"));
  CHECK_THROWS(std::overflow_error, "overflow_error",
               kvbridge::testing::throw_kind("overflow_error"));
  CHECK_THROWS(std::underflow_error, "underflow_error",
               kvbridge::testing::throw_kind("underflow_error"));
  CHECK_THROWS(std::bad_alloc, "", kvbridge::testing::throw_kind("bad_alloc"));
  CHECK_THROWS(std::bad_cast, "", kvbridge::testing::throw_kind("bad_cast"));
  CHECK_THROWS(std::ios_base::failure, "ios_failure", kvbridge::testing::throw_kind("ios_failure"));
  CHECK_THROWS(std::logic_error, "logic_error", kvbridge::testing::throw_kind("logic_error"));
  CHECK_THROWS(std::runtime_error, "runtime_error", kvbridge::testing::throw_kind("runtime_error"));
  CHECK_THROWS(std::system_error, "system_error", kvbridge::testing::throw_kind("system_error"));
  CHECK_THROWS(kvbridge::testing::CustomError, "custom", kvbridge::testing::throw_kind("custom"));
  bool threw_int = false;
  try {
    kvbridge::testing::throw_kind("non_std");
  } catch (int value) {
    threw_int = value == 42;
  }
  CHECK(threw_int);
  CHECK_THROWS(std::invalid_argument, "unknown exception kind: 'nope'",
               kvbridge::testing::throw_kind("nope"));
}

// The one catch chain every hand-written translation uses: each kind lands on its own code, with
// what() word for word, and the code's Python type is the contract's.
TEST_CASE(caught_exception_sorts_every_kind) {
  struct Row {
    const char* kind;
    kvb_status status;
    const char* python;
  };
  const Row rows[] = {
      {"invalid_argument", KVB_INVALID_ARGUMENT, "ValueError"},
      {"domain_error", KVB_DOMAIN_ERROR, "ValueError"},
      {"length_error", KVB_LENGTH_ERROR, "ValueError"},
      {"out_of_range", KVB_OUT_OF_RANGE, "IndexError"},
      {"range_error", KVB_RANGE_ERROR, "ValueError"},
      {"overflow_error", KVB_OVERFLOW_ERROR, "OverflowError"},
      {"underflow_error", KVB_UNDERFLOW_ERROR, "RuntimeError"},
      {"bad_alloc", KVB_BAD_ALLOC, "MemoryError"},
      {"bad_cast", KVB_BAD_CAST, "RuntimeError"},
      {"ios_failure", KVB_IOS_FAILURE, "RuntimeError"},
      {"logic_error", KVB_LOGIC_ERROR, "RuntimeError"},
      {"runtime_error", KVB_RUNTIME_ERROR, "RuntimeError"},
      {"system_error", KVB_SYSTEM_ERROR, "RuntimeError"},
      {"custom", KVB_STD_EXCEPTION, "RuntimeError"},
      {"non_std", KVB_UNKNOWN_EXCEPTION, "RuntimeError"},
  };
  for (const Row& row : rows) {
    kvbridge::CaughtException caught{KVB_OK, ""};
    try {
      kvbridge::testing::throw_kind(row.kind);
    } catch (...) {
      caught = kvbridge::caught_exception();
    }
    CHECK(caught.status == row.status);
    CHECK(std::string(kvbridge::python_exception_name(caught.status)) == row.python);
    const bool library_text = caught.status == KVB_BAD_ALLOC || caught.status == KVB_BAD_CAST ||
                              caught.status == KVB_UNKNOWN_EXCEPTION;
    if (!library_text) {
      CHECK(caught.message.rfind(std::string("kvbridge test exception: ") + row.kind, 0) == 0);
    }
  }
  CHECK(kvbridge::python_exception_name(KVB_OK) == nullptr);
}

TEST_CASE(checked_int32_bounds) {
  CHECK(kvbridge::checked_int32(2147483647, "n") == 2147483647);
  CHECK(kvbridge::checked_int32(-2147483648LL, "n") == -2147483647 - 1);
  CHECK_THROWS(std::overflow_error, "n=2147483648 does not fit in int32",
               kvbridge::checked_int32(2147483648LL, "n"));
}

HARNESS_MAIN()
