// Printing diagnostics (kept out of report.hpp, which CUDA translation units include: nvcc does not compile fmt's
// compile-time format checks).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace dropbench {

// A diagnostic line on stderr (warnings, progress). A stderr that cannot take it (closed, a reader that went
// away) does not stop the sweep: fmt::print would throw.
template <class... T>
void print_stderr(fmt::format_string<T...> f, T&&... args) {
  const std::string s = fmt::format(f, std::forward<T>(args)...);
  static_cast<void>(std::fwrite(s.data(), 1, s.size(), stderr));
}

// A 64-bit checksum as reports write it: 0x and 16 hex digits.
inline std::string hex64(uint64_t v) { return fmt::format("0x{:016x}", v); }

}  // namespace dropbench
