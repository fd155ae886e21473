// What the attention GPU tests (forward: test_attention_gpu.cu, backward: test_attention_bwd_gpu.cpp) share: the
// per-process input seed, whether a kernel family can run on this device, the forward's parameters of a test
// problem (shape, buffers, dropout fields), and how gtest prints a kernel family.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <random>
#include <string>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "gpu_guard.hpp"
#include "kernels/attention/attention.cuh"
#include "kernels/rng/dropout_scheme.cuh"

namespace dropbench {

// ctest lists the kernel parameter by its family name (ADL: beside the enum, outside the anonymous namespace).
inline void PrintTo(AttentionKernel k, std::ostream* os) { *os << attention_kernel_family_name(k); }

namespace test {

// Every problem draws fresh inputs: a per-process base seed (random, or DB_ATTN_SEED to reproduce a failure; printed
// once) mixed with a counter.
inline uint64_t base_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("DB_ATTN_SEED");
    const uint64_t s = env ? std::strtoull(env, nullptr, 0)
                           : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    std::printf("[ info ] input seed DB_ATTN_SEED=0x%llx\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}
inline uint64_t next_draw_seed() {
  static uint64_t draw = 0;
  return base_seed() ^ (++draw * 0x9e3779b97f4a7c15ULL);
}

// Whether kernel family k can run here (wgmma: an sm_90 device).
inline bool kernel_available(AttentionKernel k) {
  if (k != AttentionKernel::Wgmma) return true;
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return major == 9 && minor == 0;
}

// Both kernel families, as the parameter of a per-family test suite, named by family:
//   INSTANTIATE_TEST_SUITE_P(Kernels, Suite, test::kAllKernels, test::kernel_param_name);
inline const auto kAllKernels = ::testing::Values(AttentionKernel::Mma, AttentionKernel::Wgmma);
inline std::string kernel_param_name(const ::testing::TestParamInfo<AttentionKernel>& i) {
  return attention_kernel_family_name(i.param);
}

// The forward's parameters of a problem: S has b, sq, hq, hkv, hd, causal; D has p, seed, offset, rounds, tw (the
// dropout fields are set unless m is None).
template <class S, class D>
AttentionParams attention_params(const S& s, AttentionKernel kernel, const __nv_bfloat16* qkv, __nv_bfloat16* o,
                                 float* lse, const uint32_t* mask, DropoutMode m, const D& d) {
  AttentionParams p;
  p.kernel = kernel;
  p.qkv = qkv;
  p.o = o;
  p.lse = lse;
  p.batch = s.b;
  p.sq = s.sq;
  p.q_heads = s.hq;
  p.kv_heads = s.hkv;
  p.head_dim = s.hd;
  p.causal = s.causal;
  if (m != DropoutMode::None) {
    const Threshold t = make_threshold(d.p, d.tw);
    p.mask = mask;
    p.seed = d.seed;
    p.offset = d.offset;
    p.drop_threshold = t.drop;
    p.keep_scale = t.scale;
    p.rounds = d.rounds;
    p.threshold_bits = d.tw;
  }
  return p;
}

}  // namespace test
}  // namespace dropbench

#define DB_REQUIRE_KERNEL(k)                                                                                      \
  do {                                                                                                            \
    DB_REQUIRE_GPU();                                                                                             \
    if (!::dropbench::test::kernel_available(k))                                                                  \
      GTEST_SKIP() << ::dropbench::attention_kernel_family_name(k) << " needs an sm_90 device";                   \
  } while (0)
