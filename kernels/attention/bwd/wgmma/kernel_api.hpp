// The wgmma attention backward's entry points as the host launcher (attention_bwd.cu) sees them; defined in
// kernel.cuh, instantiated in attention_bwd_wgmma_hd*.cu.
#pragma once
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/bwd/attention_bwd_args.cuh"
#include "kernels/attention/bwd/wgmma/config.cuh"

namespace dropbench {
namespace attn_bwd_wg {

// The tensor maps of a launch (encode_rows_map): Q boxes of 64 rows and K / V boxes of 128 over the QKV buffer, dO
// boxes of 64 rows over dO (64 columns, 128-byte swizzle); the fast mode's reduce-add boxes of 64 rows x 32 columns
// over the fp32 dQ accumulator (unused, zero, in the deterministic mode).
struct Maps {
  CUtensorMap q, kv, dout, dq;
};

// The dK/dV kernel (with the fast mode's dQ unless a.dq_fast is 0) on a grid of (Hkv x B, SQ / 128).
template <int HD, DropoutMode M>
void launch(const Args& a, const Maps& m, int batch, cudaStream_t s);
// Its attributes (registers, local memory).
template <int HD, DropoutMode M>
void attributes(cudaFuncAttributes* fa);

}  // namespace attn_bwd_wg
}  // namespace dropbench
