#include "util_kernels.cuh"

#include "src/check.hpp"

namespace dropbench {
namespace {

__device__ __forceinline__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long* out, long long cycles) {
  const unsigned long long t0 = globaltimer_ns();
  const long long c0 = clock64();
  long long c = c0;
  while (c - c0 < cycles) c = clock64();
  const unsigned long long t1 = globaltimer_ns();
  out[0] = t0;
  out[1] = static_cast<unsigned long long>(c0);
  out[2] = t1;
  out[3] = static_cast<unsigned long long>(c);
}

__global__ void poison_kernel(uint32_t* p, size_t words, uint32_t pattern) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    p[i] = pattern;
}

__global__ void poison_tail_kernel(unsigned char* p, size_t n, uint32_t pattern) {
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) p[i] = static_cast<unsigned char>(pattern >> (8 * (i & 3)));
}

}  // namespace

void launch_clock_probe(unsigned long long* out, long long spin_cycles, cudaStream_t s) {
  spin_kernel<<<1, 1, 0, s>>>(out, spin_cycles);
  DB_CUDA_LAUNCH();
}

void launch_spin(unsigned long long* out, long long cycles, cudaStream_t s) {
  spin_kernel<<<1, 1, 0, s>>>(out, cycles);
  DB_CUDA_LAUNCH();
}

void launch_poison(void* p, size_t bytes, uint32_t pattern, cudaStream_t s) {
  const size_t words = bytes / 4;
  if (words) {
    const unsigned blocks = static_cast<unsigned>(words / 256 + 1 < 65536 ? words / 256 + 1 : 65536);
    poison_kernel<<<blocks, 256, 0, s>>>(static_cast<uint32_t*>(p), words, pattern);
    DB_CUDA_LAUNCH();
  }
  if (bytes % 4) {
    poison_tail_kernel<<<1, 32, 0, s>>>(static_cast<unsigned char*>(p) + words * 4, bytes % 4, pattern);
    DB_CUDA_LAUNCH();
  }
}

double probe_mhz(const unsigned long long* h) {
  const double dt = static_cast<double>(h[2] - h[0]);
  const double dc = static_cast<double>(h[3] - h[1]);
  return dt > 0 ? dc / dt * 1000.0 : 0.0;
}

}  // namespace dropbench
