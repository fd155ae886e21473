// The consumer warpgroups of the wgmma attention forward: per tile, the state of the pipelined block loop (the O
// and S accumulators, P, the keep words, the online softmax's row max and sum, the dropout state), the loop
// (mainloop.cuh) and the epilogue (epilogue.cuh).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/attention_kernel.cuh"  // KernelArgs
#include "kernels/attention/wgmma/dropout_apply.cuh"
#include "kernels/attention/wgmma/epilogue.cuh"
#include "kernels/attention/wgmma/mainloop.cuh"
#include "kernels/attention/wgmma/smem.cuh"
#include "kernels/attention/wgmma/tile_scheduler.cuh"
#include "kernels/common/ptx.cuh"

namespace dropbench {
namespace attn_wg {

// Consumer warpgroup wgi (1 or 2): every tile of the CTA. sq = sk: the sequence length.
// The per-tile arrays (accumulators, P, keep words, the softmax's row state, the dropout's words and masks) are
// this function's locals, which the parts (DropoutApply, Gemms, BlockLoop) hold by reference: held as members of
// those structs instead, they reach ptxas in another order and it schedules and allocates them differently.
template <class C, DropoutMode kMode, int R, int TW, bool kCausal>
__device__ __forceinline__ void consume(const SmemLayout<C>& sm, const TileScheduler<C, kCausal>& sched,
                                        const attn::KernelArgs& a, int sq, int sk, int wgi) {
  using namespace ptx;
  constexpr int HD = C::kHeadDim, BN = C::kBc, ST = C::kStages;
  constexpr int PK = BN / 16;  // k-steps of O += P V
  constexpr int NT = BN / 64;  // 16x64 mask tiles per warp per key block
  constexpr int NS = BN / 2;   // S accumulators per thread
  constexpr int NO = HD / 2;   // O accumulators per thread
  constexpr bool kDrop = kMode != DropoutMode::None;
  constexpr bool kPersist = C::kPersist;
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

}  // namespace attn_wg
}  // namespace dropbench
