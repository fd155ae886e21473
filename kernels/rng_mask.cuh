// The RNG mask kernel: writes keep masks from the counter scheme of dropout_scheme.cuh.
//   Tile: 1 bit per element in the attention tile layout (what mode-`mask` attention reads).
//   Bits / U8 / I32: flat-domain masks of N elements (1 bit packed, one byte, one int32 per element), the
//   mask tensors of standalone mask-tensor dropout.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "dropout_scheme.cuh"

namespace dropbench {

enum class MaskLayout { Tile, Bits, U8, I32 };
MaskLayout parse_mask_layout(const std::string& s);  // "tile" | "bits" | "u8" | "i32"
const char* mask_layout_name(MaskLayout l);

struct RngMaskParams {
  uint64_t seed = 0;
  uint32_t offset = 0;
  int rounds = 7;            // 3, 5, 7, 10
  int threshold_bits = 8;    // 8, 16, 32
  uint32_t drop = 0;         // Threshold::drop
  MaskLayout layout = MaskLayout::Tile;
  MaskGeometry geo;          // Tile layout
  uint64_t elements = 0;     // flat layouts
  void* out = nullptr;
  int grid = 0;              // blocks; 0 = enough to fill the device (persistent grid-stride)
  int block = 256;           // threads per block (multiple of 32)
};

// Bytes the mask occupies (tile: geometry.bytes(); bits: ceil(N/32)*4; u8: N; i32: 4N).
size_t mask_bytes(const RngMaskParams& p);
// Elements actually sampled (tile causal skips tiles above the diagonal; flat: N).
uint64_t mask_elements_generated(const RngMaskParams& p);
void launch_rng_mask(const RngMaskParams& p, cudaStream_t s);

}  // namespace dropbench
