// The Hopper-native (sm_90a) attention forward kernel template: TMA loads through an mbarrier ring, a producer
// warpgroup and two consumer warpgroups (register reallocation with setmaxnreg), S = Q K^T and O += P V with
// wgmma.mma_async, online softmax in fp32, dropout through the hooks of attention_dropout.cuh. Its schedule is
// config.cuh's WgCfg; which schedule runs is dispatch.cuh's rule. docs/attention.md has the design.
//
// CTA = one (batch b, query head h, block of 128 query rows). 384 threads:
//   warpgroup 0 (producer): one thread issues the TMA loads (Q once; K_j and V_j into an ST-stage ring);
//   warpgroups 1, 2 (consumers): 64 query rows each; warp w of consumer c owns rows q0 + 64c + 16w .. +15,
//   which is exactly one 16-row strip of the counter scheme's mask tiles, so the dropout hooks apply per 64-key
//   slice of the m64nBN accumulator unchanged.
// Shared memory (128-byte swizzle, as TMA writes it and wgmma reads it): every tile is stored as HD/64 column
// slices of 64 bf16 (128 bytes) per row; a slice of R rows is R*128 bytes, 8-row groups 1024 bytes apart.
//   Q (A of S, K-major), K (B of S, K-major): k-step kk reads slice kk/4 at byte 32*(kk%4) of each row.
//   V (B of P V, MN-major: keys are K, dH is N): k-step kk (16 keys) starts 16*128 bytes further; the dH
//   slices are LBO = BN*128 bytes apart, 8-key groups SBO = 1024.
// Consumer main loop, software-pipelined inside the warpgroup (block j):
//   [turn] issue S_j = Q K_j^T; issue O += P_{j-1} V_{j-1} [pass the turn]; [fused: Philox for block j's
//   keep words]; wait S_j; mask + online softmax + dropout on S_j (overlaps P_{j-1} V_{j-1} and the other
//   warpgroup's GEMMs on the tensor cores); wait PV; release stage j-1; rescale O; P_j -> bf16 registers.
// Ping-pong between the two consumer warpgroups (two named barriers): a warpgroup issues its GEMMs only in its
// turn and then hands the turn over, so one warpgroup's softmax runs under the other's GEMMs.
// Mode fused: each consumer thread runs the Philox calls of its own keep words, while the tensor cores run.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <cuda.h>
#include <cuda_bf16.h>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/attention_dropout.cuh"
#include "kernels/attention/attention_kernel.cuh"  // KernelArgs, make_kernel_args, fast_exp2, pack_bf16
#include "kernels/attention/wgmma/config.cuh"
#include "kernels/attention/wgmma/dropout_apply.cuh"
#include "kernels/attention/wgmma/epilogue.cuh"
#include "kernels/attention/wgmma/mainloop.cuh"
#include "kernels/attention/wgmma/producer.cuh"
#include "kernels/attention/wgmma/smem.cuh"
#include "kernels/attention/wgmma/softmax.cuh"
#include "kernels/attention/wgmma/tile_scheduler.cuh"
#include "kernels/common/check.hpp"
#include "kernels/common/ptx.cuh"
#include "kernels/rng/dropout_scheme.cuh"

namespace dropbench {
namespace attn_wg {

template <class C, DropoutMode kMode, int R, int TW, bool kCausal>
__global__ void __launch_bounds__(384, 1)
    attn_fwd_wgmma_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_kv,
                          const attn::KernelArgs a) {
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // A plain sm_90 / PTX pass: wgmma, setmaxnreg and TMA transaction counts exist only on sm_90a.
  __trap();
#else
  using namespace ptx;
  constexpr int HD = C::kHeadDim, BN = C::kBc, ST = C::kStages;
  constexpr int PK = BN / 16;   // k-steps of O += P V
  constexpr int NT = BN / 64;   // 16x64 mask tiles per warp per key block
  constexpr int NS = BN / 2;    // S accumulators per thread
  constexpr int NO = HD / 2;    // O accumulators per thread
  constexpr bool kDrop = kMode != DropoutMode::None;

  extern __shared__ uint8_t smem_raw[];
  const SmemLayout<C> sm(smem_u32(smem_raw));

  constexpr bool kPersist = C::kPersist;
  const int sq = a.sq, sk = a.sq;
  // The CTA's tiles; one tile per CTA: decoded here, before the barriers are set up.
  [[maybe_unused]] Tile T0{};
  const TileScheduler<C, kCausal> sched{a, sk, T0};
  if constexpr (!kPersist) sched.tile_at(0, T0);

  if (threadIdx.x == 0) init_barriers(sm, &tm_q, &tm_kv);
  __syncthreads();

  const int wgi = threadIdx.x / 128;
  if (wgi == 0) {
    // ---------------- producer ----------------
    setmaxnreg_dec<Regs::kProducer>();
    if (threadIdx.x == 0) produce(sm, sched, &tm_q, &tm_kv, a);
  } else {
    // ---------------- consumers ----------------
    setmaxnreg_inc<Regs::kConsumer>();
    const int c = wgi - 1;
    const int t = threadIdx.x - 128 * wgi;
    const int warp = t >> 5, lane = t & 31;
    const Turns<C::kPingPong> turns{c, 2 + c, 3 - c};
    if constexpr (kPersist) turns.grant_first();
    int it0 = 0;  // K/V ring position of the tile's block 0 (persistent: blocks consumed over earlier tiles)
    const Ring<ST> ring{it0};
    Tile T, T_next;
    for (int k = 0; sched.next(k, T); ++k) {
      const int q0 = T.q0, h = T.h, b = T.b, n_kv = T.n_kv;
      const bool last_tile = !sched.next(k + 1, T_next);
      const int wrow = q0 + 64 * c + 16 * warp;  // first query row of this warp's strip
      const int r_lo = wrow + (lane >> 2);       // accumulator rows r_lo (elements 0,1) and r_lo + 8 (2,3)

      // Dropout state.
      const uint32_t bh = static_cast<uint32_t>(b * a.hq + h);
      const uint32_t r16 = static_cast<uint32_t>(wrow / 16);
      [[maybe_unused]] attn::ByteThreshold bthr{};
      [[maybe_unused]] uint32_t ge7[NT][2][4];
      [[maybe_unused]] uint32_t pe[PK][4], pm[PK][4];
      DropoutApply<C, kMode, R, TW, kCausal> drop(a, bh, r16, lane, bthr, ge7, pe, pm);
      using Drop = decltype(drop);

      float o[NO];
#pragma unroll
      for (int i = 0; i < NO; ++i) o[i] = 0.f;
      float s[NS];
      uint32_t p[PK][4];
      [[maybe_unused]] uint32_t p2[PK][4];  // WAIT_SPLIT 3: the odd blocks' P (the even blocks' is p)
      float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
      const float sl2 = a.scale_log2;
      [[maybe_unused]] const int never = sq < 0 ? 1 : 0;  // 0 at run time (sq >= 1); ptxas cannot know (block_boundary)

      const Gemms<C> gemm{desc_sw128(sm.sQ + c * 64 * 128, 16, 1024), sm, s, o};

      if constexpr (!kPersist) turns.grant_first();
      mbar_wait_or_trap(sm.q_full(), static_cast<uint32_t>(k & 1));
      uint32_t kw[NT], kw_next[NT];
#pragma unroll
      for (int tt = 0; tt < NT; ++tt) kw[tt] = kw_next[tt] = 0u;
      float alpha[2];
      BlockLoop<C, kMode, R, TW, kCausal> loop{sm, ring, turns, gemm, drop, o, s, row_max, row_sum, alpha, n_kv, sk, wrow, r_lo,
                                              lane, sl2, never};
      loop.first(kw, kw_next, p);
      loop.rest(kw, kw_next, p, p2);
      loop.tail(p, p2, last_tile);

      store_o_lse<HD, kDrop>(a, o, row_max, row_sum, sq, b, h, r_lo, lane);
      it0 += n_kv;
    }  // tiles
  }
#endif
}

}  // namespace attn_wg
}  // namespace dropbench
