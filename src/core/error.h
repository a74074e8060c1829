// Error types shared by every layer. InputError: the user gave us something wrong (a config key,
// a file, a row) and can fix it; Error: a system call or library failed. Library code throws;
// only cli/main catches. NM_CHECK guards internal invariants and names the failed condition.
#pragma once
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace nemotron {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_internal(const char* file, int line, const std::string& what);

}  // namespace nemotron

#define NM_CHECK(cond, ...)                                                                   \
  do {                                                                                        \
    if (!(cond))                                                                              \
      ::nemotron::throw_internal(__FILE__, __LINE__,                                          \
                                 std::string("check failed: " #cond ": ") + fmt::format(__VA_ARGS__)); \
  } while (0)
