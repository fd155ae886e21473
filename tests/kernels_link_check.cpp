// Built against dropbench_kernels alone (whole archive, plus CUDA): if any kernel object needs a symbol from the
// host layers in src/, this executable does not link, and the build stops here. Run as a CPU test, it also checks
// that the library's own error idiom throws with file:line and the call, with or without a GPU.
#include <cstdio>
#include <cstring>

#include "kernels/common/check.hpp"

int main() {
  try {
    DB_CUDA(cudaErrorInvalidValue);
  } catch (const dropbench::CudaError& e) {
    const bool ok = std::strstr(e.what(), "kernels_link_check.cpp:") && std::strstr(e.what(), "cudaErrorInvalidValue");
    std::printf("%s\n", e.what());
    return ok ? 0 : 1;
  }
  std::printf("DB_CUDA did not throw\n");
  return 1;
}
