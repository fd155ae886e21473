// Shared memory of one wgmma attention CTA and its mbarriers. Every tile is stored as HD/64 column slices of 64
// bf16 (128 bytes) per row, with the 128-byte swizzle TMA writes and wgmma reads; a slice of R rows is R*128
// bytes, 8-row groups 1024 bytes apart. Layout (1024-byte aligned): Q, ST K stages, ST V stages, the barriers:
//   q_full         Q loaded (the producer's expect_tx, TMA's complete_tx)
//   k_full[s]      K stage s loaded; v_full[s]: V stage s loaded
//   kv_empty[s]    stage s released by the 8 consumer warps
//   q_empty        persistent: both consumers' last S GEMM of the tile done (Q may be reloaded)
#pragma once
#include <cstdint>

#include <cuda.h>

#include "kernels/common/ptx.cuh"

namespace dropbench {
namespace attn_wg {

template <class C>
struct SmemLayout {
  uint32_t sQ, sK, sV, bar;
  __device__ __forceinline__ explicit SmemLayout(uint32_t raw) {
    const uint32_t base = (raw + 1023u) & ~1023u;
    sQ = base;
    sK = base + C::kQBytes;
    sV = sK + C::kStages * C::kKVBytes;
    bar = base + C::kBarOffset;
  }
  __device__ __forceinline__ uint32_t q_full() const { return bar; }
  __device__ __forceinline__ uint32_t k_full(int s) const { return bar + 8u + 8u * s; }
  __device__ __forceinline__ uint32_t v_full(int s) const { return bar + 8u + 8u * (C::kStages + s); }
  __device__ __forceinline__ uint32_t kv_empty(int s) const { return bar + 8u + 8u * (2 * C::kStages + s); }
  __device__ __forceinline__ uint32_t q_empty() const { return bar + 8u * (C::kBarriers - 1); }  // persistent: last
};

// Thread 0: the barriers' arrival counts, and the tensor maps prefetched.
template <class C>
__device__ __forceinline__ void init_barriers(const SmemLayout<C>& sm, const CUtensorMap* tm_q, const CUtensorMap* tm_kv) {
  using namespace ptx;
  mbar_init(sm.q_full(), 1);
#pragma unroll
  for (int s = 0; s < C::kStages; ++s) {
    mbar_init(sm.k_full(s), 1);
    mbar_init(sm.v_full(s), 1);
    mbar_init(sm.kv_empty(s), 8);  // one arrival per consumer warp
  }
  if constexpr (C::kPersist) mbar_init(sm.q_empty(), 8);  // one arrival per consumer warp
  fence_mbar_init();
  prefetch_tensormap(tm_q);
  prefetch_tensormap(tm_kv);
}

}  // namespace attn_wg
}  // namespace dropbench
