// The consumer warpgroups' main loop pieces of the wgmma attention forward: the ping-pong turns, the K/V ring
// position, the two GEMMs of a key block (S = Q K^T and O += P V with wgmma.mma_async) and the O rescale.
// Warp w of consumer c owns query rows q0 + 64c + 16w .. +15, exactly one 16-row strip of the counter scheme's
// mask tiles, so the dropout hooks apply per 64-key slice of the m64nBN accumulator unchanged.
#pragma once
#include <cstdint>

#include "kernels/attention/wgmma/smem.cuh"
#include "kernels/common/ptx.cuh"

namespace dropbench {
namespace attn_wg {

// Ping-pong turns: named barrier 2 + c is "consumer c may issue"; 128 threads of c sync on it, 128 of the other
// consumer arrive. Consumer 1 grants the first turn; both take n_kv + 1 turns per tile (n_kv blocks + the tail
// P V; persistent: the turns go on across tiles), and consumer 1 skips the hand-over of its last tile's tail so
// every barrier generation completes.
template <bool kPingPong>
struct Turns {
  const int c, my_turn, other_turn;
  __device__ __forceinline__ void grant_first() const {
    if (kPingPong && c == 1) ptx::named_bar_arrive(2, 256);
  }
  __device__ void take() const {
    if constexpr (kPingPong) ptx::named_bar_sync(my_turn, 256);
  }
  __device__ void pass(bool last) const {
    if constexpr (kPingPong) {
      if (!(last && c == 1)) ptx::named_bar_arrive(other_turn, 256);
    }
  }
};

// Block j's K/V stage and barrier parity: it0 is the ring position of the tile's block 0 (persistent: the blocks
// consumed over the CTA's earlier tiles).
template <int ST>
struct Ring {
  const int& it0;
  __device__ int stage(int j) const { return (it0 + j) % ST; }
  __device__ uint32_t parity(int j) const { return static_cast<uint32_t>(((it0 + j) / ST) & 1); }
};

// The GEMMs of consumer c into its accumulators s (S) and o (O): S = Q K^T (A = its 64 Q rows, B = K, both
// K-major in shared memory) and O += P V (A = P from registers, B = V MN-major). Descriptor k-step offsets are
// compile-time adds to the 14-bit address field (+16 bytes = +1). Q, K: k-step kk reads slice kk/4 at byte
// 32*(kk%4) of each row; V: k-step kk (16 keys) starts 16*128 bytes further, the dH slices LBO = BN*128 bytes
// apart, 8-key groups SBO = 1024.
template <class C>
struct Gemms {
  static constexpr int HD = C::kHeadDim, BN = C::kBc;
  static constexpr int KS = HD / 16;  // k-steps of S = Q K^T
  static constexpr int PK = BN / 16;  // k-steps of O += P V
  const uint64_t dq0;                 // consumer c's Q descriptor, k-step 0
  const SmemLayout<C>& sm;
  float (&s)[BN / 2];
  float (&o)[HD / 2];

  __device__ uint64_t desc_q(int kk) const {
    return dq0 + static_cast<uint64_t>(((kk >> 2) * (C::kBr * 128) + (kk & 3) * 32) >> 4);
  }
  __device__ uint64_t desc_k(int st, int kk) const {
    return ptx::desc_sw128(sm.sK + st * C::kKVBytes + (kk >> 2) * (BN * 128) + (kk & 3) * 32, 16, 1024);
  }
  __device__ uint64_t desc_v(int st, int kk) const {
    return ptx::desc_sw128(sm.sV + st * C::kKVBytes + kk * 16 * 128, BN * 128, 1024);
  }
  __device__ void issue_s(int st) const {
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) ptx::wgmma_ss_bf16<BN>(s, desc_q(kk), desc_k(st, kk), kk > 0 ? 1 : 0);
    ptx::wgmma_commit();
  }
  __device__ void issue_pv(int st, uint32_t (&pa)[PK][4]) const {
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < PK; ++kk) ptx::wgmma_rs_bf16_tn<HD>(o, pa[kk], desc_v(st, kk), 1);
    ptx::wgmma_commit();
  }
};

// O *= alpha of the last softmax (rows r_lo: elements 0, 1 of each n8 block; r_lo + 8: elements 2, 3).
template <int NO>
__device__ void rescale_o(float (&o)[NO], const float (&alpha)[2]) {
#pragma unroll
  for (int i = 0; i < NO; ++i) o[i] *= alpha[(i >> 1) & 1];
}

}  // namespace attn_wg
}  // namespace dropbench
