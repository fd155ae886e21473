// Problem-size arithmetic shared by the kernels and every host layer (header-only, no CUDA needed): a GEMM's FLOPs,
// the attention backward's FLOP convention, the QKV projection GEMM's M, N, K, and the bytes of its input, weight
// and output. The model uses these without linking the kernels library; the mask's size is MaskGeometry's
// (kernels/rng/dropout_scheme.cuh).
#pragma once
#include <cstdint>

namespace dropbench {

// FLOPs of C[m, n] = A[m, k] B[k, n] (one multiply and one add per term).
constexpr double gemm_flops(double m, double n, double k) { return 2.0 * m * n * k; }

// The attention backward's FLOPs over the forward's (five products against two), the usual convention: every
// TFLOP/s of a backward and the model's backward work count it.
inline constexpr double kAttentionBwdFlopRatio = 2.5;

// Y[M, N] = X[M, K] * W[N, K]^T: M = batch * sq tokens, K = embed, N = (q_heads + 2 kv_heads) * head_dim (the
// query heads, then the key heads, then the value heads of each token, as attention reads them).
struct QkvDims {
  int64_t m = 0, n = 0, k = 0;
  constexpr double flops() const {
    return gemm_flops(static_cast<double>(m), static_cast<double>(n), static_cast<double>(k));
  }
  // Bytes of X and W at `in_bytes` per element, and of the bf16 output QKV.
  constexpr uint64_t x_bytes(int in_bytes) const { return static_cast<uint64_t>(m) * k * in_bytes; }
  constexpr uint64_t w_bytes(int in_bytes) const { return static_cast<uint64_t>(n) * k * in_bytes; }
  constexpr uint64_t qkv_bytes() const { return static_cast<uint64_t>(m) * n * 2; }
};

constexpr QkvDims qkv_dims(int64_t batch, int64_t sq, int64_t embed, int64_t q_heads, int64_t kv_heads,
                           int64_t head_dim) {
  return QkvDims{batch * sq, (q_heads + 2 * kv_heads) * head_dim, embed};
}

}  // namespace dropbench
