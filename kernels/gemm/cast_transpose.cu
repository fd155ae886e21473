// Cast-transpose (see cast_transpose.cuh): one CTA per 64 x 64 tile of the input, 256 threads, each converting
// 16 consecutive elements of one row (two 16-byte loads of bf16, one of fp8) and staging the fp8 bytes in shared
// memory, from which each thread gathers 16 bytes of one column for the transposed copy.
#include "kernels/gemm/cast_transpose.cuh"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <string>

#include "kernels/common/check.hpp"

namespace dropbench {

namespace {

constexpr int kTile = 64;      // rows and columns of one CTA's tile
constexpr int kThreads = 256;  // 4 threads per tile row, 16 elements each
constexpr int kPerThread = 16;

__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__nv_fp8_e4m3 v) { return static_cast<float>(v); }

template <class Out>
__device__ __forceinline__ uint8_t to_fp8(float v) {
  return static_cast<uint8_t>(Out(v).__x);  // satfinite, round to nearest even
}

template <class In, class Out>
__global__ void __launch_bounds__(kThreads)
    cast_transpose_kernel(const In* __restrict__ in, int64_t rows, int64_t cols, const float* scale,
                          uint8_t* __restrict__ out, uint8_t* __restrict__ out_t, float* amax, bool vec) {
  // +4 bytes per row: the column gathers of the transposed write fall into different banks.
  __shared__ uint8_t tile[kTile][kTile + 4];
  __shared__ float warp_max[kThreads / 32];
  const int t = threadIdx.x, r = t >> 2, c0 = (t & 3) * kPerThread;
  const int64_t tr = static_cast<int64_t>(blockIdx.x) * kTile, tc = static_cast<int64_t>(blockIdx.y) * kTile;
  const float s = scale ? *scale : 1.f;
  // The vector path needs the whole tile inside the matrix and 16-byte rows in both outputs (vec, host-checked).
  const bool full = vec && tr + kTile <= rows && tc + kTile <= cols;
  const int64_t row = tr + r;
  float m = 0.f;
  if (full) {
    uint4 raw[sizeof(In) * kPerThread / 16];
    const uint4* src = reinterpret_cast<const uint4*>(in + row * cols + tc + c0);
#pragma unroll
    for (int i = 0; i < static_cast<int>(sizeof(raw) / 16); ++i) raw[i] = src[i];
    const In* v = reinterpret_cast<const In*>(raw);
    uint4 packed;
    uint8_t* q = reinterpret_cast<uint8_t*>(&packed);
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const float f = to_float(v[i]);
      m = fmaxf(m, fabsf(f));
      q[i] = to_fp8<Out>(f * s);
      tile[r][c0 + i] = q[i];
    }
    if (out) *reinterpret_cast<uint4*>(out + row * cols + tc + c0) = packed;
  } else {
    for (int i = 0; i < kPerThread; ++i) {
      const int64_t col = tc + c0 + i;
      if (row >= rows || col >= cols) continue;
      const float f = to_float(in[row * cols + col]);
      m = fmaxf(m, fabsf(f));
      const uint8_t q = to_fp8<Out>(f * s);
      if (out) out[row * cols + col] = q;
      tile[r][c0 + i] = q;
    }
  }
  __syncthreads();
  if (out_t) {
    // Thread t writes 16 bytes of out_t's row tc + oc: the tile's column oc, rows r0 .. r0 + 15.
    const int oc = t >> 2, r0 = (t & 3) * kPerThread;
    const int64_t orow = tc + oc;
    if (full) {
      uint4 packed;
      uint8_t* q = reinterpret_cast<uint8_t*>(&packed);
#pragma unroll
      for (int i = 0; i < kPerThread; ++i) q[i] = tile[r0 + i][oc];
      *reinterpret_cast<uint4*>(out_t + orow * rows + tr + r0) = packed;
    } else if (orow < cols) {
      for (int i = 0; i < kPerThread; ++i)
        if (tr + r0 + i < rows) out_t[orow * rows + tr + r0 + i] = tile[r0 + i][oc];
    }
  }
  if (amax) {  // uniform across the CTA
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((t & 31) == 0) warp_max[t >> 5] = m;
    __syncthreads();
    if (t == 0) {
      float b = 0.f;
      for (int w = 0; w < kThreads / 32; ++w) b = fmaxf(b, warp_max[w]);
      // Non-negative floats order as their bit patterns do.
      atomicMax(reinterpret_cast<unsigned int*>(amax), __float_as_uint(b));
    }
  }
}

template <class In, class Out>
void launch_kernel(const CastTransposeParams& p, dim3 grid, bool vec, cudaStream_t stream) {
  cast_transpose_kernel<In, Out><<<grid, kThreads, 0, stream>>>(
      static_cast<const In*>(p.in), p.rows, p.cols, p.scale, static_cast<uint8_t*>(p.out),
      static_cast<uint8_t*>(p.out_t), p.amax, vec);
  DB_CUDA_LAUNCH();
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

void check_cast_transpose(const CastTransposeParams& p) {
  const int64_t lim = int64_t{1} << 31;
  if (!p.in) throw UsageError("cast_transpose: in must not be null");
  if (!p.out && !p.out_t) throw UsageError("cast_transpose: out and out_t are both null (allowed: at least one)");
  if (p.rows < 1 || p.rows >= lim)
    throw UsageError("cast_transpose: rows " + std::to_string(p.rows) + " (allowed: [1, 2^31))");
  if (p.cols < 1 || p.cols >= lim)
    throw UsageError("cast_transpose: cols " + std::to_string(p.cols) + " (allowed: [1, 2^31))");
  if ((p.cols + kTile - 1) / kTile > 65535)
    throw UsageError("cast_transpose: cols " + std::to_string(p.cols) + " (allowed: at most 65535 * 64)");
  if (p.in_e4m3 && p.out_kind != Fp8Kind::e4m3)
    throw UsageError("cast_transpose: an e4m3 input is only transposed (allowed: out_kind e4m3)");
}

void launch_cast_transpose(const CastTransposeParams& p, cudaStream_t stream) {
  check_cast_transpose(p);
  const dim3 grid(static_cast<unsigned>((p.rows + kTile - 1) / kTile),
                  static_cast<unsigned>((p.cols + kTile - 1) / kTile));
  const bool vec = p.rows % 16 == 0 && p.cols % 16 == 0 && aligned16(p.in) && (!p.out || aligned16(p.out)) &&
                   (!p.out_t || aligned16(p.out_t));
  // The three combinations the training step uses: an fp8 tensor's transpose, a bf16 activation to e4m3, a bf16
  // gradient to e5m2.
  if (p.in_e4m3)
    launch_kernel<__nv_fp8_e4m3, __nv_fp8_e4m3>(p, grid, vec, stream);
  else if (p.out_kind == Fp8Kind::e4m3)
    launch_kernel<__nv_bfloat16, __nv_fp8_e4m3>(p, grid, vec, stream);
  else
    launch_kernel<__nv_bfloat16, __nv_fp8_e5m2>(p, grid, vec, stream);
}

}  // namespace dropbench
