// Attention backward: kernel arguments, tiling and the per-instance entry points shared by the host launcher
// (attention_bwd.cu) and the instance translation units (attention_bwd_hd*.cu). docs/attention-backward.md.
#pragma once
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "kernels/attention/attention.cuh"
#include "kernels/rng/dropout_scheme.cuh"

namespace dropbench {
namespace attn_bwd {

// Tiling: a CTA of 4 warps owns 64 keys (16 per warp, the rows of S^T / dP^T / dK / dV) and walks query blocks
// of 64; the deterministic dQ pass has 4 warps own 64 query rows and walks key blocks of 64. One 64 x 64 block is
// four 16 x 64 mask tiles (one tile column, since key blocks start at multiples of 64).
template <int HD>
struct Cfg {
  static constexpr int kHeadDim = HD;
  static constexpr int kBk = 64, kBq = 64, kWarps = 4, kThreads = 128;
  static constexpr int kDB = HD / 8;  // n8-blocks of a dK / dV / dQ row fragment
  static constexpr int kRowBytes = HD * 2;
  static constexpr int kTile = 64 * kRowBytes;  // one 64-row bf16 tile
  // dK/dV kernel: K, V (once per CTA); Q, dO (two stages each); dS^T (64 x 64 bf16); per stage 64 LSE (natural
  // log, as the forward writes it; scaled by log2 e where used), 64 D and 128 keep words.
  static constexpr int kOffK = 0, kOffV = kTile, kOffQ = 2 * kTile, kOffDo = 4 * kTile, kOffDs = 6 * kTile;
  static constexpr int kOffLse = kOffDs + 64 * 64 * 2;
  static constexpr int kOffD = kOffLse + 2 * 64 * 4;
  static constexpr int kOffM = kOffD + 2 * 64 * 4;
  static constexpr int kSmemMain = kOffM + 2 * 128 * 4;
  // dQ kernel: Q, dO (once per CTA); K, V (two stages each).
  static constexpr int kDqOffQ = 0, kDqOffDo = kTile, kDqOffK = 2 * kTile, kDqOffV = 4 * kTile;
  static constexpr int kSmemDq = 6 * kTile;
  static_assert(HD == 64 || HD == 128, "head_dim 64 or 128");
};

struct Args {
  const __nv_bfloat16* qkv;
  const __nv_bfloat16* dout;
  const float* lse;
  const float* dsum;    // D [B*Hq, sq_pad] (the preprocessing kernel's; 0 past SQ)
  const float* lse_pad; // the forward's LSE copied to [B*Hq, sq_pad] (0 past SQ): whole 256-byte rows for bulk copies
  const uint32_t* mask;
  __nv_bfloat16* dqkv;
  float* dq_acc;        // fast mode: [B*SQ, Hq*dH] fp32, zeroed before the main kernel
  float* dkv_part;      // wgmma, subgroups > 1: dK and dV partial sums, [2][subgroups][B*SQ, Hkv*dH] fp32
  int64_t qkv_stride, dout_stride, dqkv_stride;
  int64_t dkv_slab;     // elements of one [B*SQ, Hkv*dH] slab of dkv_part
  int sq, hq, hkv, group;
  int subgroups;        // the wgmma kernel's CTAs per (KV head, key block): each walks group / subgroups query heads
  int section;          // the wgmma kernel's launch order: units per section (tile_order.hpp, bwd_cta_sectioned)
  int sq_pad;           // SQ rounded up to 64: the row length of dsum and lse_pad
  int causal, dq_fast;  // dq_fast: the fast mode (dQ added into dq_acc in any order: TMA reduce-adds, or atomics)
  int rounds, tw;       // mode Fused (the wgmma kernel chooses them at run time; the mma kernel's are template arguments)
  float scale, scale_log2, keep_scale;
  uint64_t seed;
  uint32_t offset, drop;
  MaskGeometry geo;     // B*Hq matrices of SQ x SQ
};

// Launches the main (dK, dV and, unless deterministic, atomic dQ) kernel and, when deterministic, the dQ kernel.
template <int HD, DropoutMode M, int R, int TW>
void launch_instance(const Args& a, int batch, bool deterministic, cudaStream_t s);
// The deterministic dQ kernel alone (the wgmma backward's deterministic mode runs it after its own dK/dV kernel).
template <int HD, DropoutMode M, int R, int TW>
void launch_dq_instance(const Args& a, int batch, cudaStream_t s);
// Attributes of the two kernels of the instance.
template <int HD, DropoutMode M, int R, int TW>
void instance_attributes(cudaFuncAttributes* main_kernel, cudaFuncAttributes* dq_kernel);

}  // namespace attn_bwd
}  // namespace dropbench
