// The wgmma attention backward's fast-mode dQ. Each consumer stores its dS^T (the dK GEMM's A fragments, rows = its 64
// keys) into its shared-memory buffer in the 128-byte-swizzled layout TMA writes (64 key rows of 128 bytes, 16-byte
// chunk q ^ (row % 8)); read through a descriptor as an MN-major A operand it is dS (64 queries x 64 keys). Once both
// consumers' dS^T of the block are stored (a named barrier of the two warpgroups), the block's dQ = dS K (64 queries x
// dH, the contraction over all 128 keys of the CTA) is split by 64-column slices of dH: slice n belongs to consumer (n
// + buffer) % 2 (dH 128: one slice each; dH 64: the consumers take turns). The owner computes its slice with wgmma
// after releasing the ring stage (8 k-steps: the two consumers' dS against their K rows), stages it in shared memory
// (fp32, the reduce's swizzled boxes) and one thread adds it into the fp32 accumulator with two TMA tensor reduce-adds
// (asynchronous: the staging is written again at the consumer's next slice, one or two blocks later, after that
// thread's bulk_wait_read). Each dQ element of a block is added once per CTA, by the copy engine, instead of once per
// consumer warp lane with atomics. The deterministic mode skips this (a run-time branch) and runs the mma backward's dQ
// kernel instead.
#pragma once
#include <cstdint>

#include <cuda.h>

#include "kernels/attention/bwd/wgmma/config.cuh"
#include "kernels/common/ptx.cuh"

namespace dropbench {
namespace attn_bwd_wg {

// The warp's 16 key rows of dS^T (A fragments ds[kk], m64k16 layout) into buf. Conflict-free: per store a warp
// writes 8 rows x 4 words, the rows' chunks XOR-swizzled apart. Row kl = 16 warp + lane / 4 + 8 hh, chunk nb at
// 128 kl + ((nb ^ kl % 8) << 4), word lane % 4: buf (1024-aligned), 128 kl and 4 (lane % 4) leave bits 4..6 clear,
// so the chunk is an XOR of nb << 4 into the row's address with kl % 8 in those bits, and hh = 1 (8 rows on, the
// same kl % 8) adds 1024.
__device__ __forceinline__ void store_ds(uint32_t buf, const uint32_t (&ds)[4][4], int warp, int lane) {
  const int kl = warp * 16 + (lane >> 2);
  const uint32_t row = buf + kl * 128 + ((kl & 7) << 4) + (lane & 3) * 4;
#pragma unroll
  for (int nb = 0; nb < 8; ++nb)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const uint32_t addr = (row ^ (nb << 4)) + 1024 * hh;
      ptx::st_shared_b32(addr, ds[nb >> 1][2 * (nb & 1) + hh]);
    }
  ptx::fence_proxy_async_smem();  // the generic stores before the wgmma's (async proxy) reads
}

// The warp's 16 query rows of a 64 x 64 fp32 dQ slice (the m64n64 accumulator) into the staging: columns 32 b ..
// 32 b + 31 in box b, row r at 128 r, its 16-byte chunk j at (j ^ (r % 8)). Row r = 16 warp + lane / 4 + 8 hh, chunk
// j = 2 (nb % 4) + (lane % 4) / 2, 8 bytes (lane % 2) in: stage and box_bytes (1024-aligned), 128 r and 8 (lane % 2)
// leave bits 4..6 clear, so the chunk is an XOR of (nb % 4) << 5 into the row's address with ((lane % 4) / 2) ^ (r %
// 8) in those bits, and hh = 1 (8 rows on, the same r % 8) adds 1024. A 64-bit store goes out a half-warp (4 rows x
// 32 bytes) per wavefront, and row r's 32 bytes sit at bank offset 32 ((nb % 4) ^ (r % 8) / 2): rows r and r ^ 1
// would meet. The odd rows therefore store column group nb ^ 2 where the even rows store nb (the same box), which
// puts the half-warp's 4 rows at 4 offsets: two wavefronts per store, the minimum for 256 bytes.
__device__ __forceinline__ void store_dq_stage(uint32_t stage, const float (&dq)[32], int box_bytes, int warp, int lane) {
  const int r = warp * 16 + (lane >> 2);
  const bool odd = (r & 1) != 0;
  const uint32_t row = (stage + r * 128 + ((((lane & 3) >> 1) ^ (r & 7)) << 4) + (lane & 1) * 8) ^ (odd ? 64u : 0u);
#pragma unroll
  for (int nb = 0; nb < 8; ++nb)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int e = 4 * nb + 2 * hh, o = 4 * (nb ^ 2) + 2 * hh;  // the even rows' elements, the odd rows'
      const uint32_t addr = (row ^ ((nb & 3) << 5)) + (nb >> 2) * box_bytes + 1024 * hh;
      ptx::st_shared_v2_f32(addr, odd ? dq[o] : dq[e], odd ? dq[o + 1] : dq[e + 1]);
    }
  ptx::fence_proxy_async_smem();  // the generic stores before the reduce's (async proxy) reads
}

// The two consumers meet once their dS^T of the block is stored (each after its store_ds), with this consumer's
// staging free: its issuing thread (t == 0) first waits until its earlier reduce-adds have read it.
__device__ __forceinline__ void dq_meet(int t) {
  if (t == 0) ptx::bulk_wait_read<0>();
  ptx::named_bar_sync(3, 256);
}

// The 64-column slice of the block's dQ that consumer c owns with dS^T buffer buf, or -1 (dH 64, the other
// consumer's turn).
template <class C>
__device__ __forceinline__ int dq_slice(int c, int buf) {
  // At most one slice per consumer and block: a second would overwrite the staging its first reduce-add still reads.
  static_assert(C::kSlices <= 2, "one dQ slice per consumer per block");
  const int n = (c + buf) & 1;  // (n + buf) % 2 == c
  return n < C::kSlices ? n : -1;
}

// Slice n of dQ[q0 .. q0 + 63] = dS K (unscaled; the conversion multiplies by the softmax scale) into dq, issued as
// one commit group once both consumers' dS^T of the block (buffer buf) are stored: 8 k-steps, the two consumers' dS
// against their K rows.
// The k-steps' descriptors are the first k-step's plus the byte offset / 16 (the address field counts 16 bytes, and
// every operand lies below 2^18 bytes of the shared window, so no carry leaves the field): consumer half's dS^T is
// ds(half, buf) = ds(0, buf) + 2 kDsBytes half, its K rows 64 x 128 bytes half further, a k-step 16 rows of 128 bytes.
template <class C>
__device__ __forceinline__ void issue_dq(const Smem<C>& sm, int buf, int n, float (&dq)[32]) {
  using namespace ptx;
  const uint64_t da0 = desc_sw128(sm.ds(0, buf), 64 * 128, 1024);
  const uint64_t db0 = desc_sw128(sm.k() + n * (C::kBk * 128), C::kBk * 128, 1024);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const int half = kk >> 2, k16 = kk & 3;  // the consumer whose keys, and the k-step within them
    wgmma_ss_m64n64k16_bf16<1, 1>(dq, da0 + static_cast<uint64_t>((half * 2 * C::kDsBytes + k16 * 16 * 128) >> 4),
                                  db0 + static_cast<uint64_t>((half * 64 * 128 + k16 * 16 * 128) >> 4), kk > 0 ? 1 : 0);
  }
  wgmma_commit();
}

// The completed slice n (issue_dq's, after its wait) staged in consumer c's staging, which is free (its issuing
// thread's earlier reduce-adds have read it: bulk_wait_read before the two warpgroups' barrier), and added into the
// fp32 accumulator of head h, batch b: two TMA tensor reduce-adds issued by the warpgroup's thread t == 0.
template <class C>
__device__ __forceinline__ void dq_reduce(const Smem<C>& sm, const CUtensorMap* tm_dq, const float (&dq)[32], int n,
                                          int c, int b, int h, int q0, int t, int warp, int lane) {
  using namespace ptx;
  constexpr int HD = C::kHeadDim;
  const uint32_t stage = sm.dq_stage(c);
  store_dq_stage(stage, dq, C::kDqBoxBytes, warp, lane);
  named_bar_sync(4 + c, 128);  // the warpgroup's slice staged
  if (t == 0) {
    tma_reduce_add_3d(tm_dq, h * HD + n * 64, q0, b, stage);
    tma_reduce_add_3d(tm_dq, h * HD + n * 64 + 32, q0, b, stage + C::kDqBoxBytes);
    bulk_commit();
  }
}

}  // namespace attn_bwd_wg
}  // namespace dropbench
