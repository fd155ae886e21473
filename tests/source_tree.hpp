// Paths inside the source tree (the build passes its root as DROPBENCH_SOURCE_DIR). Built by appending rather than
// by `std::string(dir) + "/rel"`, which g++ 12 at -O1 flags with a false -Wstringop-overread.
#pragma once
#include <string>
#include <string_view>

#ifndef DROPBENCH_SOURCE_DIR
#error "DROPBENCH_SOURCE_DIR must be defined (repo root)"
#endif

namespace dropbench_test {

// source_path("configs/llama3-8b.json") == "<root>/configs/llama3-8b.json"; source_path() is the root.
inline std::string source_path(std::string_view rel = {}) {
  std::string p = DROPBENCH_SOURCE_DIR;
  if (!rel.empty()) {
    p += '/';
    p += rel;
  }
  return p;
}

}  // namespace dropbench_test
