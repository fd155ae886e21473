// The one counter scheme of dropbench: how (seed, offset, batch, head, row, col) — or (seed, offset, flat
// element index) — becomes (Philox counter, key, output word, field) and then a keep bit. Every producer of
// randomness (RNG mask kernel, seeded dropout, fused attention, host reference) goes through these functions,
// so all pipelines see the same keep bits. docs/rng-scheme.md is the prose version of this file.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/rng/philox.cuh"

namespace dropbench {

// ---------------------------------------------------------------------------------------------------------
// Thresholds. A Philox call yields 128 random bits, cut into fields of TW bits (TW = 8, 16 or 32):
// 16, 8 or 4 elements per call. An element is dropped iff its field value < drop_threshold, with
// drop_threshold = round(p * 2^TW) clamped to [0, 2^TW - 1]. The keep probability actually sampled is
// keep_eff = 1 - drop_threshold / 2^TW, and kept values are scaled by 1 / keep_eff so E[y] = x exactly.
// ---------------------------------------------------------------------------------------------------------
template <int TW>
constexpr int kElemsPerCall = 128 / TW;
template <int TW>
constexpr int kCallsPerWord = 32 / kElemsPerCall<TW>;  // calls that fill one 32-bit keep word

struct Threshold {
  int bits = 8;                 // TW
  uint32_t drop = 0;            // drop iff field < drop
  double p_requested = 0;       // dropout probability asked for
  double keep_effective = 1;    // 1 - drop / 2^TW
  double p_error = 0;           // (1 - keep_effective) - p_requested
  float scale = 1.f;            // (float)(1 / keep_effective), the factor applied to kept values
};

inline Threshold make_threshold(double p, int bits) {
  Threshold t;
  t.bits = bits;
  t.p_requested = p;
  const double range = bits == 32 ? 4294967296.0 : static_cast<double>(1u << bits);
  double d = p * range + 0.5;
  if (d > range - 1) d = range - 1;
  if (d < 0) d = 0;
  t.drop = static_cast<uint32_t>(d);
  t.keep_effective = 1.0 - static_cast<double>(t.drop) / range;
  t.p_error = (1.0 - t.keep_effective) - p;
  t.scale = static_cast<float>(1.0 / t.keep_effective);
  return t;
}

// What a kernel accepts as the factor on kept values: make_threshold's scale, 1 / keep_effective, is finite and
// >= 1 (keep_effective is in (0, 1]). The forward and the backward refuse anything else with the same words.
inline bool keep_scale_valid(float s) { return s >= 1.f && s < INFINITY; }
inline constexpr const char* kKeepScaleRule = "keep_scale must be finite and >= 1 (1 / keep probability)";

// Keep bits of one Philox output: bit i <-> element i of the call, element i = word (i / (E/4)), field
// (i % (E/4)) counted from the least significant bits. Bit set = keep.
template <int TW>
DB_HD uint32_t keep_bits(u32x4 r, uint32_t drop) {
  const uint32_t w[4] = {r.x, r.y, r.z, r.w};
  uint32_t bits = 0;
  if constexpr (TW == 8) {
#if defined(__CUDA_ARCH__)
    const uint32_t d4 = drop * 0x01010101u;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      // Per-byte unsigned >= compare gives 0xFF/0x00 bytes; the multiply gathers bit 0 of each byte into
      // bits 28..31 (cross terms land below bit 28 or above bit 31 without carries).
      const uint32_t ge = __vcmpgeu4(w[q], d4) & 0x01010101u;
      bits |= ((ge * 0x10204080u) >> 28) << (4 * q);
    }
#else
    for (int q = 0; q < 4; ++q)
      for (int f = 0; f < 4; ++f) bits |= static_cast<uint32_t>(((w[q] >> (8 * f)) & 0xFFu) >= drop) << (4 * q + f);
#endif
  } else if constexpr (TW == 16) {
#if defined(__CUDA_ARCH__)
    const uint32_t d2 = drop * 0x00010001u;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const uint32_t ge = __vcmpgeu2(w[q], d2);
      bits |= ((ge & 1u) | ((ge >> 15) & 2u)) << (2 * q);
    }
#else
    for (int q = 0; q < 4; ++q)
      for (int f = 0; f < 2; ++f) bits |= static_cast<uint32_t>(((w[q] >> (16 * f)) & 0xFFFFu) >= drop) << (2 * q + f);
#endif
  } else {
    static_assert(TW == 32, "threshold width must be 8, 16 or 32");
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int q = 0; q < 4; ++q) bits |= static_cast<uint32_t>(w[q] >= drop) << q;
  }
  return bits;
}

DB_HD uint32_t seed_lo(uint64_t seed) { return static_cast<uint32_t>(seed); }
DB_HD uint32_t seed_hi(uint64_t seed) { return static_cast<uint32_t>(seed >> 32); }

// ---------------------------------------------------------------------------------------------------------
// Attention domain: the B x H x SQ x SK matrix of attention probabilities.
// It is cut into mask tiles of 16 rows x 64 columns (rows padded up to 16, columns to 64). A tile's 1024
// keep bits live in 32 words, one per lane of the warp that owns those 16 rows in an mma.sync m16n8 (or
// wgmma m64nN, per warp) accumulator layout: lane l, bit e <-> row (l/4) + 8*((e/2)%2), col 8*(e/4) +
// 2*(l%4) + (e%2). So a warp reads its tile's mask as one coalesced 128-byte load, one word per lane.
//
// Counter of call k (0..TW/4-1) of lane l in tile t of matrix bh = b*H + h:
//     counter = (32*k + l, t, bh, offset), key = (seed_lo, seed_hi)
// with t = r16 * cols64 + c64. Call k fills bits [k*E, (k+1)*E) of the lane's word (E = 128/TW) for TW 16
// and 32; for TW 8, bit 8f + 4k + q is byte f of output word q of call k (tile_call_bits).
// Word order in memory: ((bh * rows16 + r16) * cols64 + c64) * 32 + l  (row-strip major, as attention
// walks the key/value blocks of one query block).
// Causal (top-left aligned, col <= row): tiles with c64*64 > r16*16 + 15 hold no visible element and are
// neither generated nor read; their words are left untouched.
// ---------------------------------------------------------------------------------------------------------
constexpr int kTileRows = 16;
constexpr int kTileCols = 64;
constexpr int kWordsPerTile = 32;
constexpr int kTileBytes = kWordsPerTile * 4;  // one tile's 1024 keep bits
// Row strips and tile columns of a dense tile mask (causal too: unread tiles keep their place), in 64-bit counts for
// the host's plans of shapes past MaskGeometry's 32-bit fields.
constexpr uint64_t mask_strips(uint64_t rows) { return (rows + kTileRows - 1) / kTileRows; }
constexpr uint64_t mask_tile_cols(uint64_t keys) { return (keys + kTileCols - 1) / kTileCols; }
constexpr uint32_t kFlatDomainTag = 0x80000000u;  // counter.z of the flat domain; bh < 2^31 never collides

DB_HD int tile_elem_row(int lane, int e) { return (lane >> 2) + 8 * ((e >> 1) & 1); }
DB_HD int tile_elem_col(int lane, int e) { return 8 * (e >> 2) + 2 * (lane & 3) + (e & 1); }
DB_HD int tile_lane_of(int row, int col) { return (row & 7) * 4 + ((col & 7) >> 1); }
DB_HD int tile_bit_of(int row, int col) { return (col >> 3) * 4 + ((row >> 3) & 1) * 2 + (col & 1); }

struct MaskGeometry {
  uint32_t bh = 1;   // batch * heads matrices
  uint32_t sq = 0;   // rows (queries)
  uint32_t sk = 0;   // columns (keys)
  bool causal = false;
  DB_HD uint32_t rows16() const { return (sq + kTileRows - 1) / kTileRows; }
  DB_HD uint32_t cols64() const { return (sk + kTileCols - 1) / kTileCols; }
  DB_HD uint64_t words() const { return static_cast<uint64_t>(bh) * rows16() * cols64() * kWordsPerTile; }
  DB_HD uint64_t bytes() const { return words() * 4; }
  // Number of tiles of row strip r16 that are generated (all of them unless causal).
  DB_HD uint32_t tiles_in_strip(uint32_t r16) const {
    if (!causal) return cols64();
    const uint32_t last = (r16 * kTileRows + kTileRows - 1) / kTileCols;  // last c64 touching col <= row
    return last + 1 < cols64() ? last + 1 : cols64();
  }
  DB_HD uint64_t word_index(uint32_t bh_i, uint32_t r16, uint32_t c64, uint32_t lane) const {
    return ((static_cast<uint64_t>(bh_i) * rows16() + r16) * cols64() + c64) * kWordsPerTile + lane;
  }
  // Generated tiles of row strips 0 .. r-1 of one matrix (tiles_in_strip summed, closed form): cols64 per strip
  // unless causal; causal strip r has min(cols64, r / 4 + 1) (four 16-row strips per 64-column tile), so strips
  // 4q .. 4q+3 have q + 1 each until the cap. The RNG kernel splits its work by it, so it must stay O(1).
  DB_HD uint64_t tiles_before(uint32_t r) const {
    static_assert(kTileCols == 4 * kTileRows, "four row strips per tile column");
    const uint64_t cols = cols64();
    if (!causal) return r * cols;
    const uint64_t rc = r < 4 * cols ? r : 4 * cols;  // strips from 4 cols64 on all have cols64 tiles
    const uint64_t q = rc / 4, m = rc % 4;
    return 2 * q * (q + 1) + m * (q + 1) + (r - rc) * cols;
  }
  // Elements actually sampled (generated tiles x 1024), for Gelem/s.
  DB_HD uint64_t generated_elements() const { return tiles_before(rows16()) * bh * kTileRows * kTileCols; }
};

// A window of query rows [row_begin, row_begin + rows) of every matrix (rows = 0: to the end), for work done
// in pieces (the chunked pipeline). row_begin is a multiple of 16. Its mask holds the row strips r16 in
// [r16_begin, r16_begin + rows16) of each matrix, densely:
//     word ((bh * rows16 + (r16 - r16_begin)) * cols64 + c64) * 32 + lane
// while the COUNTER keeps the global tile index r16 * cols64 + c64, so the bits are exactly those of the full
// mask. The whole-matrix window (0, 0) is the full layout above, word for word.
struct MaskWindow {
  uint32_t r16_begin = 0;
  uint32_t rows16 = 0;  // strips in the window
  DB_HD uint64_t words(const MaskGeometry& g) const {
    return static_cast<uint64_t>(g.bh) * rows16 * g.cols64() * kWordsPerTile;
  }
  DB_HD uint64_t bytes(const MaskGeometry& g) const { return words(g) * 4; }
  DB_HD uint64_t word_index(const MaskGeometry& g, uint32_t bh_i, uint32_t r16, uint32_t c64, uint32_t lane) const {
    return ((static_cast<uint64_t>(bh_i) * rows16 + (r16 - r16_begin)) * g.cols64() + c64) * kWordsPerTile + lane;
  }
  // Elements actually sampled in the window (generated tiles x 1024).
  DB_HD uint64_t generated_elements(const MaskGeometry& g) const {
    return (g.tiles_before(r16_begin + rows16) - g.tiles_before(r16_begin)) * g.bh * kTileRows * kTileCols;
  }
};

// The window of rows [row_begin, row_begin + rows) (rows 0 or past the end: to the end); empty when row_begin
// >= sq. row_begin is expected to be a multiple of 16 (the launchers check it).
DB_HD MaskWindow mask_window(const MaskGeometry& g, uint32_t row_begin, uint32_t rows) {
  MaskWindow w;
  const uint64_t end64 = rows == 0 ? g.sq : static_cast<uint64_t>(row_begin) + rows;
  const uint32_t end = end64 > g.sq ? g.sq : static_cast<uint32_t>(end64);
  w.r16_begin = row_begin / kTileRows;
  w.rows16 = end > row_begin ? (end + kTileRows - 1) / kTileRows - w.r16_begin : 0;
  return w;
}

DB_HD u32x4 attn_counter(uint32_t lane, uint32_t k, uint32_t tile, uint32_t bh, uint32_t offset) {
  return u32x4{32u * k + lane, tile, bh, offset};
}

// Call k's share of a tile word. TW 16 and 32: the call's keep bits at [kE, (k+1)E). TW 8 interleaves the
// two calls byte-wise instead: bit 8f + 4k + q of the word is byte f of output word q of call k. The byte
// compare then lands each keep flag in place with one AND-OR per output word (no gather of bits), which made
// the fused attention kernel ~1 % faster on the H200 (docs/attention.md); which random byte feeds which element
// is a free choice of the scheme, the statistics of a mask are the same either way.
template <int TW>
DB_HD uint32_t tile_call_bits(u32x4 r, uint32_t drop, int k) {
  if constexpr (TW == 8) {
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
    uint32_t bits = 0;
#if defined(__CUDA_ARCH__)
    const uint32_t d4 = drop * 0x01010101u;
#pragma unroll
    for (int q = 0; q < 4; ++q) bits |= __vcmpgeu4(w[q], d4) & (0x01010101u << (4 * k + q));
#else
    for (int q = 0; q < 4; ++q)
      for (int f = 0; f < 4; ++f)
        bits |= static_cast<uint32_t>(((w[q] >> (8 * f)) & 0xFFu) >= drop) << (8 * f + 4 * k + q);
#endif
    return bits;
  } else {
    return keep_bits<TW>(r, drop) << (k * kElemsPerCall<TW>);
  }
}

// The keep word of lane `lane` in tile (r16, c64) of matrix bh. The fused attention kernel calls exactly this.
template <int R, int TW>
DB_HD uint32_t attn_keep_word(uint64_t seed, uint32_t offset, uint32_t drop, uint32_t bh, uint32_t tile,
                              uint32_t lane) {
  uint32_t word = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int k = 0; k < kCallsPerWord<TW>; ++k) {
    const u32x4 r = philox4x32<R>(attn_counter(lane, k, tile, bh, offset), seed_lo(seed), seed_hi(seed));
    word |= tile_call_bits<TW>(r, drop, k);
  }
  return word;
}

// ---------------------------------------------------------------------------------------------------------
// Flat domain: any tensor of N elements (standalone dropout, flat mask layouts).
// Element i belongs to call c = i / E, bit (i % E) of that call's keep bits; counter = (c_lo, c_hi,
// kFlatDomainTag, offset), key = (seed_lo, seed_hi). Flat packed masks store element i at bit (i % 32) of
// word i / 32, so word j is calls j*TW/4 .. j*TW/4 + TW/4 - 1 concatenated, exactly like a tile word.
// ---------------------------------------------------------------------------------------------------------
DB_HD u32x4 flat_counter(uint64_t call, uint32_t offset) {
  return u32x4{static_cast<uint32_t>(call), static_cast<uint32_t>(call >> 32), kFlatDomainTag, offset};
}

template <int R, int TW>
DB_HD uint32_t flat_keep_call(uint64_t seed, uint32_t offset, uint32_t drop, uint64_t call) {
  return keep_bits<TW>(philox4x32<R>(flat_counter(call, offset), seed_lo(seed), seed_hi(seed)), drop);
}

template <int R, int TW>
DB_HD uint32_t flat_keep_word(uint64_t seed, uint32_t offset, uint32_t drop, uint64_t word_index) {
  uint32_t word = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int k = 0; k < kCallsPerWord<TW>; ++k)
    word |= flat_keep_call<R, TW>(seed, offset, drop, word_index * kCallsPerWord<TW> + k) << (k * kElemsPerCall<TW>);
  return word;
}

}  // namespace dropbench
