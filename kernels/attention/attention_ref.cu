// Naive fp32 references for the attention kernel: one block per (query row, head, batch), the scores of the
// row in shared memory, exact expf, fp32 accumulation. The keep bits come straight from the counter scheme
// (attn_keep_word) or the mask, element by element. Also a simple tile-mask generator for tests/benchmarks.
#include <cmath>
#include <string>

#include <cuda_bf16.h>

#include "kernels/attention/attention.cuh"
#include "kernels/rng/dropout_scheme.cuh"
#include "kernels/common/check.hpp"
#include "kernels/common/dispatch.cuh"

namespace dropbench {
namespace {

constexpr int kRefMaxSq = 16384;

template <DropoutMode kMode, int R, int TW>
__global__ void attn_ref_kernel(const __nv_bfloat16* __restrict__ qkv, int64_t stride, __nv_bfloat16* __restrict__ o,
                                float* __restrict__ o_f32, int64_t o_stride, float* __restrict__ lse, int sq, int hq, int hkv, int hd, bool causal,
                                float scale, const uint32_t* __restrict__ mask, uint64_t seed, uint32_t offset,
                                uint32_t drop, float keep_scale) {
  extern __shared__ float sh[];
  float* sc = sh;                                     // [sq] scores (scaled), -inf where masked
  unsigned char* keep = reinterpret_cast<unsigned char*>(sh + sq);  // [sq]
  __shared__ float qrow[128];
  __shared__ float red[32];

  const int row = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (hq / hkv);
  const uint32_t bh = static_cast<uint32_t>(b * hq + h);
  MaskGeometry g;
  g.bh = static_cast<uint32_t>(gridDim.z) * hq;
  g.sq = g.sk = static_cast<uint32_t>(sq);
  g.causal = causal;
  const uint32_t cols64 = g.cols64();

  const __nv_bfloat16* base = qkv + static_cast<int64_t>(b) * sq * stride;
  for (int d = threadIdx.x; d < hd; d += blockDim.x)
    qrow[d] = __bfloat162float(base[static_cast<int64_t>(row) * stride + h * hd + d]);
  __syncthreads();

  const int nk = causal ? row + 1 : sq;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < sq; j += blockDim.x) {
    float s = -INFINITY;
    bool kp = false;
    if (j < nk) {
      const __nv_bfloat16* kr = base + static_cast<int64_t>(j) * stride + (hq + hk) * hd;
      float acc = 0.f;
      for (int d = 0; d < hd; ++d) acc = fmaf(qrow[d], __bfloat162float(kr[d]), acc);
      s = acc * scale;
      const uint32_t r16 = row / 16, c64 = j / 64;
      const uint32_t lane = tile_lane_of(row % 16, j % 64), bit = tile_bit_of(row % 16, j % 64);
      if constexpr (kMode == DropoutMode::None) {
        kp = true;
      } else if constexpr (kMode == DropoutMode::Mask) {
        kp = (mask[g.word_index(bh, r16, c64, lane)] >> bit) & 1u;
      } else {
        kp = (attn_keep_word<R, TW>(seed, offset, drop, bh, r16 * cols64 + c64, lane) >> bit) & 1u;
      }
    }
    sc[j] = s;
    keep[j] = kp ? 1 : 0;
    mx = fmaxf(mx, s);
  }
  // Block max.
  for (int w = 16; w > 0; w >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, w));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mx;
  __syncthreads();
  mx = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) mx = fmaxf(mx, red[w]);

  // Each thread: one or more output columns d; the row sum is recomputed by every thread (cheap, exact same
  // order everywhere).
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0.f, l = 0.f;
    const __nv_bfloat16* vc = base + (hq + hkv + hk) * hd + d;
    for (int j = 0; j < nk; ++j) {
      const float p = expf(sc[j] - mx);
      l += p;
      if (keep[j]) acc = fmaf(p, __bfloat162float(vc[static_cast<int64_t>(j) * stride]), acc);
    }
    float out = acc / l;
    if (kMode != DropoutMode::None) out *= keep_scale;
    if (o_f32 != nullptr)
      o_f32[(static_cast<int64_t>(b) * sq + row) * hq * hd + h * hd + d] = out;
    else
      o[(static_cast<int64_t>(b) * sq + row) * o_stride + h * hd + d] = __float2bfloat16(out);
    if (d == 0 && lse != nullptr) lse[(static_cast<int64_t>(b) * hq + h) * sq + row] = mx + logf(l);
  }
}

template <DropoutMode M, int R, int TW>
void launch_ref_inst(const AttentionParams& p, cudaStream_t s, float* o_f32) {
  const int64_t stride = p.qkv_row_stride ? p.qkv_row_stride : static_cast<int64_t>(p.q_heads + 2 * p.kv_heads) * p.head_dim;
  const int64_t o_stride = p.o_row_stride ? p.o_row_stride : static_cast<int64_t>(p.q_heads) * p.head_dim;
  const float scale = p.softmax_scale > 0.f ? p.softmax_scale : 1.f / std::sqrt(static_cast<float>(p.head_dim));
  const size_t smem = static_cast<size_t>(p.sq) * (sizeof(float) + 1);
  auto fn = attn_ref_kernel<M, R, TW>;
  DB_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  fn<<<dim3(p.sq, p.q_heads, p.batch), 128, smem, s>>>(p.qkv, stride, p.o, o_f32, o_stride, p.lse, p.sq, p.q_heads,
                                                          p.kv_heads, p.head_dim, p.causal, scale, p.mask, p.seed,
                                                          p.offset, p.drop_threshold, p.keep_scale);
  DB_CUDA_LAUNCH();
}

template <int R, int TW>
__global__ void attn_mask_ref_kernel(uint32_t* __restrict__ mask, MaskGeometry g, uint64_t seed, uint32_t offset,
                                     uint32_t drop) {
  // One warp per tile, grid-stride over all (bh, r16, c64).
  const uint64_t tiles = static_cast<uint64_t>(g.bh) * g.rows16() * g.cols64();
  const uint32_t lane = threadIdx.x & 31;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * (blockDim.x / 32);
  for (uint64_t t = static_cast<uint64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5); t < tiles; t += warps) {
    const uint32_t c64 = static_cast<uint32_t>(t % g.cols64());
    const uint32_t r16 = static_cast<uint32_t>((t / g.cols64()) % g.rows16());
    const uint32_t bh = static_cast<uint32_t>(t / (static_cast<uint64_t>(g.cols64()) * g.rows16()));
    if (g.causal && c64 * kTileCols > r16 * kTileRows + kTileRows - 1) continue;
    mask[g.word_index(bh, r16, c64, lane)] = attn_keep_word<R, TW>(seed, offset, drop, bh, r16 * g.cols64() + c64, lane);
  }
}

}  // namespace

void launch_attention_reference(const AttentionParams& p, DropoutMode mode, cudaStream_t s, float* o_f32) {
  if (p.head_dim > 128 || p.head_dim < 1) throw UsageError("attention reference: head_dim must be in [1, 128]");
  if (p.sq < 1 || p.sq > kRefMaxSq) throw UsageError("attention reference: sq must be in [1, 16384]");
  if (p.q_heads % p.kv_heads != 0) throw UsageError("attention reference: kv_heads must divide q_heads");
  if (mode == DropoutMode::Mask && p.mask == nullptr) throw UsageError("attention reference: mode mask needs a mask");
  if (p.o == nullptr && o_f32 == nullptr) throw UsageError("attention reference: no output");
  if (p.row_begin != 0 || p.rows != 0) throw UsageError("attention reference: row windows are not supported");
  switch (mode) {
    case DropoutMode::None: return launch_ref_inst<DropoutMode::None, 7, 8>(p, s, o_f32);
    case DropoutMode::Mask: return launch_ref_inst<DropoutMode::Mask, 7, 8>(p, s, o_f32);
    case DropoutMode::Fused:
      return with_rounds_tw(p.rounds, p.threshold_bits, "attention reference", [&](auto r, auto tw) {
        launch_ref_inst<DropoutMode::Fused, r(), tw()>(p, s, o_f32);
      });
  }
}

void launch_attention_mask_reference(uint32_t* mask, const MaskGeometry& g, uint64_t seed, uint32_t offset,
                                     uint32_t drop, int rounds, int tw, cudaStream_t s) {
  // One warp per tile, 8 per block.
  const uint64_t tiles = static_cast<uint64_t>(g.bh) * g.rows16() * g.cols64();
  const unsigned blocks = static_cast<unsigned>(std::min<uint64_t>((tiles + 7) / 8, 65535));
  with_rounds_tw(rounds, tw, "attention mask reference", [&](auto r, auto b) {
    attn_mask_ref_kernel<r(), b()><<<blocks, 256, 0, s>>>(mask, g, seed, offset, drop);
  });
  DB_CUDA_LAUNCH();
}

}  // namespace dropbench
