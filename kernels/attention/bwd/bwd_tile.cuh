// The per-warp arithmetic both attention backward kernels share (the mma.sync kernel, attention_bwd_kernel.cuh, and
// the wgmma kernel, wgmma/): one warp holds 16 keys x 64 queries of a block as S^T and dP^T in the m16n8 accumulator
// layout (an m64nN wgmma accumulator gives each warp its 16 rows in the same layout), so the ldmatrix addressing of
// the swizzled tiles, the keep-bit reads, the masking, P^T, dS^T, the bf16 A fragments and the dK / dV stores are
// written once here.
//
// Keep bits in the transposed layout. The scheme (dropout_scheme.cuh) gives the lane that holds 16 *query* rows in an
// m16n8 accumulator one 32-bit word per 16 x 64 tile. Here the rows are keys: a lane's 32 elements of a 64 x 64 block
// lie in the block's 4 tiles (query strips nb/2) and, per tile, in 2 words of other lanes (tile_lane_of(2(l%4) + i%2,
// l/4)), at bits tile_bit_of(query % 16, key). The block's 4 x 32 words are staged in shared memory (one word per
// thread: loaded, or generated with attn_keep_word) and each lane reads its 8 words (read_keep_words; the index and
// bit arithmetic in keep_layout.cuh).
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "kernels/attention/attention_dropout.cuh"
#include "kernels/attention/attention_kernel.cuh"  // pack_bf16, fast_exp2
#include "kernels/attention/bwd/attention_bwd_args.cuh"
#include "kernels/attention/bwd/keep_layout.cuh"  // el_key / el_query, read_keep_words, keep_bit, keep_bits, keep_at
#include "kernels/attention/ldsm_layout.cuh"
#include "kernels/attention/tile_order.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/rng/dropout_scheme.cuh"

namespace dropbench {
namespace attn_bwd {

constexpr float kLog2e = 1.4426950408889634f;

// The dynamic shared memory of a backward kernel (1024-byte aligned: the swizzled tiles need it).
__device__ __forceinline__ unsigned char* dynamic_smem() {
  extern __shared__ __align__(1024) unsigned char bwd_smem[];
  return bwd_smem;
}

// The grid of a backward kernel with one CTA per (block, head, batch): (heads x batch, blocks), decoded by
// tile_order.hpp's bwd_cta_in_order (mma kernels) or bwd_cta_sectioned (the wgmma kernel, blocks x subgroups).
// check_attention_backward_shape keeps blocks (of 64 or 128) <= 65535 and heads x batch < 2^31.
inline dim3 bwd_grid(int blocks, int heads, int batch) {
  return dim3(static_cast<unsigned>(heads) * static_cast<unsigned>(batch), static_cast<unsigned>(blocks));
}

// The mma kernels' ldmatrix addressing (off_a, off_b, at): ldsm_layout.cuh, shared with the forward.
using attn::at;
using attn::off_a;
using attn::off_b;

// Whether keep word (r16, c64) is read: the tile exists (rows before SQ, columns before SK) and was generated (causal:
// not above the diagonal). Words of other tiles are 0 in every mode; every element there is masked anyway.
__device__ __forceinline__ bool tile_read(const Args& a, uint32_t r16, uint32_t c64) {
  return r16 < a.geo.rows16() && c64 < a.geo.cols64() && (!a.causal || attn::tile_generated<true>(r16, c64));
}
// The keep word `lane` of tile (r16, c64) of matrix bh: read from the mask or generated, 0 where tile_read is false.
// known_read: the caller knows that tile_read holds, so it is not evaluated.
template <DropoutMode kMode, int R, int TW>
__device__ __forceinline__ uint32_t keep_word(const Args& a, uint32_t bh, uint32_t r16, uint32_t c64, uint32_t lane,
                                              bool known_read = false) {
  uint32_t w = 0;
  if (known_read || tile_read(a, r16, c64)) {
    if constexpr (kMode == DropoutMode::Mask) {
      w = ptx::ld_nc_no_l1(a.mask + a.geo.word_index(bh, r16, c64, lane));
    } else if constexpr (kMode == DropoutMode::Fused) {
      w = attn_keep_word<R, TW>(a.seed, a.offset, a.drop, bh, r16 * a.geo.cols64() + c64, lane);
    }
  }
  return w;
}

// Element (n8-block nb, i) of a fragment held as [N/8][4] (the mma kernel's) or flat [N/2] (a wgmma accumulator):
// the same element, written for both so that no array is reinterpreted (which can put it in local memory).
template <int NB>
__device__ __forceinline__ float& el(float (&x)[NB][4], int nb, int i) { return x[nb][i]; }
template <int N>
__device__ __forceinline__ float& el(float (&x)[N], int nb, int i) { return x[4 * nb + i]; }
template <int NB>
__device__ __forceinline__ float el(const float (&x)[NB][4], int nb, int i) { return x[nb][i]; }
template <int N>
__device__ __forceinline__ float el(const float (&x)[N], int nb, int i) { return x[4 * nb + i]; }

// One warp's 16 keys x 64 queries of a block: P^T, the keep bits, dS^T and (P o Z)^T, per element, in passes (the
// wgmma kernel computes P^T while its dP^T GEMM runs: probs, keep_bits, then pz_dropped / pack_a and dst or
// dst_dropped, or dst_dropped alone for both) or in one pass
// (probs_and_dst: the mma kernel, whose registers allow no more). kl0: the lane's first key row in the 64-key block
// (16 warp + lane / 4); k0, q0: the block's first key and query; edge: the block reaches past SQ or crosses the
// causal diagonal (masking needed); lse (natural log, the forward's), dd: the block's 64 LSE and D values; kw:
// read_keep_words' words; z: keep_bits' bits; sl2: a.scale_log2, read by the caller before its loop over blocks (read
// here, per block, the mma kernel's dH-128 instances spill).
// The LSE of query ql: from the block's 64 values, or the value itself (read by the caller).
__device__ __forceinline__ float lse_of(const float* lse, int ql) { return lse[ql]; }
__device__ __forceinline__ float lse_of(float lq, int) { return lq; }
// Element (nb, i) of s, a raw score, becomes P^T (masked past SQ and above the causal diagonal on edge blocks); lse:
// the block's 64 LSE values, or the element's own (lse_of).
template <class F, class L>
__device__ __forceinline__ void prob_at(F& s, int nb, int i, const Args& a, float sl2, int kl0, int lane, int k0,
                                        int q0, bool edge, L lse) {
  const int kl = el_key(kl0, i), ql = el_query(nb, i, lane);
  float x = el(s, nb, i);
  if (edge) {
    const int kg = k0 + kl, qg = q0 + ql;
    if (kg >= a.sq || qg >= a.sq || (a.causal && kg > qg)) x = -INFINITY;
  }
  el(s, nb, i) = attn::fast_exp2(__fmaf_rn(x, sl2, -__fmul_rn(lse_of(lse, ql), kLog2e)));
}
// The values of queries el_query(nb, 0, lane) and el_query(nb, 1, lane) (adjacent, the first even) of a block's 64
// in shared memory, v 8-byte aligned: one 64-bit load instead of two 32-bit ones.
__device__ __forceinline__ float2 query_pair(const float* v, int nb, int lane) {
  return *reinterpret_cast<const float2*>(v + el_query(nb, 0, lane));
}
// dS^T of an element: P^T o (dP^T o Z - D), zf the dropout factor (keep_scale where kept, 0 where dropped, 1 without
// dropout).
__device__ __forceinline__ float dst_el(float p, float dp, float zf, float d) { return __fmul_rn(p, __fmaf_rn(dp, zf, -d)); }
// (P o Z)^T of an element, the dV GEMM's A operand: P^T times the dropout factor zf.
__device__ __forceinline__ float pz_el(float p, float zf) { return __fmul_rn(p, zf); }

// probs: s = S^T (raw scores) becomes P^T, in place; lse 8-byte aligned (query_pair).
template <class F>
__device__ __forceinline__ void probs(F& s, const Args& a, float sl2, int kl0, int lane, int k0, int q0, bool edge,
                                      const float* lse) {
#pragma unroll
  for (int nb = 0; nb < 8; ++nb) {
    const float2 l = query_pair(lse, nb, lane);
#pragma unroll
    for (int i = 0; i < 4; ++i) prob_at(s, nb, i, a, sl2, kl0, lane, k0, q0, edge, (i & 1) ? l.y : l.x);
  }
}
// The dropout factor of an element from its keep bit: keep_scale where kept, 0 where dropped (1 without dropout).
template <bool kDrop>
__device__ __forceinline__ float keep_factor(uint32_t bit, float keep_scale) {
  if constexpr (kDrop) return bit ? keep_scale : 0.f;
  return 1.f;
}
// dst, without dropout: with p = P^T from probs and dp = dP^T, dp becomes dS^T; p already is (P o Z)^T. dd 8-byte
// aligned (query_pair).
template <class F>
__device__ __forceinline__ void dst(const F& p, F& dp, int lane, const float* dd) {
#pragma unroll
  for (int nb = 0; nb < 8; ++nb) {
    const float2 d = query_pair(dd, nb, lane);
#pragma unroll
    for (int i = 0; i < 4; ++i) el(dp, nb, i) = dst_el(el(p, nb, i), el(dp, nb, i), 1.f, (i & 1) ? d.y : d.x);
  }
}
// acc (16 x 64 fp32, m16n8 layout, 8 n8-blocks) as four m16k16 A fragments (bf16): accumulator n8-blocks 2kk, 2kk+1
// are the A fragment of k-step kk (mma.sync m16n8k16 and wgmma m64k16 alike).
template <class F>
__device__ __forceinline__ void pack_a(const F& x, uint32_t (&pa)[4][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    pa[kk][0] = attn::pack_bf16(el(x, 2 * kk, 0), el(x, 2 * kk, 1));
    pa[kk][1] = attn::pack_bf16(el(x, 2 * kk, 2), el(x, 2 * kk, 3));
    pa[kk][2] = attn::pack_bf16(el(x, 2 * kk + 1, 0), el(x, 2 * kk + 1, 1));
    pa[kk][3] = attn::pack_bf16(el(x, 2 * kk + 1, 2), el(x, 2 * kk + 1, 3));
  }
}

// The elements of a lane in the order of their bits in z (keep_at: word h, byte 2 (j % 2) + e, bit 4 (i / 2) +
// 2 (nb % 2)), f(nb, i) for each, after group(nb0) for each group of n8-blocks nb0, nb0 + 1 (their D / LSE pairs):
// walked in this order, ptxas reads each byte's 4 bits into predicates with one R2P, where in (nb, i) order it tests
// every bit with its own LOP3.
template <class G, class Fn>
__device__ __forceinline__ void for_bits(G group, Fn f) {
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      group(4 * h + 2 * jj);
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int t = 0; t < 4; ++t) f(4 * h + 2 * jj + (t & 1), 2 * (t >> 1) + e);
    }
}
// pz_dropped, with dropout: (P o Z)^T = P^T times the factor, packed as pack_a's A fragments; p = P^T stays (dS^T
// needs it unscaled). z: keep_bits'.
template <class F>
__device__ __forceinline__ void pz_dropped(const F& p, const uint32_t (&z)[2], float keep_scale, uint32_t (&pa)[4][4]) {
  float pz[32];
  for_bits([](int) {},
           [&](int nb, int i) { el(pz, nb, i) = pz_el(el(p, nb, i), keep_factor<true>(keep_at(z, nb, i), keep_scale)); });
  pack_a(pz, pa);
}
// dst_dropped, with dropout: dp becomes dS^T = P^T o (dP^T o Z - D) from p = P^T (unscaled); with kPz, p then
// becomes (P o Z)^T in the same pass, else it stays (pz_dropped made (P o Z)^T before). z: keep_bits'.
template <bool kPz, class F>
__device__ __forceinline__ void dst_dropped(F& p, F& dp, const uint32_t (&z)[2], float keep_scale, int lane,
                                            const float* dd) {
  float2 d[2];
  for_bits([&](int nb0) { d[0] = query_pair(dd, nb0, lane), d[1] = query_pair(dd, nb0 + 1, lane); },
           [&](int nb, int i) {
             const float zf = keep_factor<true>(keep_at(z, nb, i), keep_scale), pv = el(p, nb, i);
             el(dp, nb, i) = dst_el(pv, el(dp, nb, i), zf, (i & 1) ? d[nb & 1].y : d[nb & 1].x);
             if constexpr (kPz) el(p, nb, i) = pz_el(pv, zf);
           });
}
// Both in one pass (the mma kernel, whose registers allow no more): s = S^T becomes (P o Z)^T, dp = dP^T becomes
// dS^T.
template <bool kDrop, class F>
__device__ __forceinline__ void probs_and_dst(F& s, F& dp, const Args& a, float sl2, int kl0, int lane,
                                              int k0, int q0, bool edge, const float* lse, const float* dd,
                                              const uint32_t (&kw)[4][2]) {
#pragma unroll
  for (int nb = 0; nb < 8; ++nb)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int kl = el_key(kl0, i), ql = el_query(nb, i, lane);
      prob_at(s, nb, i, a, sl2, kl0, lane, k0, q0, edge, lse);
      const float p = el(s, nb, i);
      float zf = 1.f;
      if constexpr (kDrop) zf = keep_factor<kDrop>(keep_bit(kw, nb, i, kl, ql), a.keep_scale);
      el(s, nb, i) = pz_el(p, zf);
      el(dp, nb, i) = dst_el(p, el(dp, nb, i), zf, dd[ql]);
    }
}

// dK * scale and dV of the warp's 16 keys (first key row key0 = k0 + kl0, the other 8 below) into dQKV's key / value
// head columns of KV head hk; rows past SQ are not stored. sg >= 0 (the wgmma kernel's subgroup sg of a split
// group): dK and dV unscaled in fp32 into the subgroup's slabs of a.dkv_part instead (bwd_fp32_to_dqkv_kernel adds them).
template <int HD, class F>
__device__ __forceinline__ void store_dk_dv(const Args& a, const F& dk, const F& dv, int64_t tok0, int key0, int hk,
                                            int lane, int sg = -1) {
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int key = key0 + 8 * hh;
    if (key < a.sq && sg >= 0) {
      float* pk = a.dkv_part + sg * a.dkv_slab + ((tok0 + key) * a.hkv + hk) * HD + 2 * (lane & 3);
      float* pv = pk + a.subgroups * a.dkv_slab;
#pragma unroll
      for (int nb = 0; nb < HD / 8; ++nb) {
        *reinterpret_cast<float2*>(pk + 8 * nb) = make_float2(el(dk, nb, 2 * hh), el(dk, nb, 2 * hh + 1));
        *reinterpret_cast<float2*>(pv + 8 * nb) = make_float2(el(dv, nb, 2 * hh), el(dv, nb, 2 * hh + 1));
      }
    } else if (key < a.sq) {
      __nv_bfloat16* row = a.dqkv + (tok0 + key) * a.dqkv_stride + 2 * (lane & 3);
      __nv_bfloat16* rk = row + (a.hq + hk) * HD;
      __nv_bfloat16* rv = row + (a.hq + a.hkv + hk) * HD;
#pragma unroll
      for (int nb = 0; nb < HD / 8; ++nb) {
        *reinterpret_cast<uint32_t*>(rk + 8 * nb) =
            attn::pack_bf16(el(dk, nb, 2 * hh) * a.scale, el(dk, nb, 2 * hh + 1) * a.scale);
        *reinterpret_cast<uint32_t*>(rv + 8 * nb) = attn::pack_bf16(el(dv, nb, 2 * hh), el(dv, nb, 2 * hh + 1));
      }
    }
  }
}

}  // namespace attn_bwd
}  // namespace dropbench
