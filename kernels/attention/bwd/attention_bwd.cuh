// Attention backward with dropout: host API. The gradients dQ, dK, dV of the forward of attention.cuh (the same
// function, the same keep bits) from Q, K, V (the QKV buffer), O, dO and the forward's LSE. docs/attention-backward.md
// has the design; the kernels are the mma.sync one, attention_bwd_kernel.cuh (instantiated in attention_bwd_hd*.cu),
// and the Hopper-native one, wgmma/ (instantiated in attention_bwd_wgmma_hd*.cu); the reference attention_bwd_ref.cu.
//
// Buffers (row-major, bf16 unless noted; SK = SQ, self-attention):
//   QKV  [B*SQ, (Hq + 2*Hkv) * dH]  as the forward reads it (fwd.qkv, fwd.qkv_row_stride).
//   O    [B*SQ, Hq * dH]            the forward's output (fwd.o, fwd.o_row_stride).
//   LSE  [B, Hq, SQ] fp32           the forward's LSE (fwd.lse, natural log), required.
//   dO   [B*SQ, Hq * dH]            (dout, dout_row_stride; 0 = Hq*dH).
//   dQKV [B*SQ, (Hq + 2*Hkv) * dH]  output, laid out like QKV (dqkv_row_stride; 0 = (Hq + 2*Hkv)*dH): dQ in the
//                                   query heads' columns, dK / dV in the key / value heads'. Every element of the
//                                   B*SQ rows' (Hq + 2*Hkv)*dH columns is written; padding columns are not.
//   workspace                       attention_backward_workspace_bytes(p) bytes of the launch's own p (fp32 D =
//                                   rowsum(dO * O) and a copy of the LSE, both in rows padded to 64 queries; in the
//                                   fast mode the fp32 dQ accumulator; for a causal group of more than 4 query heads
//                                   per KV head the wgmma kernel's fp32 dK / dV partials per subgroup: the size
//                                   depends on causal, the heads, SQ and the dQ mode); contents on entry do not matter.
// Dropout: mode None, Mask (fwd.mask, the tile-layout mask of attention_mask_geometry(fwd), as the RNG kernel
// writes it and the forward's mode Mask reads it) or Fused (regenerated in the kernels: attn_keep_word<fwd.rounds,
// fwd.threshold_bits> with fwd.seed, fwd.offset, fwd.drop_threshold). Kept values are scaled by fwd.keep_scale.
// GQA: dK, dV of KV head k sum the query heads of its group in a fixed order, in both dQ modes (h ascending; a split
// group: h ascending within each subgroup, then the subgroups in order).
// dQ: deterministic = a separate pass per query block walking the key blocks in order (bitwise reproducible, mode
// Mask and Fused give the same bits); otherwise fp32 atomics into the workspace, then a conversion.
// dK and dV are bitwise the same in both dQ modes.
// Whole matrix only (no query-row windows), head_dim 64 or 128, SQ >= 1, Hkv divides Hq.
// Kernel family: fwd.kernel. Mma runs the mma.sync backward; Wgmma the Hopper-native one (sm_90 only: a UsageError
// elsewhere), whose deterministic mode uses the mma backward's dQ kernel; Auto the wgmma one on an sm_90 device (the
// current one), else the mma one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "kernels/attention/attention.cuh"

namespace dropbench {

struct AttentionBwdParams {
  AttentionParams fwd;  // qkv, o, lse (read), shape, causal, scale, dropout fields, mask, kernel; window unused
  const __nv_bfloat16* dout = nullptr;
  int64_t dout_row_stride = 0;  // elements; 0 = Hq * dH
  __nv_bfloat16* dqkv = nullptr;
  int64_t dqkv_row_stride = 0;  // elements; 0 = (Hq + 2*Hkv) * dH
  void* workspace = nullptr;
  bool deterministic = false;
};

// Throws UsageError naming the field when p (with mode) cannot run: shape, head_dim, pointers, strides, dropout.
// Host only, touches no device.
void check_attention_backward(const AttentionBwdParams& p, DropoutMode mode);
// The same without the pointers (buffers not yet allocated): shape, head_dim, strides, dropout fields. The workspace
// size and the kernel name call it, so a size or a name is never given for a problem the launch would refuse.
void check_attention_backward_shape(const AttentionBwdParams& p, DropoutMode mode);

// The family launch_attention_backward runs for p (never Auto): Auto is Wgmma on an sm_90 device (the current one),
// else Mma. Auto asks the device; on a machine without one it gives Mma.
AttentionKernel attention_backward_kernel_resolved(const AttentionBwdParams& p);

// Workspace bytes: D and the LSE copy (each B*Hq*roundup(SQ, 64) fp32, 256-byte aligned) plus, unless deterministic,
// the dQ accumulator (B*SQ*Hq*dH fp32).
size_t attention_backward_workspace_bytes(const AttentionBwdParams& p);

// 2.5 x attention_flops(p.fwd) (the usual convention: five GEMMs against the forward's two).
double attention_backward_flops(const AttentionBwdParams& p);

// Asynchronous: preprocess (D), the dK/dV kernel (which also accumulates dQ in the fast mode), then the dQ pass
// (deterministic) or the conversion of the accumulator.
void launch_attention_backward(const AttentionBwdParams& p, DropoutMode mode, cudaStream_t stream);

// The main (dK/dV) kernel's instance name, e.g. "attn_bwd_mma_hd128_k64q64w4_fused_r7_tw8_causal_atomic" or
// "attn_bwd_wgmma_hd128_k128q64s2_mask_det".
std::string attention_backward_kernel_name(const AttentionBwdParams& p, DropoutMode mode);

// Resources of the main kernel (mma or wgmma) and of the deterministic dQ kernel (cudaFuncGetAttributes).
struct AttentionBwdKernelInfo {
  std::string name;
  int threads = 0, block_keys = 0, block_queries = 0;
  int registers = 0, dq_registers = 0;
  size_t smem_dynamic = 0, dq_smem_dynamic = 0, local_bytes = 0, dq_local_bytes = 0;
};
AttentionBwdKernelInfo attention_backward_kernel_info(const AttentionBwdParams& p, DropoutMode mode);

// ---- Reference (attention_bwd_ref.cu) ----
// Naive fp32 gradients straight from the definition, independent of O and LSE: per (b, h, query row) one block
// recomputes the softmax row, the keep bits element by element (the mask, or attn_keep_word), D = sum_j P Z dP,
// dS and dQ; per (b, kv head, key) one block sums dK, dV over the group's heads and all query rows. Writes
// dqkv_f32 [B*SQ, (Hq + 2*Hkv)*dH] dense fp32. SQ <= 4096. Scratch: attention_backward_reference_scratch_bytes.
size_t attention_backward_reference_scratch_bytes(const AttentionBwdParams& p);
void launch_attention_backward_reference(const AttentionBwdParams& p, DropoutMode mode, float* dqkv_f32, void* scratch,
                                         cudaStream_t stream);

}  // namespace dropbench
