// GPU tests skip cleanly (GTEST_SKIP) on machines without a CUDA device, e.g. CI.
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

inline bool dropbench_has_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define DB_REQUIRE_GPU()                                              \
  do {                                                                \
    if (!dropbench_has_gpu()) GTEST_SKIP() << "no CUDA device present"; \
  } while (0)
