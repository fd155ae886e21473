// WgmmaGemm (our wgmma + TMA FP8 GEMM, lab/gemm_wgmma/gemm_wgmma.cu) against the fp32 reference kernel
// (kernels/gemm_ref.cu) on the same stored fp8 inputs, fresh random data every run (seed printed).
//
// Error bounds (both must hold):
//   * ‖out − ref‖₂ / ‖ref‖₂ ≤ 1e-2, as for cuBLASLt in test_gemm_gpu.cpp. Both sides read the same fp8 values;
//     what is left is the bf16 rounding of the output (≤ 2^-9 relative per element, RMS ≈ 1.1e-3) and the
//     summation: the fp8 wgmma accumulates over the whole K in the tensor core's own accumulator (FAST
//     accumulation, never promoted to a separate fp32 sum), which cuBLASLt's FAST_ACCUM also does
//     (measured there 1.1e-3..2e-3).
//   * every element: |out − ref| ≤ 0.1·rms(ref) + 0.02·|ref|. A wrong element (wrong row/column/K slice) is
//     off by O(rms) and fails this even when the Frobenius ratio would hide it.
// Every element must be written (the output is poisoned with 0xFF bytes = bf16 NaN first) and nothing past
// the M x N output (a guard of poisoned rows after it) may be touched.
#include <cuda_bf16.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_guard.hpp"
#include "test_random.hpp"
#include "kernels/gemm/gemm.cuh"
#include "lab/gemm_wgmma/gemm_wgmma.cuh"
#include "kernels/common/check.hpp"

using namespace dropbench;

namespace {

using dropbench_test::bf16_bits_to_float;
using dropbench_test::fresh_seed;

constexpr double kRelBound = 1e-2;
constexpr double kElemRms = 0.1, kElemRel = 0.02;
constexpr int64_t kGuardRows = 3;

struct Case {
  const char* name;
  int64_t m, n, k;
  WgmmaEpilogue epi;
  bool scales;  // false: nullptr scales (= 1)
  int cluster = 1;
  int tile_n = 256;
};

std::string case_name(const testing::TestParamInfo<Case>& i) { return i.param.name; }
// ctest lists a parameter by its name, not its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class WgmmaVsRef : public testing::TestWithParam<Case> {};

TEST_P(WgmmaVsRef, MatchesReference) {
  DB_REQUIRE_GPU();
  const Case& c = GetParam();
  const GemmShape shape{c.m, c.n, c.k};
  cudaStream_t stream;
  DB_CUDA(cudaStreamCreate(&stream));
  QkvBuffers buf(shape, GemmDtype::fp8_e4m3);
  const uint64_t seed = fresh_seed();
  buf.randomize(seed, stream);
  const float* sx = c.scales ? buf.scale_x() : nullptr;
  const float* sw = c.scales ? buf.scale_w() : nullptr;

  const size_t n_out = static_cast<size_t>(c.m) * c.n;
  const size_t n_all = static_cast<size_t>(c.m + kGuardRows) * c.n;
  float* d_ref = nullptr;
  void* d_y = nullptr;
  DB_CUDA(cudaMalloc(&d_ref, n_out * sizeof(float)));
  DB_CUDA(cudaMalloc(&d_y, n_all * 2));
  DB_CUDA(cudaMemsetAsync(d_ref, 0xFF, n_out * sizeof(float), stream));
  DB_CUDA(cudaMemsetAsync(d_y, 0xFF, n_all * 2, stream));  // bf16 NaN everywhere, guard rows included
  gemm_reference(GemmDtype::fp8_e4m3, shape, buf.x, buf.w, sx, sw, d_ref, stream);

  const WgmmaConfig cfg{c.epi, c.cluster, c.tile_n};
  WgmmaGemm g(shape, cfg);
  g.bind(buf.x, buf.w, d_y, sx, sw);
  g.run(stream);
  DB_CUDA(cudaStreamSynchronize(stream));
  DB_CUDA(cudaGetLastError());

  std::vector<uint16_t> out(n_all);
  std::vector<float> ref(n_out);
  DB_CUDA(cudaMemcpy(out.data(), d_y, n_all * 2, cudaMemcpyDeviceToHost));
  DB_CUDA(cudaMemcpy(ref.data(), d_ref, n_out * 4, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  size_t unwritten = 0, guard_touched = 0;
  for (size_t i = 0; i < n_out; ++i) {
    const double r = ref[i];
    den += r * r;
  }
  const double rms = std::sqrt(den / static_cast<double>(n_out));
  size_t bad = 0, first_bad = SIZE_MAX;
  double max_abs = 0;
  for (size_t i = 0; i < n_out; ++i) {
    const double o = bf16_bits_to_float(out[i]);
    const double r = ref[i];
    if (!std::isfinite(o)) {
      ++unwritten;
      if (first_bad == SIZE_MAX) first_bad = i;
      continue;
    }
    const double e = std::fabs(o - r);
    num += (o - r) * (o - r);
    max_abs = std::max(max_abs, e);
    if (e > kElemRms * rms + kElemRel * std::fabs(r)) {
      ++bad;
      if (first_bad == SIZE_MAX) first_bad = i;
    }
  }
  for (size_t i = n_out; i < n_all; ++i) guard_touched += out[i] != 0xFFFF;
  const double rel = den > 0 ? std::sqrt(num / den) : INFINITY;
  std::printf("[ info ] %s M=%lld N=%lld K=%lld %s seed=%llu: rel %.3e, max |err| %.3e (= %.3e rms), rms(ref) %.3e, "
              "bad %zu, unwritten %zu, guard touched %zu\n",
              c.name, static_cast<long long>(c.m), static_cast<long long>(c.n), static_cast<long long>(c.k),
              cfg.name().c_str(), static_cast<unsigned long long>(seed), rel, max_abs, max_abs / rms, rms,
              bad, unwritten, guard_touched);
  if (first_bad != SIZE_MAX) {
    // Diagnostics for a wrong mapping: the first few bad elements, and where in their row / column of the
    // reference the value that was written actually belongs.
    int shown = 0;
    for (size_t i = first_bad; i < n_out && shown < 6; ++i) {
      const double o = bf16_bits_to_float(out[i]), r = ref[i];
      if (std::isfinite(o) && std::fabs(o - r) <= kElemRms * rms + kElemRel * std::fabs(r)) continue;
      ++shown;
      const size_t row = i / c.n, col = i % c.n;
      std::string where;
      for (size_t j = 0; j < static_cast<size_t>(c.n) && where.size() < 60; ++j)
        if (std::fabs(ref[row * c.n + j] - o) <= 0.01 * rms) where += " col " + std::to_string(j);
      for (size_t j = 0; j < static_cast<size_t>(c.m) && where.size() < 120; ++j)
        if (std::fabs(ref[j * c.n + col] - o) <= 0.01 * rms) where += " row " + std::to_string(j);
      std::printf("[ info ]   bad (%zu, %zu): out %g ref %g; value found at:%s\n", row, col, o, r, where.c_str());
    }
  }
  EXPECT_EQ(unwritten, 0u) << "seed " << seed;
  EXPECT_EQ(guard_touched, 0u) << "seed " << seed;
  EXPECT_EQ(bad, 0u) << "seed " << seed;
  EXPECT_LE(rel, kRelBound) << "seed " << seed;
  EXPECT_GT(rms, 0.0);
  DB_CUDA(cudaFree(d_ref));
  DB_CUDA(cudaFree(d_y));
  DB_CUDA(cudaStreamDestroy(stream));
}

constexpr auto S = WgmmaEpilogue::Staged;
constexpr auto D = WgmmaEpilogue::Direct;

INSTANTIATE_TEST_SUITE_P(
    Shapes, WgmmaVsRef,
    testing::Values(
        // Llama-3 8B QKV (full), ragged M at its K/N, a 70B-like and a 405B-like K at small M.
        // One wgmma K slice, one K tile, two K tiles: isolate descriptor / pipeline mistakes.
        Case{"m128_n256_k32_staged", 128, 256, 32, S, true},
        Case{"m128_n256_k128_direct", 128, 256, 128, D, true},
        Case{"m256_n512_k256_staged", 256, 512, 256, S, true},
        Case{"m256_n512_k1024_direct", 256, 512, 1024, D, true},
        Case{"llama8b_full_staged", 8192, 6144, 4096, S, true},
        Case{"llama8b_full_direct", 8192, 6144, 4096, D, true},
        Case{"m1000_n6144_k4096_staged", 1000, 6144, 4096, S, true},
        Case{"m1000_n6144_k4096_direct", 1000, 6144, 4096, D, true},
        Case{"m300_n10240_k8192_staged", 300, 10240, 8192, S, true},
        Case{"m129_n18432_k16384_staged", 129, 18432, 16384, S, true},
        // Ragged everything: N not a multiple of 256, K not a multiple of 128, M below one tile.
        Case{"m77_n384_k272_staged", 77, 384, 272, S, true},
        Case{"m77_n384_k272_direct", 77, 384, 272, D, true},
        Case{"m1_n16_k16_staged", 1, 16, 16, S, true},
        Case{"m1_n16_k16_direct", 1, 16, 16, D, true},
        Case{"m250_n272_k4112_staged", 250, 272, 4112, S, true},
        Case{"m250_n272_k4112_direct", 250, 272, 4112, D, true},
        // No scale pointers (= 1).
        Case{"m512_n512_k1024_noscale_staged", 512, 512, 1024, S, false},
        // Cluster of 2 with the B tile multicast (odd M-tile counts get a padding CTA).
        Case{"m128_n256_k32_staged_c2", 128, 256, 32, S, true, 2},
        Case{"m256_n512_k1024_direct_c2", 256, 512, 1024, D, true, 2},
        Case{"m77_n384_k272_staged_c2", 77, 384, 272, S, true, 2},
        Case{"m300_n10240_k8192_direct_c2", 300, 10240, 8192, D, true, 2},
        Case{"m250_n272_k4112_staged_c2", 250, 272, 4112, S, true, 2},
        Case{"llama8b_full_staged_c2", 8192, 6144, 4096, S, true, 2},
        Case{"llama8b_full_direct_c2", 8192, 6144, 4096, D, true, 2},
        // 128 x 128 tiles (the variant that leaves 28672 registers per SM).
        Case{"m128_n128_k32_staged_n128", 128, 128, 32, S, true, 1, 128},
        Case{"m256_n512_k1024_direct_n128", 256, 512, 1024, D, true, 1, 128},
        Case{"m77_n400_k272_staged_n128", 77, 400, 272, S, true, 1, 128},
        Case{"m77_n400_k272_direct_n128", 77, 400, 272, D, true, 1, 128},
        Case{"m1_n16_k16_staged_n128", 1, 16, 16, S, true, 1, 128},
        Case{"m250_n272_k4112_staged_n128", 250, 272, 4112, S, true, 1, 128},
        Case{"m300_n10240_k8192_staged_n128", 300, 10240, 8192, S, true, 1, 128},
        Case{"llama8b_full_staged_n128", 8192, 6144, 4096, S, true, 1, 128},
        Case{"llama8b_full_direct_n128", 8192, 6144, 4096, D, true, 1, 128}),
    case_name);

// The point of the kernel: one GEMM CTA per SM that leaves room for the co-resident RNG CTA (128 threads x
// 32 registers, no shared memory).
TEST(WgmmaResources, LeavesRoomForOneRngCta) {
  DB_REQUIRE_GPU();
  for (const WgmmaConfig cfg : {WgmmaConfig{S, 1}, WgmmaConfig{D, 1}, WgmmaConfig{S, 2}, WgmmaConfig{D, 2},
                                WgmmaConfig{S, 1, 128}, WgmmaConfig{D, 1, 128}}) {
    const WgmmaResources r = WgmmaGemm::resources(cfg);
    std::printf("[ info ] %s: %s\n", cfg.name().c_str(), r.summary().c_str());
    EXPECT_EQ(r.ctas_per_sm, 1);
    EXPECT_LE(r.regs_per_cta, 61440);
    EXPECT_EQ(r.local_bytes, 0u);
    EXPECT_LE(r.smem_dynamic + r.smem_static, 200 * 1024);
    EXPECT_TRUE(r.fits_beside(128, 32));
    if (cfg.tile_n == 256) {
      EXPECT_FALSE(r.fits_beside(256, 32));  // exactly one such CTA (4 warps), not two
    } else {
      EXPECT_LE(r.regs_per_cta, 36864);
      EXPECT_TRUE(r.fits_beside(512, 32));   // 16 warps of 32 registers
    }
  }
}

TEST(WgmmaGemm, RejectsBadShapesAndPointers) {
  EXPECT_THROW(WgmmaGemm(GemmShape{128, 100, 128}), UsageError);  // N not a multiple of 16
  EXPECT_THROW(WgmmaGemm(GemmShape{128, 128, 8}), UsageError);    // K not a multiple of 16
  EXPECT_THROW(WgmmaGemm(GemmShape{0, 128, 128}), UsageError);
  EXPECT_THROW(WgmmaGemm(GemmShape{128, 128, 128}, WgmmaConfig{WgmmaEpilogue::Staged, 3}), UsageError);
  EXPECT_THROW(WgmmaGemm(GemmShape{128, 128, 128}, WgmmaConfig{WgmmaEpilogue::Staged, 2, 128}), UsageError);
  EXPECT_THROW(WgmmaGemm(GemmShape{128, 128, 128}, WgmmaConfig{WgmmaEpilogue::Staged, 1, 64}), UsageError);
  WgmmaGemm g(GemmShape{128, 128, 128});
  EXPECT_THROW(g.run(nullptr), UsageError);  // before bind
  EXPECT_THROW(g.bind(nullptr, nullptr, nullptr), UsageError);
}

}  // namespace
