// Keep bits of the wgmma attention backward. Consumer c holds S^T of its 64 keys (tile column c64 = k0/64 + c) x the
// block's 64 queries (4 query strips): per warp exactly the mma backward's transposed layout, so the lane's bits lie
// in 8 words of the block's 4 x 32, staged in shared memory:
//   mode Mask   the producer's bulk copy of the mask words into the ring stage (4 strips x 2 tile columns); the lane
//               reads its 8 words (keep_layout.cuh: read_keep_words) and gathers its bits (keep_bits);
//   mode Fused  each consumer thread generates one word (strip = its warp, word = its lane; attn_keep_word<R, TW> bit
//               for bit, the forward's and the RNG kernel's function) while the block's S^T / dP^T GEMMs run, stores
//               its bytes where their readers want them (keep_layout.cuh: staged_store_off), and the warpgroup meets
//               at a named barrier before the reads (one buffer per ring stage).
// Words of tiles that are not read (strips past SQ, the tile column past SK, causal tiles above the diagonal) are 0
// in both modes, so mode Mask and mode Fused give the same bits everywhere.
#pragma once
#include <cstdint>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/attention_dropout.cuh"
#include "kernels/attention/bwd/bwd_tile.cuh"
#include "kernels/attention/bwd/keep_layout.cuh"
#include "kernels/attention/bwd/wgmma/config.cuh"
#include "kernels/common/dispatch.cuh"
#include "kernels/common/ptx.cuh"
#include "kernels/rng/dropout_scheme.cuh"

namespace dropbench {
namespace attn_bwd_wg {

// Mode Fused: the keep word `lane` of tile `tile` of matrix bh, attn_keep_word<R, TW> bit for bit. TW 8 takes the
// forward's lean form of the same bits (attention_dropout.cuh: ge_bytes7's three instructions per byte compare of an
// output word and ge7_keep_word's gather, where tile_call_bits<8> spends six per output word).
template <int R, int TW>
__device__ __forceinline__ uint32_t regen_word(const Args& a, uint32_t bh, uint32_t tile, uint32_t lane) {
  if constexpr (TW == 8) {
    const attn::FusedStream f{seed_lo(a.seed), seed_hi(a.seed), bh, a.offset, a.drop};
    uint32_t ge[2][4];
#pragma unroll
    for (int k = 0; k < 2; ++k) attn::fused_call_ge7<R>(f, attn::byte_threshold(a.drop), tile, lane, k, ge[k]);
    return attn::ge7_keep_word(ge);
  } else {
    return attn_keep_word<R, TW>(a.seed, a.offset, a.drop, bh, tile, lane);
  }
}
// The round count and threshold width are chosen at run time (a.rounds, a.tw, checked against dispatch.cuh's lists
// on the host; warp-uniform branches once per word): a binary search over each ascending list (keep_layout.cuh:
// search_list), two compares for the four round counts and at most two for the three widths, where testing the
// (R, TW) pairs one after another takes up to twelve.
__device__ __forceinline__ uint32_t regen(const Args& a, uint32_t bh, uint32_t tile, uint32_t lane) {
  return attn_bwd::search_list<kPhiloxRounds>(a.rounds, [&](auto r) {
    return attn_bwd::search_list<kThresholdBits>(
        a.tw, [&](auto tw) { return regen_word<decltype(r)::value, decltype(tw)::value>(a, bh, tile, lane); });
  });
}
static_assert(attn_bwd::ascending(kPhiloxRounds, sizeof(kPhiloxRounds) / sizeof(int)) &&
                  attn_bwd::ascending(kThresholdBits, sizeof(kThresholdBits) / sizeof(int)),
              "regen's search_list needs ascending lists");

template <class C, DropoutMode kMode>
struct KeepBits {
  const Smem<C>& sm;
  const Args& a;
  const int c, warp, lane;
  const uint32_t c64;  // the consumer's tile column
  const int kl0;             // the lane's first key row
  int st_off, ld_off;        // mode Fused: the thread's byte offsets in a buffer (generate's first byte, bits' 8)
  uint32_t sel;              // mode Mask: keep_bits' byte selector

  __device__ __forceinline__ KeepBits(const Smem<C>& sm_, const Args& a_, int c_, int warp_, int lane_, uint32_t c64_)
      : sm(sm_), a(a_), c(c_), warp(warp_), lane(lane_), c64(c64_), kl0(warp_ * 16 + (lane_ >> 2)),
        st_off(attn_bwd::staged_store_off(warp_, lane_)), ld_off(attn_bwd::staged_load_off(warp_, lane_)),
        sel(attn_bwd::keep_sel(kl0)) {
    // Opaque to ptxas, which would otherwise rebuild them from the lane index in every block (4 to 7 instructions).
    if constexpr (kMode == DropoutMode::Mask) asm("" : "+r"(sel));
    if constexpr (kMode == DropoutMode::Fused) asm("" : "+r"(st_off), "+r"(ld_off));
  }

  // Only an edge block (mainloop.cuh's edge) has tiles that are not read: otherwise q0 + 63 < SQ puts its four strips
  // below rows16, kc0 + 63 < SQ its tile column below cols64, and causal kc0 + 63 <= q0 the whole tile at or below
  // the diagonal (64 c64 = kc0 < q0 <= 16 r16), so tile_read holds for all four strips: on a non-edge block generate
  // does not evaluate it and bits zeroes no words.
  //
  // Mode Fused stages the words transposed to bytes (keep_layout.cuh: staged_store_off, staged_load_off), so a
  // reader loads its 8 bytes with one LDS.64.

  // Mode Fused, right after the block's GEMMs are issued: this thread's word into the buffer of ring stage s.
  __device__ __forceinline__ void generate(uint32_t bh, int q0, int s, bool edge) const {
    if constexpr (kMode == DropoutMode::Fused) {
      const uint32_t r16 = static_cast<uint32_t>(q0) / 16u + static_cast<uint32_t>(warp);  // q0 >= 0: a shift
      uint32_t word = 0;
      if (!edge || attn_bwd::tile_read(a, r16, c64))
        word = regen(a, bh, r16 * a.geo.cols64() + c64, static_cast<uint32_t>(lane));
      unsigned char* p = sm.template at<unsigned char>(sm.words(c, s) + st_off);
#pragma unroll
      for (int b = 0; b < 4; ++b) p[attn_bwd::kStagedRegion * b] = static_cast<unsigned char>(word >> (8 * b));
    }
  }
  // The lane's 32 keep bits of the block in ring stage s (keep_bits' two words): mode Mask at dH 128 while the S^T /
  // dP^T GEMMs run (mainloop.cuh: kBitsEarly), otherwise after P^T.
  __device__ __forceinline__ void bits(int s, int q0, bool edge, uint32_t (&z)[2]) const {
    if constexpr (kMode == DropoutMode::Fused) {
      ptx::named_bar_sync(1 + c, 128);  // every word of the block stored
      const uint2 v = *sm.template at<const uint2>(sm.words(c, s) + ld_off);
      attn_bwd::staged_bits(v.x, v.y, kl0, z);
    } else if constexpr (kMode == DropoutMode::Mask) {
      uint32_t kw[4][2];
      attn_bwd::read_keep_words<64>(sm.template at<const uint32_t>(sm.mask(s)) + 32 * c, lane, kw);
      if (edge) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (!attn_bwd::tile_read(a, static_cast<uint32_t>(q0 / 16 + j), c64)) kw[j][0] = kw[j][1] = 0u;
        }
      }
      attn_bwd::keep_bits(kw, kl0, sel, z);
    }
  }
};

}  // namespace attn_bwd_wg
}  // namespace dropbench
