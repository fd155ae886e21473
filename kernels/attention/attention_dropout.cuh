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

#include "kernels/common/ptx.cuh"
#include "kernels/rng/dropout_scheme.cuh"

namespace dropbench {
namespace attn {

// Addressing of one warp's row strip in a tile-layout mask (read by mode Mask, written by mode Fused with
// mask_out): pointer to word (bh, r16, c64 = 0, lane) plus whether the strip exists; tile c64 is at
// ptr + 32 * c64. The mask holds `mrows16` strips of every matrix starting at strip r16_0 (a MaskWindow; the
// whole matrix: r16_0 = 0, mrows16 = rows16); `mask` is the mask's base shifted back by r16_0 strips
// (make_kernel_args), so strip r16 of matrix bh is at (bh * mrows16 + r16) strips from it. rows16 is the
// matrix's own strip count.
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
    w = ptx::ld_nc_no_l1(s.ptr + c64 * kWordsPerTile);
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

// ---- Leaner forms of the same bits (the wgmma kernel; docs/attention.md "Cutting the dropout instructions") ----

// Mode Mask, walking one strip block by block: the number of tiles of the strip that exist and were generated
// (0 if the strip does not exist), so tile c64 may be read iff c64 < mask_strip_tiles (one compare per tile
// instead of three).
template <bool kCausal>
__device__ __forceinline__ uint32_t mask_strip_tiles(const MaskStrip& s) {
  if (!s.rows_exist) return 0;
  if (!kCausal) return s.cols64;
  const uint32_t last = (s.r16 * kTileRows + (kTileRows - 1)) / kTileCols;  // last generated c64
  return last + 1 < s.cols64 ? last + 1 : s.cols64;
}

// Mode Fused with a mask output (AttentionParams::mask_out): the lane's words of tiles c0 .. c0 + N - 1 of strip
// r16 (word(t): tile c0 + t's) stored where the RNG kernel stores them, for the tiles it generates only. The
// strip's addressing is made here, at the store, rather than held across the main loop: at dH 128 neither kernel
// family has registers to spare.
template <bool kCausal, int N, class W>
__device__ __forceinline__ void store_mask_words(uint32_t* mask_out, uint32_t bh, uint32_t rows16, uint32_t mrows16,
                                                 uint32_t cols64, uint32_t r16, uint32_t lane, uint32_t c0,
                                                 const W& word) {
  const MaskStrip s = mask_strip(mask_out, bh, rows16, mrows16, cols64, r16, lane);
  const uint32_t tiles = mask_strip_tiles<kCausal>(s);
#pragma unroll
  for (int t = 0; t < N; ++t) {
    const uint32_t c64 = c0 + static_cast<uint32_t>(t), w = word(t);
    if (c64 < tiles) *const_cast<uint32_t*>(s.ptr + c64 * kWordsPerTile) = w;
  }
}
// The lane's word at p (p = strip pointer + 32 * c64), or 0 when the tile is not read.
__device__ __forceinline__ uint32_t mask_word_at(const uint32_t* p, bool valid) {
  uint32_t w = 0;
  if (valid) w = ptx::ld_nc_no_l1(p);
  return w;
}

// Mode Fused, 8-bit thresholds, without building the keep word. keep <=> (byte of a Philox output word) >=
// drop. Per 32-bit word, SWAR: t = (x & 0x7f7f7f7f) + (0x80 - (drop & 0x7f)) per byte (no carry leaves a byte)
// has bit 7 = [low 7 bits of x >= low 7 bits of drop]; the byte compare is then maj(x7, !drop7, t7) (x7 decides
// where the top bits differ, t7 where they are equal). Three instructions per word (LOP3, IADD3, LOP3), where
// __vcmpgeu4 (no sm_90 instruction) costs five plus the bit gather. Only bit 7 of each byte of the result is
// meaningful: it is exactly bit (8f + 4k + q) of tile_call_bits<8> for byte f of word q of call k.
struct ByteThreshold {
  uint32_t nd4;  // ~(drop * 0x01010101): bit 7 of each byte = !drop7
  uint32_t c7;   // per byte 0x80 - (drop & 0x7f)
};
__host__ __device__ __forceinline__ ByteThreshold byte_threshold(uint32_t drop) {
  const uint32_t d4 = (drop & 0xFFu) * 0x01010101u;
  return ByteThreshold{~d4, 0x80808080u - (d4 & 0x7f7f7f7fu)};
}
__host__ __device__ __forceinline__ uint32_t ge_bytes7(uint32_t x, ByteThreshold b) {
  const uint32_t t = (x & 0x7f7f7f7fu) + b.c7;
  return (x & b.nd4) | (x & t) | (b.nd4 & t);
}
// The keep word of one tile from its two Philox calls' ge_bytes7 words (ge[k][q]: call k, output word q): bit
// 8f + 4k + q of tile_call_bits<8> is bit 7 of byte f of ge[k][q], so this is attn_keep_word<R, 8> bit for bit.
__host__ __device__ __forceinline__ uint32_t ge7_keep_word(const uint32_t (&ge)[2][4]) {
  uint32_t w = 0;
#pragma unroll
  for (int k = 0; k < 2; ++k)
#pragma unroll
    for (int q = 0; q < 4; ++q) w |= (ge[k][q] & 0x80808080u) >> (7 - 4 * k - q);
  return w;
}
// philox4x32<R> (kernels/rng/philox.cuh) with each round's two 32x32 -> 64 products written as mul.wide.u32
// (MulWide, philox.cuh).
template <int R>
__device__ __forceinline__ u32x4 philox4x32_wide(u32x4 c, uint32_t k0, uint32_t k1) {
  return philox4x32<R, MulWide>(c, k0, k1);
}

// Philox call k of the lane's word of `tile`, as four ge_bytes7 words (q = 0..3).
template <int R>
__device__ __forceinline__ void fused_call_ge7(const FusedStream& f, ByteThreshold bt, uint32_t tile, uint32_t lane, int k,
                                               uint32_t (&ge)[4]) {
  const u32x4 r = philox4x32_wide<R>(attn_counter(lane, static_cast<uint32_t>(k), tile, f.bh, f.offset), f.key_lo, f.key_hi);
  ge[0] = ge_bytes7(r.x, bt);
  ge[1] = ge_bytes7(r.y, bt);
  ge[2] = ge_bytes7(r.z, bt);
  ge[3] = ge_bytes7(r.w, bt);
}
// Zero the dropped halves of a packed bf16x2 P word (lo = element of word qa, hi = of word qb, both from byte f):
// prmt's sign-replicate mode turns bit 7 of byte f of each source into a 16-bit all-ones / all-zeros half, so
// one PRMT + one LOP3 drop two elements (bf16(0) is +0, exactly what zeroing the fp32 value first gives).
template <int F>
__device__ __forceinline__ uint32_t keep_mask_bf16x2(uint32_t ge_lo, uint32_t ge_hi) {
  constexpr uint32_t sel = (8u + F) | ((8u + F) << 4) | ((12u + F) << 8) | ((12u + F) << 12);
  return ptx::prmt<sel>(ge_lo, ge_hi);
}
template <int F>
__device__ __forceinline__ uint32_t drop_bf16x2(uint32_t pk, uint32_t ge_lo, uint32_t ge_hi) {
  return pk & keep_mask_bf16x2<F>(ge_lo, ge_hi);
}

// The masks of a keep word for the packed bf16x2 P of its 16x64 tile: m[kk][0..3] for pk[kk][0..3], kk = 0..3
// (n8-blocks 2kk and 2kk+1, halves (c0,c1) and (c2,c3)); P &= m drops the elements apply_keep_word drops.
// Bit 4nb+i goes to bit 7 of byte nb/2 in the copy of the word shifted left by 7 - (4*(nb%2) + i): seven
// shifts, then one PRMT per pair (and one LOP3 to apply): 78 instructions per 64 elements, where R2P + FSEL
// compile to ~100 (R2P fills only P0-P6, so two bits of every byte take extra LOP3 / ISETP / PRMT).
__device__ __forceinline__ void keep_word_masks_bf16x2(uint32_t w, uint32_t (&m)[4][4]) {
  uint32_t v[8];
#pragma unroll
  for (int s = 0; s < 8; ++s) v[s] = w << s;
  m[0][0] = keep_mask_bf16x2<0>(v[7], v[6]);
  m[0][1] = keep_mask_bf16x2<0>(v[5], v[4]);
  m[0][2] = keep_mask_bf16x2<0>(v[3], v[2]);
  m[0][3] = keep_mask_bf16x2<0>(v[1], v[0]);
  m[1][0] = keep_mask_bf16x2<1>(v[7], v[6]);
  m[1][1] = keep_mask_bf16x2<1>(v[5], v[4]);
  m[1][2] = keep_mask_bf16x2<1>(v[3], v[2]);
  m[1][3] = keep_mask_bf16x2<1>(v[1], v[0]);
  m[2][0] = keep_mask_bf16x2<2>(v[7], v[6]);
  m[2][1] = keep_mask_bf16x2<2>(v[5], v[4]);
  m[2][2] = keep_mask_bf16x2<2>(v[3], v[2]);
  m[2][3] = keep_mask_bf16x2<2>(v[1], v[0]);
  m[3][0] = keep_mask_bf16x2<3>(v[7], v[6]);
  m[3][1] = keep_mask_bf16x2<3>(v[5], v[4]);
  m[3][2] = keep_mask_bf16x2<3>(v[3], v[2]);
  m[3][3] = keep_mask_bf16x2<3>(v[1], v[0]);
}
// The masks of one block's ge7 words (tile tt = kk/4, byte f = kk%4; pk[kk][0,1] from call 0's words (0,1),
// (2,3); pk[kk][2,3] from call 1's).
template <int NT>
__device__ __forceinline__ void ge7_masks_bf16x2(const uint32_t (&ge)[NT][2][4], uint32_t (&m)[4 * NT][4]) {
#pragma unroll
  for (int kk = 0; kk < 4 * NT; ++kk) {
    const int tt = kk >> 2;
    auto one = [&]<int F>() {
      m[kk][0] = keep_mask_bf16x2<F>(ge[tt][0][0], ge[tt][0][1]);
      m[kk][1] = keep_mask_bf16x2<F>(ge[tt][0][2], ge[tt][0][3]);
      m[kk][2] = keep_mask_bf16x2<F>(ge[tt][1][0], ge[tt][1][1]);
      m[kk][3] = keep_mask_bf16x2<F>(ge[tt][1][2], ge[tt][1][3]);
    };
    switch (kk & 3) {
      case 0: one.template operator()<0>(); break;
      case 1: one.template operator()<1>(); break;
      case 2: one.template operator()<2>(); break;
      default: one.template operator()<3>(); break;
    }
  }
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
