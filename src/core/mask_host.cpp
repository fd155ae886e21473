#include "src/core/mask_host.hpp"

#include <cstring>
#include <stdexcept>

#include "kernels/common/dispatch.cuh"

namespace dropbench {
namespace {

template <int R, int TW>
void tile_rt(const MaskGeometry& g, uint64_t seed, uint32_t offset, uint32_t drop, std::vector<uint32_t>& out) {
  for (uint32_t bh = 0; bh < g.bh; ++bh)
    for (uint32_t r16 = 0; r16 < g.rows16(); ++r16)
      for (uint32_t c64 = 0; c64 < g.tiles_in_strip(r16); ++c64)
        for (uint32_t l = 0; l < kWordsPerTile; ++l)
          out[g.word_index(bh, r16, c64, l)] = attn_keep_word<R, TW>(seed, offset, drop, bh, r16 * g.cols64() + c64, l);
}

template <int R, int TW>
void flat_rt(uint64_t words, uint64_t seed, uint32_t offset, uint32_t drop, std::vector<uint32_t>& out) {
  for (uint64_t w = 0; w < words; ++w) out[w] = flat_keep_word<R, TW>(seed, offset, drop, w);
}

// Field `idx` of a call's output for width tw, read without any of the packing helpers.
bool naive_keep(const u32x4& r, int tw, uint32_t idx, uint32_t drop) {
  const uint32_t per_word = 32 / tw;
  const uint32_t words[4] = {r.x, r.y, r.z, r.w};
  const uint32_t w = words[idx / per_word];
  const uint32_t field = idx % per_word;
  const uint64_t v = tw == 32 ? w : (w >> (field * tw)) & ((1u << tw) - 1u);
  return v >= drop;
}

}  // namespace

std::vector<uint32_t> host_tile_mask(const MaskGeometry& g, uint64_t seed, uint32_t offset, int rounds, int tw,
                                     uint32_t drop, uint32_t fill) {
  std::vector<uint32_t> out(g.words(), fill);
  with_rounds_tw(rounds, tw, "host mask", [&](auto r, auto b) { tile_rt<r(), b()>(g, seed, offset, drop, out); });
  return out;
}

std::vector<uint32_t> host_flat_mask(uint64_t n, uint64_t seed, uint32_t offset, int rounds, int tw, uint32_t drop) {
  std::vector<uint32_t> out((n + 31) / 32);
  with_rounds_tw(rounds, tw, "host mask", [&](auto r, auto b) { flat_rt<r(), b()>(out.size(), seed, offset, drop, out); });
  return out;
}

bool ref_attn_keep(uint64_t seed, uint32_t offset, int rounds, int tw, uint32_t drop, uint32_t bh, uint32_t cols64,
                   uint32_t row, uint32_t col) {
  const uint32_t r16 = row / 16, c64 = col / 64, tr = row % 16, tc = col % 64;
  // Position inside the mma.sync m16n8 accumulator fragment: 8 n-blocks of 8 columns; lane = group*4 + quad.
  const uint32_t nblk = tc / 8, lane = (tr % 8) * 4 + (tc % 8) / 2;
  const uint32_t e = nblk * 4 + (tr / 8) * 2 + (tc % 2);
  const uint32_t per_call = 128 / tw;
  // Which call and which field of it decide bit e: TW 16/32, call e / E, field e % E; TW 8 interleaves the two
  // calls byte-wise: bit 8f + 4k + q is byte f of output word q of call k, i.e. field 4q + f of call k.
  uint32_t k = e / per_call, idx = e % per_call;
  if (tw == 8) {
    k = (e >> 2) & 1u;
    idx = 4 * (e & 3u) + (e >> 3);
  }
  const u32x4 ctr{32 * k + lane, r16 * cols64 + c64, bh, offset};
  const u32x4 r = philox4x32_rt(rounds, ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return naive_keep(r, tw, idx, drop);
}

bool ref_flat_keep(uint64_t seed, uint32_t offset, int rounds, int tw, uint32_t drop, uint64_t i) {
  const uint64_t per_call = 128 / tw;
  const uint64_t call = i / per_call;
  const u32x4 ctr{static_cast<uint32_t>(call), static_cast<uint32_t>(call >> 32), 0x80000000u, offset};
  const u32x4 r = philox4x32_rt(rounds, ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return naive_keep(r, tw, static_cast<uint32_t>(i % per_call), drop);
}

uint16_t host_drop_bf16(uint16_t x_bits, bool keep, float scale) {
  if (!keep) return 0;
  uint32_t u = static_cast<uint32_t>(x_bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  f *= scale;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu)) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

float host_drop_f32(float x, bool keep, float scale) { return keep ? x * scale : 0.f; }

}  // namespace dropbench
