// Online softmax of one key block in the wgmma attention consumer (fp32, log2 domain). The thread holds the m64nBN
// accumulator's elements of rows r_lo and r_lo + 8 (hh = 0, 1): element i is row r_lo + 8*((i/2)%2), key
// 8*(i/4) + 2*(lane%4) + i%2; a row's 4 threads are lanes 4r .. 4r+3 (two shuffles reduce over them).
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/attention/attention_kernel.cuh"  // fast_exp2

namespace dropbench {
namespace attn_wg {

// Block j of S (keys j*BN ..): keys past sk and (causal) keys after the row masked, the running max and sum
// updated, S becomes P (fp32) and alpha[hh] the factor by which the row's earlier O is to be scaled; then the
// dropout's fp32 application where the schedule codes it so (DropoutApply::apply_fp32 with the keep words kw).
// wrow: the warp's first query row; sl2: softmax scale * log2(e).
template <int BN, bool kCausal, class Drop>
__device__ void online_softmax(float (&s)[BN / 2], float (&row_max)[2], float (&row_sum)[2], float (&alpha)[2], int j, int sk,
                               int wrow, int r_lo, int lane, float sl2, Drop& drop, const uint32_t (&kw)[BN / 64]) {
  constexpr int NS = BN / 2;
  const int kv0 = j * BN;
  const bool edge = (kv0 + BN > sk) || (kCausal && kv0 + BN - 1 > wrow);
  if (edge) {
#pragma unroll
    for (int i = 0; i < NS; ++i) {
      const int col = kv0 + 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
      const int row = r_lo + 8 * ((i >> 1) & 1);
      if (col >= sk || (kCausal && col > row)) s[i] = -INFINITY;
    }
  }
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    float mx = row_max[hh];
#pragma unroll
    for (int nb = 0; nb < BN / 8; ++nb) mx = fmaxf(mx, fmaxf(s[4 * nb + 2 * hh], s[4 * nb + 2 * hh + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float ms = (mx == -INFINITY) ? 0.f : mx * sl2;
    alpha[hh] = attn::fast_exp2(row_max[hh] * sl2 - ms);
    row_max[hh] = mx;
    float sum = 0.f;
#pragma unroll
    for (int nb = 0; nb < BN / 8; ++nb)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float pe = attn::fast_exp2(__fmaf_rn(s[4 * nb + 2 * hh + e], sl2, -ms));
        s[4 * nb + 2 * hh + e] = pe;
        sum += pe;
      }
    row_sum[hh] = __fmaf_rn(row_sum[hh], alpha[hh], sum);
  }
  drop.apply_fp32(s, kw);
}

}  // namespace attn_wg
}  // namespace dropbench
