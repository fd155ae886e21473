// QkvGemm (cuBLASLt) against the fp32 reference kernel, on the same quantised inputs.
//
// Error bound: ‖out − ref‖₂ / ‖ref‖₂ ≤ 1e-2 for both dtypes. Both sides read the SAME stored fp8/bf16
// values (the fp8 quantisation error is in the inputs, not between the two sides), so what is left is
//   * rounding the output to bf16: relative error ≤ 2^-9 per element (RMS about 2^-9/√3 ≈ 1.1e-3);
//   * summation order / accumulator precision: fp32 on both sides for bf16 and for fp8 without fast
//     accumulation (~1e-6); with FAST_ACCUM Hopper's fp8 MMA keeps partial sums in its reduced-precision
//     accumulator instead of promoting them to fp32 every few k-steps, which costs up to ~1e-3 here.
// Measured figures land near 1.1e-3..2e-3; 1e-2 leaves room without hiding a wrong element (one wrong
// element of an M x N output with random data moves the ratio by ~1/√(MN) only, which is why every element is
// also checked to be written: no NaN from the poison, and the per-element max error is reported).
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>  // the typed cudaMalloc(T**, size); nvcc includes it implicitly, g++ does not

#include <cmath>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <string>
#include <vector>

#include "dev_buf.hpp"
#include "gpu_guard.hpp"
#include "test_random.hpp"
#include "kernels/gemm/gemm.cuh"
#include "kernels/common/check.hpp"

using namespace dropbench;

namespace {

using dropbench_test::bf16_bits_to_float;
using dropbench_test::fresh_seed;

constexpr double kRelBound = 1e-2;

struct Case {
  const char* name;
  GemmDtype dtype;
  int64_t m, n, k;
  bool fast_accum;
  int top_k;
  int sm_count;
};

std::string case_name(const testing::TestParamInfo<Case>& i) { return i.param.name; }
// ctest lists a parameter by its name, not its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

struct Compare {
  double rel = 0;           // ‖out − ref‖ / ‖ref‖
  double max_abs = 0;       // max |out − ref|
  double ref_rms = 0;
  size_t unwritten = 0;     // elements still NaN (poison) or non-finite
  size_t wrong = 0;         // elements off by more than kElemBound allows
};

// Per element: |out - ref| <= 2^-7 |ref| + 0.05 rms(ref). The output's bf16 rounding is at most 2^-8 |ref|, and the
// accumulation differences (fp8 fast accumulation the largest) stay near rel_l2 ~ 2e-3 of the rms; an element of a
// mis-addressed or skipped tile is off by about the rms itself. The whole-matrix rel_l2 bound alone cannot see a few
// wrong elements among millions (one moves it by ~1/sqrt(M N)): a ragged last tile's rows are that few.
bool elem_ok(double o, double r, double ref_rms) { return std::fabs(o - r) <= 0x1p-7 * std::fabs(r) + 0.05 * ref_rms; }

Compare compare(const QkvBuffers& buf, const float* d_ref) {
  const size_t n = static_cast<size_t>(buf.shape.m) * static_cast<size_t>(buf.shape.n);
  std::vector<uint16_t> out(n);
  std::vector<float> ref(n);
  DB_CUDA(cudaMemcpy(out.data(), buf.y, n * 2, cudaMemcpyDeviceToHost));
  DB_CUDA(cudaMemcpy(ref.data(), d_ref, n * 4, cudaMemcpyDeviceToHost));
  Compare c;
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double o = bf16_bits_to_float(out[i]);
    const double r = ref[i];
    if (!std::isfinite(o) || !std::isfinite(r)) {
      ++c.unwritten;
      continue;
    }
    num += (o - r) * (o - r);
    den += r * r;
    c.max_abs = std::max(c.max_abs, std::fabs(o - r));
  }
  c.rel = den > 0 ? std::sqrt(num / den) : INFINITY;
  c.ref_rms = std::sqrt(den / static_cast<double>(n));
  for (size_t i = 0; i < n; ++i) {
    const double o = bf16_bits_to_float(out[i]);
    if (std::isfinite(o) && std::isfinite(ref[i])) c.wrong += !elem_ok(o, ref[i], c.ref_rms);
  }
  return c;
}

class GemmVsRef : public testing::TestWithParam<Case> {};

TEST_P(GemmVsRef, MatchesReference) {
  DB_REQUIRE_GPU();
  const Case& c = GetParam();
  const GemmShape shape{c.m, c.n, c.k};
  GemmOptions opts;
  opts.dtype = c.dtype;
  opts.fast_accum = c.fast_accum;
  opts.top_k = c.top_k;
  opts.sm_count_target = c.sm_count;

  cudaStream_t stream;
  DB_CUDA(cudaStreamCreate(&stream));
  QkvBuffers buf(shape, c.dtype);
  const uint64_t seed = fresh_seed();
  buf.randomize(seed, stream);
  float* d_ref = nullptr;
  DB_CUDA(cudaMalloc(&d_ref, static_cast<size_t>(c.m) * c.n * sizeof(float)));
  DB_CUDA(cudaMemsetAsync(d_ref, 0xFF, static_cast<size_t>(c.m) * c.n * sizeof(float), stream));  // NaN
  gemm_reference(c.dtype, shape, buf.x, buf.w, buf.scale_x(), buf.scale_w(), d_ref, stream);

  QkvGemm g(shape, opts);
  g.bind(buf.x, buf.w, buf.y, buf.scale_x(), buf.scale_w());
  ASSERT_GE(g.candidates().size(), 1u);
  if (c.top_k > 1) {
    EXPECT_LE(g.candidates().size(), static_cast<size_t>(c.top_k));
    g.tune(stream);  // writes y: the poison below must come after
    if (g.candidates().size() > 1) {
      EXPECT_TRUE(g.tuned());
      // The chosen one is the fastest of those timed, or within tune_margin of it.
      const double chosen_ms = g.candidates()[g.chosen()].ms;
      EXPECT_GT(chosen_ms, 0);
      for (const auto& cand : g.candidates())
        if (!cand.failed) EXPECT_LE(chosen_ms * (1.0 - opts.tune_margin), cand.ms);
    }
  }

  // Two runs, each on a freshly poisoned output: both must write everything and match the reference.
  for (int run = 0; run < 2; ++run) {
    buf.poison_output(stream);
    g.run(stream);
    DB_CUDA(cudaStreamSynchronize(stream));
    const Compare cmp = compare(buf, d_ref);
    std::printf("[%s] seed=%llu run=%d rel=%.3e max_abs=%.3e ref_rms=%.3e wrong=%zu candidates=%zu algo: %s\n", c.name,
                static_cast<unsigned long long>(seed), run, cmp.rel, cmp.max_abs, cmp.ref_rms, cmp.wrong,
                g.candidates().size(), g.algo().summary().c_str());
    EXPECT_EQ(cmp.unwritten, 0u) << "elements not written (poison left) or non-finite, seed " << seed;
    EXPECT_LE(cmp.rel, kRelBound) << "seed " << seed;
    EXPECT_EQ(cmp.wrong, 0u) << "elements past the per-element bound, " << "seed " << seed;
    EXPECT_GT(cmp.ref_rms, 0.1) << "reference looks degenerate (zeros?)";
  }

  DB_CUDA(cudaFree(d_ref));
  DB_CUDA(cudaStreamDestroy(stream));
}

// N = (Hq + 2 Hkv)·dH throughout; several M are not multiples of 16 (nor of any tile size).
INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmVsRef,
    testing::Values(
        // name,                    dtype,               M,    N,    K,    fast, topk, sms
        Case{"bf16_m1000", GemmDtype::bf16, 1000, (8 + 2 * 2) * 64, 512, false, 1, 0},
        Case{"fp8_fast_m1000", GemmDtype::fp8_e4m3, 1000, (8 + 2 * 2) * 64, 512, true, 1, 0},
        Case{"fp8_exact_m1000", GemmDtype::fp8_e4m3, 1000, (8 + 2 * 2) * 64, 512, false, 1, 0},
        Case{"fp8_fast_m4097_k4096", GemmDtype::fp8_e4m3, 4097, (32 + 2 * 8) * 128, 4096, true, 1, 0},
        Case{"fp8_exact_m4097_k4096", GemmDtype::fp8_e4m3, 4097, (32 + 2 * 8) * 128, 4096, false, 1, 0},
        Case{"bf16_m4097_k4096", GemmDtype::bf16, 4097, (32 + 2 * 8) * 128, 4096, false, 1, 0},
        Case{"fp8_topk8_m2051", GemmDtype::fp8_e4m3, 2051, (16 + 2 * 4) * 128, 2048, true, 8, 0},
        Case{"bf16_topk8_m2051", GemmDtype::bf16, 2051, (16 + 2 * 4) * 128, 2048, false, 8, 0},
        Case{"fp8_sm66_m3001", GemmDtype::fp8_e4m3, 3001, (32 + 2 * 8) * 128, 1024, true, 1, 66},
        Case{"bf16_sm66_topk4_m3001", GemmDtype::bf16, 3001, (32 + 2 * 8) * 128, 1024, false, 4, 66},
        Case{"fp8_m7_tiny", GemmDtype::fp8_e4m3, 7, (2 + 2 * 1) * 64, 64, true, 1, 0},
        Case{"bf16_m1_tiny", GemmDtype::bf16, 1, (2 + 2 * 1) * 64, 64, false, 1, 0}),
    case_name);

TEST(GemmShapeChecks, RejectsUnsupportedShapes) {
  // Validation runs before any CUDA/cuBLAS call, so no GPU is needed.
  EXPECT_THROW(validate_gemm_shape(GemmShape{0, 64, 64}, GemmDtype::fp8_e4m3), UsageError);
  EXPECT_THROW(validate_gemm_shape(GemmShape{16, 64, 40}, GemmDtype::fp8_e4m3), UsageError);  // K % 16
  EXPECT_THROW(validate_gemm_shape(GemmShape{16, 72, 64}, GemmDtype::bf16), UsageError);      // N % 16
  EXPECT_NO_THROW(validate_gemm_shape(GemmShape{17, 64, 64}, GemmDtype::fp8_e4m3));          // M is free
  EXPECT_THROW(parse_gemm_dtype("fp16"), UsageError);
  EXPECT_EQ(parse_gemm_dtype("fp8"), GemmDtype::fp8_e4m3);
  const GemmShape s = qkv_gemm_shape(2, 4096, 4096, 32, 8, 128);
  EXPECT_EQ(s.m, 8192);
  EXPECT_EQ(s.k, 4096);
  EXPECT_EQ(s.n, 6144);
  EXPECT_DOUBLE_EQ(s.flops(), 2.0 * 8192 * 6144 * 4096);
}

TEST(GemmInfo, ReportsVersionAndAlgorithm) {
  DB_REQUIRE_GPU();
  EXPECT_GE(QkvGemm::cublaslt_version(), 120000u);
  const GemmShape shape{256, 768, 256};
  QkvBuffers buf(shape, GemmDtype::fp8_e4m3);
  buf.randomize(fresh_seed(), nullptr);
  GemmOptions o;
  o.top_k = 4;
  QkvGemm g(shape, o);
  EXPECT_THROW(g.run(nullptr), UsageError);  // not bound yet
  // cuBLASLt refuses (NOT_SUPPORTED at run time) fp8 scale pointers that are only 4-byte aligned: bind says so.
  EXPECT_THROW(g.bind(buf.x, buf.w, buf.y, buf.scale_x() + 1, buf.scale_w()), UsageError);
  g.bind(buf.x, buf.w, buf.y, buf.scale_x(), buf.scale_w());
  const GemmAlgoInfo& a = g.algo();
  EXPECT_GE(a.algo_id, 0);
  EXPECT_FALSE(a.summary().empty());
  std::printf("cuBLASLt %s: %s\n", QkvGemm::cublaslt_version_string().c_str(), a.summary().c_str());
  for (const auto& c : g.candidates()) std::printf("  candidate %s\n", c.info.summary().c_str());
}

// ---- The training step's operands (GemmOptions x_transposed / w_transposed / x_e5m2) ----

std::vector<uint8_t> host_transpose(const void* d, int64_t rows, int64_t cols, size_t elem) {
  std::vector<uint8_t> h(static_cast<size_t>(rows * cols) * elem), t(h.size());
  DB_CUDA(cudaMemcpy(h.data(), d, h.size(), cudaMemcpyDeviceToHost));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(&t[static_cast<size_t>(c * rows + r) * elem], &h[static_cast<size_t>(r * cols + c) * elem], elem);
  return t;
}

QkvBuffers random_buffers(const GemmShape& shape, GemmDtype d, uint64_t seed) {
  QkvBuffers buf(shape, d);
  buf.randomize(seed, nullptr);
  return buf;
}

// bf16: X stored [K, M] and/or W stored [K, N] give the product of the untransposed buffers (reference kernel).
TEST(GemmTrainOperands, TransposedBf16MatchesReference) {
  DB_REQUIRE_GPU();
  const GemmShape shape{256, 192, 320};
  const uint64_t seed = fresh_seed();
  QkvBuffers buf = random_buffers(shape, GemmDtype::bf16, seed);
  dropbench::test::DevBuf<float> ref(static_cast<size_t>(shape.m * shape.n));
  gemm_reference(GemmDtype::bf16, shape, buf.x, buf.w, nullptr, nullptr, ref.p, nullptr);
  dropbench::test::DevBuf<uint8_t> xt(static_cast<size_t>(shape.m * shape.k) * 2);
  dropbench::test::DevBuf<uint8_t> wt(static_cast<size_t>(shape.n * shape.k) * 2);
  xt.put(host_transpose(buf.x, shape.m, shape.k, 2));
  wt.put(host_transpose(buf.w, shape.n, shape.k, 2));
  for (int combo = 1; combo < 4; ++combo) {
    GemmOptions o;
    o.dtype = GemmDtype::bf16;
    o.x_transposed = combo & 1;
    o.w_transposed = combo & 2;
    QkvGemm g(shape, o);
    g.bind(o.x_transposed ? static_cast<void*>(xt.p) : buf.x, o.w_transposed ? static_cast<void*>(wt.p) : buf.w, buf.y);
    buf.poison_output(nullptr);
    g.run(nullptr);
    DB_CUDA(cudaDeviceSynchronize());
    const Compare cmp = compare(buf, ref.p);
    std::printf("[transposed x %d w %d] seed=%llu rel=%.3e\n", o.x_transposed, o.w_transposed,
                static_cast<unsigned long long>(seed), cmp.rel);
    EXPECT_EQ(cmp.unwritten, 0u) << "combo " << combo << " seed " << seed;
    EXPECT_LE(cmp.rel, kRelBound) << "combo " << combo << " seed " << seed;
    EXPECT_EQ(cmp.wrong, 0u) << "elements past the per-element bound, " << "combo " << combo << " seed " << seed;
  }
}

// fp8: an e5m2 X (a gradient) times an e4m3 W against an fp64 host product of the same stored values and scales.
TEST(GemmTrainOperands, E5m2GradientMatchesHostProduct) {
  DB_REQUIRE_GPU();
  const GemmShape shape{96, 128, 256};
  const uint64_t seed = fresh_seed();
  QkvBuffers buf = random_buffers(shape, GemmDtype::fp8_e4m3, seed);
  std::vector<uint8_t> hx(static_cast<size_t>(shape.m * shape.k)), hw(static_cast<size_t>(shape.n * shape.k));
  uint64_t z = seed;
  for (uint8_t& b : hx) {
    z = z * 6364136223846793005ULL + 1442695040888963407ULL;
    b = static_cast<uint8_t>(__nv_fp8_e5m2(static_cast<float>(static_cast<int>(z >> 40) % 2001 - 1000) / 250.f).__x);
  }
  DB_CUDA(cudaMemcpy(buf.x, hx.data(), hx.size(), cudaMemcpyHostToDevice));
  DB_CUDA(cudaMemcpy(hw.data(), buf.w, hw.size(), cudaMemcpyDeviceToHost));
  float sx = 0, sw = 0;
  DB_CUDA(cudaMemcpy(&sx, buf.scale_x(), sizeof sx, cudaMemcpyDeviceToHost));
  DB_CUDA(cudaMemcpy(&sw, buf.scale_w(), sizeof sw, cudaMemcpyDeviceToHost));
  std::vector<float> ref(static_cast<size_t>(shape.m * shape.n));
  for (int64_t i = 0; i < shape.m; ++i)
    for (int64_t j = 0; j < shape.n; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < shape.k; ++k) {
        __nv_fp8_e5m2 xv;
        xv.__x = hx[static_cast<size_t>(i * shape.k + k)];
        __nv_fp8_e4m3 wv;
        wv.__x = hw[static_cast<size_t>(j * shape.k + k)];
        acc += static_cast<double>(static_cast<float>(xv)) * static_cast<double>(static_cast<float>(wv));
      }
      ref[static_cast<size_t>(i * shape.n + j)] = static_cast<float>(acc * sx * sw);
    }
  dropbench::test::DevBuf<float> d_ref(ref.size());
  d_ref.put(ref);
  GemmOptions o;
  o.dtype = GemmDtype::fp8_e4m3;
  o.fast_accum = false;
  o.x_e5m2 = true;
  QkvGemm g(shape, o);
  g.bind(buf.x, buf.w, buf.y, buf.scale_x(), buf.scale_w());
  buf.poison_output(nullptr);
  g.run(nullptr);
  DB_CUDA(cudaDeviceSynchronize());
  const Compare cmp = compare(buf, d_ref.p);
  std::printf("[e5m2 x] seed=%llu rel=%.3e\n", static_cast<unsigned long long>(seed), cmp.rel);
  EXPECT_EQ(cmp.unwritten, 0u) << "seed " << seed;
  EXPECT_LE(cmp.rel, kRelBound) << "seed " << seed;
  EXPECT_EQ(cmp.wrong, 0u) << "elements past the per-element bound, " << "seed " << seed;
}

TEST(GemmTrainOperands, RefusesWhatCublasLtCannotRun) {
  // Checked in the constructor before any CUDA call: no GPU needed.
  GemmOptions o;
  o.dtype = GemmDtype::bf16;
  o.x_e5m2 = true;
  EXPECT_THROW({ QkvGemm g(GemmShape{64, 64, 64}, o); }, UsageError);  // e5m2 is an fp8 operand
  o = GemmOptions{};
  o.x_transposed = true;
  EXPECT_THROW({ QkvGemm g(GemmShape{64, 64, 64}, o); }, UsageError);  // fp8 is TN only
  o.dtype = GemmDtype::bf16;
  EXPECT_THROW({ QkvGemm g(GemmShape{60, 64, 64}, o); }, UsageError);  // a transposed X's rows are M long
}

}  // namespace
