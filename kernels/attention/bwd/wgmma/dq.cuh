// The wgmma attention backward's fast-mode dQ: consumer c adds dS K_c (its 64 keys) of the block into the fp32 dQ
// accumulator with atomics. dS^T (the dK GEMM's A fragments, rows = keys) goes to the consumer's shared-memory buffer
// in the 128-byte-swizzled layout TMA writes (64 key rows of 128 bytes, 16-byte chunk q ^ (row % 8)); read through a
// descriptor as an MN-major A operand it is dS (64 queries x 64 keys). B = K_c read MN-major (keys along K, dH
// contiguous); dH in chunks of 64 columns (32 accumulators each, atomics after each chunk). The deterministic mode
// skips this (a run-time branch) and runs the mma backward's dQ kernel instead.
#pragma once
#include <cstdint>

#include "kernels/attention/bwd/wgmma/config.cuh"
#include "kernels/common/ptx.cuh"

namespace dropbench {
namespace attn_bwd_wg {

// The warp's 16 key rows of dS^T (A fragments ds[kk], m64k16 layout) into buf. Conflict-free: per store a warp
// writes 8 rows x 4 words, the rows' chunks XOR-swizzled apart.
__device__ __forceinline__ void store_ds(uint32_t buf, const uint32_t (&ds)[4][4], int warp, int lane) {
#pragma unroll
  for (int nb = 0; nb < 8; ++nb)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int kl = warp * 16 + (lane >> 2) + 8 * hh;
      const uint32_t addr = buf + kl * 128 + ((nb ^ (kl & 7)) << 4) + (lane & 3) * 4;
      asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(ds[nb >> 1][2 * (nb & 1) + hh]) : "memory");
    }
  ptx::fence_proxy_async_smem();  // the generic stores before the wgmma's (async proxy) reads
}

// dQ[q0 + 64 rows, h] += dS K_c (unscaled; the conversion multiplies by the softmax scale), after the warpgroup's
// dS^T stores met at its named barrier.
template <class C>
__device__ __forceinline__ void dq_atomic(const Smem<C>& sm, uint32_t ds_buf, const Args& a, int c, int64_t tok0, int h,
                                          int q0, int warp, int lane) {
  using namespace ptx;
  constexpr int HD = C::kHeadDim;
  const int qr = q0 + warp * 16 + (lane >> 2);
  const int64_t ld = static_cast<int64_t>(a.hq) * HD;
  float* dst = a.dq_acc + (tok0 + qr) * ld + h * HD + 2 * (lane & 3);
  const bool ok0 = qr < a.sq, ok1 = qr + 8 < a.sq;
#pragma unroll
  for (int n = 0; n < HD / 64; ++n) {
    float dq[32];
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      wgmma_ss_m64n64k16_bf16<1, 1>(dq, desc_sw128(ds_buf + kk * 16 * 128, 64 * 128, 1024),
                                 desc_sw128(sm.k() + n * (C::kBk * 128) + c * 64 * 128 + kk * 16 * 128, C::kBk * 128, 1024),
                                 kk > 0 ? 1 : 0);
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(dq);
#pragma unroll
    for (int nb = 0; nb < 8; ++nb) {
      const int col = n * 64 + 8 * nb;
      if (ok0) atomicAdd(reinterpret_cast<float2*>(dst + col), make_float2(dq[4 * nb], dq[4 * nb + 1]));
      if (ok1) atomicAdd(reinterpret_cast<float2*>(dst + 8 * ld + col), make_float2(dq[4 * nb + 2], dq[4 * nb + 3]));
    }
  }
}

}  // namespace attn_bwd_wg
}  // namespace dropbench
