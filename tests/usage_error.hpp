// The message of the UsageError a call throws, or "" when it throws none: the bad-input tests' one helper (a test
// asserts either on the message or on "").
#pragma once
#include <functional>
#include <string>

#include "kernels/common/check.hpp"

namespace dropbench_test {

inline std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const dropbench::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace dropbench_test
