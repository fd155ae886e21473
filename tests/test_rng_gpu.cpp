// GPU: the RNG mask kernel bit for bit against the host generator (tile and flat layouts, several seeds,
// offsets, sizes incl. non-multiples of the tile, causal, every 8-bit threshold regime and grid shape), keep rate
// within a 5-sigma binomial bound; the Philox ceiling kernel's XOR result against a host computation.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "src/core/device_buffer.hpp"
#include "gpu_guard.hpp"
#include "src/core/mask_host.hpp"
#include "kernels/rng/philox_ceiling.cuh"
#include "kernels/rng/rng_mask.cuh"
#include "kernels/common/dispatch.cuh"

using namespace dropbench;

namespace {

std::vector<uint32_t> download_words(const DeviceBuffer& b, size_t words) {
  std::vector<uint32_t> h(words);
  DB_CUDA(cudaMemcpy(h.data(), b.get(), words * 4, cudaMemcpyDeviceToHost));
  return h;
}

struct TileCase {
  uint32_t bh, sq;
  bool causal;
  int rounds, tw;
  double p;
  uint64_t seed;
  uint32_t offset;
};

}  // namespace

TEST(RngGpu, TileMaskMatchesHostBitForBit) {
  DB_REQUIRE_GPU();
  const TileCase cases[] = {
      {1, 64, false, 7, 8, 0.1, 1, 0},           {2, 1000, false, 7, 8, 0.1, 0x5eed, 3},
      {3, 777, true, 5, 16, 0.3, 42, 0xfffffffe}, {1, 513, false, 10, 32, 0.5, ~0ull, 17},
      {4, 256, true, 3, 8, 0.2, 0x123456789ull, 0}, {2, 2048, false, 7, 16, 0.05, 9, 1},
      {1, 100, false, 5, 32, 0.9, 77, 5},         {5, 1537, true, 7, 8, 0.1, 1234, 8},
  };
  for (const TileCase& c : cases) {
    const MaskGeometry g{c.bh, c.sq, c.sq, c.causal};
    const Threshold t = make_threshold(c.p, c.tw);
    DeviceBuffer buf(g.bytes());
    DB_CUDA(cudaMemset(buf.get(), 0xA5, g.bytes()));  // untouched causal tiles keep the pattern
    RngMaskParams p;
    p.seed = c.seed;
    p.offset = c.offset;
    p.rounds = c.rounds;
    p.threshold_bits = c.tw;
    p.drop = t.drop;
    p.layout = MaskLayout::Tile;
    p.geo = g;
    p.out = buf.get();
    p.grid = c.sq % 2 ? 7 : 0;  // a small grid exercises the grid-stride loop
    launch_rng_mask(p, nullptr);
    DB_CUDA(cudaDeviceSynchronize());
    const auto dev = download_words(buf, g.words());
    const auto host = host_tile_mask(g, c.seed, c.offset, c.rounds, c.tw, t.drop, 0xA5A5A5A5u);
    size_t bad = 0;
    for (size_t i = 0; i < dev.size(); ++i) bad += dev[i] != host[i];
    EXPECT_EQ(bad, 0u) << "bh=" << c.bh << " sq=" << c.sq << " causal=" << c.causal << " R=" << c.rounds << " tw=" << c.tw;
  }
}

TEST(RngGpu, FlatLayoutsMatchHostBitForBit) {
  DB_REQUIRE_GPU();
  for (uint64_t n : {1ull, 31ull, 32ull, 1000ull, 65536ull + 7, 1ull << 20}) {
    for (int tw : kThresholdBits) {
      const int rounds = tw == 8 ? 7 : tw == 16 ? 5 : 10;
      const uint64_t seed = 0xC0FFEE + n + tw;
      const uint32_t offset = static_cast<uint32_t>(n * 3);
      const Threshold t = make_threshold(0.37, tw);
      const auto ref = host_flat_mask(n, seed, offset, rounds, tw, t.drop);
      for (MaskLayout L : {MaskLayout::Bits, MaskLayout::U8, MaskLayout::I32}) {
        RngMaskParams p;
        p.seed = seed;
        p.offset = offset;
        p.rounds = rounds;
        p.threshold_bits = tw;
        p.drop = t.drop;
        p.layout = L;
        p.elements = n;
        DeviceBuffer buf(mask_bytes(p));
        DB_CUDA(cudaMemset(buf.get(), 0x77, mask_bytes(p)));
        p.out = buf.get();
        launch_rng_mask(p, nullptr);
        DB_CUDA(cudaDeviceSynchronize());
        std::vector<uint8_t> h(mask_bytes(p));
        DB_CUDA(cudaMemcpy(h.data(), buf.get(), h.size(), cudaMemcpyDeviceToHost));
        size_t bad = 0;
        for (uint64_t i = 0; i < n; ++i) {
          const uint32_t want = (ref[i / 32] >> (i % 32)) & 1u;
          uint32_t got;
          if (L == MaskLayout::Bits) got = (reinterpret_cast<const uint32_t*>(h.data())[i / 32] >> (i % 32)) & 1u;
          else if (L == MaskLayout::U8) got = h[i];
          else got = reinterpret_cast<const uint32_t*>(h.data())[i];
          bad += got != want;
        }
        if (L == MaskLayout::Bits) {  // bits past n in the last word are generated too
          for (size_t wi = 0; wi < ref.size(); ++wi) bad += reinterpret_cast<const uint32_t*>(h.data())[wi] != ref[wi];
        }
        EXPECT_EQ(bad, 0u) << "n=" << n << " tw=" << tw << " layout=" << mask_layout_name(L);
      }
    }
  }
}

TEST(RngGpu, KeepRateWithinFiveSigma) {
  DB_REQUIRE_GPU();
  // 2^27 elements per case: tight enough to see a 0.1% bias.
  const MaskGeometry g{32, 2048, 2048, false};
  DeviceBuffer buf(g.bytes());
  for (int R : {5, 7, 10})
    for (int tw : kThresholdBits)
      for (double p : {0.1, 0.5}) {
        const Threshold t = make_threshold(p, tw);
        RngMaskParams rp;
        rp.seed = 2024 + R;
        rp.rounds = R;
        rp.threshold_bits = tw;
        rp.drop = t.drop;
        rp.geo = g;
        rp.out = buf.get();
        launch_rng_mask(rp, nullptr);
        DB_CUDA(cudaDeviceSynchronize());
        const auto w = download_words(buf, g.words());
        uint64_t kept = 0;
        for (uint32_t x : w) kept += std::popcount(x);
        const double n = static_cast<double>(g.words()) * 32;
        const double sd = std::sqrt(n * t.keep_effective * (1 - t.keep_effective));
        EXPECT_LT(std::fabs(kept - n * t.keep_effective), 5 * sd) << "R=" << R << " tw=" << tw << " p=" << p;
      }
}

TEST(RngGpu, BadParametersAreRejected) {
  DB_REQUIRE_GPU();
  RngMaskParams p;
  p.rounds = 4;
  EXPECT_THROW(launch_rng_mask(p, nullptr), UsageError);
  p.rounds = 7;
  p.threshold_bits = 12;
  EXPECT_THROW(launch_rng_mask(p, nullptr), UsageError);
}

// The 8-bit tile kernel's compare has two regimes (drop <= 128: OR, drop > 128: AND) and edge thresholds (0 = keep
// all, 128, 129, 255); its half-warps walk contiguous tile ranges that cross strips, so grids from 1 block to more
// half-warps than tiles are checked, with windows and causal masks.
TEST(RngGpu, Tile8MatchesHostAcrossThresholdsAndGrids) {
  DB_REQUIRE_GPU();
  struct C {
    uint32_t bh, sq;
    bool causal;
    int rounds;
    uint32_t drop;
    int grid, block;
    uint32_t row_begin, rows;
  };
  const C cases[] = {
      {2, 1000, false, 7, 0, 0, 256, 0, 0},     {2, 1000, false, 7, 128, 1, 256, 0, 0},
      {3, 777, true, 5, 129, 3, 64, 0, 0},      {1, 4096, false, 3, 255, 0, 256, 0, 0},
      {4, 513, true, 10, 200, 5000, 256, 0, 0}, {2, 2048, false, 7, 26, 13, 128, 512, 700},
      {5, 1537, true, 7, 1, 0, 32, 64, 0},      {1, 64, false, 7, 127, 2, 256, 0, 0},
  };
  for (const C& c : cases) {
    const MaskGeometry g{c.bh, c.sq, c.sq, c.causal};
    RngMaskParams p;
    p.seed = 0xABCDEF12345ull + c.drop;
    p.offset = c.drop * 7;
    p.rounds = c.rounds;
    p.threshold_bits = 8;
    p.drop = c.drop;
    p.geo = g;
    p.grid = c.grid;
    p.block = c.block;
    p.row_begin = c.row_begin;
    p.rows = c.rows;
    const MaskWindow win = rng_mask_window(p);
    const size_t bytes = mask_bytes(p);
    DeviceBuffer buf(bytes);
    DB_CUDA(cudaMemset(buf.get(), 0xA5, bytes));
    p.out = buf.get();
    launch_rng_mask(p, nullptr);
    DB_CUDA(cudaDeviceSynchronize());
    const auto dev = download_words(buf, bytes / 4);
    const auto host = host_tile_mask(g, p.seed, p.offset, c.rounds, 8, c.drop, 0xA5A5A5A5u);
    const uint64_t strip_words = static_cast<uint64_t>(g.cols64()) * kWordsPerTile;
    size_t bad = 0;
    for (uint32_t bh = 0; bh < g.bh; ++bh)
      for (uint32_t s = 0; s < win.rows16; ++s)
        for (uint64_t i = 0; i < strip_words; ++i)
          bad += dev[(static_cast<uint64_t>(bh) * win.rows16 + s) * strip_words + i] !=
                 host[(static_cast<uint64_t>(bh) * g.rows16() + win.r16_begin + s) * strip_words + i];
    EXPECT_EQ(bad, 0u) << "bh=" << c.bh << " sq=" << c.sq << " causal=" << c.causal << " R=" << c.rounds
                       << " drop=" << c.drop << " grid=" << c.grid << " block=" << c.block << " rows=[" << c.row_begin
                       << ", +" << c.rows << ")";
  }
}

// A tiny ceiling launch: every thread's XOR of its calls' output words equals the host's, so the benchmark
// cannot measure a loop that was optimised away or computes something else.
TEST(RngGpu, PhiloxCeilingMatchesHost) {
  DB_REQUIRE_GPU();
  for (int R : kPhiloxRounds) {
    PhiloxCeilingParams p;
    p.rounds = R;
    p.seed = 0x0123456789ABCDEFull + R;
    p.grid = 3;
    p.block = 64;
    p.calls_per_thread = 9;  // not a multiple of the loop's unroll factor
    ASSERT_EQ(philox_ceiling_threads(p), 192u);
    ASSERT_EQ(philox_ceiling_calls(p), 192u * 9);
    DeviceBuffer buf(philox_ceiling_threads(p) * 4);
    DB_CUDA(cudaMemset(buf.get(), 0, philox_ceiling_threads(p) * 4));
    p.out = buf.get<uint32_t>();
    launch_philox_ceiling(p, nullptr);
    DB_CUDA(cudaDeviceSynchronize());
    const auto dev = download_words(buf, philox_ceiling_threads(p));
    size_t bad = 0, zero = 0;
    for (uint32_t g = 0; g < dev.size(); ++g) {
      bad += dev[g] != philox_ceiling_host_word(R, p.seed, g, p.calls_per_thread);
      zero += dev[g] == 0;
    }
    EXPECT_EQ(bad, 0u) << "R=" << R;
    EXPECT_LT(zero, 2u) << "R=" << R;
    // One call less changes every thread's word: the last call is not dead code.
    EXPECT_NE(philox_ceiling_host_word(R, p.seed, 5, 9), philox_ceiling_host_word(R, p.seed, 5, 8));
  }
  PhiloxCeilingParams p;
  p.grid = 2;
  p.block = 128;
  EXPECT_EQ(philox_ceiling_calls_per_thread(p, 1000), 4u);
  EXPECT_EQ(philox_ceiling_calls_per_thread(p, 0), 1u);
  p.block = 48;
  EXPECT_THROW(philox_ceiling_grid(p), UsageError);
  p.block = 64;
  p.rounds = 4;
  p.calls_per_thread = 1;
  EXPECT_THROW(launch_philox_ceiling(p, nullptr), UsageError);
}
