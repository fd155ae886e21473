// Dropout hooks of the attention kernels, independent of how the main loop computes S and P.V.
//
// Unit of work: one 16 x 64 mask tile (dropout_scheme.cuh), owned by one warp whose accumulator holds those
// 16 rows in the mma.sync m16n8 layout, 8 n8-blocks wide: lane l, block nb, element i (c0..c3) is row
// l/4 + 8*(i/2), col 8*nb + 2*(l%4) + (i%2) -- bit 4*nb + i of the lane's keep word. (A Hopper wgmma
// m64nN accumulator gives each warp 16 rows in the same per-n8 layout, so a wgmma main loop can call the
// same functions on each 64-column slice of its fragment.)
//
//   mask_tile_word     mode Mask: the lane's word, one coalesced 128-byte load per warp (0 for tiles that
//                      do not exist: rows past SQ, columns past SK, or above the causal diagonal -- never
//                      read).
//   fused_word_part    mode Fused: Philox call k (0 .. TW/4-1) of the lane's word, already shifted into
//                      place; OR-ing all k gives attn_keep_word<R,TW> bit for bit. Separate calls let the
//                      main loop interleave integer work with tensor-core work.
//   apply_keep_word    zero the dropped elements of a 16x64 fp32 fragment (scaling by 1/keep is applied
//                      once to the output row, not per element).
#pragma once
#include <cstdint>

#include "kernels/rng/dropout_scheme.cuh"

namespace dropbench {
namespace attn {

// Mask-mode addressing of one warp's row strip: pointer to word (bh, r16, c64 = 0, lane) plus whether the
// strip exists; tile c64 is at ptr + 32 * c64. The mask holds `mrows16` strips of every matrix starting at
// strip r16_0 (a MaskWindow; the whole matrix: r16_0 = 0, mrows16 = rows16); `mask` is the mask's base
// shifted back by r16_0 strips (make_kernel_args), so strip r16 of matrix bh is at (bh * mrows16 + r16) strips
// from it. rows16 is the matrix's own strip count.
struct MaskStrip {
  const uint32_t* ptr;
  uint32_t r16, cols64;
  bool rows_exist;
};

__device__ __forceinline__ MaskStrip mask_strip(const uint32_t* __restrict__ mask, uint32_t bh, uint32_t rows16,
                                                uint32_t mrows16, uint32_t cols64, uint32_t r16, uint32_t lane) {
  MaskStrip s;
  s.rows_exist = r16 < rows16;
  s.r16 = r16;
  s.cols64 = cols64;
  // A strip that does not exist is never read: its pointer may be anything.
  s.ptr = mask + ((static_cast<uint64_t>(bh) * mrows16 + (s.rows_exist ? r16 : 0)) * cols64) * kWordsPerTile + lane;
  return s;
}

// Whether tile (r16, c64) of an existing strip was generated: causal skips tiles entirely above the diagonal.
template <bool kCausal>
__device__ __forceinline__ bool tile_generated(uint32_t r16, uint32_t c64) {
  return !kCausal || c64 * kTileCols <= r16 * kTileRows + (kTileRows - 1);
}

template <bool kCausal>
__device__ __forceinline__ uint32_t mask_tile_word(const MaskStrip& s, uint32_t c64) {
  uint32_t w = 0;
  if (s.rows_exist && c64 < s.cols64 && tile_generated<kCausal>(s.r16, c64)) {
    // Read once, never reused: keep it out of L1.
    asm volatile("ld.global.nc.L1::no_allocate.b32 %0, [%1];" : "=r"(w) : "l"(s.ptr + c64 * kWordsPerTile));
  }
  return w;
}

// Fused-mode key/stream constants of one matrix bh.
struct FusedStream {
  uint32_t key_lo, key_hi, bh, offset, drop;
};

template <int R, int TW>
__device__ __forceinline__ uint32_t fused_word_part(const FusedStream& f, uint32_t tile, uint32_t lane, int k) {
  const u32x4 r = philox4x32<R>(attn_counter(lane, static_cast<uint32_t>(k), tile, f.bh, f.offset), f.key_lo, f.key_hi);
  return tile_call_bits<TW>(r, f.drop, k);
}

template <int R, int TW>
__device__ __forceinline__ uint32_t fused_word(const FusedStream& f, uint32_t tile, uint32_t lane) {
  uint32_t w = 0;
#pragma unroll
  for (int k = 0; k < kCallsPerWord<TW>; ++k) w |= fused_word_part<R, TW>(f, tile, lane, k);
  return w;
}

// acc: one 16x64 tile of an m16n8 accumulator, 8 n8-blocks x (c0, c1, c2, c3). Dropped elements become 0.
__device__ __forceinline__ void apply_keep_word(float (&acc)[8][4], uint32_t word) {
#pragma unroll
  for (int nb = 0; nb < 8; ++nb) {
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nb][i] = ((word >> (4 * nb + i)) & 1u) ? acc[nb][i] : 0.f;
  }
}

}  // namespace attn
}  // namespace dropbench
