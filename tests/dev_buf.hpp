// A device array of n T for the GPU tests: allocated at construction (at least one element, so a size-0 array is
// still a valid pointer), freed at destruction; poison() fills it with 0xFF bytes (NaN for floats, so an element
// the kernel never wrote shows), get() / put() copy it to or from the host.
#pragma once
#include <algorithm>
#include <cstddef>
#include <vector>

#include <cuda_runtime.h>  // the typed cudaMalloc(T**, size); nvcc includes it implicitly, g++ does not

#include "kernels/common/check.hpp"

namespace dropbench::test {

template <class T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  explicit DevBuf(size_t count) : n(count) { DB_CUDA(cudaMalloc(&p, std::max<size_t>(count, 1) * sizeof(T))); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  void poison() { DB_CUDA(cudaMemset(p, 0xFF, std::max<size_t>(n, 1) * sizeof(T))); }
  std::vector<T> get() const {
    std::vector<T> h(n);
    DB_CUDA(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  void put(const std::vector<T>& h) { DB_CUDA(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice)); }
};

}  // namespace dropbench::test
