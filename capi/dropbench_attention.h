/* C ABI over dropbench's attention kernels (kernels/attention/) and its RNG mask kernel, for callers outside
 * C++ -- scripts/h2h_attention.py loads it with ctypes to time our kernels in the same process as PyTorch's SDPA
 * backends. Links the kernels library only (no src/). Every call is asynchronous on `stream` (a cudaStream_t; NULL
 * = the legacy default stream) and returns 0, or DBA_USAGE (bad parameter: dba_last_error() names the field and the
 * allowed values), DBA_CUDA (a CUDA failure, with file:line and the call) or DBA_OTHER. The message is per thread.
 *
 * Buffers are those of kernels/attention/attention.cuh: QKV [B*SQ, (Hq + 2*Hkv) * dH] bf16 (row stride
 * qkv_row_stride elements, 0 = dense), O [B*SQ, Hq * dH] bf16, LSE [B, Hq, SQ] fp32 (optional). The keep bits of
 * mode MASK (read from `mask`, written by dba_make_mask) and mode FUSED (generated in the kernel) are the same
 * bits for the same (seed, offset, rounds, threshold_bits, dropout_p). */
#ifndef DROPBENCH_ATTENTION_H
#define DROPBENCH_ATTENTION_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility and exports these functions only (no CUDA runtime symbols). */
#if defined(__GNUC__)
#define DBA_API __attribute__((visibility("default")))
#else
#define DBA_API
#endif

#define DBA_ABI_VERSION 2
enum { DBA_OK = 0, DBA_CUDA = 1, DBA_USAGE = 2, DBA_OTHER = 3 };
enum { DBA_MODE_NONE = 0, DBA_MODE_MASK = 1, DBA_MODE_FUSED = 2 };
enum { DBA_KERNEL_AUTO = 0, DBA_KERNEL_MMA = 1, DBA_KERNEL_WGMMA = 2 };

typedef struct dba_params {
  const void* qkv;         /* bf16 */
  int64_t qkv_row_stride;  /* elements; 0 = (Hq + 2*Hkv) * dH */
  void* o;                 /* bf16 */
  int64_t o_row_stride;    /* elements; 0 = Hq * dH */
  float* lse;              /* may be NULL */
  int32_t batch, sq, q_heads, kv_heads, head_dim;
  int32_t causal;          /* 0 / 1: top-left aligned, key col <= query row */
  float softmax_scale;     /* 0 = 1/sqrt(dH) */
  double dropout_p;        /* [0, 1): modes MASK and FUSED */
  uint64_t seed;
  uint32_t offset;
  int32_t rounds;          /* Philox rounds: 3, 5, 7, 10 */
  int32_t threshold_bits;  /* 8, 16, 32 */
  int32_t kernel;          /* DBA_KERNEL_* */
  const uint32_t* mask;    /* mode MASK: tile-layout keep words (dba_mask_bytes bytes) */
  uint32_t* mask_out;      /* mode FUSED, may be NULL: the kernel also writes the keep words it generates here, what
                              dba_make_mask writes (dba_mask_bytes bytes; causal: tiles above the diagonal untouched) */
} dba_params;

DBA_API int dba_abi_version(void);
/* sizeof(dba_params): a binding checks its own struct layout against it. */
DBA_API size_t dba_params_size(void);
/* Fills *p with the defaults (batch 1, 1 head each, dH 128, rounds 7, 8-bit thresholds, kernel auto). */
DBA_API void dba_params_init(dba_params* p);
DBA_API int dba_attention(const dba_params* p, int mode, void* stream);
/* Bytes of the tile-layout mask mode MASK reads for p's shape (B*Hq matrices of SQ x SQ, causal as in p). */
DBA_API int dba_mask_bytes(const dba_params* p, uint64_t* bytes);
/* The RNG mask kernel (the one dropbench's pipelines run) writes that mask to `mask`. */
DBA_API int dba_make_mask(const dba_params* p, uint32_t* mask, void* stream);
/* The keep bits of a tile-layout mask as a dense matrix, on the host (no device): keep[(bh * sq + row) * sq + col]
 * = 1 where element (row, col) of matrix bh = b * q_heads + h is kept, 0 where it is dropped or above the causal
 * diagonal. words: the mask of p's shape (dba_mask_bytes bytes, e.g. dba_make_mask's output copied to the host);
 * keep: batch * q_heads * sq * sq bytes. For references that apply the kernels' keep bits element by element: the
 * tile layout stays defined in one place (kernels/rng/dropout_scheme.cuh). */
DBA_API int dba_mask_expand(const dba_params* p, const uint32_t* words, uint8_t* keep);
/* The kernel instance dba_attention launches for (p, mode), e.g. "attn_fwd_wgmma_hd128_..."; truncated to len-1. */
DBA_API int dba_kernel_name(const dba_params* p, int mode, char* buf, size_t len);
/* The effective dropout probability of p's threshold (drop / 2^threshold_bits) and the scale on kept values. */
DBA_API int dba_threshold(const dba_params* p, double* p_effective, float* keep_scale);
/* Attention backward (kernels/attention/bwd/attention_bwd.cuh): reads p's QKV, O (p->o, the forward's output),
 * LSE (p->lse, the forward's, required) and dout [B*SQ, Hq*dH] bf16 (dense); writes dqkv [B*SQ, (Hq + 2*Hkv)*dH]
 * bf16 (dense, laid out like QKV: dQ, dK, dV in the Q, K, V heads' columns). mode, mask, seed, offset, rounds,
 * threshold_bits and dropout_p as in the forward (the same keep bits). deterministic = 1: fixed-order dQ (mode MASK
 * and FUSED bitwise equal); 0: fp32 atomics. workspace: dba_attention_backward_workspace_bytes bytes. p->kernel is
 * ignored (one backward family). */
DBA_API int dba_attention_backward_workspace_bytes(const dba_params* p, int deterministic, uint64_t* bytes);
DBA_API int dba_attention_backward(const dba_params* p, int mode, const void* dout, void* dqkv, void* workspace,
                                   int deterministic, void* stream);
/* The backward's main kernel instance, e.g. "attn_bwd_mma_hd128_k64q64w4_fused_r7_tw8_causal_atomic". */
DBA_API int dba_backward_kernel_name(const dba_params* p, int mode, int deterministic, char* buf, size_t len);
DBA_API const char* dba_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
