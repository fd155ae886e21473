#include "kernels/util/util_kernels.cuh"

#include <cuda_bf16.h>

#include "kernels/common/check.hpp"
#include "kernels/common/hash.hpp"
#include "kernels/common/ptx.cuh"

namespace dropbench {
namespace {

using ptx::globaltimer_ns;

// %globaltimer can advance in ticks about a microsecond apart, a 5 % error on the probe's 20 us spin (readings of
// 2060 MHz on an H100 whose maximum is 1980). The spin therefore starts and stops on a tick's edge: the interval is
// whole ticks, and both clock64 reads follow an edge by the same few cycles. The wait gives up after 2^22 reads,
// should the timer not move.
__device__ __forceinline__ unsigned long long next_tick() {
  const unsigned long long from = globaltimer_ns();
  unsigned long long t = globaltimer_ns();
  for (int i = 0; t == from && i < (1 << 22); ++i) t = globaltimer_ns();
  return t;
}

__global__ void spin_kernel(unsigned long long* out, long long cycles) {
  const unsigned long long t0 = next_tick();
  const long long c0 = clock64();
  long long c = c0;
  while (c - c0 < cycles) c = clock64();
  const unsigned long long t1 = next_tick();
  c = clock64();
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

__global__ void count_keep_kernel(const void* p, uint64_t n, int kind, unsigned long long* count) {
  unsigned long long local = 0;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    if (kind == 0) local += __popc(static_cast<const uint32_t*>(p)[i]);
    else if (kind == 1) local += static_cast<const uint8_t*>(p)[i] != 0;
    else local += static_cast<const int32_t*>(p)[i] != 0;
  }
  for (int o = 16; o; o >>= 1) local += __shfl_down_sync(0xffffffffu, local, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(count, local);
}

// The values of fill_kernel, from the index's 64-bit hash h.
struct UniformPm1 {  // U(-1, 1): a 24-bit uniform
  __device__ float operator()(uint64_t h) const { return static_cast<float>(h >> 40) * (2.0f / 16777216.0f) - 1.0f; }
};
struct StdNormal {  // N(0, 1) by Box-Muller on two 24-bit uniforms (u1 in (0, 1], so the log is finite)
  __device__ float operator()(uint64_t h) const {
    const float u1 = (static_cast<float>(h >> 40) + 1.0f) * (1.0f / 16777216.0f);
    const float u2 = static_cast<float>((h >> 16) & 0xFFFFFFu) * (1.0f / 16777216.0f);
    return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
  }
};
// Element i = Dist(mix64(seed * golden + i)), fp32 or rounded to bf16: deterministic for a seed, any grid.
template <class Dist>
__global__ void fill_kernel(void* p, uint64_t n, bool bf16, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    const float v = Dist{}(mix64(seed * 0x9E3779B97F4A7C15ull + i));
    if (bf16) static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
    else static_cast<float*>(p)[i] = v;
  }
}

// Sum (mod 2^64) of mix64(word ^ golden * (index + 1)); the tail (< 8 bytes) is word `words`, zero-padded.
__global__ void checksum_kernel(const uint64_t* p, size_t words, const unsigned char* tail, int tail_bytes,
                                unsigned long long* out) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    local += mix64(p[i] ^ (0x9E3779B97F4A7C15ull * (i + 1)));
  if (blockIdx.x == 0 && threadIdx.x == 0 && tail_bytes > 0) {
    uint64_t w = 0;
    for (int b = 0; b < tail_bytes; ++b) w |= static_cast<uint64_t>(tail[b]) << (8 * b);
    local += mix64(w ^ (0x9E3779B97F4A7C15ull * (words + 1)));
  }
  for (int o = 16; o; o >>= 1) local += __shfl_down_sync(0xffffffffu, local, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, local);
}

// b == nullptr: counts the words of a equal to `pattern` instead (no tail).
__global__ void count_diff_kernel(const uint32_t* a, const uint32_t* b, uint32_t pattern, size_t words,
                                  const unsigned char* ta, const unsigned char* tb, int tail_bytes,
                                  unsigned long long* count) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    local += b ? a[i] != b[i] : a[i] == pattern;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    bool differ = false;
    for (int k = 0; k < tail_bytes; ++k) differ |= ta[k] != tb[k];
    local += differ;
  }
  for (int o = 16; o; o >>= 1) local += __shfl_down_sync(0xffffffffu, local, o);
  if ((threadIdx.x & 31) == 0) atomicAdd(count, local);
}

}  // namespace

void launch_checksum(const void* p, size_t bytes, unsigned long long* out, cudaStream_t s) {
  if (reinterpret_cast<uintptr_t>(p) % 8 != 0) throw UsageError("checksum: the buffer must be 8-byte aligned");
  DB_CUDA(cudaMemsetAsync(out, 0, sizeof(unsigned long long), s));
  const size_t words = bytes / 8;
  const unsigned blocks = static_cast<unsigned>(words / 256 + 1 < 2048 ? words / 256 + 1 : 2048);
  checksum_kernel<<<blocks, 256, 0, s>>>(static_cast<const uint64_t*>(p), words,
                                         static_cast<const unsigned char*>(p) + words * 8, static_cast<int>(bytes % 8),
                                         out);
  DB_CUDA_LAUNCH();
}

namespace {
// count_diff_kernel's grid for `words` words: 256 threads a block, at most 2048 blocks.
unsigned count_blocks(size_t words) { return static_cast<unsigned>(words / 256 + 1 < 2048 ? words / 256 + 1 : 2048); }
}  // namespace

void launch_count_diff(const void* a, const void* b, size_t bytes, unsigned long long* count, cudaStream_t s) {
  if (reinterpret_cast<uintptr_t>(a) % 4 != 0 || reinterpret_cast<uintptr_t>(b) % 4 != 0)
    throw UsageError("count_diff: the buffers must be 4-byte aligned");
  const size_t words = bytes / 4;
  count_diff_kernel<<<count_blocks(words), 256, 0, s>>>(
      static_cast<const uint32_t*>(a), static_cast<const uint32_t*>(b), 0u, words,
      static_cast<const unsigned char*>(a) + words * 4, static_cast<const unsigned char*>(b) + words * 4,
      static_cast<int>(bytes % 4), count);
  DB_CUDA_LAUNCH();
}

void launch_count_word(const void* p, size_t bytes, uint32_t pattern, unsigned long long* count, cudaStream_t s) {
  if (reinterpret_cast<uintptr_t>(p) % 4 != 0) throw UsageError("count_word: the buffer must be 4-byte aligned");
  const size_t words = bytes / 4;
  count_diff_kernel<<<count_blocks(words), 256, 0, s>>>(static_cast<const uint32_t*>(p), nullptr, pattern, words,
                                                        nullptr, nullptr, 0, count);
  DB_CUDA_LAUNCH();
}

void launch_fill_uniform(void* p, uint64_t n, bool bf16, uint64_t seed, cudaStream_t s) {
  fill_kernel<UniformPm1><<<2048, 256, 0, s>>>(p, n, bf16, seed);
  DB_CUDA_LAUNCH();
}

void launch_fill_normal(void* p, uint64_t n, bool bf16, uint64_t seed, cudaStream_t s) {
  fill_kernel<StdNormal><<<2048, 256, 0, s>>>(p, n, bf16, seed);
  DB_CUDA_LAUNCH();
}

void launch_count_keep(const void* p, uint64_t n, int kind, unsigned long long* count, cudaStream_t s) {
  count_keep_kernel<<<1024, 256, 0, s>>>(p, n, kind, count);
  DB_CUDA_LAUNCH();
}

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
