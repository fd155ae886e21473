// fp32 reference for the QKV GEMM (see gemm.cuh): y_ref[m, n] = s_x·s_w · Σ_k x[m, k]·w[n, k].
// Deliberately plain: 32x32 output tile per block, 32x8 threads, 4 outputs per thread, K in steps of 32
// through shared memory, every product and sum in fp32. Correctness over speed; bounds-checked on every side
// so any M, N, K works.
#include "kernels/gemm/gemm.cuh"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "kernels/common/check.hpp"

namespace dropbench {
namespace {

constexpr int kTile = 32;
constexpr int kRowsPerThread = 4;  // blockDim = (32, 8): thread (tx, ty) owns rows ty, ty+8, ty+16, ty+24

__device__ __forceinline__ float to_float(__nv_fp8_e4m3 v) { return static_cast<float>(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__global__ void __launch_bounds__(kTile * kTile / kRowsPerThread)
    gemm_ref_kernel(const T* __restrict__ x, const T* __restrict__ w, const float* __restrict__ scale_x,
                    const float* __restrict__ scale_w, float* __restrict__ y, int64_t M, int64_t N, int64_t K) {
  // +1 column: the inner loop reads xs[row][kk] across rows of a warp-uniform kk (broadcast) and
  // ws[col][kk] with col = tx varying, which the padding spreads over the banks.
  __shared__ float xs[kTile][kTile + 1];
  __shared__ float ws[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kTile;
  float acc[kRowsPerThread] = {0.f, 0.f, 0.f, 0.f};

  for (int64_t k0 = 0; k0 < K; k0 += kTile) {
    // Loads: thread (tx, ty) fetches element k0 + tx of rows ty + 8 r (coalesced along K).
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int lr = ty + r * (kTile / kRowsPerThread);
      const int64_t k = k0 + tx;
      const int64_t gm = row0 + lr, gn = col0 + lr;
      xs[lr][tx] = (gm < M && k < K) ? to_float(x[gm * K + k]) : 0.f;
      ws[lr][tx] = (gn < N && k < K) ? to_float(w[gn * K + k]) : 0.f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kTile; ++kk) {
      const float wv = ws[tx][kk];
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) acc[r] = fmaf(xs[ty + r * (kTile / kRowsPerThread)][kk], wv, acc[r]);
    }
    __syncthreads();
  }

  const float s = (scale_x ? *scale_x : 1.f) * (scale_w ? *scale_w : 1.f);
  const int64_t gn = col0 + tx;
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int64_t gm = row0 + ty + r * (kTile / kRowsPerThread);
    if (gm < M && gn < N) y[gm * N + gn] = acc[r] * s;
  }
}

}  // namespace

void gemm_reference(GemmDtype dtype, const GemmShape& shape, const void* x, const void* w, const float* scale_x,
                    const float* scale_w, float* y_ref, cudaStream_t stream) {
  if (shape.m < 1 || shape.n < 1 || shape.k < 1) throw UsageError("gemm_reference: empty shape");
  if ((shape.m + kTile - 1) / kTile > 65535) throw UsageError("gemm_reference: M too large for the grid");
  const dim3 block(kTile, kTile / kRowsPerThread);
  const dim3 grid(static_cast<unsigned>((shape.n + kTile - 1) / kTile),
                  static_cast<unsigned>((shape.m + kTile - 1) / kTile));
  if (dtype == GemmDtype::fp8_e4m3) {
    gemm_ref_kernel<__nv_fp8_e4m3><<<grid, block, 0, stream>>>(static_cast<const __nv_fp8_e4m3*>(x),
                                                               static_cast<const __nv_fp8_e4m3*>(w), scale_x,
                                                               scale_w, y_ref, shape.m, shape.n, shape.k);
  } else {
    // bf16 inputs carry no scales (QkvGemm ignores them too).
    gemm_ref_kernel<__nv_bfloat16><<<grid, block, 0, stream>>>(static_cast<const __nv_bfloat16*>(x),
                                                               static_cast<const __nv_bfloat16*>(w), nullptr,
                                                               nullptr, y_ref, shape.m, shape.n, shape.k);
  }
  DB_CUDA_LAUNCH();
}

}  // namespace dropbench
