// Attention backward (kernels/attention/bwd/), every kernel test for both families (mma.sync and wgmma; the wgmma
// cases skip without an sm_90 device): dQ, dK, dV against the naive fp32 device reference (relative error
// ||out - ref|| / ||ref|| <= 1e-2 each), the reference against a CPU fp64 computation, the two families against each
// other, and the bitwise properties: p = 0 equals mode none, mask equals fused (regenerated) in the deterministic mode
// at every round count and threshold width, dK / dV equal in the deterministic and the atomic mode, the deterministic
// mode reproducible, the keep bits applied element by element equal to the RNG kernel's (dV of a one-hot dO). O and
// LSE come from the forward (launch_attention, the kernel auto picks); mode mask reads the mask the RNG kernel
// (launch_rng_mask) writes. Every run draws fresh N(0,1) bf16 inputs and poisons outputs and workspace (0xFF bytes:
// NaN in bf16 and fp32) first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "attention_test_problem.hpp"
#include "gpu_guard.hpp"
#include "dev_buf.hpp"
#include "kernels/attention/attention.cuh"
#include "kernels/attention/bwd/attention_bwd.cuh"
#include "kernels/common/check.hpp"
#include "kernels/common/dispatch.cuh"
#include "kernels/rng/dropout_scheme.cuh"
#include "kernels/rng/rng_mask.cuh"

namespace {

using namespace dropbench;
using bf16 = __nv_bfloat16;

using test::DevBuf;

struct Shape {
  int b, sq, hq, hkv, hd;
  bool causal;
  std::string name() const {
    return "B" + std::to_string(b) + "_S" + std::to_string(sq) + "_H" + std::to_string(hq) + "x" + std::to_string(hkv) +
           "_D" + std::to_string(hd) + (causal ? "_causal" : "");
  }
};

struct Drop {
  double p = 0.1;
  uint64_t seed = 0x1234abcdULL;
  uint32_t offset = 7;
  int rounds = 7, tw = 8;
};

struct Problem {
  Shape s;
  int64_t width;  // QKV / dQKV row (dense)
  DevBuf<bf16> qkv, o, dout, dqkv;
  DevBuf<float> lse, ref;
  DevBuf<uint32_t> mask;
  DevBuf<unsigned char> ws, scratch;
  MaskGeometry geo;
  AttentionKernel fwd_kernel = AttentionKernel::Auto;  // the forward producing O and LSE
  AttentionKernel kernel = AttentionKernel::Mma;       // the backward's family

  explicit Problem(const Shape& sh, AttentionKernel k = AttentionKernel::Mma)
      : s(sh),
        width(static_cast<int64_t>(sh.hq + 2 * sh.hkv) * sh.hd),
        qkv(static_cast<size_t>(sh.b) * sh.sq * width),
        o(static_cast<size_t>(sh.b) * sh.sq * sh.hq * sh.hd),
        dout(static_cast<size_t>(sh.b) * sh.sq * sh.hq * sh.hd),
        dqkv(static_cast<size_t>(sh.b) * sh.sq * width),
        lse(static_cast<size_t>(sh.b) * sh.hq * sh.sq),
        ref(static_cast<size_t>(sh.b) * sh.sq * width),
        mask(MaskGeometry{static_cast<uint32_t>(sh.b * sh.hq), static_cast<uint32_t>(sh.sq),
                          static_cast<uint32_t>(sh.sq), sh.causal}
                 .words()),
        ws(workspace_bytes(sh)),
        scratch(2 * static_cast<size_t>(sh.b) * sh.hq * sh.sq * sh.sq * sizeof(float)) {
    kernel = k;
    geo = MaskGeometry{static_cast<uint32_t>(s.b * s.hq), static_cast<uint32_t>(s.sq), static_cast<uint32_t>(s.sq),
                       s.causal};
    std::mt19937_64 rng(test::next_draw_seed());
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<bf16> h(qkv.n);
    for (auto& v : h) v = __float2bfloat16(nd(rng));
    qkv.put(h);
    std::vector<bf16> hd(dout.n);
    for (auto& v : hd) v = __float2bfloat16(nd(rng));
    dout.put(hd);
    mask.poison();
  }
  static size_t workspace_bytes(const Shape& sh) {
    AttentionBwdParams p;
    p.fwd.batch = sh.b;
    p.fwd.sq = sh.sq;
    p.fwd.q_heads = sh.hq;
    p.fwd.kv_heads = sh.hkv;
    p.fwd.head_dim = sh.hd;
    p.fwd.causal = sh.causal;  // a causal group of more than 4 heads holds the wgmma kernel's dK / dV partials
    p.deterministic = false;   // the larger of the two
    return attention_backward_workspace_bytes(p);
  }

  AttentionParams fwd(DropoutMode m, const Drop& d) const {
    return test::attention_params(s, fwd_kernel, qkv.p, o.p, lse.p, mask.p, m, d);
  }
  AttentionBwdParams bwd(DropoutMode m, const Drop& d, bool det) const {
    AttentionBwdParams p;
    p.fwd = fwd(m, d);
    p.fwd.kernel = kernel;  // the backward's family
    p.dout = dout.p;
    p.dqkv = dqkv.p;
    p.workspace = ws.p;
    p.deterministic = det;
    return p;
  }

  // The RNG kernel's tile mask for d (what the forward's and the backward's mode mask read).
  void make_mask(const Drop& d) {
    mask.poison();
    RngMaskParams r;
    r.seed = d.seed;
    r.offset = d.offset;
    r.rounds = d.rounds;
    r.threshold_bits = d.tw;
    r.drop = make_threshold(d.p, d.tw).drop;
    r.layout = MaskLayout::Tile;
    r.geo = geo;
    r.out = mask.p;
    launch_rng_mask(r, nullptr);
    DB_CUDA(cudaDeviceSynchronize());
  }
  void forward(DropoutMode m, const Drop& d) {
    if (m == DropoutMode::Mask) make_mask(d);
    o.poison();
    lse.poison();
    launch_attention(fwd(m, d), m, nullptr);
    DB_CUDA(cudaDeviceSynchronize());
  }
  // Backward on poisoned dQKV and workspace; checks every element was written (finite).
  std::vector<bf16> backward(DropoutMode m, const Drop& d, bool det) {
    dqkv.poison();
    ws.poison();
    launch_attention_backward(bwd(m, d, det), m, nullptr);
    DB_CUDA(cudaDeviceSynchronize());
    auto h = dqkv.get();
    size_t bad = 0;
    for (const auto& v : h) bad += !std::isfinite(__bfloat162float(v));
    EXPECT_EQ(bad, 0u) << s.name() << " " << attention_kernel_family_name(kernel) << " " << dropout_mode_name(m)
                       << (det ? " det" : " atomic")
                       << ": non-finite / unwritten dQKV elements";
    return h;
  }
  std::vector<float> reference(DropoutMode m, const Drop& d) {
    ref.poison();
    scratch.poison();
    launch_attention_backward_reference(bwd(m, d, true), m, ref.p, scratch.p, nullptr);
    DB_CUDA(cudaDeviceSynchronize());
    return ref.get();
  }

  // Column range of part k (0 dQ, 1 dK, 2 dV) of a dQKV row.
  std::pair<int64_t, int64_t> cols(int k) const {
    const int64_t q = static_cast<int64_t>(s.hq) * s.hd, kv = static_cast<int64_t>(s.hkv) * s.hd;
    if (k == 0) return {0, q};
    if (k == 1) return {q, q + kv};
    return {q + kv, q + 2 * kv};
  }
  template <class A, class B>
  double rel_err(const std::vector<A>& out, const std::vector<B>& r, int k) const {
    auto [c0, c1] = cols(k);
    double num = 0, den = 0;
    for (int64_t row = 0; row < static_cast<int64_t>(s.b) * s.sq; ++row)
      for (int64_t c = c0; c < c1; ++c) {
        const double x = to_d(out[row * width + c]), y = to_d(r[row * width + c]);
        num += (x - y) * (x - y);
        den += y * y;
      }
    return std::sqrt(num / std::max(den, 1e-30));
  }
  bool equal_part(const std::vector<bf16>& x, const std::vector<bf16>& y, int k) const {
    auto [c0, c1] = cols(k);
    for (int64_t row = 0; row < static_cast<int64_t>(s.b) * s.sq; ++row)
      if (std::memcmp(&x[row * width + c0], &y[row * width + c0], (c1 - c0) * sizeof(bf16)) != 0) return false;
    return true;
  }
  static double to_d(bf16 v) { return __bfloat162float(v); }
  static double to_d(float v) { return v; }
  static double to_d(double v) { return v; }
};

const char* kPart[3] = {"dQ", "dK", "dV"};

// ---- accuracy against the reference ----
struct Case {
  Shape s;
  DropoutMode mode;
  bool det;
  AttentionKernel kernel;
  std::string name() const {
    return std::string(attention_kernel_family_name(kernel)) + "_" + s.name() + "_" + dropout_mode_name(mode) +
           (det ? "_det" : "_atomic");
  }
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name(); }

class AttentionBwdAccuracy : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionBwdAccuracy, MatchesReference) {
  const Case c = GetParam();
  DB_REQUIRE_KERNEL(c.kernel);
  Problem pr(c.s, c.kernel);
  Drop d;
  d.p = c.mode == DropoutMode::None ? 0.0 : 0.1;
  pr.forward(c.mode, d);
  const auto out = pr.backward(c.mode, d, c.det);
  const auto ref = pr.reference(c.mode, d);
  for (int k = 0; k < 3; ++k) {
    const double e = pr.rel_err(out, ref, k);
    EXPECT_LE(e, 1e-2) << c.s.name() << " " << dropout_mode_name(c.mode) << " " << kPart[k];
    std::printf("[ info ] %s %s rel err %.2e\n", c.name().c_str(), kPart[k], e);
  }
}

std::vector<Case> accuracy_cases() {
  const Shape shapes[] = {
      {2, 77, 4, 4, 64, false},   // ragged, one block
      {2, 300, 8, 2, 128, true},  // GQA, causal, ragged
      {2, 513, 4, 1, 64, true},   // MQA, causal, one row past a block
      {2, 513, 4, 2, 128, false}, // GQA, non-causal, ragged
      {1, 128, 2, 1, 128, true},  // whole blocks
      {1, 256, 2, 2, 64, true},   // whole wgmma key blocks (128), causal
      {3, 200, 2, 1, 128, false}, // B 3, MQA, a wgmma CTA whose second warpgroup holds keys 192..199 only
      {2, 300, 16, 2, 128, true}, // GQA group 8, causal: the wgmma kernel splits it into 2 subgroups (dK, dV partials)
      {1, 257, 6, 1, 64, true},   // MQA group 6, causal: 2 subgroups of 3 heads
      {1, 257, 8, 1, 64, false},  // group 8, non-causal: not split
      {2, 256, 4, 2, 128, false}, // non-causal whole blocks: no edge block anywhere
      {1, 384, 4, 1, 64, false},  // the same at dH 64, three wgmma key blocks
      {1, 1024, 16, 2, 128, true}, // a long causal split group: each CTA walks many (head, query block) steps
      {1, 1024, 8, 1, 64, true},  // the same at dH 64, 2 subgroups of 4 heads
      {3, 2048, 32, 4, 64, true},  // 24 units (2 subgroups x B 3 x 4 KV heads): two sections of 12 on 132 SMs
      {2, 2048, 24, 12, 128, false}, // 24 units, non-causal: two sections of 12
  };
  std::vector<Case> v;
  for (AttentionKernel k : {AttentionKernel::Mma, AttentionKernel::Wgmma})
    for (const auto& s : shapes)
      for (DropoutMode m : {DropoutMode::None, DropoutMode::Mask, DropoutMode::Fused})
        for (bool det : {true, false}) v.push_back({s, m, det, k});
  return v;
}
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionBwdAccuracy, ::testing::ValuesIn(accuracy_cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name(); });

// The kernel tests below run once per family.
class AttentionBwd : public ::testing::TestWithParam<AttentionKernel> {};
INSTANTIATE_TEST_SUITE_P(Kernels, AttentionBwd, test::kAllKernels, test::kernel_param_name);

// ---- bitwise properties ----
TEST_P(AttentionBwd, DropoutZeroEqualsNone) {
  DB_REQUIRE_KERNEL(GetParam());
  for (const Shape& s : {Shape{2, 300, 4, 2, 128, true}, Shape{1, 77, 2, 1, 64, false}}) {
    Problem pr(s, GetParam());
    Drop d;
    d.p = 0.0;
    pr.forward(DropoutMode::None, d);
    const auto none = pr.backward(DropoutMode::None, d, true);
    const auto fused = pr.backward(DropoutMode::Fused, d, true);
    pr.make_mask(d);
    const auto mask = pr.backward(DropoutMode::Mask, d, true);
    EXPECT_EQ(std::memcmp(none.data(), fused.data(), none.size() * sizeof(bf16)), 0) << s.name() << " fused vs none";
    EXPECT_EQ(std::memcmp(none.data(), mask.data(), none.size() * sizeof(bf16)), 0) << s.name() << " mask vs none";
  }
}

TEST_P(AttentionBwd, MaskEqualsRegenDeterministic) {
  DB_REQUIRE_KERNEL(GetParam());
  for (const Shape& s : {Shape{2, 300, 4, 2, 128, true}, Shape{1, 200, 4, 1, 64, false}, Shape{1, 200, 8, 1, 64, true},
                         Shape{2, 256, 4, 2, 128, false}}) {
    Problem pr(s, GetParam());
    for (int r : kPhiloxRounds)
      for (int tw : kThresholdBits) {
        Drop d;
        d.p = 0.15;
        d.rounds = r;
        d.tw = tw;
        d.seed = 0xfeed0000ULL + r * 64 + tw;
        pr.forward(DropoutMode::Fused, d);
        const auto fused = pr.backward(DropoutMode::Fused, d, true);
        pr.make_mask(d);
        const auto mask = pr.backward(DropoutMode::Mask, d, true);
        EXPECT_EQ(std::memcmp(fused.data(), mask.data(), fused.size() * sizeof(bf16)), 0)
            << s.name() << " R" << r << " TW" << tw << ": mask and regenerated gradients differ";
        // The atomic mode: dK, dV (no atomics) bitwise equal as well.
        const auto fused_a = pr.backward(DropoutMode::Fused, d, false);
        const auto mask_a = pr.backward(DropoutMode::Mask, d, false);
        EXPECT_TRUE(pr.equal_part(fused_a, mask_a, 1) && pr.equal_part(fused_a, mask_a, 2))
            << s.name() << " R" << r << " TW" << tw << ": atomic mode dK/dV differ between mask and regen";
      }
  }
}

TEST_P(AttentionBwd, DkDvEqualAcrossDqModesAndDeterministicRepeats) {
  DB_REQUIRE_KERNEL(GetParam());
  for (const Shape& s : {Shape{2, 300, 8, 2, 128, true}, Shape{2, 257, 4, 4, 64, false}, Shape{2, 300, 16, 2, 128, true}}) {
    Problem pr(s, GetParam());
    for (DropoutMode m : {DropoutMode::None, DropoutMode::Mask, DropoutMode::Fused}) {
      Drop d;
      pr.forward(m, d);
      const auto det = pr.backward(m, d, true);
      const auto det2 = pr.backward(m, d, true);
      const auto fast = pr.backward(m, d, false);
      EXPECT_TRUE(pr.equal_part(det, fast, 1)) << s.name() << " " << dropout_mode_name(m) << ": dK differs";
      EXPECT_TRUE(pr.equal_part(det, fast, 2)) << s.name() << " " << dropout_mode_name(m) << ": dV differs";
      EXPECT_EQ(std::memcmp(det.data(), det2.data(), det.size() * sizeof(bf16)), 0)
          << s.name() << " " << dropout_mode_name(m) << ": deterministic mode not reproducible";
    }
  }
}

// Dropout actually happens: at p = 0.5 the gradients differ from mode none's (a backward that ignored the keep bits
// would pass the bitwise tests above).
TEST_P(AttentionBwd, DropoutChangesGradients) {
  DB_REQUIRE_KERNEL(GetParam());
  Problem pr(Shape{1, 130, 2, 1, 64, true}, GetParam());
  Drop d;
  d.p = 0.5;
  pr.forward(DropoutMode::None, d);
  const auto none = pr.backward(DropoutMode::None, d, true);
  pr.forward(DropoutMode::Fused, d);
  const auto fused = pr.backward(DropoutMode::Fused, d, true);
  for (int k = 0; k < 3; ++k) EXPECT_GT(pr.rel_err(fused, none, k), 0.1) << kPart[k];
}

// The keep bits the backward applies, element by element, against the RNG kernel's mask (every (R, TW), modes mask
// and fused): Q = K = 0 makes P uniform over the visible keys (1 / n(q)), and dO one-hot, dO[b, q, h, :] = e_c with
// c = SQ (h % group) + q (SQ x group <= dH: one column per query and head of a KV group), makes
// dV[b, k, hk, c] = P o Z [b, h, q, k] of that one (h, q): nonzero exactly where (q, k) is visible and kept. dQ and
// dK are 0 (dS times Q or K = 0).
TEST_P(AttentionBwd, KeepPatternMatchesRngMask) {
  DB_REQUIRE_KERNEL(GetParam());
  // The last two have two 64-key tile columns (and, at SQ 100, a ragged one): the counter's tile index
  // (query strip x columns + column) and the second consumer's keys are checked too.
  for (const Shape& s : {Shape{2, 32, 4, 1, 128, true}, Shape{2, 32, 4, 1, 128, false}, Shape{2, 64, 2, 1, 128, false},
                         Shape{2, 50, 2, 2, 64, false}, Shape{1, 128, 1, 1, 128, false}, Shape{2, 100, 2, 2, 128, true}}) {
    const int group = s.hq / s.hkv;
    ASSERT_LE(s.sq * group, s.hd) << s.name() << ": the one-hot dO needs SQ x group <= dH";
    Problem pr(s, GetParam());
    const int64_t W = pr.width, OW = static_cast<int64_t>(s.hq) * s.hd, rows = static_cast<int64_t>(s.b) * s.sq;
    auto h = pr.qkv.get();
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t c = 0; c < static_cast<int64_t>(s.hq + s.hkv) * s.hd; ++c) h[row * W + c] = __float2bfloat16(0.f);
    pr.qkv.put(h);
    std::vector<bf16> dout(pr.dout.n, __float2bfloat16(0.f));
    for (int b = 0; b < s.b; ++b)
      for (int q = 0; q < s.sq; ++q)
        for (int hh = 0; hh < s.hq; ++hh)
          dout[(static_cast<int64_t>(b) * s.sq + q) * OW + hh * s.hd + s.sq * (hh % group) + q] = __float2bfloat16(1.f);
    pr.dout.put(dout);
    for (int r : kPhiloxRounds)
      for (int tw : kThresholdBits)
        for (DropoutMode m : {DropoutMode::Mask, DropoutMode::Fused}) {
          Drop d;
          d.p = 0.5;
          d.rounds = r;
          d.tw = tw;
          d.seed = 0x5eed0000ULL + r * 64 + tw;
          pr.forward(m, d);
          const auto out = pr.backward(m, d, true);
          pr.make_mask(d);  // the RNG kernel's bits (mode mask's forward wrote the same)
          const auto words = pr.mask.get();
          const float keep_scale = make_threshold(d.p, d.tw).scale;
          size_t wrong_bit = 0, wrong_value = 0, nonzero_dqdk = 0, kept = 0, dropped = 0;
          std::string first;
          for (int b = 0; b < s.b; ++b)
            for (int k = 0; k < s.sq; ++k) {
              const int64_t row = static_cast<int64_t>(b) * s.sq + k;
              for (int64_t c = 0; c < static_cast<int64_t>(s.hq + s.hkv) * s.hd; ++c)
                nonzero_dqdk += __bfloat162float(out[row * W + c]) != 0.f;
              for (int hk = 0; hk < s.hkv; ++hk)
                for (int c = 0; c < s.hd; ++c) {
                  const float v = __bfloat162float(out[row * W + static_cast<int64_t>(s.hq + s.hkv + hk) * s.hd + c]);
                  bool want = false;
                  double p = 0.0;
                  if (c < s.sq * group) {
                    const int hh = hk * group + c / s.sq, q = c % s.sq;
                    const uint32_t bh = static_cast<uint32_t>(b * s.hq + hh);
                    const uint32_t w = words[pr.geo.word_index(bh, q / 16, k / 64, tile_lane_of(q % 16, k % 64))];
                    const bool visible = !s.causal || k <= q;
                    want = visible && ((w >> tile_bit_of(q % 16, k % 64)) & 1u);
                    if (visible) ((want ? kept : dropped) += 1);
                    p = visible ? 1.0 / (s.causal ? q + 1 : s.sq) : 0.0;
                  }
                  if ((v != 0.f) != want && wrong_bit++ == 0)
                    first = "b " + std::to_string(b) + " key " + std::to_string(k) + " KV head " + std::to_string(hk) +
                            " column " + std::to_string(c) + ": dV " + std::to_string(v) + ", keep bit " +
                            std::to_string(want);
                  if (want && std::abs(v - p * keep_scale) > 2e-2 * p * keep_scale) ++wrong_value;
                }
            }
          const std::string what = s.name() + " " + dropout_mode_name(m) + " R" + std::to_string(r) + " TW" +
                                   std::to_string(tw);
          EXPECT_EQ(wrong_bit, 0u) << what << ": dV's nonzero pattern differs from the RNG kernel's keep bits; first: "
                                   << first;
          EXPECT_EQ(wrong_value, 0u) << what << ": kept elements' dV off P x keep_scale by more than 2 %";
          EXPECT_EQ(nonzero_dqdk, 0u) << what << ": nonzero dQ / dK with Q = K = 0";
          EXPECT_TRUE(kept > 0 && dropped > 0) << what << ": " << kept << " kept, " << dropped << " dropped";
        }
  }
}

// The two families compute the same gradients up to rounding (p 0.5); in the deterministic mode both take dQ from
// the same dQ kernel, so dQ is bitwise equal there.
TEST(AttentionBwdKernels, WgmmaAgreesWithMma) {
  DB_REQUIRE_KERNEL(AttentionKernel::Wgmma);
  for (const Shape& s : {Shape{2, 300, 4, 2, 128, true}, Shape{1, 257, 4, 1, 64, false}, Shape{2, 130, 2, 2, 64, true}}) {
    Problem pr(s);
    for (DropoutMode m : {DropoutMode::None, DropoutMode::Mask, DropoutMode::Fused}) {
      Drop d;
      d.p = m == DropoutMode::None ? 0.0 : 0.5;
      pr.forward(m, d);
      for (bool det : {true, false}) {
        pr.kernel = AttentionKernel::Mma;
        const auto mma = pr.backward(m, d, det);
        pr.kernel = AttentionKernel::Wgmma;
        const auto wg = pr.backward(m, d, det);
        for (int k = 0; k < 3; ++k) {
          const double e = pr.rel_err(wg, mma, k);
          EXPECT_LE(e, 1e-2) << s.name() << " " << dropout_mode_name(m) << (det ? " det " : " atomic ") << kPart[k];
          std::printf("[ info ] wgmma vs mma %s %s %s %s rel diff %.2e\n", s.name().c_str(), dropout_mode_name(m),
                      det ? "det" : "atomic", kPart[k], e);
        }
        if (det) EXPECT_TRUE(pr.equal_part(wg, mma, 0)) << s.name() << " " << dropout_mode_name(m) << ": det dQ differs";
      }
    }
  }
}

// Row strides: QKV, dO and dQKV with padded rows; the gradients land in dQKV's columns like QKV's, the padding
// columns keep their poison.
TEST_P(AttentionBwd, RowStridesAndPaddingUntouched) {
  DB_REQUIRE_KERNEL(GetParam());
  const Shape s{2, 150, 4, 2, 64, true};
  const int64_t W = static_cast<int64_t>(s.hq + 2 * s.hkv) * s.hd, OW = static_cast<int64_t>(s.hq) * s.hd;
  const int64_t qs = W + 8, ds = W + 24, dos = OW + 16, rows = static_cast<int64_t>(s.b) * s.sq;
  DevBuf<bf16> qkv(rows * qs), dout(rows * dos), o(rows * OW), dqkv(rows * ds);
  DevBuf<float> lse(static_cast<size_t>(s.b) * s.hq * s.sq), ref(rows * W);
  DevBuf<unsigned char> ws(Problem::workspace_bytes(s)),
      scratch(2 * static_cast<size_t>(s.b) * s.hq * s.sq * s.sq * sizeof(float));
  std::mt19937_64 rng(test::next_draw_seed());
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<bf16> h(qkv.n), hd(dout.n);
  for (auto& v : h) v = __float2bfloat16(nd(rng));
  for (auto& v : hd) v = __float2bfloat16(nd(rng));
  qkv.put(h);
  dout.put(hd);
  Drop d;
  AttentionBwdParams bp;
  AttentionParams& f = bp.fwd;
  f = test::attention_params(s, AttentionKernel::Auto, qkv.p, o.p, lse.p, nullptr, DropoutMode::Fused, d);
  f.qkv_row_stride = qs;
  bp.dout = dout.p;
  bp.dout_row_stride = dos;
  bp.dqkv = dqkv.p;
  bp.dqkv_row_stride = ds;
  bp.workspace = ws.p;
  launch_attention(f, DropoutMode::Fused, nullptr);  // the forward auto picks
  f.kernel = GetParam();                             // the backward's family
  for (bool det : {true, false}) {
    bp.deterministic = det;
    dqkv.poison();
    ws.poison();
    launch_attention_backward(bp, DropoutMode::Fused, nullptr);
    ref.poison();
    scratch.poison();
    launch_attention_backward_reference(bp, DropoutMode::Fused, ref.p, scratch.p, nullptr);
    DB_CUDA(cudaDeviceSynchronize());
    const auto out = dqkv.get();
    const auto r = ref.get();
    size_t pad_touched = 0;
    for (int k = 0; k < 3; ++k) {
      const int64_t c0 = k == 0 ? 0 : k == 1 ? OW : OW + s.hkv * s.hd, c1 = k == 0 ? OW : k == 1 ? OW + s.hkv * s.hd : W;
      double num = 0, den = 0;
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t c = c0; c < c1; ++c) {
          const double x = __bfloat162float(out[row * ds + c]), y = r[row * W + c];
          num += (x - y) * (x - y);
          den += y * y;
        }
      EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), 1e-2) << kPart[k] << (det ? " det" : " atomic");
    }
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t c = W; c < ds; ++c) {
        uint16_t bits;
        std::memcpy(&bits, &out[row * ds + c], 2);
        pad_touched += bits != 0xFFFFu;
      }
    EXPECT_EQ(pad_touched, 0u) << "padding columns of dQKV written" << (det ? " (det)" : " (atomic)");
  }
}

// ---- the reference against fp64 on the host ----
TEST(AttentionBwdReference, MatchesHostFp64) {
  DB_REQUIRE_GPU();
  for (const Shape& s : {Shape{1, 37, 2, 1, 64, true}, Shape{2, 20, 2, 2, 64, false}}) {
    Problem pr(s);
    Drop d;
    d.p = 0.2;
    const Threshold t = make_threshold(d.p, d.tw);
    const auto ref = pr.reference(DropoutMode::Fused, d);
    const auto q = pr.qkv.get();
    const auto dout = pr.dout.get();
    const int64_t W = pr.width, OW = static_cast<int64_t>(s.hq) * s.hd;
    const double scale = 1.0 / std::sqrt(static_cast<double>(s.hd));
    std::vector<double> host(ref.size(), 0.0);
    auto f = [](bf16 v) { return static_cast<double>(__bfloat162float(v)); };
    const int group = s.hq / s.hkv;
    for (int b = 0; b < s.b; ++b)
      for (int h = 0; h < s.hq; ++h) {
        const int hk = h / group;
        const uint32_t bh = static_cast<uint32_t>(b * s.hq + h);
        for (int i = 0; i < s.sq; ++i) {
          const int nk = s.causal ? i + 1 : s.sq;
          std::vector<double> p(nk), dp(nk), z(nk);
          double mx = -1e300;
          for (int j = 0; j < nk; ++j) {
            double acc = 0, dv = 0;
            for (int e = 0; e < s.hd; ++e) {
              acc += f(q[(int64_t(b) * s.sq + i) * W + h * s.hd + e]) * f(q[(int64_t(b) * s.sq + j) * W + (s.hq + hk) * s.hd + e]);
              dv += f(dout[(int64_t(b) * s.sq + i) * OW + h * s.hd + e]) *
                    f(q[(int64_t(b) * s.sq + j) * W + (s.hq + s.hkv + hk) * s.hd + e]);
            }
            p[j] = acc * scale;
            dp[j] = dv;
            mx = std::max(mx, p[j]);
            const uint32_t word = attn_keep_word<7, 8>(d.seed, d.offset, t.drop, bh, (i / 16) * pr.geo.cols64() + j / 64,
                                                       tile_lane_of(i % 16, j % 64));
            z[j] = ((word >> tile_bit_of(i % 16, j % 64)) & 1u) ? static_cast<double>(t.scale) : 0.0;
          }
          double l = 0, dsum = 0;
          for (int j = 0; j < nk; ++j) l += (p[j] = std::exp(p[j] - mx));
          for (int j = 0; j < nk; ++j) dsum += (p[j] /= l) * z[j] * dp[j];
          for (int j = 0; j < nk; ++j) {
            const double ds = p[j] * (z[j] * dp[j] - dsum);
            for (int e = 0; e < s.hd; ++e) {
              host[(int64_t(b) * s.sq + i) * W + h * s.hd + e] += scale * ds * f(q[(int64_t(b) * s.sq + j) * W + (s.hq + hk) * s.hd + e]);
              host[(int64_t(b) * s.sq + j) * W + (s.hq + hk) * s.hd + e] += scale * ds * f(q[(int64_t(b) * s.sq + i) * W + h * s.hd + e]);
              host[(int64_t(b) * s.sq + j) * W + (s.hq + s.hkv + hk) * s.hd + e] += p[j] * z[j] * f(dout[(int64_t(b) * s.sq + i) * OW + h * s.hd + e]);
            }
          }
        }
      }
    for (int k = 0; k < 3; ++k) {
      const double e = pr.rel_err(ref, host, k);
      EXPECT_LE(e, 1e-4) << s.name() << " " << kPart[k];
      EXPECT_GT(pr.rel_err(std::vector<double>(host.size(), 0.0), host, k), 0.5);  // the host result is not all zero
    }
  }
}

// Small cases in every mode and both dQ modes, for compute-sanitizer runs (scripts/bwd_device.sh), per family. O and
// LSE come from the mma.sync forward (plain cp.async / ldmatrix, which the sanitizers follow without TMA / mbarrier
// support); the wgmma backward's own TMA / bulk copies are outside what racecheck tracks.
class AttentionBwdSanitize : public ::testing::TestWithParam<AttentionKernel> {};
INSTANTIATE_TEST_SUITE_P(Kernels, AttentionBwdSanitize, test::kAllKernels, test::kernel_param_name);
TEST_P(AttentionBwdSanitize, SmallAllModes) {
  DB_REQUIRE_KERNEL(GetParam());
  for (const Shape& s : {Shape{1, 77, 2, 1, 64, true}, Shape{1, 70, 2, 2, 128, false}, Shape{1, 77, 8, 1, 64, true}}) {
    Problem pr(s, GetParam());
    pr.fwd_kernel = AttentionKernel::Mma;
    for (DropoutMode m : {DropoutMode::None, DropoutMode::Mask, DropoutMode::Fused}) {
      Drop d;
      pr.forward(m, d);
      for (bool det : {true, false}) {
        const auto out = pr.backward(m, d, det);
        const auto ref = pr.reference(m, d);
        for (int k = 0; k < 3; ++k) EXPECT_LE(pr.rel_err(out, ref, k), 1e-2) << s.name() << " " << kPart[k];
      }
    }
  }
}

}  // namespace
