// The cast-transpose kernel (kernels/gemm/cast_transpose.cuh) against its reference: cuda_fp8.h's host conversion
// of every element (satfinite, round to nearest even), so both copies must match bit for bit, and the amax must be
// the exact max |in|. Aligned shapes take the kernel's vector path, ragged ones its scalar path; outputs are
// poisoned (0xFF) first, so an element never written shows.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dev_buf.hpp"
#include "gpu_guard.hpp"
#include "kernels/common/check.hpp"
#include "kernels/gemm/cast_transpose.cuh"
#include "kernels/util/util_kernels.cuh"
#include "test_random.hpp"

using namespace dropbench;
using dropbench::test::DevBuf;

namespace {

struct Case {
  const char* name;
  int64_t rows, cols;
  bool in_e4m3;
  Fp8Kind kind;
  float scale;
};
std::string case_name(const testing::TestParamInfo<Case>& i) { return i.param.name; }
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

uint8_t host_fp8(float v, Fp8Kind k) {
  return k == Fp8Kind::e4m3 ? static_cast<uint8_t>(__nv_fp8_e4m3(v).__x) : static_cast<uint8_t>(__nv_fp8_e5m2(v).__x);
}

class CastTranspose : public testing::TestWithParam<Case> {};

TEST_P(CastTranspose, MatchesHostConversionBitwise) {
  DB_REQUIRE_GPU();
  const Case& c = GetParam();
  const size_t n = static_cast<size_t>(c.rows) * static_cast<size_t>(c.cols);
  const uint64_t seed = dropbench_test::fresh_seed();
  // Input: bf16 uniform in [-1, 1) times 600 (past e4m3's 448: the saturation is exercised), or e4m3 bytes.
  std::vector<float> vals(n);
  DevBuf<uint8_t> in(n * (c.in_e4m3 ? 1 : 2));
  {
    DevBuf<__nv_bfloat16> u(n);
    launch_fill_uniform(u.p, n, true, seed, nullptr);
    DB_CUDA(cudaDeviceSynchronize());
    const std::vector<__nv_bfloat16> h = u.get();
    std::vector<uint8_t> bytes(in.n);
    for (size_t i = 0; i < n; ++i) {
      const float f = __bfloat162float(h[i]) * (c.in_e4m3 ? 448.f : 600.f);
      if (c.in_e4m3) {
        const __nv_fp8_e4m3 q(f);
        bytes[i] = static_cast<uint8_t>(q.__x);
        vals[i] = static_cast<float>(q);
      } else {
        const __nv_bfloat16 b = __float2bfloat16(f);
        std::memcpy(&bytes[2 * i], &b, 2);
        vals[i] = __bfloat162float(b);
      }
    }
    in.put(bytes);
  }
  DevBuf<uint8_t> out(n), out_t(n);
  DevBuf<float> scale(1), amax(1);
  out.poison();
  out_t.poison();
  scale.put({c.scale});
  amax.put({0.f});

  CastTransposeParams p;
  p.in = in.p;
  p.in_e4m3 = c.in_e4m3;
  p.rows = c.rows;
  p.cols = c.cols;
  p.out_kind = c.kind;
  p.scale = scale.p;
  p.out = out.p;
  p.out_t = out_t.p;
  p.amax = amax.p;
  launch_cast_transpose(p, nullptr);
  DB_CUDA(cudaDeviceSynchronize());

  const std::vector<uint8_t> o = out.get(), ot = out_t.get();
  size_t bad = 0, bad_t = 0;
  float want_amax = 0.f;
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t k = 0; k < c.cols; ++k) {
      const size_t i = static_cast<size_t>(r * c.cols + k);
      const uint8_t want = host_fp8(vals[i] * c.scale, c.kind);
      bad += o[i] != want;
      bad_t += ot[static_cast<size_t>(k * c.rows + r)] != want;
      want_amax = std::fmax(want_amax, std::fabs(vals[i]));
    }
  std::printf("[%s] seed=%llu mismatches %zu / %zu (transposed)\n", c.name, static_cast<unsigned long long>(seed), bad,
              bad_t);
  EXPECT_EQ(bad, 0u) << "seed " << seed;
  EXPECT_EQ(bad_t, 0u) << "seed " << seed;
  EXPECT_EQ(amax.get()[0], want_amax) << "seed " << seed;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CastTranspose,
    testing::Values(
        // name,                       rows, cols, in_e4m3, kind,           scale
        Case{"bf16_e4m3_aligned", 256, 192, false, Fp8Kind::e4m3, 1.f},
        Case{"bf16_e5m2_aligned", 128, 1024, false, Fp8Kind::e5m2, 1.f},
        Case{"bf16_e4m3_scaled", 192, 320, false, Fp8Kind::e4m3, 0.25f},
        Case{"bf16_e5m2_ragged", 77, 150, false, Fp8Kind::e5m2, 1.f},
        Case{"bf16_e4m3_ragged_tile", 208, 96, false, Fp8Kind::e4m3, 2.f},  // aligned to 16, not to the 64 tile
        Case{"e4m3_transpose_aligned", 320, 256, true, Fp8Kind::e4m3, 1.f},
        Case{"e4m3_transpose_ragged", 33, 65, true, Fp8Kind::e4m3, 1.f},
        Case{"bf16_e4m3_one_row", 1, 40, false, Fp8Kind::e4m3, 1.f}),
    case_name);

// Only the copies asked for are written, and each alone equals the host conversion bit for bit (the kernel picks its
// store path by which outputs exist); the other buffer keeps its poison.
TEST(CastTransposeOutputs, OnlyRequestedCopiesAreWritten) {
  DB_REQUIRE_GPU();
  const int64_t rows = 64, cols = 128;
  const uint64_t seed = dropbench_test::fresh_seed();
  DevBuf<__nv_bfloat16> in(rows * cols);
  launch_fill_uniform(in.p, rows * cols, true, seed, nullptr);
  DB_CUDA(cudaDeviceSynchronize());
  const std::vector<__nv_bfloat16> hin = in.get();
  DevBuf<uint8_t> out(rows * cols), out_t(rows * cols);
  for (int which = 0; which < 2; ++which) {
    out.poison();
    out_t.poison();
    CastTransposeParams p;
    p.in = in.p;
    p.rows = rows;
    p.cols = cols;
    (which == 0 ? p.out : p.out_t) = which == 0 ? out.p : out_t.p;
    launch_cast_transpose(p, nullptr);
    DB_CUDA(cudaDeviceSynchronize());
    const std::vector<uint8_t> untouched = which == 0 ? out_t.get() : out.get();
    for (uint8_t b : untouched) ASSERT_EQ(b, 0xFF) << "which " << which;
    const std::vector<uint8_t> written = which == 0 ? out.get() : out_t.get();
    size_t bad = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k) {
        const uint8_t want = host_fp8(__bfloat162float(hin[static_cast<size_t>(r * cols + k)]), p.out_kind);
        bad += written[static_cast<size_t>(which == 0 ? r * cols + k : k * rows + r)] != want;
      }
    EXPECT_EQ(bad, 0u) << "which " << which << " seed " << seed;
  }
}

TEST(CastTransposeChecks, RefusesBadParams) {
  int dummy = 0;
  CastTransposeParams p;
  p.in = &dummy;
  p.rows = 4;
  p.cols = 4;
  EXPECT_THROW(check_cast_transpose(p), UsageError);  // no output
  p.out = &dummy;
  EXPECT_NO_THROW(check_cast_transpose(p));
  p.rows = 0;
  EXPECT_THROW(check_cast_transpose(p), UsageError);
  p.rows = 4;
  p.in_e4m3 = true;
  p.out_kind = Fp8Kind::e5m2;
  EXPECT_THROW(check_cast_transpose(p), UsageError);  // an fp8 input is only transposed
}

}  // namespace
