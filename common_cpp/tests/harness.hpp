// A minimal in-repo test harness: no download, no framework package needed on a fresh machine.
// Each test file is one executable registered with ctest; a failing CHECK prints file:line and
// the process exits non-zero.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace harness {

struct Case {
  const char* name;
  std::function<void()> body;
};

inline std::vector<Case>& cases() {
  static std::vector<Case> all;
  return all;
}
inline int& failures() {
  static int count = 0;
  return count;
}

struct Register {
  Register(const char* name, std::function<void()> body) { cases().push_back({name, body}); }
};

inline int run_all() {
  int failed_cases = 0;
  for (const auto& c : cases()) {
    const int before = failures();
    try {
      c.body();
    } catch (const std::exception& e) {
      std::printf("  %s: unexpected exception: %s\n", c.name, e.what());
      ++failures();
    }
    const bool ok = failures() == before;
    failed_cases += !ok;
    std::printf("[%s] %s\n", ok ? "PASS" : "FAIL", c.name);
  }
  std::printf("%zu passed, %d failed\n", cases().size() - failed_cases, failed_cases);
  return failed_cases == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

}  // namespace harness

#define HARNESS_CAT2(a, b) a##b
#define HARNESS_CAT(a, b) HARNESS_CAT2(a, b)
#define TEST_CASE(name)                                                     \
  static void name();                                                       \
  static const harness::Register HARNESS_CAT(register_, name)(#name, name); \
  static void name()

#define CHECK(cond)                                                          \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::printf("  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      ++harness::failures();                                                 \
    }                                                                        \
  } while (0)

// Passes when `expr` throws exactly-or-derived `type` whose what() contains `needle`.
#define CHECK_THROWS(type, needle, expr)                                                     \
  do {                                                                                       \
    bool caught_ = false;                                                                    \
    try {                                                                                    \
      (void)(expr);                                                                          \
    } catch (const type& e_) {                                                               \
      caught_ = std::string(e_.what()).find(needle) != std::string::npos;                    \
      if (!caught_) std::printf("  message was: %s\n", e_.what());                           \
    } catch (...) {                                                                          \
    }                                                                                        \
    if (!caught_) {                                                                          \
      std::printf("  %s:%d: %s did not throw %s(\"...%s...\")\n", __FILE__, __LINE__, #expr, \
                  #type, needle);                                                            \
      ++harness::failures();                                                                 \
    }                                                                                        \
  } while (0)

#define HARNESS_MAIN() \
  int main() { return harness::run_all(); }
