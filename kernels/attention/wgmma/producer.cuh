// The producer warpgroup of the wgmma attention forward: one thread issues the TMA loads of each tile, Q once and
// K_j, V_j into an ST-stage ring of shared memory, each load completing on its mbarrier (smem.cuh); a stage is
// refilled once the 8 consumer warps have released it (kv_empty).
#pragma once
#include <cstdint>

#include <cuda.h>

#include "kernels/attention/attention_kernel.cuh"  // KernelArgs
#include "kernels/attention/wgmma/smem.cuh"
#include "kernels/attention/wgmma/tile_scheduler.cuh"
#include "kernels/common/ptx.cuh"

namespace dropbench {
namespace attn_wg {

// K and V of query head h start at these columns of the QKV rows (grouped-query heads share them).
template <int HD>
__device__ void kv_columns(const attn::KernelArgs& a, int h, int& kcol, int& vcol) {
  const int hk = h / a.group;
  kcol = (a.hq + hk) * HD;
  vcol = (a.hq + a.hkv + hk) * HD;
}

// Key block j of batch b into the next ring position it (one tile: the block j itself), stage it % ST, after the
// stage's previous use was released; it advances.
template <class C>
__device__ void load_kv(const SmemLayout<C>& sm, const CUtensorMap* tm_kv, int& it, int j, int b, int kcol, int vcol) {
  using namespace ptx;
  constexpr int ST = C::kStages, BN = C::kBc;
  const int q = C::kPersist ? it : j;
  const int s = q % ST;
  if (q >= ST) mbar_wait_or_trap(sm.kv_empty(s), ((q / ST) - 1) & 1);
  mbar_arrive_expect_tx(sm.k_full(s), C::kKVBytes);
#pragma unroll
  for (int sl = 0; sl < C::kSlices; ++sl)
    tma_load_3d(sm.sK + s * C::kKVBytes + sl * (BN * 128), tm_kv, kcol + sl * 64, j * BN, b, sm.k_full(s));
  mbar_arrive_expect_tx(sm.v_full(s), C::kKVBytes);
#pragma unroll
  for (int sl = 0; sl < C::kSlices; ++sl)
    tma_load_3d(sm.sV + s * C::kKVBytes + sl * (BN * 128), tm_kv, vcol + sl * 64, j * BN, b, sm.v_full(s));
  ++it;
}

// Thread 0 of the producer warpgroup: every tile's loads.
template <class C, bool kCausal>
__device__ __forceinline__ void produce(const SmemLayout<C>& sm, const TileScheduler<C, kCausal>& sched,
                                        const CUtensorMap* tm_q, const CUtensorMap* tm_kv, const attn::KernelArgs& a) {
  using namespace ptx;
  constexpr int HD = C::kHeadDim;
  constexpr bool kPersist = C::kPersist;
  int it = 0;  // K/V ring position: blocks loaded so far over the CTA's tiles
  Tile T;
  for (int k = 0; sched.next(k, T); ++k) {
    const int q0 = T.q0, h = T.h, b = T.b, n_kv = T.n_kv;
    // K / V columns: persistent, before the tile's first loads; one tile, after the Q load (the placement each
    // schedule's code is tuned with).
    [[maybe_unused]] int kcol = 0, vcol = 0;
    if constexpr (kPersist) kv_columns<HD>(a, h, kcol, vcol);
    // Persistent, after the first tile: block 0's K/V goes first (its stage frees before the previous tile's
    // last S GEMM is done), then Q once both consumers' last S GEMM of the previous tile is done.
    int j0 = 0;
    if (kPersist && k > 0) {
      load_kv(sm, tm_kv, it, 0, b, kcol, vcol);
      j0 = 1;
      mbar_wait_or_trap(sm.q_empty(), (k - 1) & 1);
    }
    mbar_arrive_expect_tx(sm.q_full(), C::kQBytes);
#pragma unroll
    for (int sl = 0; sl < C::kSlices; ++sl) tma_load_3d(sm.sQ + sl * (C::kBr * 128), tm_q, h * HD + sl * 64, q0, b, sm.q_full());
    if constexpr (!kPersist) kv_columns<HD>(a, h, kcol, vcol);
    for (int j = j0; j < n_kv; ++j) load_kv(sm, tm_kv, it, j, b, kcol, vcol);
  }
}

}  // namespace attn_wg
}  // namespace dropbench
