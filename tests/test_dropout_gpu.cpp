// GPU: standalone dropout — mask-tensor (int32/uint8/1-bit) and seeded — against the host reference:
// y = x * scale exactly where the mask keeps, exactly 0 where it drops, bf16 and fp32, ragged sizes,
// outputs poisoned first; every variant bitwise equal to the others.
#include <gtest/gtest.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "src/core/device_buffer.hpp"
#include "kernels/dropout/dropout.cuh"
#include "gpu_guard.hpp"
#include "test_random.hpp"
#include "src/core/mask_host.hpp"
#include "kernels/util/util_kernels.cuh"
#include "kernels/common/dispatch.cuh"

using namespace dropbench;

namespace {

template <typename T>
std::vector<T> download(const DeviceBuffer& b, size_t n) {
  std::vector<T> h(n);
  DB_CUDA(cudaMemcpy(h.data(), b.get(), n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

// The host's y for x (bytes of n elements of type et): x * scale where the keep bit is set, 0 where not,
// then `pad` bytes of 0xFF (the poison a kernel must leave past the end).
std::vector<uint8_t> host_expected(ElemType et, const std::vector<uint8_t>& hx, const std::vector<uint32_t>& keep,
                                   uint64_t n, float scale, size_t pad = 0) {
  const size_t es = elem_size(et);
  std::vector<uint8_t> want(n * es + pad, 0xFF);
  for (uint64_t i = 0; i < n; ++i) {
    const bool k = (keep[i / 32] >> (i % 32)) & 1u;
    if (et == ElemType::BF16) {
      uint16_t v;
      std::memcpy(&v, &hx[i * 2], 2);
      const uint16_t o = host_drop_bf16(v, k, scale);
      std::memcpy(&want[i * 2], &o, 2);
    } else {
      float v;
      std::memcpy(&v, &hx[i * 4], 4);
      const float o = host_drop_f32(v, k, scale);
      std::memcpy(&want[i * 4], &o, 4);
    }
  }
  return want;
}

}  // namespace

TEST(DropoutGpu, AllVariantsMatchHostReference) {
  DB_REQUIRE_GPU();
  std::mt19937_64 rng(7);
  for (ElemType et : {ElemType::BF16, ElemType::FP32}) {
    for (uint64_t n : {1ull, 1000ull, 1024ull, 4096ull + 33, (1ull << 20) + 5}) {
      for (int tw : kThresholdBits) {
        const int R = tw == 16 ? 5 : 7;
        const uint64_t seed = rng();
        const uint32_t offset = static_cast<uint32_t>(rng());
        const Threshold t = make_threshold(0.25, tw);
        const size_t es = elem_size(et);
        DeviceBuffer x(n * es), y(n * es), mask(n * 4);
        launch_fill_uniform(x.get(), n, et == ElemType::BF16, rng(), nullptr);
        const auto hx = download<uint8_t>(x, n * es);
        const auto keep = host_flat_mask(n, seed, offset, R, tw, t.drop);
        const std::vector<uint8_t> want = host_expected(et, hx, keep, n, t.scale);
        DropoutApplyParams ap;
        ap.type = et;
        ap.x = x.get();
        ap.y = y.get();
        ap.n = n;
        ap.scale = t.scale;
        for (int variant = 0; variant < 4; ++variant) {
          launch_poison(y.get(), n * es, 0xFFFFFFFFu, nullptr);
          const MaskLayout L = variant == 0 ? MaskLayout::I32 : variant == 1 ? MaskLayout::U8 : MaskLayout::Bits;
          if (variant < 3) {
            RngMaskParams mp;
            mp.seed = seed;
            mp.offset = offset;
            mp.rounds = R;
            mp.threshold_bits = tw;
            mp.drop = t.drop;
            mp.layout = L;
            mp.elements = n;
            mp.out = mask.get();
            launch_rng_mask(mp, nullptr);
            launch_dropout_apply(ap, L, mask.get(), nullptr);
          } else {
            launch_dropout_seeded(ap, seed, offset, R, tw, t.drop, nullptr);
          }
          DB_CUDA(cudaDeviceSynchronize());
          const auto got = download<uint8_t>(y, n * es);
          size_t bad = 0, first = SIZE_MAX;
          for (uint64_t i = 0; i < n; ++i)
            if (std::memcmp(&got[i * es], &want[i * es], es) != 0) {
              ++bad;
              if (first == SIZE_MAX) first = i;
            }
          EXPECT_EQ(bad, 0u) << "type=" << (et == ElemType::BF16 ? "bf16" : "fp32") << " n=" << n << " tw=" << tw
                             << " variant=" << (variant < 3 ? mask_layout_name(L) : "seeded") << " first bad " << first;
        }
      }
    }
  }
}

// Seeded dropout (8-bit thresholds) against the host reference, with the default grid and with a 3-block grid
// (several blocks' worth of chunks per block); sizes around the 1024-element chunk and the 8192-element block.
// The word past the end must stay poisoned.
TEST(DropoutGpu, SeededGridsMatchHostReference) {
  DB_REQUIRE_GPU();
  std::mt19937_64 rng(16);
  for (ElemType et : {ElemType::BF16, ElemType::FP32}) {
    for (uint64_t n : {1ull, 1029ull, 8192ull * 3, 8192ull * 37 + 1029, 32768ull * 5 + 8192 + 1, (1ull << 20) + 5}) {
      const int R = n % 2 ? 7 : 3;
      const uint64_t seed = rng();
      const uint32_t offset = static_cast<uint32_t>(rng());
      const Threshold t = make_threshold(0.2, 8);
      const size_t es = elem_size(et);
      DeviceBuffer x(n * es), y(n * es + 4);
      launch_fill_uniform(x.get(), n, et == ElemType::BF16, rng(), nullptr);
      const auto hx = download<uint8_t>(x, n * es);
      const auto keep = host_flat_mask(n, seed, offset, R, 8, t.drop);
      const std::vector<uint8_t> want = host_expected(et, hx, keep, n, t.scale, 4);
      for (int grid : {0, 3}) {
        DropoutApplyParams ap;
        ap.type = et;
        ap.x = x.get();
        ap.y = y.get();
        ap.n = n;
        ap.scale = t.scale;
        ap.grid = grid;
        launch_poison(y.get(), n * es + 4, 0xFFFFFFFFu, nullptr);
        launch_dropout_seeded(ap, seed, offset, R, 8, t.drop, nullptr);
        DB_CUDA(cudaDeviceSynchronize());
        const auto got = download<uint8_t>(y, n * es + 4);
        size_t bad = 0, first = SIZE_MAX;
        for (size_t b = 0; b < got.size(); ++b)
          if (got[b] != want[b]) {
            ++bad;
            if (first == SIZE_MAX) first = b / es;
          }
        EXPECT_EQ(bad, 0u) << "type=" << (et == ElemType::BF16 ? "bf16" : "fp32") << " n=" << n << " R=" << R
                           << " grid=" << grid << " first bad element " << first;
      }
    }
  }
}

TEST(DropoutGpu, ZeroProbabilityIsIdentity) {
  DB_REQUIRE_GPU();
  const uint64_t n = 100000;
  DeviceBuffer x(n * 2), y(n * 2);
  launch_fill_uniform(x.get(), n, true, 5, nullptr);
  const Threshold t = make_threshold(0.0, 8);
  DropoutApplyParams ap;
  ap.x = x.get();
  ap.y = y.get();
  ap.n = n;
  ap.scale = t.scale;
  launch_poison(y.get(), n * 2, 0xFFFFFFFFu, nullptr);
  launch_dropout_seeded(ap, 1, 2, 7, 8, t.drop, nullptr);
  DB_CUDA(cudaDeviceSynchronize());
  EXPECT_EQ(download<uint16_t>(x, n), download<uint16_t>(y, n));
}

TEST(DropoutGpu, KeptValuesAreScaledMeanPreserved) {
  DB_REQUIRE_GPU();
  // E[y] = x: over 2^24 ones, the mean of y is 1 within 5 sigma of the keep-count noise.
  const uint64_t n = 1ull << 24;
  std::vector<float> ones(n, 1.0f);
  DeviceBuffer x(n * 4), y(n * 4);
  DB_CUDA(cudaMemcpy(x.get(), ones.data(), n * 4, cudaMemcpyHostToDevice));
  const Threshold t = make_threshold(0.3, 16);
  DropoutApplyParams ap;
  ap.type = ElemType::FP32;
  ap.x = x.get();
  ap.y = y.get();
  ap.n = n;
  ap.scale = t.scale;
  launch_dropout_seeded(ap, 11, 0, 7, 16, t.drop, nullptr);
  DB_CUDA(cudaDeviceSynchronize());
  const auto hy = download<float>(y, n);
  double sum = 0;
  for (float v : hy) sum += v;
  const double mean = sum / n;
  const double sd = std::sqrt(t.keep_effective * (1 - t.keep_effective) / n) / t.keep_effective;
  EXPECT_NEAR(mean, 1.0, 5 * sd + 1e-6);
}

// launch_fill_normal (the attention command's inputs): standard normal moments and tail, a pure function of
// (seed, index), and its bf16 values the fp32 ones rounded.
TEST(UtilGpu, FillNormalIsStandardNormal) {
  DB_REQUIRE_GPU();
  const uint64_t n = 1ull << 22;
  const uint64_t seed = dropbench_test::fresh_seed();
  DeviceBuffer a(n * 4), b(n * 4), h(n * 2);
  launch_fill_normal(a.get(), n, false, seed, nullptr);
  launch_fill_normal(b.get(), n, false, seed, nullptr);
  launch_fill_normal(h.get(), n, true, seed, nullptr);
  DB_CUDA(cudaDeviceSynchronize());
  const std::vector<float> x = download<float>(a, n);
  EXPECT_EQ(x, download<float>(b, n)) << "seed " << seed;
  double s1 = 0, s2 = 0, s4 = 0;
  uint64_t tail = 0;
  for (float v : x) {
    ASSERT_TRUE(std::isfinite(v)) << "seed " << seed;
    s1 += v, s2 += double(v) * v, s4 += double(v) * v * v * v;
    tail += std::fabs(v) > 3;
  }
  const double mean = s1 / n, var = s2 / n - mean * mean;
  // 5 sigma: mean's sd 1/sqrt(n); the variance's sqrt(2/n); the fourth moment's sqrt(96/n); the tail count's
  // sqrt(n p (1 - p)) with p = 0.0027 (P(|Z| > 3)).
  EXPECT_LT(std::fabs(mean), 5 / std::sqrt(double(n))) << "seed " << seed;
  EXPECT_NEAR(var, 1.0, 5 * std::sqrt(2.0 / n)) << "seed " << seed;
  EXPECT_NEAR(s4 / n, 3.0, 5 * std::sqrt(96.0 / n)) << "seed " << seed;
  const double p = 0.0026998, et = n * p;
  EXPECT_NEAR(double(tail), et, 5 * std::sqrt(et * (1 - p))) << "seed " << seed;
  const std::vector<uint16_t> hb = download<uint16_t>(h, n);
  for (uint64_t i = 0; i < n; i += 997) {
    const __nv_bfloat16 r = __float2bfloat16_rn(x[i]);
    uint16_t rb;
    std::memcpy(&rb, &r, 2);
    ASSERT_EQ(hb[i], rb) << "index " << i << " seed " << seed;
  }
  launch_fill_normal(b.get(), n, false, seed + 1, nullptr);
  DB_CUDA(cudaDeviceSynchronize());
  EXPECT_NE(x, download<float>(b, n));
}
