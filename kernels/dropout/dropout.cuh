// Standalone dropout, the two variants of the low-memory dropout tutorial, generalised:
//   mask-tensor dropout: y = mask ? x * scale : 0 with a precomputed mask (rng_mask.cuh flat layouts:
//                        int32, uint8 or 1-bit packed), i.e. an extra tensor written then read back;
//   seeded dropout:      the keep bits are regenerated in-kernel from (seed, offset, element index) through
//                        the flat-domain counter scheme — no mask memory at all.
// Both produce bit-identical y for the same (seed, offset, rounds, threshold bits).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include "kernels/rng/rng_mask.cuh"

namespace dropbench {

enum class ElemType { BF16, FP32 };
ElemType parse_elem_type(const std::string& s);  // "bf16" | "fp32"
size_t elem_size(ElemType t);

struct DropoutApplyParams {
  ElemType type = ElemType::BF16;
  const void* x = nullptr;
  void* y = nullptr;
  uint64_t n = 0;
  float scale = 1.f;          // Threshold::scale
  int grid = 0;               // 0 = fill the device (seeded: a block per 8 chunks); > 0 caps the grid
};

// y = keep(i) ? x * scale : 0, keep(i) read from a flat mask in `layout` (Bits, U8 or I32).
void launch_dropout_apply(const DropoutApplyParams& p, MaskLayout layout, const void* mask, cudaStream_t s);

// Seeded dropout: keep(i) from flat_keep_word<R,TW>(seed, offset, drop, i / 32).
void launch_dropout_seeded(const DropoutApplyParams& p, uint64_t seed, uint32_t offset, int rounds, int threshold_bits,
                           uint32_t drop, cudaStream_t s);

}  // namespace dropbench
