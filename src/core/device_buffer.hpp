// RAII device allocation (cudaMalloc: plain device memory, never managed).
#pragma once
#include <cstddef>
#include <utility>

#include <cuda_runtime_api.h>

#include "kernels/common/check.hpp"

namespace dropbench {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { resize(bytes); }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Grows (never shrinks) to at least `bytes`; contents are not preserved.
  void reserve(size_t bytes) {
    if (bytes > n_) resize(bytes);
  }
  void resize(size_t bytes) {
    release();
    if (bytes) DB_CUDA(cudaMalloc(&p_, bytes));
    n_ = bytes;
  }
  void release() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(p_);
  }
  size_t size() const { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

// Free device memory in bytes (for skipping points that cannot fit).
inline size_t device_free_bytes() {
  size_t free_b = 0, total = 0;
  DB_CUDA(cudaMemGetInfo(&free_b, &total));
  return free_b;
}

}  // namespace dropbench
