// Which tiles a wgmma attention CTA computes: one tile per CTA (from blockIdx; causal: heaviest query block first),
// or persistent CTAs (at most one per SM) walking the tiles in the order of tile_order.hpp (causal: every head's
// heaviest query block, then every head's next heaviest, ..., rounds alternating direction). Host side: the grid.
#pragma once
#include <algorithm>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/attention/attention.cuh"
#include "kernels/attention/attention_kernel.cuh"  // KernelArgs, query_block_grid
#include "kernels/attention/tile_order.hpp"
#include "kernels/common/check.hpp"

namespace dropbench {
namespace attn_wg {

// The grid of a schedule with br-row query blocks: one CTA per (query block, head, batch), or, persistent, one
// per SM at most (1 CTA/SM fits), each walking its tiles.
inline dim3 launch_grid(const AttentionParams& p, int br, bool persist) {
  const dim3 g = attn::query_block_grid(p, br);
  if (!persist) return g;
  int dev = 0, sms = 0;
  DB_CUDA(cudaGetDevice(&dev));
  DB_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int64_t tiles = static_cast<int64_t>(g.x) * g.y * g.z;
  if (tiles > INT32_MAX) throw UsageError("attention: more than 2^31 query tiles");
  return dim3(static_cast<unsigned>(std::min<int64_t>(tiles, sms)));
}

}  // namespace attn_wg
}  // namespace dropbench
