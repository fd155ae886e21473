// Keep bits of the wgmma attention backward. Consumer c holds S^T of its 64 keys (tile column c64 = k0/64 + c) x the
// block's 64 queries (4 query strips): per warp exactly the mma backward's transposed layout, so the lane reads its
// 8 words from a shared-memory stage of the block's 4 x 32 words (bwd_tile.cuh: read_keep_words, probs_and_dst):
//   mode Mask   the producer's bulk copy of the mask words into the ring stage (4 strips x 2 tile columns);
//   mode Fused  each consumer thread generates one word (strip = its warp, word = its lane; attn_keep_word, the
//               forward's and the RNG kernel's function) while the block's S^T / dP^T GEMMs run, stores it, and the
//               warpgroup meets at a named barrier before the reads (one buffer per ring stage).
// Words of tiles that are not read (strips past SQ, the tile column past SK, causal tiles above the diagonal) are 0
// in both modes, so mode Mask and mode Fused give the same bits everywhere.
#pragma once
#include <cstdint>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/bwd/bwd_tile.cuh"
#include "kernels/attention/bwd/wgmma/config.cuh"
#include "kernels/common/ptx.cuh"

namespace dropbench {
namespace attn_bwd_wg {

template <class C, DropoutMode kMode>
struct KeepBits {
  const Smem<C>& sm;
  const Args& a;
  const int c, warp, lane;
  const uint32_t c64;  // the consumer's tile column

  // Only an edge block (mainloop.cuh's edge) has tiles that are not read: otherwise q0 + 63 < SQ puts its four strips
  // below rows16, kc0 + 63 < SQ its tile column below cols64, and causal kc0 + 63 <= q0 the whole tile at or below
  // the diagonal (64 c64 = kc0 < q0 <= 16 r16), so tile_read holds for all four strips: on a non-edge block generate
  // does not evaluate it and read zeroes no words.
  //
  // Mode Fused, right after the block's GEMMs are issued: this thread's word into the buffer of ring stage s.
  __device__ __forceinline__ void generate(uint32_t bh, int q0, int s, bool edge) const {
    if constexpr (kMode == DropoutMode::Fused) {
      const uint32_t r16 = static_cast<uint32_t>(q0 / 16 + warp);
      *sm.template at<uint32_t>(sm.words(c, s) + 4 * (32 * warp + lane)) =
          attn_bwd::regen_word(a, bh, r16, c64, static_cast<uint32_t>(lane), !edge);
    }
  }
  // The lane's 8 words of the block in ring stage s, after the S^T / dP^T wait.
  __device__ __forceinline__ void read(int s, int q0, bool edge, uint32_t (&kw)[4][2]) const {
    if constexpr (kMode == DropoutMode::Fused) {
      ptx::named_bar_sync(1 + c, 128);  // every word of the block stored
      attn_bwd::read_keep_words<32>(sm.template at<const uint32_t>(sm.words(c, s)), lane, kw);
    } else if constexpr (kMode == DropoutMode::Mask) {
      attn_bwd::read_keep_words<64>(sm.template at<const uint32_t>(sm.mask(s)) + 32 * c, lane, kw);
      if (edge) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (!attn_bwd::tile_read(a, static_cast<uint32_t>(q0 / 16 + j), c64)) kw[j][0] = kw[j][1] = 0u;
        }
      }
    }
  }
};

}  // namespace attn_bwd_wg
}  // namespace dropbench
