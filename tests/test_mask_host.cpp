// The host mask generators (the GPU's bit-exact reference) against a naive per-element decoding of the
// documented counter scheme; tile-layout index maps; threshold arithmetic; dropout reference arithmetic.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "src/core/mask_host.hpp"
#include "kernels/common/dispatch.cuh"

using namespace dropbench;

TEST(TileLayout, IndexMapsAreInverse) {
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 32; ++e) {
      const int r = tile_elem_row(lane, e), c = tile_elem_col(lane, e);
      ASSERT_GE(r, 0);
      ASSERT_LT(r, 16);
      ASSERT_LT(c, 64);
      EXPECT_EQ(tile_lane_of(r, c), lane);
      EXPECT_EQ(tile_bit_of(r, c), e);
    }
  // Every element of a 16x64 tile is covered exactly once.
  int seen[16][64] = {};
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 32; ++e) ++seen[tile_elem_row(lane, e)][tile_elem_col(lane, e)];
  for (auto& row : seen)
    for (int v : row) EXPECT_EQ(v, 1);
}

TEST(TileLayout, MmaFragmentConvention) {
  // mma.sync m16n8 accumulator: lane holds rows lane/4 and lane/4+8, columns 2*(lane%4)+{0,1} of each n8 block.
  EXPECT_EQ(tile_elem_row(5, 0), 1);
  EXPECT_EQ(tile_elem_col(5, 0), 2);
  EXPECT_EQ(tile_elem_col(5, 1), 3);
  EXPECT_EQ(tile_elem_row(5, 2), 9);
  EXPECT_EQ(tile_elem_col(5, 4), 10);  // n-block 1
}

TEST(TileLayout, GeometryAndCausalTiles) {
  MaskGeometry g{3, 1000, 1000, false};
  EXPECT_EQ(g.rows16(), 63u);
  EXPECT_EQ(g.cols64(), 16u);
  EXPECT_EQ(g.words(), 3ull * 63 * 16 * 32);
  EXPECT_EQ(g.bytes(), g.words() * 4);
  g.causal = true;
  // Strip r16 covers rows 16 r16 .. 16 r16 + 15: tiles c64 <= (16 r16 + 15) / 64.
  EXPECT_EQ(g.tiles_in_strip(0), 1u);
  EXPECT_EQ(g.tiles_in_strip(3), 1u);
  EXPECT_EQ(g.tiles_in_strip(4), 2u);
  EXPECT_EQ(g.tiles_in_strip(62), 16u);
  uint64_t tiles = 0;
  for (uint32_t r = 0; r < g.rows16(); ++r) tiles += g.tiles_in_strip(r);
  EXPECT_EQ(g.generated_elements(), tiles * 3 * 1024);
  // Every visible element (col <= row) lies in a generated tile.
  for (uint32_t row = 0; row < 1000; row += 7)
    for (uint32_t col = 0; col <= row; col += 5) EXPECT_LT(col / 64, g.tiles_in_strip(row / 16));
}

// tiles_before (the closed form the RNG kernel splits its work by) is the running sum of tiles_in_strip, for
// square, ragged and rectangular masks, causal and not, at every strip and one past the last.
TEST(TileLayout, TilesBeforeIsTheSumOfStrips) {
  for (const uint32_t sq : {1u, 16u, 63u, 64u, 65u, 1000u, 4096u, 8191u})
    for (const uint32_t sk : {sq, sq / 2 + 1, 3 * sq + 5})
      for (const bool causal : {false, true}) {
        const MaskGeometry g{2, sq, sk, causal};
        SCOPED_TRACE(testing::Message() << "sq " << sq << " sk " << sk << " causal " << causal);
        uint64_t sum = 0;
        for (uint32_t r = 0; r <= g.rows16(); ++r) {
          ASSERT_EQ(g.tiles_before(r), sum) << "strip " << r;
          if (r < g.rows16()) sum += g.tiles_in_strip(r);
        }
        const MaskWindow w = mask_window(g, 16 * (g.rows16() / 3), 16 * (g.rows16() / 2 + 1));
        uint64_t wt = 0;
        for (uint32_t r = w.r16_begin; r < w.r16_begin + w.rows16; ++r) wt += g.tiles_in_strip(r);
        EXPECT_EQ(w.generated_elements(g), wt * 2 * 1024);
      }
}

TEST(Threshold, EffectiveKeepAndScale) {
  const Threshold t8 = make_threshold(0.1, 8);
  EXPECT_EQ(t8.drop, 26u);  // round(25.6)
  EXPECT_DOUBLE_EQ(t8.keep_effective, 1.0 - 26.0 / 256.0);
  EXPECT_NEAR(t8.p_error, 26.0 / 256.0 - 0.1, 1e-15);
  EXPECT_FLOAT_EQ(t8.scale, static_cast<float>(256.0 / 230.0));
  const Threshold t16 = make_threshold(0.1, 16);
  EXPECT_EQ(t16.drop, 6554u);
  const Threshold t32 = make_threshold(0.1, 32);
  EXPECT_EQ(t32.drop, 429496730u);
  EXPECT_LT(std::fabs(t32.p_error), 1e-9);
  EXPECT_EQ(make_threshold(0.0, 8).drop, 0u);
  EXPECT_FLOAT_EQ(make_threshold(0.0, 8).scale, 1.f);
  EXPECT_EQ(make_threshold(0.9999999, 8).drop, 255u);  // clamped: something is always kept
  EXPECT_EQ(make_threshold(0.9999999999, 32).drop, 0xFFFFFFFFu);
}

TEST(Threshold, KeepBitsPerFieldOrder) {
  // Word q, field f of a call is element q * (E/4) + f.
  const u32x4 r{0x00FF10FFu, 0x0u, 0xFFFFFFFFu, 0x1A1A1A19u};
  const uint32_t b8 = keep_bits<8>(r, 0x1A);
  EXPECT_EQ(b8 & 0xF, 0b0101u);         // bytes (LSB first) FF, 10, FF, 00 vs 1A: keep, drop, keep, drop
  EXPECT_EQ((b8 >> 4) & 0xF, 0u);
  EXPECT_EQ((b8 >> 8) & 0xF, 0xFu);
  EXPECT_EQ((b8 >> 12) & 0xF, 0b1110u);  // 19 < 1A dropped, the rest kept
  const uint32_t b16 = keep_bits<16>(r, 0x10FF);
  EXPECT_EQ(b16 & 3u, 0b01u);  // lo 0x10FF kept (>=), hi 0x00FF dropped
  const uint32_t b32 = keep_bits<32>(r, 0x1A1A1A19u);
  EXPECT_EQ(b32, 0b1100u);
}

TEST(Threshold, TileWordInterleavesTheTwoCallsBytewise) {
  // TW 8 tile words: bit 8f + 4k + q <- byte f of output word q of call k (dropout_scheme.cuh).
  const u32x4 r{0x00FF10FFu, 0x0u, 0xFFFFFFFFu, 0x1A1A1A19u};
  const uint32_t c0 = tile_call_bits<8>(r, 0x1A, 0), c1 = tile_call_bits<8>(r, 0x1A, 1);
  uint32_t want0 = 0;
  const bool keep[4][4] = {{true, false, true, false}, {false, false, false, false}, {true, true, true, true},
                           {false, true, true, true}};  // [q][f], as in KeepBitsPerFieldOrder
  for (int q = 0; q < 4; ++q)
    for (int f = 0; f < 4; ++f) want0 |= static_cast<uint32_t>(keep[q][f]) << (8 * f + q);
  EXPECT_EQ(c0, want0);
  EXPECT_EQ(c1, want0 << 4);  // call 1: the upper nibble of every byte
  EXPECT_EQ(c0 & c1, 0u);
  // TW 16 / 32 keep the contiguous runs.
  EXPECT_EQ(tile_call_bits<16>(r, 0x10FF, 1), keep_bits<16>(r, 0x10FF) << 8);
  EXPECT_EQ(tile_call_bits<32>(r, 0x1A1A1A19u, 3), keep_bits<32>(r, 0x1A1A1A19u) << 12);
}

namespace {

struct Case {
  uint32_t bh, sq, sk;
  bool causal;
  int rounds, tw;
  double p;
  uint64_t seed;
  uint32_t offset;
};

}  // namespace

TEST(HostMask, TileMatchesPerElementReference) {
  const Case cases[] = {
      {2, 64, 64, false, 7, 8, 0.1, 1, 0},          {1, 100, 130, false, 10, 16, 0.25, 0xabcdef0123ull, 7},
      {3, 77, 77, true, 5, 32, 0.5, 42, 0xffffffffu}, {1, 256, 256, true, 3, 8, 0.9, 0x8000000000000001ull, 3},
      {2, 33, 200, false, 7, 32, 0.01, 99, 1},
  };
  for (const Case& c : cases) {
    const MaskGeometry g{c.bh, c.sq, c.sk, c.causal};
    const Threshold t = make_threshold(c.p, c.tw);
    const auto words = host_tile_mask(g, c.seed, c.offset, c.rounds, c.tw, t.drop, 0xA5A5A5A5u);
    ASSERT_EQ(words.size(), g.words());
    uint64_t checked = 0;
    for (uint32_t bh = 0; bh < c.bh; ++bh)
      for (uint32_t row = 0; row < g.rows16() * 16; ++row)
        for (uint32_t col = 0; col < g.cols64() * 64; ++col) {
          const uint32_t r16 = row / 16, c64 = col / 64;
          const uint32_t w = words[g.word_index(bh, r16, c64, tile_lane_of(row % 16, col % 64))];
          if (c64 >= g.tiles_in_strip(r16)) {
            ASSERT_EQ(w, 0xA5A5A5A5u) << "causal tile above the diagonal must not be generated";
            continue;
          }
          const bool bit = (w >> tile_bit_of(row % 16, col % 64)) & 1u;
          ASSERT_EQ(bit, ref_attn_keep(c.seed, c.offset, c.rounds, c.tw, t.drop, bh, g.cols64(), row, col))
              << "bh=" << bh << " row=" << row << " col=" << col << " R=" << c.rounds << " tw=" << c.tw;
          ++checked;
        }
    EXPECT_GT(checked, 0u);
  }
}

TEST(HostMask, FlatMatchesPerElementReference) {
  const Case cases[] = {{0, 0, 0, false, 7, 8, 0.1, 5, 0}, {0, 0, 0, false, 3, 16, 0.3, 6, 9},
                        {0, 0, 0, false, 10, 32, 0.7, 7, 1}, {0, 0, 0, false, 5, 8, 0.5, ~0ull, ~0u}};
  for (const Case& c : cases) {
    const uint64_t n = 32 * 97 + 13;
    const Threshold t = make_threshold(c.p, c.tw);
    const auto words = host_flat_mask(n, c.seed, c.offset, c.rounds, c.tw, t.drop);
    ASSERT_EQ(words.size(), (n + 31) / 32);
    for (uint64_t i = 0; i < n; ++i)
      ASSERT_EQ((words[i / 32] >> (i % 32)) & 1u, ref_flat_keep(c.seed, c.offset, c.rounds, c.tw, t.drop, i) ? 1u : 0u)
          << "i=" << i;
  }
}

TEST(HostMask, SeedOffsetAndDomainsChangeBits) {
  const MaskGeometry g{1, 64, 64, false};
  const Threshold t = make_threshold(0.5, 8);
  const auto a = host_tile_mask(g, 1, 0, 7, 8, t.drop);
  const auto b = host_tile_mask(g, 2, 0, 7, 8, t.drop);
  const auto c = host_tile_mask(g, 1, 1, 7, 8, t.drop);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a, host_tile_mask(g, 1, 0, 7, 8, t.drop));  // reproducible
  // The flat domain never reuses an attention counter: same (seed, offset), different bits.
  EXPECT_NE(host_flat_mask(g.words() * 32, 1, 0, 7, 8, t.drop), a);
}

TEST(HostMask, KeepRateWithinBinomialBound) {
  // R >= 5 keep rates agree with keep_effective within 5 sigma. (Philox-3 does not: see test_philox.)
  const MaskGeometry g{2, 512, 512, false};
  for (int R : {5, 7, 10})
    for (int tw : kThresholdBits) {
      const Threshold t = make_threshold(0.1, tw);
      const auto words = host_tile_mask(g, 777, 0, R, tw, t.drop);
      uint64_t kept = 0;
      for (uint32_t w : words) kept += std::popcount(w);
      const double n = static_cast<double>(words.size()) * 32;
      const double sd = std::sqrt(n * t.keep_effective * (1 - t.keep_effective));
      EXPECT_LT(std::fabs(kept - n * t.keep_effective), 5 * sd) << "R=" << R << " tw=" << tw;
    }
}

TEST(HostDropout, Bf16Arithmetic) {
  // 1.0 * 1.25 = 1.25 exactly; rounding to nearest even on a tie; dropped -> +0.
  EXPECT_EQ(host_drop_bf16(0x3F80, true, 1.25f), 0x3FA0);
  EXPECT_EQ(host_drop_bf16(0x3F80, false, 1.25f), 0x0000);
  float f = 1.0f + 1.0f / 256;  // halfway between two bf16 values
  uint32_t u;
  std::memcpy(&u, &f, 4);
  EXPECT_EQ(host_drop_bf16(0x3F80, true, f), 0x3F80);  // tie -> even
  EXPECT_FLOAT_EQ(host_drop_f32(2.f, true, 1.5f), 3.f);
  EXPECT_EQ(host_drop_f32(2.f, false, 1.5f), 0.f);
}
