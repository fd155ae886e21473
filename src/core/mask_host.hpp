// Host generators of the keep masks (the reference the GPU kernels are checked against bit for bit), and
// a deliberately naive per-element reference that decodes the counter scheme element by element, used to
// check the generators themselves.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/rng/dropout_scheme.cuh"

namespace dropbench {

// Tile layout, MaskGeometry::words() words; tiles not generated (causal) hold `fill`.
std::vector<uint32_t> host_tile_mask(const MaskGeometry& g, uint64_t seed, uint32_t offset, int rounds, int tw,
                                     uint32_t drop, uint32_t fill = 0);
// Flat layout: ceil(n/32) words, element i at bit i%32 of word i/32 (bits past n are still generated).
std::vector<uint32_t> host_flat_mask(uint64_t n, uint64_t seed, uint32_t offset, int rounds, int tw, uint32_t drop);

// Naive references: the keep bit of one element, straight from the documented scheme.
bool ref_attn_keep(uint64_t seed, uint32_t offset, int rounds, int tw, uint32_t drop, uint32_t bh, uint32_t cols64,
                   uint32_t row, uint32_t col);
bool ref_flat_keep(uint64_t seed, uint32_t offset, int rounds, int tw, uint32_t drop, uint64_t i);

// Host dropout reference with the kernels' arithmetic: y = keep ? round(x * scale) : 0.
uint16_t host_drop_bf16(uint16_t x_bits, bool keep, float scale);
float host_drop_f32(float x, bool keep, float scale);

}  // namespace dropbench
