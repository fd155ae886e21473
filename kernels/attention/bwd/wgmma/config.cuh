// The wgmma attention backward's tiling and shared-memory layout (docs/attention-backward.md, "The Hopper-native
// kernel"). One CTA = 128 keys of one KV head and batch: a producer warpgroup (one thread issues the TMA loads) and
// two consumer warpgroups, each owning 64 of the keys (the M dimension of its S^T, dP^T, dK, dV accumulators); the
// CTA walks the group's (a split causal group: its subgroup's) query heads and, per head, the query blocks of 64
// through a kStages-deep ring.
#pragma once
#include <cstdint>

#include "kernels/attention/bwd/attention_bwd_args.cuh"
#include "kernels/attention/tile_order.hpp"
#include "kernels/attention/wgmma/config.cuh"  // Regs: the CTA and register split both wgmma kernels share

namespace dropbench {
namespace attn_bwd_wg {

using attn_bwd::Args;

template <int HD>
struct Cfg {
  static constexpr int kHeadDim = HD;
  static constexpr int kBk = 128;        // keys per CTA (64 per consumer warpgroup)
  static constexpr int kBq = 64;         // queries per block (the N of S^T / dP^T, the K of dV / dK)
  static constexpr int kStages = 2;      // Q / dO / LSE / D / mask-word ring
  static constexpr int kThreads = attn_wg::Regs::kThreads;  // producer warpgroup + 2 consumer warpgroups
  static constexpr int kSlices = HD / 64;  // 128-byte column slices of a row (TMA boxes of 64 columns)
  static constexpr int kKBytes = kBk * HD * 2;  // K (or V) of the CTA: kSlices slices of 128 rows x 128 bytes
  static constexpr int kQBytes = kBq * HD * 2;  // one Q (or dO) block: kSlices slices of 64 rows x 128 bytes
  // Mode Mask: the block's words, 4 query strips x 2 tile columns (the two warpgroups' 64 keys) x 32 words; the
  // two tiles of a strip are adjacent in the mask (256 bytes, one bulk copy per strip).
  static constexpr int kMaskBytes = 4 * 2 * 32 * 4;
  // Stage: Q, dO, 64 LSE, 64 D, the mask words; padded to 1024 bytes (the swizzled tiles' alignment).
  static constexpr int kOffQ = 0, kOffDo = kQBytes, kOffLse = 2 * kQBytes, kOffD = kOffLse + 256, kOffMask = kOffD + 256;
  static constexpr int kStageBytes = (kOffMask + kMaskBytes + 1023) / 1024 * 1024;
  // dS^T of one consumer (64 keys x 64 queries bf16, 128-byte rows, swizzled): the A operand of its dQ GEMM; two
  // buffers per consumer (alternating blocks), so a block's stores never meet the previous block's GEMM reads.
  static constexpr int kDsBytes = 64 * kBq * 2;
  // Mode Fused: each consumer's generated words, one buffer of 4 strips x 32 words (as bytes: keep_layout.cuh) per
  // ring stage. A buffer is written again only for the stage's next block, which the producer loads after both
  // consumers released the stage, i.e. after every read of the buffer's previous words (the chain release ->
  // producer -> full barrier).
  static constexpr int kWordBytes = kStages * 128 * 4;
  // The fast mode's dQ staging of one consumer: a 64-query x 64-column fp32 slice of dQ as two TMA boxes of 32
  // columns (128-byte rows, 128-byte swizzle), the source of the tensor reduce-add into the accumulator (dq.cuh).
  static constexpr int kDqBoxBytes = kBq * 32 * 4;
  static constexpr int kOffK = 0, kOffV = kKBytes, kOffStages = 2 * kKBytes;
  static constexpr int kOffDs = kOffStages + kStages * kStageBytes;
  static constexpr int kOffWords = kOffDs + 4 * kDsBytes;
  static constexpr int kOffDqStage = kOffWords + 2 * kWordBytes;
  static constexpr int kOffBar = kOffDqStage + 2 * 2 * kDqBoxBytes;
  static constexpr int kBarriers = 1 + 2 * kStages;                      // kv_full, full[s], empty[s]
  static constexpr int kSmem = 1024 + kOffBar + 8 * kBarriers;           // + alignment slack
  static_assert(kSmem <= 232448, "shared memory per block");
  // The swizzled tiles (TMA boxes, wgmma operands, dS^T) start on 1024-byte boundaries; bulk copies need 16 bytes.
  static_assert(kKBytes % 1024 == 0 && kQBytes % 1024 == 0 && kStageBytes % 1024 == 0 && kOffDs % 1024 == 0 &&
                    kDsBytes % 1024 == 0 && kOffDqStage % 1024 == 0 && kDqBoxBytes % 1024 == 0,
                "1024-byte aligned tiles");
  static_assert(kOffLse % 16 == 0 && kOffD % 16 == 0 && kOffMask % 16 == 0 && kOffBar % 8 == 0, "bulk copy / mbarrier alignment");
  // One stage's transaction bytes (Q, dO, LSE, D, the mask words) and K + V fit an mbarrier's tx-count.
  static_assert(2 * kQBytes + 512 + kMaskBytes < (1 << 20) && 2 * kKBytes < (1 << 20), "mbarrier tx-count");
  static_assert(HD == 64 || HD == 128, "head_dim 64 or 128");
};

// Shared-memory addresses of one CTA (from the 1024-aligned base) and its mbarriers:
//   kv_full    K and V of the CTA loaded (once)
//   full[s]    stage s loaded (Q, dO, LSE, D and, mode Mask, the words): one arrival (the producer's expect_tx)
//   empty[s]   stage s released: one arrival per consumer thread (256)
template <class C>
struct Smem {
  uint32_t base;       // shared-window address (descriptors, TMA, mbarriers)
  unsigned char* gen;  // the same byte as a generic pointer (plain loads and stores)
  __device__ __forceinline__ explicit Smem(unsigned char* raw) {
    const uint32_t r = static_cast<uint32_t>(__cvta_generic_to_shared(raw));
    base = (r + 1023u) & ~1023u;
    gen = raw + (base - r);
  }
  template <class T>
  __device__ __forceinline__ T* at(uint32_t addr) const { return reinterpret_cast<T*>(gen + (addr - base)); }
  __device__ __forceinline__ uint32_t k() const { return base + C::kOffK; }
  __device__ __forceinline__ uint32_t v() const { return base + C::kOffV; }
  __device__ __forceinline__ uint32_t stage(int s) const { return base + C::kOffStages + s * C::kStageBytes; }
  __device__ __forceinline__ uint32_t q(int s) const { return stage(s) + C::kOffQ; }
  __device__ __forceinline__ uint32_t dout(int s) const { return stage(s) + C::kOffDo; }
  __device__ __forceinline__ uint32_t lse(int s) const { return stage(s) + C::kOffLse; }
  __device__ __forceinline__ uint32_t dsum(int s) const { return stage(s) + C::kOffD; }
  __device__ __forceinline__ uint32_t mask(int s) const { return stage(s) + C::kOffMask; }
  __device__ __forceinline__ uint32_t ds(int c, int buf) const { return base + C::kOffDs + (2 * c + buf) * C::kDsBytes; }
  __device__ __forceinline__ uint32_t words(int c, int buf) const { return base + C::kOffWords + c * C::kWordBytes + buf * 512; }
  __device__ __forceinline__ uint32_t dq_stage(int c) const { return base + C::kOffDqStage + c * 2 * C::kDqBoxBytes; }
  __device__ __forceinline__ uint32_t kv_full() const { return base + C::kOffBar; }
  __device__ __forceinline__ uint32_t full(int s) const { return base + C::kOffBar + 8u + 8u * s; }
  __device__ __forceinline__ uint32_t empty(int s) const { return base + C::kOffBar + 8u + 8u * (C::kStages + s); }
};

// The CTA's work: keys [k0, k0 + 128) of KV head hk in batch b, the query heads of subgroup sg of its group
// (tile_order.hpp: bwd_subgroups; heads hk*group + sg*heads ..), from the launch index in sections of units
// (tile_order.hpp's bwd_cta_sectioned: a section's key blocks heaviest first, its units' CTAs of a block together,
// so the CTAs in flight share a few units' query heads). Iteration it = query head hk*group + sg*heads
// + it / nq, query block qb0 + it % nq (causal: from the first block that reaches key k0, qb0 = k0 / 64). Heads in
// ascending order: dK, dV sum the subgroup's heads in a fixed order.
struct Schedule {
  int k0, hk, b, sg, head0, qb0, nq, n_it;
  __device__ __forceinline__ Schedule(const Args& a, int kb, int hk_, int b_, int sg_) : hk(hk_), b(b_), sg(sg_) {
    k0 = kb * 128;
    const int nqb = (a.sq + 63) / 64, heads = a.group / a.subgroups;
    head0 = hk * a.group + sg * heads;
    qb0 = attn::first_query_block(k0, 64, a.causal);
    nq = nqb - qb0;
    n_it = heads * nq;
  }
  __device__ __forceinline__ int head(int it) const { return head0 + it / nq; }
  __device__ __forceinline__ int q0(int it) const { return (qb0 + it % nq) * 64; }
  // From head(it), q0(it) to head(it + 1), q0(it + 1) without the division: the next query block, or past the
  // last one the next head's first.
  __device__ __forceinline__ void advance(int& h, int& q) const {
    q += 64;
    if (q == (qb0 + nq) * 64) {
      q = qb0 * 64;
      ++h;
    }
  }
};

}  // namespace attn_bwd_wg
}  // namespace dropbench
