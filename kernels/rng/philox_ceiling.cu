#include "kernels/rng/philox_ceiling.cuh"

#include "kernels/common/check.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/rng/philox.cuh"

namespace dropbench {
namespace {

template <int R>
__global__ void __launch_bounds__(1024) philox_ceiling_kernel(uint32_t* __restrict__ out, uint32_t calls,
                                                             uint32_t k0, uint32_t k1) {
  const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t c3 = k1 ^ g;
  uint32_t acc = 0;
  // Unrolled by 4: independent calls in flight for the multiplier's latency; the trip count is a run-time value,
  // so the loop stays a loop (checked in SASS: 14 IMAD.WIDE.U32 per Philox-7 call).
#pragma unroll 4
  for (uint32_t i = 0; i < calls; ++i) {
    // i ^ g, not i: an affine counter lets the compiler replace round 1's low products by running sums.
    const uint32_t c = i ^ g;
    const u32x4 r = philox4x32<R>(u32x4{c, g, c, c3}, k0, k1);
    acc ^= r.x ^ r.y ^ r.z ^ r.w;
  }
  out[g] = acc;
}

int resident_grid(int block, const void* kernel) {
  int dev = 0, sms = 0, per_sm = 0;
  DB_CUDA(cudaGetDevice(&dev));
  DB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  DB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, 0));
  return sms * (per_sm > 0 ? per_sm : 1);
}

void check_params(const PhiloxCeilingParams& p) {
  if (p.block <= 0 || p.block % 32 || p.block > 1024)
    throw UsageError("philox ceiling: block must be a multiple of 32 in [32, 1024]");
  if (p.grid < 0) throw UsageError("philox ceiling: grid must be >= 0 (0 = fill the device)");
}

}  // namespace

int philox_ceiling_grid(const PhiloxCeilingParams& p) {
  check_params(p);
  if (p.grid > 0) return p.grid;
  return with_rounds(p.rounds, "philox ceiling", [&](auto r) {
    return resident_grid(p.block, reinterpret_cast<const void*>(philox_ceiling_kernel<r()>));
  });
}

uint64_t philox_ceiling_threads(const PhiloxCeilingParams& p) {
  return static_cast<uint64_t>(philox_ceiling_grid(p)) * p.block;
}

uint64_t philox_ceiling_calls(const PhiloxCeilingParams& p) { return philox_ceiling_threads(p) * p.calls_per_thread; }

uint32_t philox_ceiling_calls_per_thread(const PhiloxCeilingParams& p, uint64_t calls) {
  const uint64_t t = philox_ceiling_threads(p);
  const uint64_t c = (calls + t - 1) / t;
  return static_cast<uint32_t>(c < 1 ? 1 : c > 0xFFFFFFFFull ? 0xFFFFFFFFull : c);
}

void launch_philox_ceiling(const PhiloxCeilingParams& p, cudaStream_t s) {
  if (p.calls_per_thread == 0) throw UsageError("philox ceiling: calls_per_thread must be >= 1");
  const int grid = philox_ceiling_grid(p);
  with_rounds(p.rounds, "philox ceiling", [&](auto r) {
    philox_ceiling_kernel<r()><<<grid, p.block, 0, s>>>(p.out, p.calls_per_thread, static_cast<uint32_t>(p.seed),
                                                         static_cast<uint32_t>(p.seed >> 32));
  });
  DB_CUDA_LAUNCH();
}

uint32_t philox_ceiling_host_word(int rounds, uint64_t seed, uint32_t g, uint32_t calls_per_thread) {
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  uint32_t acc = 0;
  for (uint32_t i = 0; i < calls_per_thread; ++i) {
    const u32x4 r = philox4x32_rt(rounds, u32x4{i ^ g, g, i ^ g, k1 ^ g}, k0, k1);
    acc ^= r.x ^ r.y ^ r.z ^ r.w;
  }
  return acc;
}

}  // namespace dropbench
