// Kernel parameters from a sweep point's workload: the one place that maps Workload fields (shape, seed,
// offset, rounds, threshold width) onto the kernels' host APIs. Callers add buffers, windows, schedules.
#pragma once
#include "kernels/attention/attention.cuh"
#include "src/core/config.hpp"
#include "kernels/gemm/gemm.cuh"
#include "kernels/rng/rng_mask.cuh"

namespace dropbench {

inline GemmShape qkv_gemm_shape(const Workload& w) {
  return qkv_gemm_shape(w.batch, w.sq, w.embed, w.q_heads, w.kv_heads, w.head_dim);
}

// workload.attention_kernel (validated by the config) by the kernels' own family names.
inline AttentionKernel attention_kernel_of(const Workload& w) {
  for (AttentionKernel k : {AttentionKernel::Mma, AttentionKernel::Wgmma})
    if (w.attention_kernel == attention_kernel_family_name(k)) return k;
  return AttentionKernel::Auto;
}

inline AttentionParams attention_params(const Workload& w, const Threshold& t) {
  AttentionParams ap;
  ap.kernel = attention_kernel_of(w);
  ap.batch = static_cast<int>(w.batch);
  ap.sq = static_cast<int>(w.sq);
  ap.q_heads = static_cast<int>(w.q_heads);
  ap.kv_heads = static_cast<int>(w.kv_heads);
  ap.head_dim = static_cast<int>(w.head_dim);
  ap.causal = w.causal;
  ap.seed = w.seed;
  ap.offset = w.offset;
  ap.drop_threshold = t.drop;
  ap.keep_scale = t.scale;
  ap.rounds = static_cast<int>(w.rounds);
  ap.threshold_bits = static_cast<int>(w.threshold_bits);
  return ap;
}

inline RngMaskParams rng_mask_params(const Workload& w, const Threshold& t, MaskLayout layout) {
  RngMaskParams rp;
  rp.seed = w.seed;
  rp.offset = w.offset;
  rp.rounds = static_cast<int>(w.rounds);
  rp.threshold_bits = static_cast<int>(w.threshold_bits);
  rp.drop = t.drop;
  rp.layout = layout;
  return rp;
}

}  // namespace dropbench
