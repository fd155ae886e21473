// The FlashAttention-2-style forward kernel template (mma.sync m16n8k16, bf16 in, fp32 accumulate).
// Included by attention.cu (which instantiates and dispatches it) and by benchmarks that try other tilings.
//
// One CTA = one (batch b, query head h, block of kBr query rows). kWarps warps, each owning kWM strips of 16
// query rows. The CTA walks the key/value blocks of kBc keys: S = Q K^T (A = Q from shared memory or
// registers, B = K from shared memory), online softmax (log2 domain, fp32), dropout on P, P converted to
// bf16 in registers and used as the A operand of O += P V (B = V via ldmatrix.trans). K/V blocks are
// double-buffered in XOR-swizzled shared memory, loaded with cp.async one block ahead: one __syncthreads
// per key block. See docs/attention.md.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/attention_dropout.cuh"
#include "kernels/attention/ldsm_layout.cuh"
#include "kernels/attention/tile_order.hpp"
#include "kernels/common/ptx.cuh"
#include "kernels/rng/dropout_scheme.cuh"

namespace dropbench {
namespace attn {

// ---------------------------------------------------------------------------------------------------------
// Tiling configuration.
// ---------------------------------------------------------------------------------------------------------
template <int HD, int WARPS, int WM, int BC, int MINB, bool SKIP_RESCALE = false>
struct Cfg {
  static constexpr int kHeadDim = HD;
  static constexpr int kWarps = WARPS;
  static constexpr int kWM = WM;               // 16-row strips per warp
  static constexpr int kBr = WARPS * WM * 16;  // query rows per CTA
  static constexpr int kBc = BC;               // keys per block
  static constexpr int kThreads = WARPS * 32;
  static constexpr int kMinBlocks = MINB;      // __launch_bounds__ min blocks per SM
  static constexpr bool kQInRegs = (WM == 1);  // one strip per warp: Q fragments fit in registers
  // Skip the O rescale of a key block when no row max of the warp changed (alpha == 1 exactly: the result is
  // bit for bit the same either way; a warp vote and a branch against 2*WM*HD/8 FMULs).
  static constexpr bool kSkipRescale = SKIP_RESCALE;
  static constexpr int kRowBytes = HD * 2;
  static constexpr int kTiles = BC / 64;       // 16x64 mask tiles per strip per key block
  static constexpr int kSmemQ = kBr * kRowBytes;
  static constexpr int kSmemKV = BC * kRowBytes;  // one K (or V) stage
  static constexpr int kSmem = kSmemQ + 4 * kSmemKV;  // Q + 2 K stages + 2 V stages
  static_assert(HD == 64 || HD == 128, "head_dim 64 or 128");
  static_assert(BC % 64 == 0, "key block must be a multiple of the 64-column mask tile");
};

// Default tilings (what launch_attention uses). Skipping the no-op rescale is exact, so instances with and
// without it give bit-identical results; it pays in mode none at dH 128 (+3-4%) and, since the 8-bit tile
// words need no bit gather (fewer live registers), in non-causal fused mode; it costs mode mask and causal
// fused mode registers (spills) and dH 64 everything (-10%), as measured on the H200 (docs/attention.md).
using CfgHd128None = Cfg<128, 4, 2, 64, 2, true>;
using CfgHd128 = Cfg<128, 4, 2, 64, 2, false>;
using CfgHd128FusedNc = CfgHd128None;  // fused, non-causal
using CfgHd64 = Cfg<64, 4, 2, 64, 2, false>;

// Kernel arguments, prepared on the host from AttentionParams.
struct KernelArgs {
  const __nv_bfloat16* qkv;
  __nv_bfloat16* o;
  float* lse;
  const uint32_t* mask;  // mode Mask: the mask's base shifted back by mask_r16_0 strips (see mask_strip)
  int64_t qkv_stride;  // elements
  int64_t o_stride;    // elements
  int sq, hq, hkv, group;
  float scale_log2;    // softmax_scale * log2(e)
  float softmax_scale;
  float keep_scale;
  uint32_t seed_lo, seed_hi, offset, drop;
  uint32_t rows16, cols64;
  int row0;              // first query row of the window (multiple of kBr)
  uint32_t mask_rows16;  // strips per matrix the mask (mode Mask) or mask_out (mode Fused) holds (its MaskWindow)
  int wrows, batch;      // query rows of the window, batch (the persistent wgmma kernel's tile count)
  // Mode Fused: where the kernel also stores the keep words it generates (null: nothing is stored), shifted back
  // like `mask`. A run-time pointer rather than a kernel instance of its own: a launch without it pays one test of
  // the pointer per key block (docs/attention.md has the static cost), where an instance per fused instance would
  // double the fused instances' compile time.
  uint32_t* mask_out;
};

// ---------------------------------------------------------------------------------------------------------
// PTX helpers.
// ---------------------------------------------------------------------------------------------------------
// The wrappers themselves are kernels/common/ptx.cuh's (one set for every kernel family); this family's code and the
// backward name them here.
using ptx::cp_async16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::fast_exp2;
using ptx::ldsm_x4;
using ptx::ldsm_x4_trans;
using ptx::mma_bf16;
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return ptx::smem_u32(p); }

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Copies ROWS x HD bf16 tiles from global memory into XOR-swizzled shared memory (16-byte chunk c of row r
// lands at chunk c ^ (r & 7), so ldmatrix reads of 8 rows hit 8 distinct bank groups). Thread t always moves
// chunk t % (HD/8) of rows t / (HD/8) + i * kRowsPerPass: its source pointer and destination offset are
// computed once. Rows at or past `nvalid` are zero-filled (ragged sequence end).
template <int ROWS, int HD, int THREADS>
struct TileLoader {
  static constexpr int kChunks = HD / 8;
  static constexpr int kRowsPerPass = THREADS / kChunks;
  static constexpr int kPasses = ROWS / kRowsPerPass;
  static_assert(THREADS % kChunks == 0 && ROWS % kRowsPerPass == 0 && kRowsPerPass % 8 == 0, "tile/thread mismatch");
  __device__ __forceinline__ static int row0() { return static_cast<int>(threadIdx.x) / kChunks; }
  // g: the tile's row 0 column 0; rows `stride` elements apart; first_row: its row index (for the bound).
  __device__ __forceinline__ static void load(uint32_t s, const __nv_bfloat16* g, int64_t stride, int first_row,
                                              int nvalid) {
    const int c = static_cast<int>(threadIdx.x) % kChunks, r0 = row0();
    const __nv_bfloat16* src = g + r0 * stride + c * 8;
    const int64_t step = kRowsPerPass * stride;
    const uint32_t dst = s + r0 * (HD * 2) + ((c ^ (r0 & 7)) << 4);
    const int left = nvalid - first_row - r0;  // pass i is valid iff i * kRowsPerPass < left
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const bool valid = i * kRowsPerPass < left;
      // Invalid rows: the copy's source operand is predicated off in hardware (zero-fill, no memory access),
      // so the row pointer may run past the end of the buffer.
      cp_async16(dst + i * kRowsPerPass * (HD * 2), src, valid);
      src += step;
    }
  }
};

// ---------------------------------------------------------------------------------------------------------
// The kernel's parts (state passed explicitly; s: the warp's S / P fragments, WM strips x NT tiles x 8 n8-blocks x
// (c0..c3); o: its O fragments; row_max / row_sum: the online softmax's running max and sum per strip and half).
// ---------------------------------------------------------------------------------------------------------
// Dropout on P: the dropped elements of each 16x64 tile become 0.
template <class C>
__device__ __forceinline__ void apply_keep_words(float (&s)[C::kWM][C::kTiles][8][4], const uint32_t (&kw)[C::kWM][C::kTiles]) {
#pragma unroll
  for (int mi = 0; mi < C::kWM; ++mi)
#pragma unroll
    for (int t = 0; t < C::kTiles; ++t) apply_keep_word(s[mi][t], kw[mi][t]);
}

// Keys past the end and (causal) keys after the query row -> -inf, on the key block starting at kv0.
template <class C, bool kCausal>
__device__ __forceinline__ void mask_edge(float (&s)[C::kWM][C::kTiles][8][4], int kv0, int sk, int wrow, int lane) {
  constexpr int WM = C::kWM, BC = C::kBc, NT = C::kTiles;
  const bool edge = (kv0 + BC > sk) || (kCausal && kv0 + BC - 1 > wrow);
  if (edge) {
#pragma unroll
    for (int mi = 0; mi < WM; ++mi)
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int nb = 0; nb < 8; ++nb)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int col = kv0 + t * 64 + nb * 8 + 2 * (lane & 3) + (i & 1);
            const int row = wrow + mi * 16 + (lane >> 2) + 8 * (i >> 1);
            if (col >= sk || (kCausal && col > row)) s[mi][t][nb][i] = -INFINITY;
          }
  }
}

// O /= rowsum (times 1/keep with dropout) stored as bf16, LSE = m*scale + ln(rowsum).
template <class C, bool kDrop>
__device__ __forceinline__ void store_o_lse(const KernelArgs& a, const float (&o)[C::kWM][C::kHeadDim / 8][4],
                                            const float (&row_max)[C::kWM][2], const float (&row_sum)[C::kWM][2], int sq, int b,
                                            int h, int wrow, int lane) {
  constexpr int WM = C::kWM, HD = C::kHeadDim, DB = HD / 8;
#pragma unroll
  for (int mi = 0; mi < WM; ++mi) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float l = row_sum[mi][hh];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = 1.f / l;
      const float fac = kDrop ? inv * a.keep_scale : inv;
      const int row = wrow + mi * 16 + (lane >> 2) + 8 * hh;
      if (row < sq) {
        __nv_bfloat16* dst = a.o + (static_cast<int64_t>(b) * sq + row) * a.o_stride + h * HD + 2 * (lane & 3);
#pragma unroll
        for (int d = 0; d < DB; ++d)
          *reinterpret_cast<uint32_t*>(dst + d * 8) = pack_bf16(o[mi][d][2 * hh] * fac, o[mi][d][2 * hh + 1] * fac);
        if (a.lse != nullptr && (lane & 3) == 0)
          a.lse[(static_cast<int64_t>(b) * a.hq + h) * sq + row] = row_max[mi][hh] * a.softmax_scale + logf(l);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// The kernel.
// ---------------------------------------------------------------------------------------------------------
// The warp's output accumulators at 0 and its rows' running max and sum at -inf and 0, before the key blocks.
template <int WM, int DB>
__device__ __forceinline__ void init_softmax_state(float (&o)[WM][DB][4], float (&row_max)[WM][2], float (&row_sum)[WM][2]) {
#pragma unroll
  for (int mi = 0; mi < WM; ++mi) {
#pragma unroll
    for (int d = 0; d < DB; ++d) o[mi][d][0] = o[mi][d][1] = o[mi][d][2] = o[mi][d][3] = 0.f;
    row_max[mi][0] = row_max[mi][1] = -INFINITY;
    row_sum[mi][0] = row_sum[mi][1] = 0.f;
  }
}

// Key block j's keep words before S: mode Mask issues their loads now (consumed after the softmax), mode Fused starts
// them at 0 (the Philox calls OR their parts in across the k-steps of S).
template <DropoutMode kMode, bool kCausal, int WM, int NT>
__device__ __forceinline__ void begin_keep_words(uint32_t (&kw)[WM][NT], const MaskStrip (&mstrip)[WM], int j) {
  if constexpr (kMode == DropoutMode::Mask) {
#pragma unroll
    for (int mi = 0; mi < WM; ++mi)
#pragma unroll
      for (int t = 0; t < NT; ++t) kw[mi][t] = mask_tile_word<kCausal>(mstrip[mi], static_cast<uint32_t>(j * NT + t));
  }
  if constexpr (kMode == DropoutMode::Fused) {
#pragma unroll
    for (int mi = 0; mi < WM; ++mi)
#pragma unroll
      for (int t = 0; t < NT; ++t) kw[mi][t] = 0u;
  }
}

// The warp's dropout state for the whole CTA: mode Mask its strips' mask pointers, mode Fused the Philox stream and
// its strips' first tile index (r16 * cols64).
template <DropoutMode kMode, int WM>
__device__ __forceinline__ void init_keep_state(MaskStrip (&mstrip)[WM], FusedStream& fstream, uint32_t (&tile_row)[WM],
                                                const KernelArgs& a, uint32_t bh, int wrow, int lane) {
  if constexpr (kMode == DropoutMode::Mask) {
#pragma unroll
    for (int mi = 0; mi < WM; ++mi)
      mstrip[mi] =
          mask_strip(a.mask, bh, a.rows16, a.mask_rows16, a.cols64, static_cast<uint32_t>(wrow / 16 + mi), lane);
  }
  if constexpr (kMode == DropoutMode::Fused) {
    fstream = FusedStream{a.seed_lo, a.seed_hi, bh, a.offset, a.drop};
#pragma unroll
    for (int mi = 0; mi < WM; ++mi) tile_row[mi] = static_cast<uint32_t>(wrow / 16 + mi) * a.cols64;
  }
}

// K and V tiles from gK / gV (rows first_row ..; rows at or past sk zero-filled) into the stage at sK / sV.
template <class C>
__device__ __forceinline__ void load_kv(uint32_t sK, uint32_t sV, const __nv_bfloat16* gK, const __nv_bfloat16* gV,
                                        int64_t stride, int first_row, int sk) {
  using KVLoad = TileLoader<C::kBc, C::kHeadDim, C::kThreads>;
  KVLoad::load(sK, gK, stride, first_row, sk);
  KVLoad::load(sV, gV, stride, first_row, sk);
}

// Mode Fused with a mask output: the keep words key block j generated, written as the RNG kernel writes its mask.
template <class C, bool kCausal>
__device__ __forceinline__ void store_block_keep_words(const KernelArgs& a, const uint32_t (&kw)[C::kWM][C::kTiles],
                                                       uint32_t bh, int wrow, int lane, int j) {
  if (a.mask_out == nullptr) return;
#pragma unroll
  for (int mi = 0; mi < C::kWM; ++mi)
    store_mask_words<kCausal, C::kTiles>(a.mask_out, bh, a.rows16, a.mask_rows16, a.cols64,
                                         static_cast<uint32_t>(wrow / 16 + mi), lane,
                                         static_cast<uint32_t>(j * C::kTiles), [&](int t) { return kw[mi][t]; });
}

// Q's A fragments of every k-step, into registers (the configurations that keep Q there).
template <int KS>
__device__ __forceinline__ void load_q_frags(uint32_t (&qf)[KS][4], uint32_t aQ) {
#pragma unroll
  for (int kk = 0; kk < KS; ++kk) ldsm_x4(qf[kk], at(aQ, kk));
}

// S = Q K^T of key block j (s zeroed here). A = Q from the registers qf (C::kQInRegs) or from shared memory at aQ,
// B = K at aK. Mode Fused spreads the block's Philox calls over the k-steps, ORing their parts into kw.
template <class C, DropoutMode kMode, int R, int TW, int QN>
__device__ __forceinline__ void qk_product(float (&s)[C::kWM][C::kTiles][8][4], uint32_t (&kw)[C::kWM][C::kTiles],
                                           const uint32_t (&qf)[QN][4], uint32_t aQ, uint32_t aK,
                                           const FusedStream& fstream, const uint32_t (&tile_row)[C::kWM], int j,
                                           int lane) {
  constexpr int WM = C::kWM, BC = C::kBc, RB = C::kRowBytes, NT = C::kTiles, KS = C::kHeadDim / 16;
#pragma unroll
  for (int mi = 0; mi < WM; ++mi)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int nb = 0; nb < 8; ++nb) s[mi][t][nb][0] = s[mi][t][nb][1] = s[mi][t][nb][2] = s[mi][t][nb][3] = 0.f;

#pragma unroll
  for (int kk = 0; kk < KS; ++kk) {
    uint32_t qa[WM][4];
#pragma unroll
    for (int mi = 0; mi < WM; ++mi) {
      if constexpr (C::kQInRegs) {
#pragma unroll
        for (int i = 0; i < 4; ++i) qa[mi][i] = qf[kk][i];
      } else {
        ldsm_x4(qa[mi], at(aQ, kk) + mi * 16 * RB);
      }
    }
#pragma unroll
    for (int n2 = 0; n2 < BC / 16; ++n2) {
      uint32_t kb[4];
      ldsm_x4(kb, at(aK, kk) + n2 * 16 * RB);
#pragma unroll
      for (int mi = 0; mi < WM; ++mi) {
        mma_bf16(s[mi][n2 / 4][(2 * n2) % 8], qa[mi], kb[0], kb[1]);
        mma_bf16(s[mi][n2 / 4][(2 * n2 + 1) % 8], qa[mi], kb[2], kb[3]);
      }
    }
    if constexpr (kMode == DropoutMode::Fused) {
      constexpr int kCalls = WM * NT * kCallsPerWord<TW>;
      // Calls [kk*kCalls/KS, (kk+1)*kCalls/KS) happen in this k-step.
#pragma unroll
      for (int ci = kk * kCalls / KS; ci < (kk + 1) * kCalls / KS; ++ci) {
        const int k = ci % kCallsPerWord<TW>;
        const int t = (ci / kCallsPerWord<TW>) % NT;
        const int mi = ci / (kCallsPerWord<TW> * NT);
        kw[mi][t] |= fused_word_part<R, TW>(fstream, tile_row[mi] + static_cast<uint32_t>(j * NT + t),
                                            static_cast<uint32_t>(lane), k);
      }
    }
  }
}

// Online softmax of one key block (log2 domain): the running max, P = exp2(S*c - m*c) in place, the row sums (of the
// undropped P), and O rescaled by the max's change (skipped when no row's max moved, C::kSkipRescale: exact).
template <class C>
__device__ __forceinline__ void softmax_block(float (&s)[C::kWM][C::kTiles][8][4],
                                              float (&o)[C::kWM][C::kHeadDim / 8][4], float (&row_max)[C::kWM][2],
                                              float (&row_sum)[C::kWM][2], float sl2) {
  constexpr int WM = C::kWM, NT = C::kTiles, DB = C::kHeadDim / 8;
  float alphas[WM][2];
#pragma unroll
  for (int mi = 0; mi < WM; ++mi) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      float mx = row_max[mi][hh];
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int nb = 0; nb < 8; ++nb) mx = fmaxf(mx, fmaxf(s[mi][t][nb][2 * hh], s[mi][t][nb][2 * hh + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float ms = (mx == -INFINITY) ? 0.f : mx * sl2;
      const float alpha = fast_exp2(row_max[mi][hh] * sl2 - ms);
      row_max[mi][hh] = mx;
      float sum = 0.f;
#pragma unroll
      for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int nb = 0; nb < 8; ++nb)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float p = fast_exp2(__fmaf_rn(s[mi][t][nb][2 * hh + e], sl2, -ms));
            s[mi][t][nb][2 * hh + e] = p;
            sum += p;
          }
      row_sum[mi][hh] = __fmaf_rn(row_sum[mi][hh], alpha, sum);
      alphas[mi][hh] = alpha;
    }
  }
  bool rescale = true;
  if constexpr (C::kSkipRescale) {
    bool any = false;
#pragma unroll
    for (int mi = 0; mi < WM; ++mi) any |= (alphas[mi][0] != 1.f) | (alphas[mi][1] != 1.f);
    rescale = __any_sync(0xffffffffu, any);
  }
  if (rescale) {
#pragma unroll
    for (int mi = 0; mi < WM; ++mi)
#pragma unroll
      for (int d = 0; d < DB; ++d) {
        o[mi][d][0] *= alphas[mi][0];
        o[mi][d][1] *= alphas[mi][0];
        o[mi][d][2] *= alphas[mi][1];
        o[mi][d][3] *= alphas[mi][1];
      }
  }
}

// O += P V: P converted to bf16 in registers as the A operand, B = V at aV read transposed by ldmatrix.
template <class C>
__device__ __forceinline__ void pv_product(float (&o)[C::kWM][C::kHeadDim / 8][4],
                                           const float (&s)[C::kWM][C::kTiles][8][4], uint32_t aV) {
  constexpr int WM = C::kWM, DB = C::kHeadDim / 8, PK = C::kBc / 16, RB = C::kRowBytes;
  uint32_t pa[WM][PK][4];
#pragma unroll
  for (int mi = 0; mi < WM; ++mi)
#pragma unroll
    for (int kk = 0; kk < PK; ++kk) {
      const int t = kk / 4, nb = (2 * kk) % 8;
      pa[mi][kk][0] = pack_bf16(s[mi][t][nb][0], s[mi][t][nb][1]);
      pa[mi][kk][1] = pack_bf16(s[mi][t][nb][2], s[mi][t][nb][3]);
      pa[mi][kk][2] = pack_bf16(s[mi][t][nb + 1][0], s[mi][t][nb + 1][1]);
      pa[mi][kk][3] = pack_bf16(s[mi][t][nb + 1][2], s[mi][t][nb + 1][3]);
    }
#pragma unroll
  for (int kk = 0; kk < PK; ++kk) {
#pragma unroll
    for (int d2 = 0; d2 < DB / 2; ++d2) {
      uint32_t vb[4];
      ldsm_x4_trans(vb, at(aV, d2) + kk * 16 * RB);
#pragma unroll
      for (int mi = 0; mi < WM; ++mi) {
        mma_bf16(o[mi][2 * d2], pa[mi][kk], vb[0], vb[1]);
        mma_bf16(o[mi][2 * d2 + 1], pa[mi][kk], vb[2], vb[3]);
      }
    }
  }
}

template <class C, DropoutMode kMode, int R, int TW, bool kCausal>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks) attn_fwd_kernel(const KernelArgs a) {
  constexpr int HD = C::kHeadDim, WM = C::kWM, BC = C::kBc, RB = C::kRowBytes;
  constexpr int KS = HD / 16;      // k-steps of S = Q K^T
  constexpr int DB = HD / 8;       // n8-blocks of O
  constexpr int NT = C::kTiles;    // 64-key mask tiles per block
  constexpr bool kDrop = kMode != DropoutMode::None;

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sQ = smem_addr(smem), sK = sQ + C::kSmemQ, sV = sK + 2 * C::kSmemKV;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int qb = query_block_in_order<int>(gridDim.x, blockIdx.x, kCausal);
  const int h = blockIdx.y, b = blockIdx.z;
  const int hk = h / a.group, sq = a.sq, sk = a.sq;
  const int q0 = a.row0 + qb * C::kBr;
  const int wrow = q0 + warp * WM * 16;  // first query row of this warp
  const int n_kv = key_blocks_visited<int>(sk, q0, C::kBr, BC, kCausal);

  const __nv_bfloat16* gQ = a.qkv + static_cast<int64_t>(b) * sq * a.qkv_stride + h * HD;
  const __nv_bfloat16* gK = a.qkv + static_cast<int64_t>(b) * sq * a.qkv_stride + (a.hq + hk) * HD;
  const __nv_bfloat16* gV = gK + a.hkv * HD;

  // Prologue: Q, K_0, V_0 in one group.
  TileLoader<C::kBr, HD, C::kThreads>::load(sQ, gQ + static_cast<int64_t>(q0) * a.qkv_stride, a.qkv_stride, q0, sq);
  load_kv<C>(sK, sV, gK, gV, a.qkv_stride, 0, sk);
  cp_async_commit();

  const LdsmOffsets off = ldsm_offsets(RB);  // ldsm_layout.cuh
  const uint32_t aQ = sQ + warp * WM * 16 * RB + off.a;

  // Dropout state.
  [[maybe_unused]] MaskStrip mstrip[WM];
  [[maybe_unused]] FusedStream fstream;
  [[maybe_unused]] uint32_t tile_row[WM];  // r16 * cols64
  const uint32_t bh = static_cast<uint32_t>(b * a.hq + h);
  init_keep_state<kMode>(mstrip, fstream, tile_row, a, bh, wrow, lane);

  float o[WM][DB][4];
  float row_max[WM][2], row_sum[WM][2];
  init_softmax_state(o, row_max, row_sum);
  const float sl2 = a.scale_log2;
  [[maybe_unused]] uint32_t qf[C::kQInRegs ? KS : 1][4];  // Q's fragments (C::kQInRegs)

  for (int j = 0; j < n_kv; ++j) {
    const int st = j & 1;
    const uint32_t aK = sK + st * C::kSmemKV + off.b, aV = sV + st * C::kSmemKV + off.a;
    cp_async_wait<0>();
    __syncthreads();  // block j visible to all; every warp is done with block j-1 (the other stage)
    if (j + 1 < n_kv) {
      const int64_t off = static_cast<int64_t>((j + 1) * BC) * a.qkv_stride;
      load_kv<C>(sK + (st ^ 1) * C::kSmemKV, sV + (st ^ 1) * C::kSmemKV, gK + off, gV + off, a.qkv_stride, (j + 1) * BC,
                 sk);
    }
    cp_async_commit();
    if constexpr (C::kQInRegs) {
      if (j == 0) load_q_frags(qf, aQ);
    }

    const int kv0 = j * BC;
    const bool active = !kCausal || kv0 <= wrow + WM * 16 - 1;  // causal: not when the warp's rows all precede it
    if (!active) continue;

    // S = Q K^T (mode Fused: with the block's Philox calls; its words to mask_out if set), the edge mask, the online
    // softmax (the row sums are of the undropped P), dropout on P, O += P V.
    [[maybe_unused]] uint32_t kw[WM][NT];
    begin_keep_words<kMode, kCausal>(kw, mstrip, j);
    float s[WM][NT][8][4];
    qk_product<C, kMode, R, TW>(s, kw, qf, aQ, aK, fstream, tile_row, j, lane);
    if constexpr (kMode == DropoutMode::Fused) store_block_keep_words<C, kCausal>(a, kw, bh, wrow, lane, j);
    mask_edge<C, kCausal>(s, kv0, sk, wrow, lane);
    softmax_block<C>(s, o, row_max, row_sum, sl2);
    if constexpr (kDrop) apply_keep_words<C>(s, kw);
    pv_product<C>(o, s, aV);
  }
  cp_async_wait<0>();  // nothing outstanding at exit

  // ---- epilogue: O /= rowsum (times 1/keep with dropout), LSE = m*scale + ln(rowsum) ----
  store_o_lse<C, kDrop>(a, o, row_max, row_sum, sq, b, h, wrow, lane);
}

// ---------------------------------------------------------------------------------------------------------
// Host side helpers shared by attention.cu and benchmarks.
// ---------------------------------------------------------------------------------------------------------
// Query rows of the window [row_begin, end).
inline int window_rows(const AttentionParams& p) {
  const int64_t end = p.rows == 0 ? p.sq : std::min<int64_t>(p.sq, static_cast<int64_t>(p.row_begin) + p.rows);
  return static_cast<int>(end - p.row_begin);
}

inline KernelArgs make_kernel_args(const AttentionParams& p) {
  KernelArgs a{};
  a.qkv = p.qkv;
  a.o = p.o;
  a.lse = p.lse;
  a.mask = p.mask;
  a.qkv_stride = p.qkv_row_stride ? p.qkv_row_stride
                                  : static_cast<int64_t>(p.q_heads + 2 * p.kv_heads) * p.head_dim;
  a.o_stride = p.o_row_stride ? p.o_row_stride : static_cast<int64_t>(p.q_heads) * p.head_dim;
  a.sq = p.sq;
  a.hq = p.q_heads;
  a.hkv = p.kv_heads;
  a.group = p.q_heads / p.kv_heads;
  a.softmax_scale = p.softmax_scale > 0.f ? p.softmax_scale : 1.f / std::sqrt(static_cast<float>(p.head_dim));
  a.scale_log2 = a.softmax_scale * 1.4426950408889634f;
  a.keep_scale = p.keep_scale;
  a.seed_lo = seed_lo(p.seed);
  a.seed_hi = seed_hi(p.seed);
  a.offset = p.offset;
  a.drop = p.drop_threshold;
  const MaskGeometry g = attention_mask_geometry(p);
  a.rows16 = g.rows16();
  a.cols64 = g.cols64();
  a.row0 = p.row_begin;
  a.wrows = window_rows(p);
  a.batch = p.batch;
  const MaskWindow w = mask_window(g, static_cast<uint32_t>(p.row_begin), static_cast<uint32_t>(p.rows));
  a.mask_rows16 = w.rows16;
  // Shift the base back by the window's first strip: integer arithmetic on the device address (never
  // dereferenced outside the window's words).
  const uintptr_t shift = static_cast<uintptr_t>(w.r16_begin) * a.cols64 * kWordsPerTile * 4;
  if (p.mask != nullptr) a.mask = reinterpret_cast<const uint32_t*>(reinterpret_cast<uintptr_t>(p.mask) - shift);
  if (p.mask_out != nullptr) a.mask_out = reinterpret_cast<uint32_t*>(reinterpret_cast<uintptr_t>(p.mask_out) - shift);
  return a;
}

// One CTA per (block of br query rows of the window, query head, batch).
inline dim3 query_block_grid(const AttentionParams& p, int br) {
  return dim3(static_cast<unsigned>((window_rows(p) + br - 1) / br), static_cast<unsigned>(p.q_heads),
              static_cast<unsigned>(p.batch));
}

template <class C>
inline dim3 grid_for(const AttentionParams& p) {
  return query_block_grid(p, C::kBr);
}

}  // namespace attn
}  // namespace dropbench
