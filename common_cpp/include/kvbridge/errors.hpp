// Error helpers shared by the core and every binding.
//
// The core reports bad input with standard exceptions whose messages name the value. Which
// Python exception each becomes is one table, the kvb_status codes of c_abi.h (docs/contract.md,
// "Errors"); `caught_exception` is the one catch chain that sorts an exception into that table.
// Every binding but pybind11 goes through it: Cython and nanobind (packages/args/raise_caught.hpp),
// the C ABI (c_abi.cpp), tvm-ffi, and both torch packages (`rethrow_tagged`, below). pybind11
// translates the standard exceptions itself, to the same types.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvbridge/c_abi.h"

namespace kvbridge {

// Narrows a 64-bit argument to int32 (block ids and counts are int32, as in an engine's block
// table), throwing std::overflow_error "<name>=<value> does not fit in int32" otherwise.
std::int32_t checked_int32(std::int64_t value, std::string_view name);

// The exception in flight, sorted into the contract's table. Call only inside a catch block.
struct CaughtException {
  kvb_status status;
  std::string message;  // what(), word for word ("Caught an unknown exception!" for non-std)
};
CaughtException caught_exception() noexcept;

// "ValueError", "IndexError", "OverflowError", "MemoryError" or "RuntimeError".
const char* python_exception_name(kvb_status status) noexcept;

// The exception in flight, sorted as above, thrown again as the one type a host that maps none
// of ours passes through: std::runtime_error("[<Python type>] <what()>"), for a front end to
// raise as that type (the torch packages: torch 2.15 turns every standard exception out of a
// kernel into RuntimeError). Call only inside a catch block.
[[noreturn]] void rethrow_tagged();

}  // namespace kvbridge
