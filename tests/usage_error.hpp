// The message of the UsageError a call throws, or "" when it throws none: the bad-input tests' one helper (a test
// asserts either on the message or on ""; expect_refused asserts that it names something).
#pragma once
#include <functional>
#include <string>

#include <gtest/gtest.h>

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

// Expects f to throw a UsageError whose message contains `needle`; prints the message (or that none was thrown).
inline void expect_refused(const std::function<void()>& f, const std::string& needle) {
  const std::string e = usage_error(f);
  EXPECT_NE(e.find(needle), std::string::npos) << (e.empty() ? std::string("no UsageError") : e);
}

}  // namespace dropbench_test
