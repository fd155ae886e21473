// Where the tests find the source tree and the dropbench executable: $DROPBENCH_TEST_SOURCE_DIR /
// $DROPBENCH_TEST_BINARY when set (test binaries built on one machine and run on another: scripts/device_pack.sh),
// else the paths the build compiled in. Names of their own: $DROPBENCH_BINARY is the scripts' binary (peers.py), and
// a user who exports it must not silently test another build. Paths are built by appending rather than by
// `std::string(dir) + "/rel"`, which g++ 12 at -O1 flags with a false -Wstringop-overread.
#pragma once
#include <cstdlib>
#include <string>
#include <string_view>

#ifndef DROPBENCH_SOURCE_DIR
#error "DROPBENCH_SOURCE_DIR must be defined (repo root)"
#endif
#ifndef DROPBENCH_BINARY
#error "DROPBENCH_BINARY (path of the dropbench executable) must be defined by the build"
#endif

namespace dropbench_test {

inline std::string env_or(const char* name, const char* compiled) {
  const char* v = std::getenv(name);
  return v && *v ? v : compiled;
}

// source_path("configs/llama3-8b.json") == "<root>/configs/llama3-8b.json"; source_path() is the root.
inline std::string source_path(std::string_view rel = {}) {
  std::string p = env_or("DROPBENCH_TEST_SOURCE_DIR", DROPBENCH_SOURCE_DIR);
  if (!rel.empty()) {
    p += '/';
    p += rel;
  }
  return p;
}

inline std::string dropbench_binary() { return env_or("DROPBENCH_TEST_BINARY", DROPBENCH_BINARY); }

}  // namespace dropbench_test
