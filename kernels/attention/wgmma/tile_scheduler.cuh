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
#include "kernels/common/device.hpp"

namespace dropbench {
namespace attn_wg {

// One tile: first query row, head, batch, key blocks.
struct Tile {
  int q0, h, b, n_kv;
};

// The CTA's tiles. One tile per CTA: decoded once (tile_at(0, t0) by the kernel, before the barriers are set up)
// and returned by next(0); persistent: tile k of the CTA decoded at each next(k).
template <class C, bool kCausal>
struct TileScheduler {
  const attn::KernelArgs& a;
  const int sk;  // keys (= query rows of the sequence)
  Tile& t0;

  // The CTA's k-th tile; false past its last.
  __device__ bool tile_at(int k, Tile& T) const {
    int qb, h, b;
    if constexpr (!C::kPersist) {
      if (k > 0) return false;
      qb = attn::query_block_in_order<int>(gridDim.x, blockIdx.x, kCausal);
      b = blockIdx.z;
      h = blockIdx.y;
    } else {
      const int nq = (a.wrows + C::kBr - 1) / C::kBr, G = gridDim.x, i = blockIdx.x, hb_n = a.hq * a.batch;
      const int L = attn::persistent_tile_index(k, G, i, kCausal);
      if (L >= nq * hb_n) return false;
      // Causal: every head's heaviest query block, then every head's next heaviest, ... One order over all heads:
      // in groups of heads (to keep their K/V in L2) the weights saw-tooth across rounds, the snake no longer
      // evens the CTAs out and the persistent kernel measured slower than the one-tile one in every mode.
      if constexpr (kCausal) {
        qb = attn::query_block_in_order(nq, L / hb_n, true);
        h = (L % hb_n) % a.hq;
        b = (L % hb_n) / a.hq;
      } else {  // query block fastest, as the one-tile grid is launched
        qb = L % nq;
        h = (L / nq) % a.hq;
        b = L / (nq * a.hq);
      }
    }
    T.q0 = a.row0 + qb * C::kBr;
    T.h = h;
    T.b = b;
    T.n_kv = attn::key_blocks_visited<int>(sk, T.q0, C::kBr, C::kBc, kCausal);
    return true;
  }

  __device__ bool next(int k, Tile& T) const {
    if constexpr (C::kPersist) {
      return tile_at(k, T);
    } else {
      T = t0;
      return k == 0;
    }
  }
};

// The grid of a schedule with br-row query blocks: one CTA per (query block, head, batch), or, persistent, one
// per SM at most (1 CTA/SM fits), each walking its tiles.
inline dim3 launch_grid(const AttentionParams& p, int br, bool persist) {
  const dim3 g = attn::query_block_grid(p, br);
  if (!persist) return g;
  const int sms = current_device_sms();
  const int64_t tiles = static_cast<int64_t>(g.x) * g.y * g.z;
  if (tiles > INT32_MAX) throw UsageError("attention: more than 2^31 query tiles");
  return dim3(static_cast<unsigned>(std::min<int64_t>(tiles, sms)));
}

}  // namespace attn_wg
}  // namespace dropbench
