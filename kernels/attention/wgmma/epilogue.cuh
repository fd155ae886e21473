// The wgmma attention consumer's epilogue: O /= rowsum (times 1/keep with dropout) stored as bf16, and the
// log-sum-exp LSE = m * scale + ln(rowsum) of each row (when asked for).
#pragma once
#include <cstdint>

#include <cuda_bf16.h>

#include "kernels/attention/attention_kernel.cuh"  // KernelArgs, pack_bf16

namespace dropbench {
namespace attn_wg {

// o: the thread's m64nHD accumulator elements of rows r_lo and r_lo + 8 of batch b, head h; row_max / row_sum: the
// online softmax's; sq: the sequence length.
template <int HD, bool kDrop>
__device__ __forceinline__ void store_o_lse(const attn::KernelArgs& a, const float (&o)[HD / 2], const float (&row_max)[2],
                                            const float (&row_sum)[2], int sq, int b, int h, int r_lo, int lane) {
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    float l = row_sum[hh];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = 1.f / l;
    const float fac = kDrop ? inv * a.keep_scale : inv;
    const int row = r_lo + 8 * hh;
    if (row < sq) {
      __nv_bfloat16* dst = a.o + (static_cast<int64_t>(b) * sq + row) * a.o_stride + h * HD + 2 * (lane & 3);
#pragma unroll
      for (int nb = 0; nb < HD / 8; ++nb)
        *reinterpret_cast<uint32_t*>(dst + nb * 8) = attn::pack_bf16(o[4 * nb + 2 * hh] * fac, o[4 * nb + 2 * hh + 1] * fac);
      if (a.lse != nullptr && (lane & 3) == 0)
        a.lse[(static_cast<int64_t>(b) * a.hq + h) * sq + row] = row_max[hh] * a.softmax_scale + logf(l);
    }
  }
}

}  // namespace attn_wg
}  // namespace dropbench
