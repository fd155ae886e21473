// Where the attention backward's lanes find their keep bits: the pure index and bit arithmetic of both backward
// kernels (bwd_tile.cuh's per-warp arithmetic, wgmma/dropout.cuh's staging and (R, TW) search), host and device, so
// that tests/test_attention_bwd.cpp checks it on the CPU against the forward's tile mapping (dropout_scheme.cuh:
// tile_lane_of / tile_bit_of).
//
// One warp holds 16 keys x 64 queries of a block as S^T in the m16n8 accumulator layout: lane l's element (nb, i)
// (n8-block nb, index i) is key row el_key(kl0, i) of the 64-key block (kl0 = 16 warp + l / 4) and query column
// el_query(nb, i, l). Its bit lies in tile (query strip) nb / 2 of the block's 4 x 32 words, word
// tile_lane_of(query % 16, key), bit tile_bit_of(query % 16, key).
#pragma once
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/common/host_device.hpp"
#include "kernels/rng/dropout_scheme.cuh"

namespace dropbench {
namespace attn_bwd {

// Element (nb, i) of the lane: its key row (in the 64-key block) and query column (in the block).
DB_HD int el_key(int kl0, int i) { return kl0 + 8 * (i >> 1); }
DB_HD int el_query(int nb, int i, int lane) { return 8 * nb + 2 * (lane & 3) + (i & 1); }

// PRMT (__byte_perm) on the device; on the host the same result for the selectors used here (every nibble below 8:
// a plain byte select, no sign replication).
DB_HD uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, y, s);
#else
  const uint64_t v = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) r |= static_cast<uint32_t>((v >> (8 * ((s >> (4 * n)) & 7u))) & 0xFFu) << (8 * n);
  return r;
#endif
}

// The lane's 8 words of a block staged as 4 tiles (query strips) of 32 words, `stride` words apart: kw[j][e] holds
// the bits of strip j for the elements of parity e (i % 2).
template <int kStride>
DB_HD void read_keep_words(const uint32_t* m, int lane, uint32_t (&kw)[4][2]) {
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) kw[j][e] = m[j * kStride + tile_lane_of(2 * (lane & 3) + e, lane >> 2)];
}
// The keep bit of element (nb, i) in read_keep_words' words (kl, ql: its el_key, el_query).
DB_HD uint32_t keep_bit(const uint32_t (&kw)[4][2], int nb, int i, int kl, int ql) {
  return (kw[nb >> 1][i & 1] >> tile_bit_of(ql & 15, kl)) & 1u;
}

// The lane's 32 keep bits of the block, in two words at fixed positions (keep_at). Its 4 bits in each of
// read_keep_words' words all lie in byte kl0 / 16 (tile_bit_of: the key row's 8-key group is 2 (kl0 / 16) or one
// more), at bits kl0 % 2 + {0, 2, 4, 6}. Byte permutes gather that byte of the 8 words into z[h] (strips 2h, 2h + 1;
// byte 2 (j % 2) + e), one shift by kl0 % 2 puts the bits at 0, 2, 4, 6 of each byte: with the positions constant,
// ptxas tests them with R2P (a byte's 4 bits in one instruction) instead of one LOP3 per element against
// lane-dependent masks.
// sel: keep_sel(kl0), made once by a caller that walks many blocks.
DB_HD uint32_t keep_sel(int kl0) {
  const uint32_t b = static_cast<uint32_t>(kl0) >> 4;
  return b | ((b + 4u) << 4);
}
DB_HD void keep_bits(const uint32_t (&kw)[4][2], int kl0, uint32_t sel, uint32_t (&z)[2]) {
  uint32_t pair[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) pair[j] = byte_perm(kw[j][0], kw[j][1], sel);
#pragma unroll
  for (int h = 0; h < 2; ++h) z[h] = byte_perm(pair[2 * h], pair[2 * h + 1], 0x5410u) >> (kl0 & 1);
}
// The keep bit of element (nb, i) in keep_bits' words: strip nb / 2 and parity i % 2 give the byte, the key half
// i / 2 and the query half nb % 2 the bit (4 (i / 2) + 2 (nb % 2), tile_bit_of's order).
DB_HD uint32_t keep_at(const uint32_t (&z)[2], int nb, int i) {
  return (z[nb >> 2] >> (8 * (2 * ((nb >> 1) & 1) + (i & 1)) + 4 * (i >> 1) + 2 * (nb & 1))) & 1u;
}

// The wgmma kernel's mode Fused stages a block's generated words transposed to bytes (4 strips x 32 words = 512
// bytes per consumer): the thread of warp j, lane L generates word L of strip j. A lane's 32 bits lie in one byte of
// each of its 8 words (byte kl0 / 16 = its warp: keep_bits), so the generating thread stores byte b of its word into
// warp b's kStagedRegion-byte region, at the 8 bytes of the reader lanes that need the word, in keep_bits' order
// (2 j + e: strip j, parity e). A reader then loads its 8 bytes at once (one LDS.64, where the words take 8 LDS and
// 6 PRMT), already as keep_bits' two words before the shift (staged_bits). Word L of strip j is read by the lanes
// with lane % 4 = L / 8, lane / 8 = L % 4 (and e = L / 4 % 2), so their 8 bytes sit at slot 4 (lane % 4) + lane / 8
// of the region. Both sides are free of bank conflicts: a reader warp's 16 slots are 128 contiguous bytes; a store's
// 32 bytes lie in 16 words 8 bytes apart.
constexpr int kStagedRegion = 128;
DB_HD int staged_slot(int lane) { return 4 * (lane & 3) + (lane >> 3); }
// The slot of the readers of word L (staged_slot(lane) for lane % 4 = L / 8, lane / 8 = L % 4).
DB_HD int staged_slot_of_word(int L) { return 4 * (L >> 3) + (L & 3); }
// The generating thread's byte 0 (byte b at + kStagedRegion b) and the reader's 8 bytes.
DB_HD int staged_store_off(int warp, int lane) { return 8 * staged_slot_of_word(lane) + 2 * warp + ((lane >> 2) & 1); }
DB_HD int staged_load_off(int warp, int lane) { return kStagedRegion * warp + 8 * staged_slot(lane); }
// The reader's 8 bytes (lo: bytes 0-3, hi: 4-7) as keep_bits' two words.
DB_HD void staged_bits(uint32_t lo, uint32_t hi, int kl0, uint32_t (&z)[2]) {
  z[0] = lo >> (kl0 & 1);
  z[1] = hi >> (kl0 & 1);
}

// f(std::integral_constant<int, kList[k]>{}) for the kList[k] == v of an ascending list (kList[Lo, Hi)): a binary
// search, ceil(log2 n) warp-uniform compares, where testing the values one after another takes up to n. A v between
// the values gives the largest one below it (the host checks v against the list).
template <const auto& kList, int Lo = 0, int Hi = static_cast<int>(sizeof(kList) / sizeof(kList[0])), class F>
DB_HD decltype(auto) search_list(int v, F&& f) {
  if constexpr (Hi - Lo == 1) {
    return f(std::integral_constant<int, kList[Lo]>{});
  } else {
    constexpr int M = (Lo + Hi) / 2, T = kList[M];
    if (v < T) return search_list<kList, Lo, M>(v, f);
    return search_list<kList, M, Hi>(v, f);
  }
}
constexpr bool ascending(const int* v, int n) { return n < 2 || (v[0] < v[1] && ascending(v + 1, n - 1)); }

}  // namespace attn_bwd
}  // namespace dropbench
