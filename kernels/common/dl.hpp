// Loading a library at run time: the first of several candidate names that dlopen accepts. The binaries do not
// link the large libraries only some commands need (cuBLASLt, CUPTI), so that starting one costs nothing for them.
#pragma once
#include <dlfcn.h>

#include <string>
#include <vector>

namespace dropbench {

// The handle of the first of `names` that dlopen (RTLD_NOW | RTLD_LOCAL) opens (its name in *opened), else nullptr
// with *tried set to each name tried and dlerror's reason, comma-separated (a file can exist and still not load).
inline void* dlopen_first(const std::vector<std::string>& names, std::string* tried, std::string* opened = nullptr) {
  for (const std::string& n : names) {
    if (n.empty()) continue;
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      if (opened) *opened = n;
      return h;
    }
    if (tried) {
      const char* why = dlerror();
      *tried += (tried->empty() ? "" : ", ") + n + (why ? std::string(": ") + why : std::string());
    }
  }
  return nullptr;
}

}  // namespace dropbench
