// The training step on the GPU (src/block/train_step.hpp): every strategy's gradients bitwise equal in the
// deterministic dQ mode (fused-write's too: its forward writes the mask its backward reads), every gradient written (poisoned first), the GEMM products wired to the right operands
// (each against an fp64 host product of the same stored values: bf16, or the fp8 copies the casts make), the
// attention backward's dQKV against its reference kernel (fp8 cases: unit-variance QKV), and dropout changing the
// gradients. Skips without a device.
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gpu_guard.hpp"
#include "kernels/common/check.hpp"
#include "src/block/train_step.hpp"
#include "src/core/device_buffer.hpp"
#include "test_random.hpp"

using namespace dropbench;

namespace {

struct Case {
  const char* name;
  const char* dtype;
  int64_t head_dim;
  bool causal;
};
std::string case_name(const testing::TestParamInfo<Case>& i) { return i.param.name; }
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

Workload small(const Case& c, uint64_t seed) {
  Workload w;
  w.batch = 2;
  w.sq = 136;  // ragged against the attention's 64-row blocks; batch * sq = 272, a multiple of 16
  w.embed = 256;
  w.q_heads = 4;
  w.kv_heads = 2;
  w.head_dim = c.head_dim;
  w.causal = c.causal;
  w.dropout_p = 0.1;
  w.dtype = c.dtype;
  w.rounds = 7;
  w.threshold_bits = 8;
  w.seed = seed;
  return w;
}

// Device array of n elements (bf16, e4m3 or, `e5m2`, e5m2) as floats.
std::vector<float> fetch(const void* d, size_t n, int bytes, bool e5m2 = false) {
  std::vector<uint8_t> raw(n * bytes);
  DB_CUDA(cudaMemcpy(raw.data(), d, raw.size(), cudaMemcpyDeviceToHost));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (bytes == 2) {
      uint32_t u = static_cast<uint32_t>(raw[2 * i] | (raw[2 * i + 1] << 8)) << 16;
      std::memcpy(&out[i], &u, 4);
    } else if (e5m2) {
      __nv_fp8_e5m2 q;
      q.__x = raw[i];
      out[i] = static_cast<float>(q);
    } else {
      __nv_fp8_e4m3 q;
      q.__x = raw[i];
      out[i] = static_cast<float>(q);
    }
  }
  return out;
}

float scalar(const float* d) {
  if (!d) return 1.f;
  float h = 0;
  DB_CUDA(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
  return h;
}

// The cast the fp8 step applies to a bf16 activation (e4m3) or gradient (e5m2) before its GEMM; bf16: none.
std::vector<float> as_gemm_input(std::vector<float> v, const std::string& dtype, bool gradient) {
  if (dtype != "fp8") return v;
  for (float& f : v) f = gradient ? static_cast<float>(__nv_fp8_e5m2(f)) : static_cast<float>(__nv_fp8_e4m3(f));
  return v;
}

// ||out - ref|| / ||ref|| of out [rows, cols] (bf16 device) against ref(r, c) in fp64; every element written.
double rel_error(const void* d_out, int64_t rows, int64_t cols, const std::function<double(int64_t, int64_t)>& ref,
                 size_t* unwritten) {
  const std::vector<float> out = fetch(d_out, static_cast<size_t>(rows * cols), 2);
  double num = 0, den = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double o = out[static_cast<size_t>(r * cols + c)], e = ref(r, c);
      if (!std::isfinite(o)) {
        ++*unwritten;
        continue;
      }
      num += (o - e) * (o - e);
      den += e * e;
    }
  return den > 0 ? std::sqrt(num / den) : INFINITY;
}

// Each case on its own stream with a fresh seed (printed with every failure); skipped without a device.
class TrainStepGpu : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    DB_REQUIRE_GPU();
    DB_CUDA(cudaStreamCreate(&s));
    seed = dropbench_test::fresh_seed();
  }
  void TearDown() override {
    if (s) cudaStreamDestroy(s);
  }
  cudaStream_t s = nullptr;
  uint64_t seed = 0;
};

TEST_P(TrainStepGpu, StrategiesGiveBitwiseEqualGradients) {
  const Case& c = GetParam();
  {
    TrainRunner tr(small(c, seed), TrainRunner::Options{}, s);
    // The unwritten-word count (run's check of the reference strategy) sees the poison before any kernel ran.
    tr.poison_gradients(s);
    const TrainRunner::GradientDiff poisoned = tr.unwritten(s);
    EXPECT_GT(poisoned.dqkv, 0u);
    EXPECT_GT(poisoned.dx, 0u);
    EXPECT_GT(poisoned.dw, 0u);
    EXPECT_GT(poisoned.dw_out, 0u);
    bool first = true;
    // Every strategy of the pass: fused, stored, regen-overlap, fused-write (whose backward reads only what its
    // forward wrote: the mask is zeroed first).
    for (Pipeline p : pass_pipelines(Pass::Train)) {
      tr.block().poison_outputs(s);  // O, LSE poisoned and the mask zeroed: no strategy passes on another's leftovers
      tr.poison_gradients(s);
      tr.run(p, s, no_phases(), rng_plain(), /*deterministic=*/true, /*check=*/true);
      DB_CUDA(cudaStreamSynchronize(s));
      EXPECT_EQ(tr.unwritten(s).total(), 0u) << c.name << " " << pipeline_name(p) << " seed " << seed;
      if (first) {
        tr.keep_reference(s);
        first = false;
        continue;
      }
      const TrainRunner::GradientDiff d = tr.diff_reference(s);
      EXPECT_EQ(d.total(), 0u) << c.name << " " << pipeline_name(p) << " seed " << seed << ": dqkv " << d.dqkv << " dx "
                               << d.dx << " dw " << d.dw << " dw_out " << d.dw_out;
    }
    // The timed (fast dQ) mode runs too, and the deterministic mode repeats bit for bit afterwards.
    tr.run(Pipeline::RegenOverlap, s, no_phases(), rng_plain(), false);
    tr.poison_gradients(s);
    tr.run(Pipeline::Stored, s, no_phases(), rng_plain(), true, true);
    EXPECT_EQ(tr.diff_reference(s).total(), 0u) << c.name << " seed " << seed;
    // The comparison sees a difference: one changed word of dQKV is one word counted, in dQKV alone.
    void* dqkv = const_cast<void*>(tr.buffers().dqkv);
    uint32_t w0 = 0;
    DB_CUDA(cudaMemcpy(&w0, dqkv, 4, cudaMemcpyDeviceToHost));
    w0 ^= 0x00010000u;
    DB_CUDA(cudaMemcpy(dqkv, &w0, 4, cudaMemcpyHostToDevice));
    const TrainRunner::GradientDiff one = tr.diff_reference(s);
    EXPECT_EQ(one.dqkv, 1u) << c.name;
    EXPECT_EQ(one.total(), 1u) << c.name;
  }
}

TEST_P(TrainStepGpu, ProductsMatchHostReferences) {
  const Case& c = GetParam();
  const Workload w = small(c, seed);
  {
    TrainRunner tr(w, TrainRunner::Options{}, s);
    tr.poison_gradients(s);
    tr.run(Pipeline::Fused, s, no_phases(), rng_plain(), true);
    DB_CUDA(cudaStreamSynchronize(s));
    const TrainRunner::Buffers b = tr.buffers();
    const bool f8 = tr.fp8();
    const int in_bytes = f8 ? 1 : 2;
    const int64_t M = w.batch * w.sq, E = w.embed, HD = w.q_heads * w.head_dim;
    const int64_t NQ = (w.q_heads + 2 * w.kv_heads) * w.head_dim;
    const std::vector<float> x = fetch(b.x, M * E, in_bytes), wq = fetch(b.w_qkv, NQ * E, in_bytes),
                             wo = fetch(b.w_out, E * HD, in_bytes);
    const std::vector<float> o = as_gemm_input(fetch(b.o, M * HD, 2), w.dtype, false),
                             dy = as_gemm_input(fetch(b.dy, M * E, 2), w.dtype, true),
                             dqkv = as_gemm_input(fetch(b.dqkv, M * NQ, 2), w.dtype, true);
    const double sx = scalar(b.scale_x), swq = scalar(b.scale_w_qkv), swo = scalar(b.scale_w_out);
    auto at = [](const std::vector<float>& v, int64_t cols, int64_t r, int64_t k) {
      return static_cast<double>(v[static_cast<size_t>(r * cols + k)]);
    };
    // (r, c) -> scale * sum_k a[r * ar + k * ak] * b[c * bc + k * bk]: a row of one operand times a column of the
    // other, each read in place with its own strides.
    auto product = [](const std::vector<float>& a, int64_t ar, int64_t ak, const std::vector<float>& bv, int64_t bc,
                      int64_t bk, int64_t K, double scale) {
      return [&a, &bv, ar, ak, bc, bk, K, scale](int64_t r, int64_t c) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += static_cast<double>(a[static_cast<size_t>(r * ar + k * ak)]) *
                 static_cast<double>(bv[static_cast<size_t>(c * bc + k * bk)]);
        return acc * scale;
      };
    };
    struct Product {
      const char* name;
      const void* out;
      int64_t rows, cols;
      std::function<double(int64_t, int64_t)> ref;
    };
    const std::vector<Product> products = {
        {"y = o wo^T", b.y, M, E, product(o, HD, 1, wo, HD, 1, HD, swo)},
        {"do = dy wo", b.d_o, M, HD, product(dy, E, 1, wo, 1, HD, E, swo)},
        {"dwo = dy^T o", b.dw_out, E, HD, product(dy, 1, E, o, 1, HD, M, 1.0)},
        {"dx = dqkv wq", b.dx, M, E, product(dqkv, NQ, 1, wq, 1, E, NQ, swq)},
        {"dw = dqkv^T x", b.dw, NQ, E, product(dqkv, 1, NQ, x, 1, E, M, sx)},
    };
    for (const Product& p : products) {
      size_t unwritten = 0;
      const double rel = rel_error(p.out, p.rows, p.cols, p.ref, &unwritten);
      std::printf("[%s] %s seed=%llu rel=%.3e\n", c.name, p.name, static_cast<unsigned long long>(seed), rel);
      EXPECT_EQ(unwritten, 0u) << c.name << " " << p.name << " seed " << seed;
      EXPECT_LE(rel, 1e-2) << c.name << " " << p.name << " seed " << seed;
    }
    size_t dqkv_poisoned = 0;  // dQKV was poisoned (NaN) before the step: every element must be written
    for (float v : fetch(b.dqkv, static_cast<size_t>(M * NQ), 2)) dqkv_poisoned += !std::isfinite(v);
    EXPECT_EQ(dqkv_poisoned, 0u) << c.name << " seed " << seed;
    // dQKV against the attention backward's reference on the step's own QKV, O, LSE and dO. Only where QKV has
    // unit variance (fp8: BlockRunner scales W_qkv so): bf16 keeps the unscaled product (stdev sqrt(E)/3), whose
    // nearly one-hot softmax makes dS = P o (dP - D) cancel below the bound's reach; the backward's accuracy on
    // N(0, 1) inputs is tests/test_attention_bwd_gpu.cpp's.
    if (!f8) return;
    const AttentionBwdParams bp = tr.backward_params(DropoutMode::Fused, true);
    DeviceBuffer ref(static_cast<size_t>(M * NQ) * 4), scratch(attention_backward_reference_scratch_bytes(bp));
    launch_attention_backward_reference(bp, DropoutMode::Fused, ref.get<float>(), scratch.get(), s);
    DB_CUDA(cudaStreamSynchronize(s));
    std::vector<float> r(static_cast<size_t>(M * NQ));
    DB_CUDA(cudaMemcpy(r.data(), ref.get(), r.size() * 4, cudaMemcpyDeviceToHost));
    size_t unwritten = 0;
    const double rel = rel_error(b.dqkv, M, NQ, [&](int64_t m, int64_t n) { return at(r, NQ, m, n); }, &unwritten);
    std::printf("[%s] dqkv vs reference seed=%llu rel=%.3e\n", c.name, static_cast<unsigned long long>(seed), rel);
    EXPECT_EQ(unwritten, 0u) << c.name << " seed " << seed;
    EXPECT_LE(rel, 1e-2) << c.name << " seed " << seed;
  }
}

// The bitwise test alone would pass a step that ignored the keep bits: p = 0.5 must change the gradients.
TEST_P(TrainStepGpu, DropoutChangesGradients) {
  const Case& c = GetParam();
  {
    Workload w = small(c, seed);
    w.dropout_p = 0.0;
    TrainRunner none(w, TrainRunner::Options{}, s);
    none.run(Pipeline::Stored, s, no_phases(), rng_plain(), true);
    const TrainRunner::GradientSums a = none.checksums(s);
    w.dropout_p = 0.5;
    TrainRunner half(w, TrainRunner::Options{}, s);
    half.run(Pipeline::Stored, s, no_phases(), rng_plain(), true);
    const TrainRunner::GradientSums b = half.checksums(s);
    EXPECT_NE(a.dqkv, b.dqkv) << c.name << " seed " << seed;
    EXPECT_NE(a.dx, b.dx) << c.name << " seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, TrainStepGpu,
                         testing::Values(Case{"bf16_hd64_causal", "bf16", 64, true},
                                         Case{"bf16_hd128", "bf16", 128, false},
                                         Case{"fp8_hd128_causal", "fp8", 128, true},
                                         Case{"fp8_hd64", "fp8", 64, false}),
                         case_name);

TEST(TrainStepChecks, RefusesTokensNotAMultipleOf16) {
  Workload w = small(Case{"check", "bf16", 64, false}, 1);
  w.batch = 1;
  w.sq = 100;
  EXPECT_THROW(validate_train_workload(w), UsageError);
  w.sq = 112;
  EXPECT_NO_THROW(validate_train_workload(w));
}

}  // namespace
