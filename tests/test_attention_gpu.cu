// Attention forward kernels (kernels/attention/: the mma.sync kernel and the sm_90a wgmma kernel, every kernel
// test runs for both families) against the naive fp32 device reference, the reference against a CPU fp64
// computation, the dropout modes against each other (bitwise), and the dropped elements of both kernels against
// the counter scheme (bit for bit).
// Every run draws fresh N(0,1) bf16 inputs and poisons the outputs (0xFF bytes: NaN in bf16 and fp32) first.
#include <gtest/gtest.h>

#include <ostream>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "dev_buf.hpp"
#include "attention_test_problem.hpp"
#include "gpu_guard.hpp"
#include "kernels/attention/attention.cuh"
#include "kernels/attention/attention_dropout.cuh"
#include "kernels/attention/attention_wgmma.cuh"
#include "kernels/attention/attention_wgmma_kernel.cuh"  // the coding comparison launches instances directly
#include "kernels/attention/ldsm_layout.cuh"
#include "kernels/rng/dropout_scheme.cuh"
#include "kernels/rng/rng_mask.cuh"
#include "kernels/common/check.hpp"
#include "kernels/common/dispatch.cuh"

namespace {

using namespace dropbench;
using bf16 = __nv_bfloat16;

using test::DevBuf;

struct Shape {
  int b, sq, hq, hkv, hd;
  bool causal;
  int pad = 0;  // extra elements per QKV row (tests the row stride)
  std::string name() const {
    return "B" + std::to_string(b) + "_S" + std::to_string(sq) + "_H" + std::to_string(hq) + "x" + std::to_string(hkv) +
           "_D" + std::to_string(hd) + (causal ? "_causal" : "") + (pad ? "_pad" + std::to_string(pad) : "");
  }
};
// ctest lists a parameter by its name, not its bytes.
void PrintTo(const Shape& s, std::ostream* os) { *os << s.name(); }

struct Dropout {
  double p = 0;
  uint64_t seed = 0;
  uint32_t offset = 0;
  int rounds = 7, tw = 8;
};

struct Problem {
  Shape s;
  AttentionKernel kernel = AttentionKernel::Mma;
  int64_t stride;
  std::vector<bf16> h_qkv;
  DevBuf<bf16> qkv;
  DevBuf<bf16> o;
  DevBuf<float> lse, o_ref, lse_ref;
  DevBuf<uint32_t> mask;
  MaskGeometry geo;

  explicit Problem(const Shape& sh, AttentionKernel k = AttentionKernel::Mma)
      : s(sh),
        kernel(k),
        stride(static_cast<int64_t>(sh.hq + 2 * sh.hkv) * sh.hd + sh.pad),
        qkv(static_cast<size_t>(sh.b) * sh.sq * stride),
        o(static_cast<size_t>(sh.b) * sh.sq * sh.hq * sh.hd),
        lse(static_cast<size_t>(sh.b) * sh.hq * sh.sq),
        o_ref(static_cast<size_t>(sh.b) * sh.sq * sh.hq * sh.hd),
        lse_ref(static_cast<size_t>(sh.b) * sh.hq * sh.sq),
        mask(MaskGeometry{static_cast<uint32_t>(sh.b * sh.hq), static_cast<uint32_t>(sh.sq),
                          static_cast<uint32_t>(sh.sq), sh.causal}
                 .words()) {
    geo = MaskGeometry{static_cast<uint32_t>(s.b * s.hq), static_cast<uint32_t>(s.sq), static_cast<uint32_t>(s.sq),
                       s.causal};
    std::mt19937_64 rng(test::next_draw_seed());
    std::normal_distribution<float> nd(0.f, 1.f);
    h_qkv.resize(qkv.n);
    for (auto& v : h_qkv) v = __float2bfloat16(nd(rng));
    qkv.put(h_qkv);
    mask.poison();
  }

  AttentionParams params(DropoutMode m, const Dropout& d) const {
    AttentionParams p = test::attention_params(s, kernel, qkv.p, o.p, lse.p, mask.p, m, d);
    p.qkv_row_stride = s.pad ? stride : 0;
    p.softmax_scale = 1.f / std::sqrt(static_cast<float>(s.hd));
    return p;
  }

  void build_mask(const Dropout& d) {
    mask.poison();
    launch_attention_mask_reference(mask.p, geo, d.seed, d.offset, make_threshold(d.p, d.tw).drop, d.rounds, d.tw,
                                    nullptr);
    DB_CUDA(cudaDeviceSynchronize());
  }

  // Runs the fast kernel on poisoned outputs; returns (O, LSE) after checking every element was written.
  std::pair<std::vector<bf16>, std::vector<float>> run(DropoutMode m, const Dropout& d) {
    if (m == DropoutMode::Mask) build_mask(d);
    o.poison();
    lse.poison();
    launch_attention(params(m, d), m, nullptr);
    DB_CUDA(cudaDeviceSynchronize());
    auto ho = o.get();
    auto hl = lse.get();
    size_t bad = 0;
    for (const auto& v : ho) bad += !std::isfinite(__bfloat162float(v));
    for (const auto& v : hl) bad += !std::isfinite(v);
    EXPECT_EQ(bad, 0u) << s.name() << " " << dropout_mode_name(m) << ": non-finite / unwritten outputs";
    return {std::move(ho), std::move(hl)};
  }

  std::pair<std::vector<float>, std::vector<float>> reference(DropoutMode m, const Dropout& d) {
    o_ref.poison();
    lse_ref.poison();
    AttentionParams p = params(m, d);
    p.o = nullptr;
    p.lse = lse_ref.p;
    if (m == DropoutMode::Mask) build_mask(d);
    launch_attention_reference(p, m, nullptr, o_ref.p);
    DB_CUDA(cudaDeviceSynchronize());
    return {o_ref.get(), lse_ref.get()};
  }
};

double rel_l2(const std::vector<bf16>& out, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(__bfloat162float(out[i])) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

bool bitwise_equal(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(bf16)) == 0;
}
bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const Shape kShapes[] = {
    {2, 1000, 8, 2, 128, false},    // GQA 4:1, ragged
    {1, 1000, 8, 2, 128, true},
    {2, 77, 4, 4, 128, false},      // shorter than one block
    {1, 77, 4, 4, 128, true},
    {1, 2048, 4, 1, 128, true},     // many full blocks, MQA
    {1, 256, 2, 1, 128, false, 24}, // padded QKV rows
    {1, 513, 8, 8, 64, false},
    {2, 300, 8, 2, 64, true},
};

class AttentionVsRef : public ::testing::TestWithParam<std::tuple<AttentionKernel, Shape>> {};

TEST_P(AttentionVsRef, AllModesMatchReference) {
  const AttentionKernel kern = std::get<0>(GetParam());
  DB_REQUIRE_KERNEL(kern);
  const Shape sh = std::get<1>(GetParam());
  const Dropout none{};
  const Dropout drop{0.1, 0x1234567890abcdefULL, 17, 7, 8};
  struct Case {
    DropoutMode mode;
    Dropout d;
  } cases[] = {{DropoutMode::None, none}, {DropoutMode::Mask, drop}, {DropoutMode::Fused, drop}};
  for (const auto& c : cases) {
    Problem pr(sh, kern);  // fresh inputs per mode
    auto [o, lse] = pr.run(c.mode, c.d);
    // The reference uses the counter scheme directly (mode Fused) for both dropout modes.
    auto [o_ref, lse_ref] = pr.reference(c.mode == DropoutMode::None ? DropoutMode::None : DropoutMode::Fused, c.d);
    const double err = rel_l2(o, o_ref);
    const double lerr = max_abs_diff(lse, lse_ref);
    EXPECT_LE(err, 1e-2) << sh.name() << " " << dropout_mode_name(c.mode);
    EXPECT_LE(lerr, 2e-3) << sh.name() << " " << dropout_mode_name(c.mode) << " LSE";
    EXPECT_TRUE(std::isfinite(err));
    std::printf("[ info ] %-5s %-28s %-5s rel_l2(O)=%.3e max|dLSE|=%.3e\n", attention_kernel_family_name(kern),
                sh.name().c_str(), dropout_mode_name(c.mode), err, lerr);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionVsRef,
                         ::testing::Combine(::testing::Values(AttentionKernel::Mma, AttentionKernel::Wgmma),
                                            ::testing::ValuesIn(kShapes)),
                         [](const ::testing::TestParamInfo<std::tuple<AttentionKernel, Shape>>& i) {
                           return std::string(attention_kernel_family_name(std::get<0>(i.param))) + "_" +
                                  std::get<1>(i.param).name();
                         });

// Every kernel test below runs once per kernel family.
class AttentionGpu : public ::testing::TestWithParam<AttentionKernel> {};
INSTANTIATE_TEST_SUITE_P(Kernels, AttentionGpu, test::kAllKernels, test::kernel_param_name);

// p = 0: modes Mask and Fused (drop threshold 0, scale 1) are bit for bit mode None.
TEST_P(AttentionGpu, ZeroDropoutEqualsNoneBitwise) {
  DB_REQUIRE_KERNEL(GetParam());
  // dH 64 non-causal too: its mode None runs the unrolled loop, the dropout modes the rolled one.
  for (const Shape& sh : {Shape{1, 1000, 8, 2, 128, true}, Shape{2, 333, 4, 4, 128, false},
                          Shape{1, 700, 4, 2, 64, true}, Shape{2, 333, 4, 4, 64, false}}) {
    Problem pr(sh, GetParam());
    const Dropout d0{0.0, 99, 3, 7, 8};
    auto [o_none, l_none] = pr.run(DropoutMode::None, {});
    auto [o_mask, l_mask] = pr.run(DropoutMode::Mask, d0);
    auto [o_fused, l_fused] = pr.run(DropoutMode::Fused, d0);
    EXPECT_TRUE(bitwise_equal(o_none, o_mask)) << sh.name();
    EXPECT_TRUE(bitwise_equal(o_none, o_fused)) << sh.name();
    EXPECT_TRUE(bitwise_equal(l_none, l_mask)) << sh.name();
    EXPECT_TRUE(bitwise_equal(l_none, l_fused)) << sh.name();
  }
}

// Mask mode (bits read from memory) and fused mode (bits generated in the kernel) agree bit for bit.
TEST_P(AttentionGpu, MaskEqualsFusedBitwise) {
  DB_REQUIRE_KERNEL(GetParam());
  const Dropout ds[] = {
      {0.1, 1, 0, 7, 8},
      {0.25, 0xdeadbeefcafef00dULL, 5, 3, 16},
      {0.5, 42, 0xffffffffu, 10, 32},
      {0.9, 7, 3, 5, 8},
      {0.15, 0x5eed5eedULL, 1234, 7, 32},
      {0.3, 3, 9, 10, 16},
  };
  int i = 0;
  for (const Dropout& d : ds) {
    const Shape sh = (i++ % 2) ? Shape{1, 1000, 8, 2, 128, true} : Shape{2, 517, 4, 1, 64, false};
    Problem pr(sh, GetParam());
    auto [o_mask, l_mask] = pr.run(DropoutMode::Mask, d);
    auto [o_fused, l_fused] = pr.run(DropoutMode::Fused, d);
    auto [o_none, l_none] = pr.run(DropoutMode::None, {});
    EXPECT_TRUE(bitwise_equal(o_mask, o_fused)) << sh.name() << " p=" << d.p << " R=" << d.rounds << " TW=" << d.tw;
    EXPECT_TRUE(bitwise_equal(l_mask, l_fused)) << sh.name();
    EXPECT_TRUE(bitwise_equal(l_mask, l_none)) << sh.name() << " (LSE is of the undropped scores)";
    EXPECT_FALSE(bitwise_equal(o_mask, o_none)) << sh.name() << " dropout had no effect";
  }
}

// Other rounds / threshold widths against the reference (all fused instances dispatch correctly).
TEST_P(AttentionGpu, FusedRoundsAndWidthsMatchReference) {
  DB_REQUIRE_KERNEL(GetParam());
  for (int r : kPhiloxRounds)
    for (int tw : kThresholdBits) {
      const Shape sh{1, 200, 4, 2, 128, (r + tw) % 2 == 1};
      Problem pr(sh, GetParam());
      const Dropout d{0.2, 0xabcdefULL + r, static_cast<uint32_t>(tw), r, tw};
      auto [o, lse] = pr.run(DropoutMode::Fused, d);
      auto [o_ref, lse_ref] = pr.reference(DropoutMode::Fused, d);
      EXPECT_LE(rel_l2(o, o_ref), 1e-2) << "R=" << r << " TW=" << tw;
      EXPECT_LE(max_abs_diff(lse, lse_ref), 2e-3) << "R=" << r << " TW=" << tw;
    }
}

// Mode Mask on the reference reads the same bits it generates in mode Fused.
TEST(AttentionRef, ReferenceMaskEqualsReferenceFused) {
  DB_REQUIRE_GPU();
  Problem pr(Shape{1, 150, 4, 2, 64, true});
  const Dropout d{0.4, 77, 1, 5, 16};
  auto [o_f, l_f] = pr.reference(DropoutMode::Fused, d);
  auto [o_m, l_m] = pr.reference(DropoutMode::Mask, d);
  EXPECT_TRUE(bitwise_equal(o_f, o_m));
  EXPECT_TRUE(bitwise_equal(l_f, l_m));
}

// The device reference itself against a CPU fp64 computation (tiny sizes).
void cpu_attention(const Problem& pr, DropoutMode m, const Dropout& d, std::vector<double>& o, std::vector<double>& lse) {
  const Shape& s = pr.s;
  const Threshold t = make_threshold(d.p, d.tw);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.hd));
  o.assign(static_cast<size_t>(s.b) * s.sq * s.hq * s.hd, 0.0);
  lse.assign(static_cast<size_t>(s.b) * s.hq * s.sq, 0.0);
  auto at = [&](int b, int row, int col) { return static_cast<double>(__bfloat162float(pr.h_qkv[(static_cast<int64_t>(b) * s.sq + row) * pr.stride + col])); };
  std::vector<double> sc(s.sq);
  for (int b = 0; b < s.b; ++b)
    for (int h = 0; h < s.hq; ++h) {
      const int hk = h / (s.hq / s.hkv);
      const uint32_t bh = static_cast<uint32_t>(b * s.hq + h);
      for (int i = 0; i < s.sq; ++i) {
        const int nk = s.causal ? i + 1 : s.sq;
        double mx = -INFINITY;
        for (int j = 0; j < nk; ++j) {
          double acc = 0;
          for (int e = 0; e < s.hd; ++e) acc += at(b, i, h * s.hd + e) * at(b, j, (s.hq + hk) * s.hd + e);
          sc[j] = acc * scale;
          mx = std::max(mx, sc[j]);
        }
        double l = 0;
        for (int j = 0; j < nk; ++j) l += std::exp(sc[j] - mx);
        lse[(static_cast<size_t>(b) * s.hq + h) * s.sq + i] = mx + std::log(l);
        for (int j = 0; j < nk; ++j) {
          double pj = std::exp(sc[j] - mx) / l;
          if (m != DropoutMode::None) {
            uint32_t w = 0;
            const uint32_t tile = (i / 16) * pr.geo.cols64() + (j / 64);
            const uint32_t lane = tile_lane_of(i % 16, j % 64);
            switch (d.rounds * 100 + d.tw) {
              case 708: w = attn_keep_word<7, 8>(d.seed, d.offset, t.drop, bh, tile, lane); break;
              case 316: w = attn_keep_word<3, 16>(d.seed, d.offset, t.drop, bh, tile, lane); break;
              case 1032: w = attn_keep_word<10, 32>(d.seed, d.offset, t.drop, bh, tile, lane); break;
              default: ADD_FAILURE() << "unsupported R/TW in the CPU reference";
            }
            const bool keep = (w >> tile_bit_of(i % 16, j % 64)) & 1u;
            pj = keep ? pj / t.keep_effective : 0.0;
          }
          for (int e = 0; e < s.hd; ++e)
            o[((static_cast<size_t>(b) * s.sq + i) * s.hq + h) * s.hd + e] += pj * at(b, j, (s.hq + s.hkv + hk) * s.hd + e);
        }
      }
    }
}

TEST(AttentionRef, ReferenceMatchesCpuFp64) {
  DB_REQUIRE_GPU();
  const Dropout ds[] = {{0.3, 5, 2, 7, 8}, {0.5, 0xfeedULL, 0, 3, 16}, {0.2, 11, 7, 10, 32}};
  int k = 0;
  for (const Shape& sh : {Shape{1, 37, 2, 1, 64, false}, Shape{2, 70, 2, 2, 128, true}, Shape{1, 130, 4, 2, 64, true}}) {
    for (DropoutMode m : {DropoutMode::None, DropoutMode::Fused}) {
      Problem pr(sh);
      const Dropout d = ds[k++ % 3];
      auto [o_ref, lse_ref] = pr.reference(m, d);
      std::vector<double> o_cpu, lse_cpu;
      cpu_attention(pr, m, d, o_cpu, lse_cpu);
      double num = 0, den = 0, lmax = 0;
      for (size_t i = 0; i < o_cpu.size(); ++i) {
        num += (o_ref[i] - o_cpu[i]) * (o_ref[i] - o_cpu[i]);
        den += o_cpu[i] * o_cpu[i];
      }
      for (size_t i = 0; i < lse_cpu.size(); ++i) lmax = std::max(lmax, std::fabs(lse_ref[i] - lse_cpu[i]));
      EXPECT_LE(std::sqrt(num / den), 1e-5) << sh.name() << " " << dropout_mode_name(m);
      EXPECT_LE(lmax, 1e-5) << sh.name() << " " << dropout_mode_name(m);
    }
  }
}

TEST_P(AttentionGpu, RejectsBadParams) {
  DB_REQUIRE_KERNEL(GetParam());
  Problem pr(Shape{1, 64, 4, 4, 128, false}, GetParam());
  AttentionParams p = pr.params(DropoutMode::None, {});
  p.head_dim = 96;
  EXPECT_THROW(launch_attention(p, DropoutMode::None, nullptr), UsageError);
  p = pr.params(DropoutMode::None, {});
  p.kv_heads = 3;
  EXPECT_THROW(launch_attention(p, DropoutMode::None, nullptr), UsageError);
  p = pr.params(DropoutMode::Fused, {0.1, 1, 0, 6, 8});
  EXPECT_THROW(launch_attention(p, DropoutMode::Fused, nullptr), UsageError);
  p = pr.params(DropoutMode::Mask, {0.1, 1, 0, 7, 8});
  p.mask = nullptr;
  EXPECT_THROW(launch_attention(p, DropoutMode::Mask, nullptr), UsageError);
  p = pr.params(DropoutMode::Mask, {0.1, 1, 0, 7, 8});
  p.mask_out = pr.mask.p;  // written in mode Fused only
  EXPECT_THROW(launch_attention(p, DropoutMode::Mask, nullptr), UsageError);
  p = pr.params(DropoutMode::Fused, {0.1, 1, 0, 7, 8});
  p.mask = nullptr;
  p.mask_out = reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(pr.mask.p) + 2);  // the words are 4-byte stores
  EXPECT_THROW(launch_attention(p, DropoutMode::Fused, nullptr), UsageError);
}


// The dropped elements themselves, bit for bit against the counter scheme (host attn_keep_word), for both
// kernel families, both dropout modes and every (R, TW) instance: V is the identity (key j's value row is the unit vector e_j, SQ <= dH),
// so O[i, j] = P_ij * keep_ij * scale / l_i is exactly zero iff element (i, j) was dropped (P_ij > 0 for every
// visible element: scores are O(1), so no exp underflows).
TEST_P(AttentionGpu, DroppedElementsMatchCounterScheme) {
  DB_REQUIRE_KERNEL(GetParam());
  for (const bool causal : {false, true}) {
    const Shape sh{2, 120, 4, 2, 128, causal};
    Problem pr(sh, GetParam());
    const int vcol0 = (sh.hq + sh.hkv) * sh.hd;
    for (int b = 0; b < sh.b; ++b)
      for (int j = 0; j < sh.sq; ++j)
        for (int hk = 0; hk < sh.hkv; ++hk)
          for (int e = 0; e < sh.hd; ++e)
            pr.h_qkv[(static_cast<int64_t>(b) * sh.sq + j) * pr.stride + vcol0 + hk * sh.hd + e] =
                __float2bfloat16(e == j ? 1.f : 0.f);
    pr.qkv.put(pr.h_qkv);
    for (int r : kPhiloxRounds)
      for (int tw : kThresholdBits) {
        const Dropout d{0.3, 0x0123456789ULL + 16 * r + tw, 11, r, tw};
        const Threshold t = make_threshold(d.p, d.tw);
        for (DropoutMode m : {DropoutMode::Mask, DropoutMode::Fused}) {
          auto [o, lse] = pr.run(m, d);
          size_t wrong = 0, dropped = 0, visible = 0;
          with_rounds_tw(r, tw, "test", [&](auto rr, auto tt) {
            constexpr int R = decltype(rr)::value, TW = decltype(tt)::value;
            for (int b = 0; b < sh.b; ++b)
              for (int h = 0; h < sh.hq; ++h) {
                const uint32_t bh = static_cast<uint32_t>(b * sh.hq + h);
                for (int i = 0; i < sh.sq; ++i)
                  for (int j = 0; j < sh.sq; ++j) {
                    if (causal && j > i) continue;
                    const uint32_t tile = (i / 16) * pr.geo.cols64() + j / 64;
                    const uint32_t w =
                        attn_keep_word<R, TW>(d.seed, d.offset, t.drop, bh, tile, tile_lane_of(i % 16, j % 64));
                    const bool keep = (w >> tile_bit_of(i % 16, j % 64)) & 1u;
                    const float v =
                        __bfloat162float(o[((static_cast<size_t>(b) * sh.sq + i) * sh.hq + h) * sh.hd + j]);
                    wrong += keep != (v != 0.f);
                    dropped += !keep;
                    ++visible;
                  }
              }
          });
          EXPECT_EQ(wrong, 0u) << attention_kernel_family_name(GetParam()) << " " << dropout_mode_name(m)
                               << (causal ? " causal" : "") << " R" << r << " TW" << tw;
          EXPECT_GT(dropped, visible / 5) << "R" << r << " TW" << tw;  // p = 0.3: the test saw dropping
        }
      }
  }
}

// Row windows (the chunked pipeline): a window's rows are bit for bit those of the whole-matrix run, and rows
// outside it are not written (modes none and fused; mode mask's window layout is tested in test_pipelines_gpu).
TEST_P(AttentionGpu, RowWindowEqualsWholeMatrixRows) {
  DB_REQUIRE_KERNEL(GetParam());
  for (const Shape& sh : {Shape{2, 1000, 4, 2, 128, true}, Shape{1, 700, 4, 4, 64, false}}) {
    Problem pr(sh, GetParam());
    const Dropout d{0.2, 0xabcULL, 5, 7, 8};
    for (DropoutMode m : {DropoutMode::None, DropoutMode::Fused}) {
      auto [o_all, l_all] = pr.run(m, d);
      const int rb = 256, rows = 256;
      pr.o.poison();
      pr.lse.poison();
      AttentionParams p = pr.params(m, d);
      p.row_begin = rb;
      p.rows = rows;
      launch_attention(p, m, nullptr);
      DB_CUDA(cudaDeviceSynchronize());
      auto o_w = pr.o.get();
      auto l_w = pr.lse.get();
      size_t diff = 0, unwritten = 0, written_outside = 0;
      const size_t row_elems = static_cast<size_t>(sh.hq) * sh.hd;
      for (int b = 0; b < sh.b; ++b)
        for (int i = 0; i < sh.sq; ++i) {
          const bool in = i >= rb && i < rb + rows;
          const size_t off = (static_cast<size_t>(b) * sh.sq + i) * row_elems;
          for (size_t e = 0; e < row_elems; ++e) {
            const uint16_t* w = reinterpret_cast<const uint16_t*>(&o_w[off + e]);
            const uint16_t* a = reinterpret_cast<const uint16_t*>(&o_all[off + e]);
            if (in) diff += *w != *a;
            else written_outside += *w != 0xFFFFu;
          }
          for (int h = 0; h < sh.hq; ++h) {
            const size_t li = (static_cast<size_t>(b) * sh.hq + h) * sh.sq + i;
            if (in) unwritten += std::memcmp(&l_w[li], &l_all[li], 4) != 0;
          }
        }
      EXPECT_EQ(diff, 0u) << sh.name() << " " << dropout_mode_name(m);
      EXPECT_EQ(unwritten, 0u) << sh.name() << " " << dropout_mode_name(m) << " LSE";
      EXPECT_EQ(written_outside, 0u) << sh.name() << " " << dropout_mode_name(m);
    }
  }
}

// Mode Fused with mask_out: the keep words the kernel writes are word for word the RNG kernel's tile mask for the
// same (seed, offset, rounds, threshold), over every word the RNG kernel writes (causal: the generated tiles; the
// words of the tiles above the diagonal keep their old contents, here the 0xA5 poison, as the RNG kernel leaves
// them), for every rounds x threshold width, causal or not, dH 64 and 128, ragged SQ; and O and LSE are bit for
// bit those of the launch without the write. A row window writes the window's words (MaskWindow layout).
TEST_P(AttentionGpu, FusedWriteEqualsRngMask) {
  DB_REQUIRE_KERNEL(GetParam());
  constexpr uint32_t kPoison = 0xA5A5A5A5u;
  const Shape shapes[] = {Shape{1, 1000, 8, 2, 128, true}, Shape{2, 333, 4, 4, 128, false},
                          Shape{1, 700, 4, 2, 64, true}, Shape{2, 517, 4, 1, 64, false}};
  for (const Shape& sh : shapes) {
    Problem pr(sh, GetParam());
    DevBuf<uint32_t> rng(pr.geo.words());
    for (int r : kPhiloxRounds)
      for (int tw : kThresholdBits)
        for (const int rb : {0, 256}) {  // the whole matrix; rows [256, 512)
          if (rb != 0 && !(r == 7 && tw == 8)) continue;  // one window case per shape
          const Dropout d{0.2, 0x5eedULL * (r + 1) + tw, static_cast<uint32_t>(3 * tw + r), r, tw};
          const std::string what = sh.name() + " R=" + std::to_string(r) + " TW=" + std::to_string(tw) +
                                   (rb ? " window" : "");
          AttentionParams p = pr.params(DropoutMode::Fused, d);
          p.mask = nullptr;
          p.row_begin = rb;
          p.rows = rb ? 256 : 0;
          const MaskWindow win = attention_mask_window(p);
          // The RNG kernel's mask and the fused forward's, both over 0xA5 bytes.
          DB_CUDA(cudaMemset(rng.p, 0xA5, rng.n * 4));
          RngMaskParams rp;
          rp.seed = d.seed;
          rp.offset = d.offset;
          rp.rounds = r;
          rp.threshold_bits = tw;
          rp.drop = p.drop_threshold;
          rp.layout = MaskLayout::Tile;
          rp.geo = pr.geo;
          rp.out = rng.p;
          rp.row_begin = static_cast<uint32_t>(p.row_begin);
          rp.rows = static_cast<uint32_t>(p.rows);
          launch_rng_mask(rp, nullptr);
          // Without the write, then with it (O and LSE poisoned before each).
          std::vector<bf16> o_plain;
          std::vector<float> l_plain;
          for (const bool write : {false, true}) {
            pr.o.poison();
            pr.lse.poison();
            DB_CUDA(cudaMemset(pr.mask.p, 0xA5, pr.mask.n * 4));
            p.mask_out = write ? pr.mask.p : nullptr;
            launch_attention(p, DropoutMode::Fused, nullptr);
            DB_CUDA(cudaDeviceSynchronize());
            if (!write) {
              o_plain = pr.o.get();
              l_plain = pr.lse.get();
              continue;
            }
            EXPECT_TRUE(bitwise_equal(o_plain, pr.o.get())) << what << ": O differs with the write";
            EXPECT_TRUE(bitwise_equal(l_plain, pr.lse.get())) << what << ": LSE differs with the write";
          }
          const std::vector<uint32_t> want = rng.get(), got = pr.mask.get();
          size_t differ = 0, generated = 0, unwritten_by_rng = 0, touched = 0, beyond = 0;
          const uint32_t cols = pr.geo.cols64();
          for (uint32_t bh = 0; bh < pr.geo.bh; ++bh)
            for (uint32_t r16 = win.r16_begin; r16 < win.r16_begin + win.rows16; ++r16)
              for (uint32_t c64 = 0; c64 < cols; ++c64)
                for (uint32_t l = 0; l < kWordsPerTile; ++l) {
                  const uint64_t i = win.word_index(pr.geo, bh, r16, c64, l);
                  const bool gen = c64 < pr.geo.tiles_in_strip(r16);
                  generated += gen;
                  differ += got[i] != want[i];
                  unwritten_by_rng += gen && want[i] == kPoison;
                  touched += !gen && got[i] != kPoison;
                }
          for (size_t i = win.words(pr.geo); i < got.size(); ++i) beyond += got[i] != kPoison;
          EXPECT_GT(generated, 0u) << what;
          EXPECT_EQ(unwritten_by_rng, 0u) << what << ": the RNG kernel left generated words unwritten";
          EXPECT_EQ(differ, 0u) << what << ": words differing from the RNG kernel's mask";
          EXPECT_EQ(touched, 0u) << what << ": words of tiles the RNG kernel does not generate were written";
          EXPECT_EQ(beyond, 0u) << what << ": words past the window's mask were written";
        }
  }
}

// Each thread's ldmatrix offsets in both spellings of ldsm_layout.cuh's rule (the forward's ldsm_offsets, the
// backward's off_a / off_b), for row widths rb0 and rb1: out[((t * 2) + w) * 4 + k], k = a, b, off_a, off_b.
__global__ void ldsm_offsets_kernel(uint32_t* out, int rb0, int rb1) {
  const int t = static_cast<int>(threadIdx.x), lane = t & 31;
  const int rbs[2] = {rb0, rb1};
  for (int w = 0; w < 2; ++w) {
    const attn::LdsmOffsets o = attn::ldsm_offsets(rbs[w]);
    uint32_t* d = out + (t * 2 + w) * 4;
    d[0] = o.a;
    d[1] = o.b;
    d[2] = attn::off_a(lane, rbs[w]);
    d[3] = attn::off_b(lane, rbs[w]);
  }
}

// The forward's and the backward's spellings of the per-lane ldmatrix offsets agree for every thread of a 128-thread
// CTA at both row widths (dH 64 and 128), and the 32 lanes of a warp address 32 distinct 16-byte chunks per pattern.
TEST(AttentionLayout, LdsmOffsetsAgreeWithOffAB) {
  DB_REQUIRE_GPU();
  constexpr int kThreads = 128;
  DevBuf<uint32_t> out(kThreads * 2 * 4);
  out.poison();
  ldsm_offsets_kernel<<<1, kThreads>>>(out.p, 128, 256);
  DB_CUDA(cudaGetLastError());
  DB_CUDA(cudaDeviceSynchronize());
  const std::vector<uint32_t> h = out.get();
  const int rbs[2] = {128, 256};
  for (int w = 0; w < 2; ++w) {
    std::vector<uint32_t> a, b;
    for (int t = 0; t < kThreads; ++t) {
      const uint32_t* d = h.data() + (t * 2 + w) * 4;
      ASSERT_EQ(d[0], d[2]) << "pattern A, thread " << t << ", row bytes " << rbs[w];
      ASSERT_EQ(d[1], d[3]) << "pattern B, thread " << t << ", row bytes " << rbs[w];
      if (t < 32) {
        a.push_back(d[0]);
        b.push_back(d[1]);
      }
    }
    for (auto* v : {&a, &b}) {
      std::sort(v->begin(), v->end());
      EXPECT_EQ(std::unique(v->begin(), v->end()), v->end()) << "row bytes " << rbs[w] << ": two lanes share an address";
    }
  }
}

// The keep word rebuilt from the byte compares (the wgmma kernel's 8-bit fused coding) is tile_call_bits<8>'s.
TEST(AttentionDropoutHost, Ge7KeepWordIsTileCallBits) {
  std::mt19937_64 rng(test::next_draw_seed());
  for (int i = 0; i < 20000; ++i) {
    const uint32_t drop = static_cast<uint32_t>(i < 256 ? i : rng() & 0xFF);
    const attn::ByteThreshold bt = attn::byte_threshold(drop);
    uint32_t ge[2][4];
    uint32_t want = 0;
    for (int k = 0; k < 2; ++k) {
      const u32x4 r{static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()),
                    static_cast<uint32_t>(rng())};
      ge[k][0] = attn::ge_bytes7(r.x, bt);
      ge[k][1] = attn::ge_bytes7(r.y, bt);
      ge[k][2] = attn::ge_bytes7(r.z, bt);
      ge[k][3] = attn::ge_bytes7(r.w, bt);
      want |= tile_call_bits<8>(r, drop, k);
    }
    ASSERT_EQ(attn::ge7_keep_word(ge), want) << "drop " << drop;
  }
}

// The two kernel families compute the same function with the same keep bits: with heavy dropout (p = 0.5, where
// any difference in the bits would change O by O(1)) they agree to bf16 rounding, in every mode.
TEST(AttentionKernels, WgmmaAgreesWithMma) {
  DB_REQUIRE_KERNEL(AttentionKernel::Wgmma);
  const Dropout d{0.5, 0xfeedfaceULL, 3, 7, 8};
  for (const Shape& sh : {Shape{2, 1000, 8, 2, 128, true}, Shape{1, 777, 4, 1, 128, false}, Shape{2, 300, 4, 2, 64, true}}) {
    Problem pm(sh, AttentionKernel::Mma);
    for (DropoutMode m : {DropoutMode::None, DropoutMode::Mask, DropoutMode::Fused}) {
      pm.kernel = AttentionKernel::Mma;
      auto [o_mma, l_mma] = pm.run(m, d);
      pm.kernel = AttentionKernel::Wgmma;
      auto [o_wg, l_wg] = pm.run(m, d);
      std::vector<float> ref(o_mma.size());
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = __bfloat162float(o_mma[i]);
      const double err = rel_l2(o_wg, ref);
      EXPECT_LE(err, 1e-2) << sh.name() << " " << dropout_mode_name(m);
      EXPECT_LE(max_abs_diff(l_wg, l_mma), 2e-3) << sh.name() << " " << dropout_mode_name(m);
      std::printf("[ info ] wgmma vs mma %-28s %-5s rel_l2(O)=%.3e\n", sh.name().c_str(), dropout_mode_name(m), err);
    }
  }
}

// Schedule C of the wgmma kernel (Philox-7, 8-bit), launched directly over the problem's tensor maps on the
// launcher's grid; persistent schedules on at most cap CTAs (0: no cap).
template <class C, DropoutMode M, bool kCausal, int R = 7, int TW = 8>
void launch_wg_schedule(const AttentionParams& p, unsigned cap = 0) {
  auto fn = attn_wg::attn_fwd_wgmma_kernel<C, M, R, TW, kCausal>;
  DB_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem));
  CUtensorMap tq, tkv;
  attn_wg::encode_tensor_maps(p, C::kBr, C::kBc, &tq, &tkv);
  dim3 g = attn_wg::launch_grid(p, C::kBr, C::kPersist);
  if (C::kPersist && cap > 0) g.x = std::min(g.x, cap);
  fn<<<g, C::kThreads, C::kSmem>>>(tq, tkv, attn::make_kernel_args(p));
  DB_CUDA_LAUNCH();
}

// One instance of the wgmma kernel at dH 128 (3 stages, ping-pong) with dropout coding I (WgCfg DROP_IMPL).
template <int I, DropoutMode M, bool kCausal, bool kAhead = false, bool kUnroll2 = false>
void launch_wg_coding(const AttentionParams& p) {
  launch_wg_schedule<attn_wg::WgCfg<128, 128, 3, true, kAhead, I, kUnroll2>, M, kCausal>(p);
}

template <bool kCausal>
std::vector<std::pair<std::string, void (*)(const AttentionParams&)>> wg_codings() {
  return {{"mask I0", &launch_wg_coding<0, DropoutMode::Mask, kCausal>},
          {"mask I1", &launch_wg_coding<1, DropoutMode::Mask, kCausal>},
          {"mask I2", &launch_wg_coding<2, DropoutMode::Mask, kCausal>},
          {"mask I3", &launch_wg_coding<3, DropoutMode::Mask, kCausal>},
          {"mask I1 unroll2", &launch_wg_coding<1, DropoutMode::Mask, kCausal, false, true>},
          {"mask I3 unroll2", &launch_wg_coding<3, DropoutMode::Mask, kCausal, false, true>},
          {"fused I0", &launch_wg_coding<0, DropoutMode::Fused, kCausal>},
          {"fused I0 ahead", &launch_wg_coding<0, DropoutMode::Fused, kCausal, true>},
          {"fused I0 ahead unroll2", &launch_wg_coding<0, DropoutMode::Fused, kCausal, true, true>},
          {"fused I1", &launch_wg_coding<1, DropoutMode::Fused, kCausal>},
          {"fused I2", &launch_wg_coding<2, DropoutMode::Fused, kCausal>},
          {"fused I3", &launch_wg_coding<3, DropoutMode::Fused, kCausal>}};
}

// The wgmma kernel's dropout codings (DROP_IMPL 0-3, docs/attention.md; also the unrolled main loop) make the same
// bits with different instructions:
// every one gives O and LSE bitwise equal to the dispatched mask kernel's, mask and fused, causal (ragged, GQA)
// and not (batch 2, MQA), every output written.
TEST(AttentionKernels, WgmmaDropoutCodingsEqualBitwise) {
  DB_REQUIRE_KERNEL(AttentionKernel::Wgmma);
  for (const Dropout& d : {Dropout{0.1, 0x5eedULL, 42, 7, 8}, Dropout{0.7, 0xfeedf00dULL, 0xffffffffu, 7, 8}}) {
    for (const Shape& sh : {Shape{1, 1000, 8, 2, 128, true}, Shape{2, 517, 4, 1, 128, false}}) {
      Problem pr(sh, AttentionKernel::Wgmma);
      auto [o_mask, l_mask] = pr.run(DropoutMode::Mask, d);  // builds the mask the Mask codings read
      for (const auto& [name, launch] : sh.causal ? wg_codings<true>() : wg_codings<false>()) {
        const bool fused = name.rfind("fused", 0) == 0;
        pr.o.poison();
        pr.lse.poison();
        launch(pr.params(fused ? DropoutMode::Fused : DropoutMode::Mask, d));
        DB_CUDA(cudaDeviceSynchronize());
        EXPECT_TRUE(bitwise_equal(o_mask, pr.o.get())) << sh.name() << " " << name << " p " << d.p;
        EXPECT_TRUE(bitwise_equal(l_mask, pr.lse.get())) << sh.name() << " " << name << " p " << d.p;
      }
    }
  }
}

// WgCfg WAIT_SPLIT 2 (the P V wait after a never-taken branch, so ptxas keeps it below the softmax, and the O
// rescale before the P V issue) and 3 (also P packed before the wait into alternating register sets) move no
// arithmetic: every schedule launch_attention dispatches gives O and LSE bitwise equal to the same schedule at
// level 0, for dH 128 and 64, every mode, causal (ragged, GQA; SQ 300 takes the persistent short-causal schedules,
// SQ 128 a single key block) and not (batch 2, MQA; SQ 517 has 5 key blocks: both P sets and an odd last block).
// Persistent schedules on at most cap CTAs (0: the launcher's grid), so that CTAs walk several tiles. The levels
// the dispatch rules promise are checked too (a rule that silently stopped splitting would pass the bitwise part).
template <int HD, DropoutMode M, bool kCausal>
int launch_level0_twin(const AttentionParams& p, unsigned cap) {
  int level = -1;
  attn_wg::with_run_time_schedule<attn_wg::SchedTw<HD, M, kCausal, 8>, M, kCausal, 8>(p, [&]<class C>() {
    level = C::kWaitSplit;
    launch_wg_schedule<typename attn_wg::WaitSplit<C, 0>::type, M, kCausal>(p, cap);
  });
  return level;
}
template <int HD, bool kCausal>
int launch_level0_twin_mode(const AttentionParams& p, DropoutMode m, unsigned cap) {
  switch (m) {
    case DropoutMode::None: return launch_level0_twin<HD, DropoutMode::None, kCausal>(p, cap);
    case DropoutMode::Mask: return launch_level0_twin<HD, DropoutMode::Mask, kCausal>(p, cap);
    case DropoutMode::Fused: return launch_level0_twin<HD, DropoutMode::Fused, kCausal>(p, cap);
  }
  return -1;
}
int launch_level0_twin_any(const AttentionParams& p, DropoutMode m, unsigned cap) {
  return with_head_dim(p.head_dim, "test", [&](auto hd) {
    return p.causal ? launch_level0_twin_mode<hd(), true>(p, m, cap) : launch_level0_twin_mode<hd(), false>(p, m, cap);
  });
}
TEST(AttentionKernels, WgmmaWaitSplitEqualsLevel0) {
  DB_REQUIRE_KERNEL(AttentionKernel::Wgmma);
  const Dropout d{0.15, 0x5b1175ULL, 77, 7, 8};
  int split = 0;
  for (const Shape& sh : {Shape{1, 1000, 8, 2, 128, true}, Shape{2, 517, 4, 1, 128, false}, Shape{1, 300, 4, 2, 128, true},
                          Shape{1, 128, 4, 2, 128, false}, Shape{1, 700, 4, 4, 64, false}, Shape{2, 300, 4, 2, 64, true},
                          Shape{2, 517, 4, 1, 64, false}}) {
    Problem pr(sh, AttentionKernel::Wgmma);
    for (DropoutMode m : {DropoutMode::None, DropoutMode::Mask, DropoutMode::Fused}) {
      auto [o_ref, l_ref] = pr.run(m, d);  // dispatched, every output written (checked there); builds the mask
      const AttentionParams p = pr.params(m, d);
      // cap 3: the persistent schedules (causal SQ 300) walk 4-8 tiles per CTA; one-tile schedules ignore it
      for (unsigned cap : {0u, 3u}) {
        pr.o.poison();
        pr.lse.poison();
        const int level = launch_level0_twin_any(p, m, cap);
        DB_CUDA(cudaDeviceSynchronize());
        // The rules (Sched, kPersistWaitSplit): level 3 for non-causal dH 64 none, 2 for the persistent causal dH 128
        // none (SQ 300 and 1000 have short tiles), 0 elsewhere.
        const bool none = m == DropoutMode::None;
        const int want = none && sh.hd == 64 && !sh.causal ? 3 : none && sh.hd == 128 && sh.causal ? 2 : 0;
        EXPECT_EQ(level, want) << sh.name() << " " << dropout_mode_name(m);
        split += level > 0;
        const std::string what = sh.name() + " " + dropout_mode_name(m) + " dispatched WAIT_SPLIT " + std::to_string(level) +
                                 " vs 0, grid cap " + std::to_string(cap);
        EXPECT_TRUE(bitwise_equal(o_ref, pr.o.get())) << what;
        EXPECT_TRUE(bitwise_equal(l_ref, pr.lse.get())) << what;
      }
    }
  }
  EXPECT_GT(split, 0) << "no split schedule was compared";
}

// The persistent wgmma schedules (WgCfg PERSIST: one CTA per SM at most, walking tiles; the Q reload after the
// last S GEMM, the K/V ring and the ping-pong turns carry over from tile to tile)
// against the same schedules one tile per CTA (SchedTwOneTile, launched directly): O and LSE bitwise equal,
// every output written, in every mode, causal (heaviest blocks first, rounds alternating direction) and not,
// dH 128 and 64, ragged SQ, GQA / MQA, batch 2, row windows. Grids of 1 and 3 CTAs make every CTA walk many
// tiles (uneven counts); 0 = the launcher's grid. launch_attention (whichever it dispatches) gives the same too.
template <int HD, DropoutMode M, bool kCausal>
void launch_tiles(const AttentionParams& p, bool persist, unsigned cap) {
  using C1 = attn_wg::SchedTwOneTile<HD, M, kCausal, 8>;
  using CP = typename attn_wg::Persistent<C1>::type;
  static_assert(!C1::kPersist && CP::kPersist);
  if (persist) launch_wg_schedule<CP, M, kCausal>(p, cap);
  else launch_wg_schedule<C1, M, kCausal>(p);
}
template <int HD, bool kCausal>
void launch_tiles_mode(const AttentionParams& p, DropoutMode m, bool persist, unsigned cap) {
  switch (m) {
    case DropoutMode::None: return launch_tiles<HD, DropoutMode::None, kCausal>(p, persist, cap);
    case DropoutMode::Mask: return launch_tiles<HD, DropoutMode::Mask, kCausal>(p, persist, cap);
    case DropoutMode::Fused: return launch_tiles<HD, DropoutMode::Fused, kCausal>(p, persist, cap);
  }
}
// persist false: one tile per CTA; true: persistent, on at most cap CTAs (0: the launcher's grid).
void launch_tiles_any(const AttentionParams& p, DropoutMode m, bool persist, unsigned cap) {
  with_head_dim(p.head_dim, "test", [&](auto hd) {
    p.causal ? launch_tiles_mode<hd(), true>(p, m, persist, cap) : launch_tiles_mode<hd(), false>(p, m, persist, cap);
  });
}

TEST(AttentionKernels, WgmmaPersistentEqualsOneTilePerCta) {
  DB_REQUIRE_KERNEL(AttentionKernel::Wgmma);
  const Dropout d{0.2, 0x9e5157ULL, 11, 7, 8};
  for (const Shape& sh : {Shape{1, 1000, 8, 2, 128, true}, Shape{2, 517, 4, 1, 128, false}, Shape{1, 700, 4, 4, 64, false},
                          Shape{2, 300, 4, 2, 64, true}}) {
    Problem pr(sh, AttentionKernel::Wgmma);
    // Every mode on the whole matrix, then modes none and fused on row windows (the chunked pipeline's launches;
    // mode Mask reads a window-shaped mask, not built here): the same rows written, the others left poisoned.
    // Window 1 runs to the (ragged) end; window 2 is 256 rows inside the matrix where it has them.
    for (int window = 0; window < 3; ++window) {
      if (window == 2 && sh.sq < 128 + 256 + 1) continue;
      for (DropoutMode m : {DropoutMode::None, DropoutMode::Mask, DropoutMode::Fused}) {
        if (window && m == DropoutMode::Mask) continue;
        AttentionParams p = pr.params(m, d);
        if (window) {
          p.row_begin = 128;
          p.rows = window == 1 ? 0 : 256;
        }
        if (m == DropoutMode::Mask) pr.build_mask(d);
        pr.o.poison();
        pr.lse.poison();
        launch_tiles_any(p, m, false, 0);
        DB_CUDA(cudaDeviceSynchronize());
        const auto o_ref = pr.o.get();
        const auto l_ref = pr.lse.get();
        {  // the reference wrote every row of its window (else two unwritten outputs would compare equal)
          const int r0 = window ? 128 : 0, r1 = (window == 2) ? 128 + 256 : sh.sq;
          const size_t row_elems = static_cast<size_t>(sh.hq) * sh.hd;
          size_t bad = 0;
          for (int bb = 0; bb < sh.b; ++bb)
            for (int r = r0; r < r1; ++r)
              for (size_t e = 0; e < row_elems; ++e)
                bad += !std::isfinite(__bfloat162float(o_ref[(static_cast<size_t>(bb) * sh.sq + r) * row_elems + e]));
          EXPECT_EQ(bad, 0u) << sh.name() << " window " << window << " " << dropout_mode_name(m)
                             << ": unwritten outputs (one tile per CTA)";
        }
        for (unsigned cap : {1u, 3u, 0u}) {
          pr.o.poison();
          pr.lse.poison();
          launch_tiles_any(p, m, true, cap);
          DB_CUDA(cudaDeviceSynchronize());
          const std::string what = sh.name() + " window " + std::to_string(window) + " " + dropout_mode_name(m) + " grid cap " + std::to_string(cap);
          EXPECT_TRUE(bitwise_equal(o_ref, pr.o.get())) << what;
          EXPECT_TRUE(bitwise_equal(l_ref, pr.lse.get())) << what;
        }
        pr.o.poison();
        pr.lse.poison();
        launch_attention(p, m, nullptr);
        DB_CUDA(cudaDeviceSynchronize());
        EXPECT_TRUE(bitwise_equal(o_ref, pr.o.get())) << sh.name() << " window " << window << " " << dropout_mode_name(m) << " as dispatched";
        EXPECT_TRUE(bitwise_equal(l_ref, pr.lse.get())) << sh.name() << " window " << window << " " << dropout_mode_name(m) << " as dispatched";
      }
    }
  }
}

// The run-time choice: persistent CTAs for causal none (dH 128 / 64) and mask (dH 64) where query tiles have
// at most 33 key blocks on average (SQ <= 8320; row windows by their own rows), one tile per CTA above; likewise fused
// dH 64 at threshold width 8; mask dH 128 causal always persistent; fused dH 128 and non-causal never. The names say
// which ran (WgmmaPersistentEqualsOneTilePerCta checks their outputs as dispatched).
TEST(AttentionKernels, WgmmaShortCausalTilesPersistent) {
  DB_REQUIRE_KERNEL(AttentionKernel::Wgmma);
  struct Case {
    int sq, hd;
    bool causal;
    DropoutMode m;
    int row_begin, rows;
    bool persist;
    int tw = 8;  // threshold width (fused)
  };
  const Case cases[] = {{8192, 128, true, DropoutMode::None, 0, 0, true},      {16384, 128, true, DropoutMode::None, 0, 0, false},
                        {8192, 128, false, DropoutMode::None, 0, 0, false},    {4096, 64, true, DropoutMode::None, 0, 0, true},
                        {8192, 64, true, DropoutMode::Mask, 0, 0, true},       {16384, 64, true, DropoutMode::Mask, 0, 0, false},
                        {8192, 128, true, DropoutMode::Mask, 0, 0, true},      {16384, 128, true, DropoutMode::Mask, 0, 0, true},
                        {8192, 128, true, DropoutMode::Fused, 0, 0, false},    {8192, 64, true, DropoutMode::Fused, 0, 0, true},
                        {16384, 64, true, DropoutMode::Fused, 0, 0, false},   {8192, 64, false, DropoutMode::Fused, 0, 0, false},
                        {16384, 128, true, DropoutMode::None, 0, 8192, true},  {16384, 128, true, DropoutMode::None, 8192, 8192, false},
                        {8448, 128, true, DropoutMode::None, 0, 0, false},
                        {8192, 64, true, DropoutMode::Fused, 0, 0, false, 16}};  // no persistent instance at TW 16
  for (const Case& k : cases) {
    AttentionParams p;
    p.kernel = AttentionKernel::Wgmma;
    p.batch = 1;
    p.q_heads = 32;
    p.kv_heads = 8;
    p.sq = k.sq;
    p.head_dim = k.hd;
    p.causal = k.causal;
    p.row_begin = k.row_begin;
    p.rows = k.rows;
    p.threshold_bits = k.tw;
    const std::string name = attention_kernel_name(p, k.m);
    EXPECT_EQ(name.find("_persist") != std::string::npos, k.persist)
        << name << " sq " << k.sq << " rows " << k.row_begin << "+" << k.rows << " tw " << k.tw;
  }
  AttentionParams p;
  p.sq = 8192;
  p.causal = true;
  EXPECT_DOUBLE_EQ(attn_wg::mean_causal_key_blocks(p, 128, 128), 32.5);  // (1 + 2 + ... + 64) / 64
  p.sq = 8448;                                                           // 66 blocks, the last one ragged
  EXPECT_DOUBLE_EQ(attn_wg::mean_causal_key_blocks(p, 128, 128), 33.5);
  p.sq = 16384;
  p.row_begin = 8192;
  p.rows = 128;
  EXPECT_DOUBLE_EQ(attn_wg::mean_causal_key_blocks(p, 128, 128), 65.0);
}

// Auto picks wgmma on sm_90 and the names say which family ran.
TEST(AttentionKernels, SelectionAndNames) {
  DB_REQUIRE_GPU();
  Problem pr(Shape{1, 256, 4, 4, 128, false}, AttentionKernel::Auto);
  const AttentionParams p = pr.params(DropoutMode::None, {});
  const bool sm90 = test::kernel_available(AttentionKernel::Wgmma);
  EXPECT_EQ(attention_kernel_resolved(p), sm90 ? AttentionKernel::Wgmma : AttentionKernel::Mma);
  EXPECT_EQ(attention_kernel_name(p, DropoutMode::None).rfind(sm90 ? "attn_fwd_wgmma_hd128" : "attn_fwd_mma_hd128", 0), 0u);
  AttentionParams q = p;
  q.kernel = AttentionKernel::Mma;
  EXPECT_EQ(attention_kernel_name(q, DropoutMode::None).rfind("attn_fwd_mma_", 0), 0u);
  if (sm90) {
    q.kernel = AttentionKernel::Wgmma;
    const AttentionKernelInfo info = attention_kernel_info(q, DropoutMode::Fused);
    EXPECT_EQ(info.threads, 384);
    EXPECT_EQ(info.block_rows, attention_query_block(q));
    EXPECT_EQ(info.local_bytes, 0u);
    EXPECT_GE(info.ctas_per_sm, 1);
  } else {
    q.kernel = AttentionKernel::Wgmma;
    EXPECT_THROW(launch_attention(q, DropoutMode::None, nullptr), UsageError);
  }
}

}  // namespace
