// Naive fp32 reference of the attention backward, from the definition and nothing the kernels compute (no O, no
// LSE, no D from O): per (b, h, query row) one block recomputes the scores, softmax, keep bits (element by element
// through the mask or attn_keep_word), dP, D = sum_j P Z dP, dS and dQ; it stores dS and P o Z rows in the scratch;
// per (b, kv head, key) one block sums dK and dV over the group's heads (ascending) and all query rows.
#include <cmath>
#include <string>

#include <cuda_bf16.h>

#include "kernels/attention/bwd/attention_bwd.cuh"
#include "kernels/common/check.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/rng/dropout_scheme.cuh"

namespace dropbench {
namespace {

constexpr int kRefMaxSq = 4096;

struct RefArgs {
  const __nv_bfloat16* qkv;
  const __nv_bfloat16* dout;
  const uint32_t* mask;
  float* out;   // [B*SQ, (Hq + 2*Hkv)*dH] dense
  float* ds;    // [B*Hq, SQ, SQ]
  float* pz;    // [B*Hq, SQ, SQ]
  int64_t stride, do_stride;
  int sq, hq, hkv, hd;
  bool causal;
  float scale, keep_scale;
  uint64_t seed;
  uint32_t offset, drop;
};

__device__ float block_sum(float v, float* red) {
  for (int w = 16; w > 0; w >>= 1) v += __shfl_xor_sync(0xffffffffu, v, w);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = 0.f;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) s += red[w];
  return s;
}
__device__ float block_max(float v, float* red) {
  for (int w = 16; w > 0; w >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, w));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float s = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) s = fmaxf(s, red[w]);
  return s;
}

template <DropoutMode kMode, int R, int TW>
__global__ void bwd_ref_row_kernel(const RefArgs a) {
  extern __shared__ float sh[];
  float* p = sh;            // [sq] probabilities
  float* dpt = sh + a.sq;   // [sq] dO . V_j
  float* z = sh + 2 * a.sq; // [sq] keep * keep_scale
  __shared__ float qrow[128], dorow[128], red[32];
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int hk = h / (a.hq / a.hkv);
  const uint32_t bh = static_cast<uint32_t>(b * a.hq + h);
  MaskGeometry g;
  g.bh = gridDim.z * a.hq;
  g.sq = g.sk = static_cast<uint32_t>(a.sq);
  g.causal = a.causal;
  const __nv_bfloat16* base = a.qkv + static_cast<int64_t>(b) * a.sq * a.stride;
  for (int d = threadIdx.x; d < a.hd; d += blockDim.x) {
    qrow[d] = __bfloat162float(base[static_cast<int64_t>(i) * a.stride + h * a.hd + d]);
    dorow[d] = __bfloat162float(a.dout[(static_cast<int64_t>(b) * a.sq + i) * a.do_stride + h * a.hd + d]);
  }
  __syncthreads();
  const int nk = a.causal ? i + 1 : a.sq;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < a.sq; j += blockDim.x) {
    float s = -INFINITY, dv = 0.f, zz = 0.f;
    if (j < nk) {
      const __nv_bfloat16* kr = base + static_cast<int64_t>(j) * a.stride + (a.hq + hk) * a.hd;
      const __nv_bfloat16* vr = base + static_cast<int64_t>(j) * a.stride + (a.hq + a.hkv + hk) * a.hd;
      float acc = 0.f;
      for (int d = 0; d < a.hd; ++d) {
        acc = fmaf(qrow[d], __bfloat162float(kr[d]), acc);
        dv = fmaf(dorow[d], __bfloat162float(vr[d]), dv);
      }
      s = acc * a.scale;
      const uint32_t lane = tile_lane_of(i % 16, j % 64), bit = tile_bit_of(i % 16, j % 64);
      bool keep = true;
      if constexpr (kMode == DropoutMode::Mask) {
        keep = (a.mask[g.word_index(bh, i / 16, j / 64, lane)] >> bit) & 1u;
      } else if constexpr (kMode == DropoutMode::Fused) {
        keep = (attn_keep_word<R, TW>(a.seed, a.offset, a.drop, bh, (i / 16) * g.cols64() + j / 64, lane) >> bit) & 1u;
      }
      zz = kMode == DropoutMode::None ? 1.f : (keep ? a.keep_scale : 0.f);
    }
    p[j] = s;
    dpt[j] = dv;
    z[j] = zz;
    mx = fmaxf(mx, s);
  }
  mx = block_max(mx, red);
  float l = 0.f;
  for (int j = threadIdx.x; j < a.sq; j += blockDim.x) {
    const float e = j < nk ? expf(p[j] - mx) : 0.f;
    p[j] = e;
    l += e;
  }
  l = block_sum(l, red);
  float dsum = 0.f;
  for (int j = threadIdx.x; j < a.sq; j += blockDim.x) {
    p[j] /= l;
    dsum += p[j] * z[j] * dpt[j];
  }
  dsum = block_sum(dsum, red);  // D = sum_j P Z dP (its block_sum's barriers also publish p)
  const int64_t rowoff = (static_cast<int64_t>(bh) * a.sq + i) * a.sq;
  for (int j = threadIdx.x; j < a.sq; j += blockDim.x) {
    const float ds = p[j] * (z[j] * dpt[j] - dsum);
    a.ds[rowoff + j] = ds;
    a.pz[rowoff + j] = p[j] * z[j];
    dpt[j] = ds;
  }
  __syncthreads();
  const int64_t w = static_cast<int64_t>(a.hq + 2 * a.hkv) * a.hd;
  for (int d = threadIdx.x; d < a.hd; d += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < nk; ++j)
      acc = fmaf(dpt[j], __bfloat162float(base[static_cast<int64_t>(j) * a.stride + (a.hq + hk) * a.hd + d]), acc);
    a.out[(static_cast<int64_t>(b) * a.sq + i) * w + h * a.hd + d] = acc * a.scale;
  }
}

__global__ void bwd_ref_col_kernel(const RefArgs a) {
  const int j = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int group = a.hq / a.hkv;
  const __nv_bfloat16* base = a.qkv + static_cast<int64_t>(b) * a.sq * a.stride;
  const int64_t w = static_cast<int64_t>(a.hq + 2 * a.hkv) * a.hd;
  for (int d = threadIdx.x; d < a.hd; d += blockDim.x) {
    float dk = 0.f, dv = 0.f;
    for (int hh = 0; hh < group; ++hh) {
      const int h = hk * group + hh;
      const int64_t m = (static_cast<int64_t>(b) * a.hq + h) * a.sq * a.sq;
      for (int i = a.causal ? j : 0; i < a.sq; ++i) {
        const float q = __bfloat162float(base[static_cast<int64_t>(i) * a.stride + h * a.hd + d]);
        const float o = __bfloat162float(a.dout[(static_cast<int64_t>(b) * a.sq + i) * a.do_stride + h * a.hd + d]);
        dk = fmaf(a.ds[m + static_cast<int64_t>(i) * a.sq + j], q, dk);
        dv = fmaf(a.pz[m + static_cast<int64_t>(i) * a.sq + j], o, dv);
      }
    }
    float* row = a.out + (static_cast<int64_t>(b) * a.sq + j) * w;
    row[(a.hq + hk) * a.hd + d] = dk * a.scale;
    row[(a.hq + a.hkv + hk) * a.hd + d] = dv;
  }
}

template <DropoutMode M, int R, int TW>
void launch_ref(const RefArgs& a, int batch, cudaStream_t s) {
  const size_t smem = static_cast<size_t>(a.sq) * 3 * sizeof(float);
  auto fn = bwd_ref_row_kernel<M, R, TW>;
  DB_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  fn<<<dim3(a.sq, a.hq, batch), 128, smem, s>>>(a);
  DB_CUDA_LAUNCH();
  bwd_ref_col_kernel<<<dim3(a.sq, a.hkv, batch), 128, 0, s>>>(a);
  DB_CUDA_LAUNCH();
}

}  // namespace

size_t attention_backward_reference_scratch_bytes(const AttentionBwdParams& p) {
  const AttentionParams& f = p.fwd;
  return 2 * static_cast<size_t>(f.batch) * f.q_heads * f.sq * f.sq * sizeof(float);
}

void launch_attention_backward_reference(const AttentionBwdParams& p, DropoutMode mode, float* dqkv_f32, void* scratch,
                                         cudaStream_t s) {
  const AttentionParams& f = p.fwd;
  if (f.head_dim < 1 || f.head_dim > 128) throw UsageError("attention backward reference: head_dim must be in [1, 128]");
  if (f.sq < 1 || f.sq > kRefMaxSq) throw UsageError("attention backward reference: sq must be in [1, 4096]");
  if (f.q_heads % f.kv_heads != 0) throw UsageError("attention backward reference: kv_heads must divide q_heads");
  if (mode == DropoutMode::Mask && f.mask == nullptr) throw UsageError("attention backward reference: mode mask needs a mask");
  if (f.qkv == nullptr || p.dout == nullptr || dqkv_f32 == nullptr || scratch == nullptr)
    throw UsageError("attention backward reference: qkv, dout, output and scratch are required");
  RefArgs a{};
  a.qkv = f.qkv;
  a.dout = p.dout;
  a.mask = f.mask;
  a.out = dqkv_f32;
  a.ds = static_cast<float*>(scratch);
  a.pz = a.ds + static_cast<size_t>(f.batch) * f.q_heads * f.sq * f.sq;
  a.stride = f.qkv_row_stride ? f.qkv_row_stride : static_cast<int64_t>(f.q_heads + 2 * f.kv_heads) * f.head_dim;
  a.do_stride = p.dout_row_stride ? p.dout_row_stride : static_cast<int64_t>(f.q_heads) * f.head_dim;
  a.sq = f.sq;
  a.hq = f.q_heads;
  a.hkv = f.kv_heads;
  a.hd = f.head_dim;
  a.causal = f.causal;
  a.scale = f.softmax_scale > 0.f ? f.softmax_scale : 1.f / std::sqrt(static_cast<float>(f.head_dim));
  a.keep_scale = f.keep_scale;
  a.seed = f.seed;
  a.offset = f.offset;
  a.drop = f.drop_threshold;
  switch (mode) {
    case DropoutMode::None: return launch_ref<DropoutMode::None, 7, 8>(a, f.batch, s);
    case DropoutMode::Mask: return launch_ref<DropoutMode::Mask, 7, 8>(a, f.batch, s);
    case DropoutMode::Fused:
      return with_rounds_tw(f.rounds, f.threshold_bits, "attention backward reference",
                            [&](auto r, auto tw) { launch_ref<DropoutMode::Fused, r(), tw()>(a, f.batch, s); });
  }
}

}  // namespace dropbench
