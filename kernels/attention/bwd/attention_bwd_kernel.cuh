// Attention backward kernels (mma.sync m16n8k16, bf16 in, fp32 accumulate), FlashAttention-2's structure:
//   main kernel   one CTA per (64-key block, KV head, batch): K, V of the block stay in shared memory; the CTA walks
//                 the query heads of the KV head's group in order and, for each, the query blocks of 64 (causal:
//                 from the diagonal on), double-buffered with cp.async. Per block and warp (16 keys):
//                 S^T = K Q^T, P^T = exp2(S^T * c - LSE), dP^T = V dO^T, dV += (P o Z)^T dO,
//                 dS^T = P^T o (dP^T o Z - D), dK += dS^T Q, and in the fast mode dQ += dS K (dS^T staged in
//                 shared memory, read back transposed by ldmatrix.trans) with fp32 atomics.
//   dQ kernel     (deterministic mode) one CTA per (64-query block, query head, batch), the forward's layout:
//                 S = Q K^T, dP = dO V^T, dS, dQ += dS K over the key blocks in order.
// Keep bits. The dQ kernel holds S with rows = queries, exactly the forward's accumulator layout: one keep word per
// lane and 16 x 64 tile, bit 4*nb + i for element (nb, i). The main kernel holds S^T (rows = keys): a lane's
// elements of one tile come from 2 words of other lanes, so the CTA stages the block's 4 tiles x 32 words in shared
// memory (one word per thread: a coalesced load in mode Mask, one attn_keep_word call in mode Fused) and each lane
// reads the 8 words its 32 elements live in (tile_lane_of / tile_bit_of of dropout_scheme.cuh).
#pragma once
#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>

#include "kernels/attention/bwd/attention_bwd_args.cuh"
#include "kernels/attention/bwd/bwd_tile.cuh"
#include "kernels/attention/attention_dropout.cuh"
#include "kernels/attention/instance.hpp"
#include "kernels/attention/attention_kernel.cuh"  // mma.sync / ldmatrix / cp.async helpers, TileLoader
#include "kernels/attention/tile_order.hpp"
#include "kernels/common/check.hpp"
#include "kernels/rng/dropout_scheme.cuh"

namespace dropbench {
namespace attn_bwd {

using attn::cp_async_commit;
using attn::cp_async_wait;
using attn::ldsm_x4;
using attn::ldsm_x4_trans;
using attn::mma_bf16;
using attn::pack_bf16;
using attn::fast_exp2;

// cp.async loader of one 64-row tile (128 threads).
template <int HD>
using Loader = attn::TileLoader<64, HD, Cfg<HD>::kThreads>;

// acc[DB][4] += A (four k-steps of 16, 64 deep) * T, T a 64 x HD bf16 tile in shared memory read transposed (rows
// = the k dimension): the forward's P V product.
template <int HD>
__device__ __forceinline__ void mma_a_tileT(float (&acc)[HD / 8][4], const uint32_t (&pa)[4][4], uint32_t tile_a) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
    for (int d2 = 0; d2 < HD / 16; ++d2) {
      uint32_t vb[4];
      ldsm_x4_trans(vb, at(tile_a, d2) + kk * 16 * (HD * 2));
      mma_bf16(acc[2 * d2], pa[kk], vb[0], vb[1]);
      mma_bf16(acc[2 * d2 + 1], pa[kk], vb[2], vb[3]);
    }
  }
}

// x[8][4] = A_rows . B^T and y[8][4] = C_rows . D^T over HD (16 rows of A/C at a_base/c_base, A pattern; 64 rows of
// B/D at b_base/d_base, B pattern): S and dP (or S^T and dP^T) of one warp.
template <int HD>
__device__ __forceinline__ void two_products(float (&x)[8][4], float (&y)[8][4], uint32_t a_base, uint32_t b_base,
                                             uint32_t c_base, uint32_t d_base) {
#pragma unroll
  for (int nb = 0; nb < 8; ++nb)
#pragma unroll
    for (int i = 0; i < 4; ++i) x[nb][i] = y[nb][i] = 0.f;
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    uint32_t fa[4], fc[4];
    ldsm_x4(fa, at(a_base, kk));
    ldsm_x4(fc, at(c_base, kk));
#pragma unroll
    for (int n2 = 0; n2 < 4; ++n2) {
      uint32_t fb[4], fd[4];
      ldsm_x4(fb, at(b_base, kk) + n2 * 16 * (HD * 2));
      ldsm_x4(fd, at(d_base, kk) + n2 * 16 * (HD * 2));
      mma_bf16(x[2 * n2], fa, fb[0], fb[1]);
      mma_bf16(x[2 * n2 + 1], fa, fb[2], fb[3]);
      mma_bf16(y[2 * n2], fc, fd[0], fd[1]);
      mma_bf16(y[2 * n2 + 1], fc, fd[2], fd[3]);
    }
  }
}

// x = 0 (accumulator fragments before a loop).
template <int N>
__device__ __forceinline__ void zero_frags(float (&x)[N][4]) {
#pragma unroll
  for (int d = 0; d < N; ++d) x[d][0] = x[d][1] = x[d][2] = x[d][3] = 0.f;
}

// The main kernel's stage loads. Iteration it: query head hk * group + it / nq, query block qb0 + it % nq.
template <int HD, DropoutMode kMode, int R, int TW>
struct MainStages {
  using C = Cfg<HD>;
  const Args& a;
  uint32_t sQ, sDo;
  float* sLse;     // [2][64]
  float* sD;       // [2][64]
  uint32_t* sM;    // [2][4 tiles][32 words]
  int sq, hk, b, kb, qb0, nq, tid, lane;  // sq: the kernel's copy of a.sq, so the loads keep their order
  int64_t tok0;

  __device__ __forceinline__ int head(int it) const { return hk * a.group + it / nq; }
  __device__ __forceinline__ int q0(int it) const { return (qb0 + it % nq) * 64; }
  // Q and dO of iteration it into stage st.
  __device__ __forceinline__ void load_tiles(int it, int st) const {
    const int h = head(it), q = q0(it);
    Loader<HD>::load(sQ + st * C::kTile, a.qkv + (tok0 + q) * a.qkv_stride + h * HD, a.qkv_stride, q, sq);
    Loader<HD>::load(sDo + st * C::kTile, a.dout + (tok0 + q) * a.dout_stride + h * HD, a.dout_stride, q, sq);
  }
  // Thread t < 64 copies the LSE of row t, the others D of row t - 64 (cp.async, zero past SQ); mode Mask: every
  // thread keep word t of the block's 4 tiles (cp.async, zero for tiles not read). Nothing is held in registers
  // across the stage's compute.
  __device__ __forceinline__ void load_scalars(int it, int st) const {
    const int h = head(it), q0i = q0(it);
    const uint32_t bh = static_cast<uint32_t>(b * a.hq + h);
    const int q = q0i + (tid & 63);
    const float* src = tid < 64 ? a.lse + static_cast<int64_t>(bh) * sq + (q < sq ? q : 0)
                                : a.dsum + static_cast<int64_t>(bh) * a.sq_pad + q;
    ptx::cp_async4(attn::smem_addr(tid < 64 ? sLse + st * 64 + tid : sD + st * 64 + tid - 64), src, q < sq);
    if constexpr (kMode == DropoutMode::Mask) {
      const uint32_t r16 = static_cast<uint32_t>(q0i / 16 + (tid >> 5));
      const bool valid = tile_read(a, r16, static_cast<uint32_t>(kb));
      const uint32_t* wsrc =
          a.mask + (valid ? a.geo.word_index(bh, r16, static_cast<uint32_t>(kb), static_cast<uint32_t>(lane)) : 0);
      ptx::cp_async4(attn::smem_addr(sM + st * 128 + tid), wsrc, valid);
    }
  }
  // Mode Fused: the keep words of iteration it, generated at the end of the previous iteration, where the block's
  // S^T / dP^T registers are dead.
  __device__ __forceinline__ void gen_words(int it, int st) const {
    if constexpr (kMode == DropoutMode::Fused) {
      const uint32_t bh = static_cast<uint32_t>(b * a.hq + head(it));
      const uint32_t r16 = static_cast<uint32_t>(q0(it) / 16 + (tid >> 5));
      sM[st * 128 + tid] = keep_word<kMode, R, TW>(a, bh, r16, static_cast<uint32_t>(kb), static_cast<uint32_t>(lane));
    }
  }
};

// The fast mode's dQ += dS K of one block: the warp's dS^T (pa, its rows kl0 and kl0 + 8) into shared memory at sDs
// ([key][query], 16-byte chunks XOR-swizzled by row), a barrier, then per 16 columns of dQ the A fragments of dS as
// transposed reads of it, B = K (at aK0 = sK + oA) read transposed, and fp32 atomics into dq_acc.
template <int HD>
__device__ __forceinline__ void dq_atomic(float* dq_acc, int hq, int sq, const uint32_t (&pa)[4][4], uint32_t sDs,
                                          uint32_t aK0, int64_t tok0, int h, int q0, int kl0, int warp, int lane) {
  constexpr int RB = Cfg<HD>::kRowBytes;
#pragma unroll
  for (int nb = 0; nb < 8; ++nb)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int kl = kl0 + 8 * hh;
      const uint32_t addr = sDs + kl * 128 + ((nb ^ (kl & 7)) << 4) + (lane & 3) * 4;
      ptx::st_shared_b32(addr, pa[nb >> 1][2 * (nb & 1) + hh]);
    }
  __syncthreads();
  // Re-read per 16 columns of dQ (16 registers fewer held across the loop, which keeps the dH 128 kernel from
  // spilling).
  const int ds_row = (lane & 7) + 8 * (lane >> 4);
  const uint32_t ds_a = sDs + ds_row * 128 + (((2 * warp + ((lane >> 3) & 1)) ^ (lane & 7)) << 4);
  const int qr = q0 + warp * 16 + (lane >> 2);
  const int64_t ld = static_cast<int64_t>(hq) * HD;
  float* dst = dq_acc + (tok0 + qr) * ld + h * HD + 2 * (lane & 3);
  const bool ok0 = qr < sq, ok1 = qr + 8 < sq;
#pragma unroll
  for (int d2 = 0; d2 < HD / 16; ++d2) {
    float acc[2][4];
    zero_frags(acc);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t dsa[4], kb4[4];
      ldsm_x4_trans(dsa, ds_a + kk * 16 * 128);  // rows kk*16 + ds_row: (row & 7) == (lane & 7), same swizzle
      ldsm_x4_trans(kb4, at(aK0, d2) + kk * 16 * RB);
      mma_bf16(acc[0], dsa, kb4[0], kb4[1]);
      mma_bf16(acc[1], dsa, kb4[2], kb4[3]);
    }
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int d = (2 * d2 + j) * 8;
      if (ok0) {
        atomicAdd(dst + d, acc[j][0]);
        atomicAdd(dst + d + 1, acc[j][1]);
      }
      if (ok1) {
        atomicAdd(dst + 8 * ld + d, acc[j][2]);
        atomicAdd(dst + 8 * ld + d + 1, acc[j][3]);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Main kernel: dK, dV (and atomic dQ).
// ---------------------------------------------------------------------------------------------------------
template <int HD, DropoutMode kMode, int R, int TW>
__global__ void __launch_bounds__(128, 1) attn_bwd_main_kernel(const Args a) {
  using C = Cfg<HD>;
  constexpr int RB = C::kRowBytes, DB = C::kDB;
  constexpr bool kDrop = kMode != DropoutMode::None;
  unsigned char* smem = dynamic_smem();
  const uint32_t s0 = attn::smem_addr(smem);
  const uint32_t sK = s0 + C::kOffK, sV = s0 + C::kOffV, sQ = s0 + C::kOffQ, sDo = s0 + C::kOffDo, sDs = s0 + C::kOffDs;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const auto cta = attn::bwd_cta_in_order<int>(blockIdx.x, blockIdx.y, gridDim.y, a.hkv, false);
  const int kb = cta.block, hk = cta.head, b = cta.batch;
  const int sq = a.sq, k0 = kb * 64;
  const int nqb = (sq + 63) / 64;
  const int qb0 = attn::first_query_block(k0, 64, a.causal);
  const int nq = nqb - qb0;
  const int n_it = a.group * nq;
  const int64_t tok0 = static_cast<int64_t>(b) * sq;
  const __nv_bfloat16* gK = a.qkv + tok0 * a.qkv_stride + (a.hq + hk) * HD;
  const __nv_bfloat16* gV = gK + a.hkv * HD;

  Loader<HD>::load(sK, gK + static_cast<int64_t>(k0) * a.qkv_stride, a.qkv_stride, k0, sq);
  Loader<HD>::load(sV, gV + static_cast<int64_t>(k0) * a.qkv_stride, a.qkv_stride, k0, sq);

  const MainStages<HD, kMode, R, TW> ld{a, sQ, sDo, reinterpret_cast<float*>(smem + C::kOffLse),
                                        reinterpret_cast<float*>(smem + C::kOffD),
                                        reinterpret_cast<uint32_t*>(smem + C::kOffM), sq, hk, b, kb, qb0, nq, tid, lane, tok0};
  if (n_it > 0) {
    ld.load_tiles(0, 0);
    ld.load_scalars(0, 0);
    ld.gen_words(0, 0);
  }
  cp_async_commit();

  const uint32_t oA = off_a(lane, RB), oB = off_b(lane, RB);
  const uint32_t aK = sK + warp * 16 * RB + oA, aV = sV + warp * 16 * RB + oA;
  const float sl2 = a.scale_log2;
  // This lane's rows of S^T: keys kl0 and kl0 + 8 of the block.
  const int kl0 = warp * 16 + (lane >> 2);

  float dk[DB][4], dv[DB][4];
  zero_frags(dk);
  zero_frags(dv);

  for (int it = 0; it < n_it; ++it) {
    const int st = it & 1;
    cp_async_wait<0>();
    __syncthreads();  // stage st (and K, V) visible; every warp is done with stage st^1 and with sDs
    if (it + 1 < n_it) {
      ld.load_tiles(it + 1, st ^ 1);
      ld.load_scalars(it + 1, st ^ 1);
    }
    cp_async_commit();
    const int h = ld.head(it), q0 = ld.q0(it);
    const uint32_t cQ = sQ + st * C::kTile, cDo = sDo + st * C::kTile;
    const float* lse = ld.sLse + st * 64;
    const float* dD = ld.sD + st * 64;

    // ---- S^T = K Q^T, dP^T = V dO^T (rows: this warp's 16 keys; columns: the block's 64 queries) ----
    float s[8][4], dp[8][4];
    two_products<HD>(s, dp, aK, cQ + oB, aV, cDo + oB);
    // ---- masking, P^T, keep bits, dS^T; dV += (P o Z)^T dO ----
    const bool edge = (k0 + 63 >= sq) || (q0 + 63 >= sq) || (a.causal && k0 + 63 > q0);
    [[maybe_unused]] uint32_t kw[4][2];  // words of strip nb/2, element parity i%2
    if constexpr (kDrop) read_keep_words<32>(ld.sM + st * 128, lane, kw);
    probs_and_dst<kDrop>(s, dp, a, sl2, kl0, lane, k0, q0, edge, lse, dD, kw);
    uint32_t pa[4][4];
    pack_a(s, pa);
    mma_a_tileT<HD>(dv, pa, cDo + oA);
    // ---- dK += dS^T Q ----
    pack_a(dp, pa);
    mma_a_tileT<HD>(dk, pa, cQ + oA);
    // ---- fast mode: dQ += dS K through shared memory, fp32 atomics ----
    if (a.dq_fast) dq_atomic<HD>(a.dq_acc, a.hq, sq, pa, sDs, sK + oA, tok0, h, q0, kl0, warp, lane);
    if (it + 1 < n_it) ld.gen_words(it + 1, st ^ 1);  // stage st^1 is read after the next barrier
  }
  cp_async_wait<0>();

  // ---- epilogue: dK * scale, dV into dQKV's key / value head columns ----
  store_dk_dv<HD>(a, dk, dv, tok0, k0 + kl0, hk, lane);
}

// The deterministic dQ kernel's dS of one key block from kv0, in place of s (rows: the warp's 16 queries from wrow):
// the edge mask, P = exp2(S * c - LSE), its keep bit (word kw, the forward's layout), dS = P o (dP o Z - D).
// The kernel arguments come as values: a load through `const Args&` cannot be speculated, and `a.causal && col > row`
// would become a branch per element.
template <bool kDrop>
__device__ __forceinline__ void ds_rows(float (&s)[8][4], const float (&dp)[8][4], uint32_t kw, float keep_scale,
                                        float sl2, const float (&lse2)[2], const float (&dd)[2], bool causal, bool edge,
                                        int sq, int kv0, int wrow, int lane) {
#pragma unroll
  for (int nb = 0; nb < 8; ++nb)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float x = s[nb][i];
      if (edge) {
        const int col = kv0 + 8 * nb + 2 * (lane & 3) + (i & 1);
        const int row = wrow + (lane >> 2) + 8 * (i >> 1);
        if (col >= sq || row >= sq || (causal && col > row)) x = -INFINITY;
      }
      const float p = fast_exp2(__fmaf_rn(x, sl2, -lse2[i >> 1]));
      float zf = 1.f;
      if constexpr (kDrop) zf = ((kw >> (4 * nb + i)) & 1u) ? keep_scale : 0.f;
      s[nb][i] = dst_el(p, dp[nb][i], zf, dd[i >> 1]);  // dS
    }
}

// dQ * scale (bf16) of the warp's rows into dQKV's query head h columns (sq by value, as in ds_rows: read through `a`
// it is loaded again here).
template <int HD>
__device__ __forceinline__ void store_dq(const Args& a, const float (&dq)[HD / 8][4], int sq, int64_t tok0, int h,
                                         int wrow, int lane) {
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = wrow + (lane >> 2) + 8 * hh;
    if (r < sq) {
      __nv_bfloat16* dst = a.dqkv + (tok0 + r) * a.dqkv_stride + h * HD + 2 * (lane & 3);
#pragma unroll
      for (int nb = 0; nb < HD / 8; ++nb)
        *reinterpret_cast<uint32_t*>(dst + 8 * nb) = pack_bf16(dq[nb][2 * hh] * a.scale, dq[nb][2 * hh + 1] * a.scale);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Deterministic dQ kernel.
// ---------------------------------------------------------------------------------------------------------
template <int HD, DropoutMode kMode, int R, int TW>
__global__ void __launch_bounds__(128, 1) attn_bwd_dq_kernel(const Args a) {
  using C = Cfg<HD>;
  constexpr int RB = C::kRowBytes, DB = C::kDB;
  constexpr bool kDrop = kMode != DropoutMode::None;
  using L = Loader<HD>;
  const uint32_t s0 = attn::smem_addr(dynamic_smem());
  const uint32_t sQ = s0 + C::kDqOffQ, sDo = s0 + C::kDqOffDo, sK = s0 + C::kDqOffK, sV = s0 + C::kDqOffV;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  (void)tid;
  const auto cta = attn::bwd_cta_in_order<int>(blockIdx.x, blockIdx.y, gridDim.y, a.hq, a.causal);
  const int qb = cta.block, h = cta.head, b = cta.batch, hk = h / a.group;
  const int sq = a.sq, q0 = qb * 64, wrow = q0 + warp * 16;
  const int n_kv = attn::key_blocks_visited(sq, q0, 64, 64, a.causal);
  const int64_t tok0 = static_cast<int64_t>(b) * sq;
  const __nv_bfloat16* gK = a.qkv + tok0 * a.qkv_stride + (a.hq + hk) * HD;
  const __nv_bfloat16* gV = gK + a.hkv * HD;

  L::load(sQ, a.qkv + (tok0 + q0) * a.qkv_stride + h * HD, a.qkv_stride, q0, sq);
  L::load(sDo, a.dout + (tok0 + q0) * a.dout_stride + h * HD, a.dout_stride, q0, sq);
  L::load(sK, gK, a.qkv_stride, 0, sq);
  L::load(sV, gV, a.qkv_stride, 0, sq);
  cp_async_commit();

  const uint32_t bh = static_cast<uint32_t>(b * a.hq + h);
  const uint32_t r16 = static_cast<uint32_t>(wrow / 16);
  float lse2[2], dd[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const int r = wrow + (lane >> 2) + 8 * hh;
    lse2[hh] = r < sq ? a.lse[static_cast<int64_t>(bh) * sq + r] * kLog2e : 0.f;
    dd[hh] = r < sq ? a.dsum[static_cast<int64_t>(bh) * a.sq_pad + r] : 0.f;
  }
  const uint32_t oA = off_a(lane, RB), oB = off_b(lane, RB);
  const float sl2 = a.scale_log2;

  float dq[DB][4];
  zero_frags(dq);

  for (int j = 0; j < n_kv; ++j) {
    const int st = j & 1;
    cp_async_wait<0>();
    __syncthreads();  // stage st visible; every warp is done with stage st^1
    if (j + 1 < n_kv) {
      const int64_t off = static_cast<int64_t>((j + 1) * 64) * a.qkv_stride;
      L::load(sK + (st ^ 1) * C::kTile, gK + off, a.qkv_stride, (j + 1) * 64, sq);
      L::load(sV + (st ^ 1) * C::kTile, gV + off, a.qkv_stride, (j + 1) * 64, sq);
    }
    cp_async_commit();
    const int kv0 = j * 64;
    if (a.causal && kv0 > wrow + 15) continue;  // every key of the block follows this warp's rows

    [[maybe_unused]] uint32_t kw = 0;
    if constexpr (kDrop) kw = keep_word<kMode, R, TW>(a, bh, r16, static_cast<uint32_t>(j), static_cast<uint32_t>(lane));

    const uint32_t cK = sK + st * C::kTile, cV = sV + st * C::kTile;
    float s[8][4], dp[8][4];
    two_products<HD>(s, dp, sQ + warp * 16 * RB + oA, cK + oB, sDo + warp * 16 * RB + oA, cV + oB);

    const bool edge = (kv0 + 63 >= sq) || (wrow + 15 >= sq) || (a.causal && kv0 + 63 > wrow);
    ds_rows<kDrop>(s, dp, kw, a.keep_scale, sl2, lse2, dd, a.causal, edge, sq, kv0, wrow, lane);
    uint32_t pa[4][4];
    pack_a(s, pa);
    mma_a_tileT<HD>(dq, pa, cK + oA);
  }
  cp_async_wait<0>();
  store_dq<HD>(a, dq, sq, tok0, h, wrow, lane);
}

// ---------------------------------------------------------------------------------------------------------
// Instance entry points (explicitly instantiated in attention_bwd_hd*.cu).
// ---------------------------------------------------------------------------------------------------------
// kernel<<<(heads x batch, SQ / 64), 128, smem>>>(a) (tile_order.hpp: bwd_cta_in_order), its shared-memory attribute
// set once per kernel (the forward's cache: not on every launch inside a timed region).
template <int HD, class K>
void launch_on_blocks(K kernel, int smem, const Args& a, int heads, int batch, cudaStream_t s) {
  attn::ensure_smem_attribute(attn::Instance{reinterpret_cast<const void*>(kernel), Cfg<HD>::kThreads, smem}, false);
  const dim3 grid = bwd_grid((a.sq + 63) / 64, heads, batch);
  kernel<<<grid, Cfg<HD>::kThreads, smem, s>>>(a);
  DB_CUDA_LAUNCH();
}

template <int HD, DropoutMode M, int R, int TW>
void launch_dq_instance(const Args& a, int batch, cudaStream_t s) {
  launch_on_blocks<HD>(attn_bwd_dq_kernel<HD, M, R, TW>, Cfg<HD>::kSmemDq, a, a.hq, batch, s);
}

template <int HD, DropoutMode M, int R, int TW>
void launch_instance(const Args& a, int batch, bool deterministic, cudaStream_t s) {
  launch_on_blocks<HD>(attn_bwd_main_kernel<HD, M, R, TW>, Cfg<HD>::kSmemMain, a, a.hkv, batch, s);
  if (deterministic) launch_dq_instance<HD, M, R, TW>(a, batch, s);
}

template <int HD, DropoutMode M, int R, int TW>
void instance_attributes(cudaFuncAttributes* main_kernel, cudaFuncAttributes* dq_kernel) {
  DB_CUDA(cudaFuncGetAttributes(main_kernel, attn_bwd_main_kernel<HD, M, R, TW>));
  DB_CUDA(cudaFuncGetAttributes(dq_kernel, attn_bwd_dq_kernel<HD, M, R, TW>));
}

}  // namespace attn_bwd
}  // namespace dropbench

// Explicit instantiation of one instance (attention_bwd_hd*.cu); the fused set covers dispatch.cuh's kPhiloxRounds x
// kThresholdBits (a value missing here fails the link of attention_bwd.cu's dispatch).
#define DB_ATTN_BWD_INSTANCE(HD, M, R, TW)                                                                         \
  template void dropbench::attn_bwd::launch_instance<HD, M, R, TW>(const dropbench::attn_bwd::Args&, int, bool,   \
                                                                    cudaStream_t);                                 \
  template void dropbench::attn_bwd::launch_dq_instance<HD, M, R, TW>(const dropbench::attn_bwd::Args&, int,       \
                                                                       cudaStream_t);                              \
  template void dropbench::attn_bwd::instance_attributes<HD, M, R, TW>(cudaFuncAttributes*, cudaFuncAttributes*);
#define DB_ATTN_BWD_FUSED_INSTANCES(HD, R)                  \
  DB_ATTN_BWD_INSTANCE(HD, dropbench::DropoutMode::Fused, R, 8)  \
  DB_ATTN_BWD_INSTANCE(HD, dropbench::DropoutMode::Fused, R, 16) \
  DB_ATTN_BWD_INSTANCE(HD, dropbench::DropoutMode::Fused, R, 32)
