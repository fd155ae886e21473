// Cast-transpose for the fp8 GEMMs of a training step (Transformer Engine's cast_transpose): one pass over a
// row-major matrix that writes its fp8 copy, its transposed fp8 copy, or both, and the input's amax.
//
//   out   [rows, cols] fp8 = fp8(scale * in)          (nullptr: not written)
//   out_t [cols, rows] fp8 = fp8(scale * in)ᵀ         (nullptr: not written)
//   amax  (device fp32) = max(amax, max |in|)         (nullptr: not computed; NaN inputs are ignored)
//
// Why: cuBLASLt's FP8 GEMMs on Hopper take only the TN layout (both operands K-contiguous), so a backward
// product that contracts over the tokens (dW = dYᵀ·X) needs the transposed copies of both operands, and the
// gradients are e5m2. The conversion saturates to the largest finite value (__NV_SATFINITE, as TE's cast).
// Input bf16, or e4m3 (then only a transposed copy of an fp8 tensor: scale 1 keeps every value exactly).
// Reference: the host conversion of cuda_fp8.h element by element (tests/test_cast_transpose_gpu.cpp).
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace dropbench {

enum class Fp8Kind { e4m3, e5m2 };

struct CastTransposeParams {
  const void* in = nullptr;   // [rows, cols] row-major, dense
  bool in_e4m3 = false;       // input element type: bf16 (false) or fp8 e4m3
  int64_t rows = 0, cols = 0;
  Fp8Kind out_kind = Fp8Kind::e4m3;
  const float* scale = nullptr;  // device fp32 scalar; nullptr = 1
  void* out = nullptr;           // [rows, cols] fp8
  void* out_t = nullptr;         // [cols, rows] fp8
  float* amax = nullptr;         // device fp32, updated with atomicMax (>= 0 on entry)
};

// Throws UsageError naming the field when p cannot run (no output, a dimension < 1 or >= 2^31, a null input).
void check_cast_transpose(const CastTransposeParams& p);
// Asynchronous on `stream`.
void launch_cast_transpose(const CastTransposeParams& p, cudaStream_t stream);

}  // namespace dropbench
