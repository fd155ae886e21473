// Attention forward with dropout: two fused kernels -- FlashAttention-2-style (mma.sync m16n8k16 bf16 tensor
// cores; attention_kernel.cuh) and Hopper-native (sm_90a: TMA, mbarrier ring, wgmma, warp specialisation;
// attention_wgmma_kernel.cuh), both with online softmax in fp32 -- and a naive fp32 reference. Host API only;
// the dropout hooks both kernels call are in attention_dropout.cuh. docs/attention.md has the design.
// AttentionParams::kernel selects the kernel family (Auto: wgmma on sm_90 devices, else mma.sync); every
// family computes the same function with the same keep bits (outputs differ only in rounding).
//
// Shapes (row-major, bf16):
//   QKV [B*SQ, (Hq + 2*Hkv) * dH]: per token row, the Hq query heads, then the Hkv key heads, then the Hkv
//       value heads, each dH wide. Rows are qkv_row_stride elements apart (>= (Hq+2*Hkv)*dH, multiple of 8).
//   O   [B*SQ, Hq * dH] (rows o_row_stride elements apart, 0 = Hq*dH).
//   LSE [B, Hq, SQ] fp32, natural log: max + log(sum) of the undropped scaled scores (optional: may be null).
// Self-attention: SK = SQ. GQA: query head h reads KV head h / (Hq / Hkv).
// Dropout applies to the probabilities P (after exp, before P.V); kept values are scaled by keep_scale; the
// row sum used for normalisation is the sum of the undropped P. Keep bits follow dropout_scheme.cuh exactly
// (matrix bh = b*Hq + h, tile = r16 * cols64 + c64): mode Mask reads them from `mask` (tile layout of
// MaskGeometry{B*Hq, SQ, SQ, causal}), mode Fused generates them with attn_keep_word<rounds, threshold_bits>.
// Causal is top-left aligned: key col <= query row.
// Query-row window (row_begin, rows): only query rows [row_begin, row_begin + rows) of every (b, h) are computed
// and written (O rows, LSE entries); every key is still attended to (causal: col <= row). row_begin must be a
// multiple of attention_query_block() (the query rows of one CTA) and rows a multiple of it unless the window
// reaches the end of the sequence. Mode Mask then reads the window's mask only (MaskWindow layout of
// attention_mask_window(p), as the RNG kernel writes it for the same window); mode Fused uses the global tile
// indices, so a window's rows are bit for bit those of the whole-matrix run.
#pragma once
#include <cstdint>
#include <string>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "kernels/common/dispatch.cuh"
#include "kernels/rng/dropout_scheme.cuh"

namespace dropbench {

enum class DropoutMode { None, Mask, Fused };
const char* dropout_mode_name(DropoutMode m);  // "none" | "mask" | "fused"

// Kernel family. Auto = Wgmma where the device is sm_90 (H100/H200) and the shape is supported (head_dim 64 or
// 128), else Mma. Asking for Wgmma explicitly on another device is a UsageError.
enum class AttentionKernel { Auto, Mma, Wgmma };
const char* attention_kernel_family_name(AttentionKernel k);  // "auto" | "mma" | "wgmma"

struct AttentionParams {
  const __nv_bfloat16* qkv = nullptr;
  int64_t qkv_row_stride = 0;  // elements; 0 = (Hq + 2*Hkv) * dH
  __nv_bfloat16* o = nullptr;
  int64_t o_row_stride = 0;    // elements; 0 = Hq * dH
  float* lse = nullptr;        // may be null (not written)
  int batch = 1, sq = 0, q_heads = 1, kv_heads = 1, head_dim = 128;
  bool causal = false;
  float softmax_scale = 0.f;   // > 0; 0 = 1/sqrt(dH)
  // Dropout (ignored in mode None).
  const uint32_t* mask = nullptr;  // mode Mask: tile-layout keep words
  uint64_t seed = 0;
  uint32_t offset = 0;
  uint32_t drop_threshold = 0;     // Threshold::drop
  float keep_scale = 1.f;          // Threshold::scale
  int rounds = kDefaultRounds;                 // kPhiloxRounds (mode Fused)
  int threshold_bits = kDefaultThresholdBits;  // kThresholdBits (mode Fused)
  // Mode Fused only: when set, the kernel also stores the keep words it generates here, word for word what the
  // RNG kernel writes for the same (seed, offset, rounds, threshold) and window (tile layout, MaskWindow of
  // attention_mask_window(p); causal: the generated tiles only, the others keep their contents), so a later mode
  // Mask pass (the attention backward) can read them.
  uint32_t* mask_out = nullptr;
  // Query-row window (chunked pipeline): rows [row_begin, row_begin + rows), rows 0 = to the end.
  int row_begin = 0;
  int rows = 0;
  AttentionKernel kernel = AttentionKernel::Auto;
};

// The family launch_attention runs for p on the current device (never Auto).
AttentionKernel attention_kernel_resolved(const AttentionParams& p);

// Query rows per CTA of the kernel launch_attention picks (the granularity of row windows): 128 (both families).
int attention_query_block(const AttentionParams& p);
// The mask window mode Mask reads: mask_window(attention_mask_geometry(p), row_begin, rows).
MaskWindow attention_mask_window(const AttentionParams& p);

// The mask geometry attention reads in mode Mask: bh = B*Hq, SQ x SQ, causal as in p.
MaskGeometry attention_mask_geometry(const AttentionParams& p);
// 4 * B * Hq * SQ^2 * dH, halved when causal (the usual convention). For a row window: 4 * B * Hq * rows * SQ * dH,
// causal 4 * B * Hq * dH * rows * (row_begin + row_end) / 2 (the same convention, summing to the whole).
double attention_flops(const AttentionParams& p);

// Throws UsageError on an unsupported shape / setting, CudaError on a CUDA failure. Asynchronous.
void launch_attention(const AttentionParams& p, DropoutMode mode, cudaStream_t stream);

// Name of the kernel instance launch_attention picks, e.g. "attn_fwd_mma_hd128_q128k64w4_fused_r7_tw8_causal" or
// "attn_fwd_wgmma_hd128_q128k128s2_fused_r7_tw8_causal".
std::string attention_kernel_name(const AttentionParams& p, DropoutMode mode);

// Resources of that instance (cudaFuncGetAttributes + occupancy).
struct AttentionKernelInfo {
  std::string name;
  int threads = 0, block_rows = 0, block_cols = 0;
  int registers = 0;
  size_t smem_dynamic = 0, smem_static = 0, local_bytes = 0;
  int ctas_per_sm = 0;
};
AttentionKernelInfo attention_kernel_info(const AttentionParams& p, DropoutMode mode);

// ---- References (kernels/attention_ref.cu) ----
// Naive fp32 device reference (whole matrix only: rejects row windows): one block per (b, h, query row), exact expf, fp32 accumulation, the same keep
// bits (mode Mask: read from p.mask; mode Fused: attn_keep_word<p.rounds, p.threshold_bits>). SQ <= 16384.
// Writes O to p.o (bf16) or, when o_f32 is given, unrounded to o_f32 ([B*SQ, Hq*dH] dense fp32) instead;
// LSE to p.lse when set.
void launch_attention_reference(const AttentionParams& p, DropoutMode mode, cudaStream_t stream,
                                float* o_f32 = nullptr);

// Writes the tile-layout keep mask of geometry g with attn_keep_word<rounds, tw> (one warp per tile; tiles
// above the causal diagonal are skipped and keep their old contents). A deliberately simple generator for
// tests and benchmarks, independent of the production RNG kernel.
void launch_attention_mask_reference(uint32_t* mask, const MaskGeometry& g, uint64_t seed, uint32_t offset,
                                     uint32_t drop, int rounds, int tw, cudaStream_t stream);

}  // namespace dropbench
