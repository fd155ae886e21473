// GPU: the RNG mask kernel bit for bit against the host generator (tile and flat layouts, several seeds,
// offsets, sizes incl. non-multiples of the tile, causal), keep rate within a 5-sigma binomial bound.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "src/core/device_buffer.hpp"
#include "gpu_guard.hpp"
#include "src/core/mask_host.hpp"
#include "kernels/rng/rng_mask.cuh"

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
    for (int tw : {8, 16, 32}) {
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
    for (int tw : {8, 16, 32})
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
