// The wgmma attention backward's producer: one thread of warpgroup 0 issues every load of the CTA. K and V of its
// 128 keys once (TMA, kv_full); then per iteration, into ring stage it % kStages once the 8 consumer warps released
// it: Q and dO of the query block (TMA over strided views of the QKV and dO buffers: rows past SQ are zero-filled by
// the copy engine), 64 LSE and 64 D values (bulk copies of whole 256-byte rows of the padded workspace arrays) and, in
// mode Mask, the block's keep words (one 256-byte bulk copy per query strip: the two tile columns of the CTA's keys
// are adjacent in the mask). Strips past SQ and a tile column past the last are not copied (their words are never
// read: tile_read).
#pragma once
#include <cstdint>

#include <cuda.h>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/bwd/wgmma/config.cuh"
#include "kernels/common/ptx.cuh"

namespace dropbench {
namespace attn_bwd_wg {

template <class C, DropoutMode kMode>
__device__ __forceinline__ void produce(const Smem<C>& sm, const Schedule& w, const Args& a, const CUtensorMap* tm_q,
                                        const CUtensorMap* tm_kv, const CUtensorMap* tm_do) {
  using namespace ptx;
  constexpr int HD = C::kHeadDim, ST = C::kStages;
  mbar_arrive_expect_tx(sm.kv_full(), 2 * C::kKBytes);
#pragma unroll
  for (int sl = 0; sl < C::kSlices; ++sl) {
    tma_load_3d(sm.k() + sl * (C::kBk * 128), tm_kv, (a.hq + w.hk) * HD + sl * 64, w.k0, w.b, sm.kv_full());
    tma_load_3d(sm.v() + sl * (C::kBk * 128), tm_kv, (a.hq + a.hkv + w.hk) * HD + sl * 64, w.k0, w.b, sm.kv_full());
  }
  const uint32_t c64 = static_cast<uint32_t>(w.k0 / 64);
  const uint32_t mask_bytes = c64 + 1 < a.geo.cols64() ? 256u : 128u;
  for (int it = 0; it < w.n_it; ++it) {
    const int s = it % ST;
    if (it >= ST) mbar_wait_or_trap(sm.empty(s), static_cast<uint32_t>(((it / ST) - 1) & 1));
    const int h = w.head(it), q0 = w.q0(it);
    const uint32_t bh = static_cast<uint32_t>(w.b * a.hq + h);
    const uint32_t r16_0 = static_cast<uint32_t>(q0 / 16);
    uint32_t strips = 0;  // mode Mask: query strips of the block that exist
    if constexpr (kMode == DropoutMode::Mask) {
      const uint32_t rows16 = a.geo.rows16();
      strips = r16_0 + 4 <= rows16 ? 4u : rows16 - r16_0;
    }
    mbar_arrive_expect_tx(sm.full(s), 2 * C::kQBytes + 512 + strips * mask_bytes);
#pragma unroll
    for (int sl = 0; sl < C::kSlices; ++sl) {
      tma_load_3d(sm.q(s) + sl * (C::kBq * 128), tm_q, h * HD + sl * 64, q0, w.b, sm.full(s));
      tma_load_3d(sm.dout(s) + sl * (C::kBq * 128), tm_do, h * HD + sl * 64, q0, w.b, sm.full(s));
    }
    const int64_t row = static_cast<int64_t>(bh) * a.sq_pad + q0;
    bulk_load(sm.lse(s), a.lse_pad + row, 256, sm.full(s));
    bulk_load(sm.dsum(s), a.dsum + row, 256, sm.full(s));
    if constexpr (kMode == DropoutMode::Mask) {
      for (uint32_t j = 0; j < strips; ++j)
        bulk_load(sm.mask(s) + j * 256, a.mask + a.geo.word_index(bh, r16_0 + j, c64, 0), mask_bytes, sm.full(s));
    }
  }
}

}  // namespace attn_bwd_wg
}  // namespace dropbench
