// The C ABI (capi/, libdropbench_attention.so) computes exactly what dropbench's own launch API computes: for each
// kernel family and dropout mode its output is bitwise the output of launch_attention (linked statically into
// this test) on the same fresh N(0,1) inputs; its mask is the RNG kernel's (bit for bit the test generator's);
// its mask and fused outputs are equal; every output element is written (poisoned first). The library is the
// shipped .so, loaded and linked as a caller would; its hidden copy of the kernels runs, not this binary's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>  // the typed cudaMalloc(T**, size); nvcc includes it implicitly, g++ does not

#include "capi/dropbench_attention.h"
#include "gpu_guard.hpp"
#include "kernels/attention/attention.cuh"
#include "kernels/common/check.hpp"
#include "kernels/rng/dropout_scheme.cuh"
#include "kernels/util/util_kernels.cuh"

namespace {

using namespace dropbench;

struct Case {
  int b, sq, hq, hkv, hd;
  bool causal;
  int kernel;  // DBA_KERNEL_*
};

std::string name_of(const Case& c) {
  return "B" + std::to_string(c.b) + "_S" + std::to_string(c.sq) + "_H" + std::to_string(c.hq) + "x" +
         std::to_string(c.hkv) + "_D" + std::to_string(c.hd) + (c.causal ? "_causal" : "") +
         (c.kernel == DBA_KERNEL_MMA ? "_mma" : "_wgmma");
}

std::vector<uint16_t> get_u16(const void* p, size_t n) {
  std::vector<uint16_t> h(n);
  DB_CUDA(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
  return h;
}

class CapiAttention : public ::testing::TestWithParam<Case> {};

TEST_P(CapiAttention, BitwiseEqualsLaunchApi) {
  DB_REQUIRE_GPU();
  const Case c = GetParam();
  if (c.kernel == DBA_KERNEL_WGMMA) {
    cudaDeviceProp prop{};
    DB_CUDA(cudaGetDeviceProperties(&prop, 0));
    if (prop.major != 9) GTEST_SKIP() << "wgmma needs sm_90";
  }
  const int64_t rows = int64_t(c.b) * c.sq, qkv_w = int64_t(c.hq + 2 * c.hkv) * c.hd, o_w = int64_t(c.hq) * c.hd;
  void *qkv, *o_api, *o_ref, *mask_api, *mask_ref;
  float *lse_api, *lse_ref;
  DB_CUDA(cudaMalloc(&qkv, rows * qkv_w * 2));
  DB_CUDA(cudaMalloc(&o_api, rows * o_w * 2));
  DB_CUDA(cudaMalloc(&o_ref, rows * o_w * 2));
  DB_CUDA(cudaMalloc(&lse_api, sizeof(float) * c.b * c.hq * c.sq));
  DB_CUDA(cudaMalloc(&lse_ref, sizeof(float) * c.b * c.hq * c.sq));
  std::random_device rd;
  const uint64_t seed = (uint64_t(rd()) << 32) | rd();
  launch_fill_normal(qkv, rows * qkv_w, true, seed, nullptr);

  dba_params cp;
  dba_params_init(&cp);
  cp.qkv = qkv;
  cp.o = o_api;
  cp.lse = lse_api;
  cp.batch = c.b;
  cp.sq = c.sq;
  cp.q_heads = c.hq;
  cp.kv_heads = c.hkv;
  cp.head_dim = c.hd;
  cp.causal = c.causal;
  cp.dropout_p = 0.17;
  cp.seed = seed ^ 0x9E3779B97F4A7C15ull;
  cp.offset = 12345;
  cp.rounds = 5;
  cp.threshold_bits = 8;
  cp.kernel = c.kernel;

  uint64_t mbytes = 0;
  ASSERT_EQ(dba_mask_bytes(&cp, &mbytes), DBA_OK) << dba_last_error();
  AttentionParams p;
  p.qkv = static_cast<const __nv_bfloat16*>(qkv);
  p.o = static_cast<__nv_bfloat16*>(o_ref);
  p.lse = lse_ref;
  p.batch = c.b;
  p.sq = c.sq;
  p.q_heads = c.hq;
  p.kv_heads = c.hkv;
  p.head_dim = c.hd;
  p.causal = c.causal;
  p.seed = cp.seed;
  p.offset = cp.offset;
  const Threshold t = make_threshold(cp.dropout_p, 8);
  p.drop_threshold = t.drop;
  p.keep_scale = t.scale;
  p.rounds = 5;
  p.threshold_bits = 8;
  p.kernel = c.kernel == DBA_KERNEL_MMA ? AttentionKernel::Mma : AttentionKernel::Wgmma;
  ASSERT_EQ(mbytes, attention_mask_geometry(p).bytes());
  DB_CUDA(cudaMalloc(&mask_api, mbytes));
  DB_CUDA(cudaMalloc(&mask_ref, mbytes));
  // Tiles above a causal diagonal are written by neither generator: give both the same contents there.
  DB_CUDA(cudaMemset(mask_api, 0, mbytes));
  DB_CUDA(cudaMemset(mask_ref, 0, mbytes));
  ASSERT_EQ(dba_make_mask(&cp, static_cast<uint32_t*>(mask_api), nullptr), DBA_OK) << dba_last_error();
  launch_attention_mask_reference(static_cast<uint32_t*>(mask_ref), attention_mask_geometry(p), p.seed, p.offset,
                                  p.drop_threshold, 5, 8, nullptr);
  DB_CUDA(cudaDeviceSynchronize());
  {
    std::vector<uint32_t> a(mbytes / 4), b(mbytes / 4);
    DB_CUDA(cudaMemcpy(a.data(), mask_api, mbytes, cudaMemcpyDeviceToHost));
    DB_CUDA(cudaMemcpy(b.data(), mask_ref, mbytes, cudaMemcpyDeviceToHost));
    EXPECT_EQ(std::memcmp(a.data(), b.data(), mbytes), 0) << "dba_make_mask differs from the test generator";
    // dba_mask_expand (the dense matrix references apply) against the keep words generated here on the host and
    // placed by the scheme's forward map (tile_elem_row / tile_elem_col; the library reads the inverse map).
    std::vector<uint8_t> keep(size_t(c.b) * c.hq * c.sq * c.sq, 0xEE);
    ASSERT_EQ(dba_mask_expand(&cp, a.data(), keep.data()), DBA_OK) << dba_last_error();
    const MaskGeometry g = attention_mask_geometry(p);
    size_t wrong = 0, seen = 0;
    for (uint32_t bh = 0; bh < g.bh; ++bh)
      for (uint32_t r16 = 0; r16 < g.rows16(); ++r16)
        for (uint32_t c64 = 0; c64 < g.cols64(); ++c64)
          for (uint32_t lane = 0; lane < 32; ++lane) {
            const uint32_t w = attn_keep_word<5, 8>(p.seed, p.offset, p.drop_threshold, bh, r16 * g.cols64() + c64, lane);
            for (int e = 0; e < 32; ++e) {
              const uint32_t row = r16 * 16 + tile_elem_row(lane, e), col = c64 * 64 + tile_elem_col(lane, e);
              if (row >= uint32_t(c.sq) || col >= uint32_t(c.sq)) continue;
              const uint8_t want = (c.causal && col > row) ? 0 : ((w >> e) & 1u);
              wrong += keep[(size_t(bh) * c.sq + row) * c.sq + col] != want;
              ++seen;
            }
          }
    EXPECT_EQ(seen, keep.size()) << "every element visited once";
    EXPECT_EQ(wrong, 0u) << "dba_mask_expand differs from the host's keep bits";
  }
  cp.mask = static_cast<const uint32_t*>(mask_api);
  p.mask = static_cast<const uint32_t*>(mask_api);

  std::vector<uint16_t> prev;
  for (int mode : {DBA_MODE_NONE, DBA_MODE_MASK, DBA_MODE_FUSED}) {
    SCOPED_TRACE("mode " + std::to_string(mode));
    DB_CUDA(cudaMemset(o_api, 0xFF, rows * o_w * 2));
    DB_CUDA(cudaMemset(o_ref, 0xFF, rows * o_w * 2));
    DB_CUDA(cudaMemset(lse_api, 0xFF, sizeof(float) * c.b * c.hq * c.sq));
    DB_CUDA(cudaMemset(lse_ref, 0xFF, sizeof(float) * c.b * c.hq * c.sq));
    ASSERT_EQ(dba_attention(&cp, mode, nullptr), DBA_OK) << dba_last_error();
    launch_attention(p, static_cast<DropoutMode>(mode), nullptr);
    DB_CUDA(cudaDeviceSynchronize());
    char name[256];
    ASSERT_EQ(dba_kernel_name(&cp, mode, name, sizeof name), DBA_OK);
    EXPECT_EQ(std::string(name), attention_kernel_name(p, static_cast<DropoutMode>(mode)));
    const auto a = get_u16(o_api, rows * o_w), b = get_u16(o_ref, rows * o_w);
    size_t poisoned = 0;
    for (uint16_t x : a) poisoned += x == 0xFFFF;
    EXPECT_EQ(poisoned, 0u) << "output elements left unwritten";
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 2), 0) << "C ABI output differs from launch_attention";
    std::vector<float> la(size_t(c.b) * c.hq * c.sq), lb(la.size());
    DB_CUDA(cudaMemcpy(la.data(), lse_api, la.size() * 4, cudaMemcpyDeviceToHost));
    DB_CUDA(cudaMemcpy(lb.data(), lse_ref, lb.size() * 4, cudaMemcpyDeviceToHost));
    size_t lse_unwritten = 0;  // both poisoned (NaN) before the calls: every row's LSE written by both
    for (size_t i = 0; i < la.size(); ++i) lse_unwritten += !std::isfinite(la[i]) || !std::isfinite(lb[i]);
    EXPECT_EQ(lse_unwritten, 0u) << "LSE left unwritten";
    EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * 4), 0) << "LSE differs";
    if (mode == DBA_MODE_FUSED) EXPECT_EQ(a, prev) << "fused differs from mask";
    if (mode == DBA_MODE_MASK) prev = a;
  }
  // Mode FUSED with mask_out writes dba_make_mask's words (both over zeros: a causal mask's untouched tiles agree)
  // and the same O.
  DB_CUDA(cudaMemset(mask_ref, 0, mbytes));
  cp.mask_out = static_cast<uint32_t*>(mask_ref);
  ASSERT_EQ(dba_attention(&cp, DBA_MODE_FUSED, nullptr), DBA_OK) << dba_last_error();
  DB_CUDA(cudaDeviceSynchronize());
  {
    std::vector<uint32_t> a(mbytes / 4), b(mbytes / 4);
    DB_CUDA(cudaMemcpy(a.data(), mask_api, mbytes, cudaMemcpyDeviceToHost));
    DB_CUDA(cudaMemcpy(b.data(), mask_ref, mbytes, cudaMemcpyDeviceToHost));
    EXPECT_EQ(std::memcmp(a.data(), b.data(), mbytes), 0) << "mask_out differs from dba_make_mask";
    EXPECT_EQ(get_u16(o_api, rows * o_w), prev) << "O differs with mask_out";
  }
  cp.mask_out = nullptr;
  for (void* x : {qkv, o_api, o_ref, mask_api, mask_ref}) cudaFree(x);
  cudaFree(lse_api);
  cudaFree(lse_ref);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CapiAttention,
                         ::testing::Values(Case{1, 300, 4, 2, 128, true, DBA_KERNEL_WGMMA},
                                           Case{2, 256, 4, 4, 64, false, DBA_KERNEL_WGMMA},
                                           Case{1, 200, 8, 1, 128, false, DBA_KERNEL_MMA},
                                           Case{1, 384, 4, 2, 64, true, DBA_KERNEL_MMA}),
                         [](const ::testing::TestParamInfo<Case>& i) { return name_of(i.param); });

// Without a device every entry point still refuses bad parameters with DBA_USAGE and a message naming the field;
// with one, a shape the kernels do not support (head_dim 96) is refused the same way before anything runs.
TEST(CapiAttention, RefusesBadParameters) {
  dba_params p;
  dba_params_init(&p);
  EXPECT_EQ(dba_params_size(), sizeof(dba_params));
  p.sq = 128;
  p.dropout_p = 1.5;
  EXPECT_EQ(dba_attention(&p, DBA_MODE_FUSED, nullptr), DBA_USAGE);
  EXPECT_NE(std::string(dba_last_error()).find("dropout_p"), std::string::npos) << dba_last_error();
  p.dropout_p = 0.1;
  EXPECT_EQ(dba_attention(&p, 3, nullptr), DBA_USAGE);
  EXPECT_NE(std::string(dba_last_error()).find("mode"), std::string::npos);
  EXPECT_EQ(dba_attention(nullptr, DBA_MODE_NONE, nullptr), DBA_USAGE);
  uint32_t words[64] = {};
  p.mask_out = words;  // written in mode FUSED only
  EXPECT_EQ(dba_attention(&p, DBA_MODE_NONE, nullptr), DBA_USAGE);
  EXPECT_NE(std::string(dba_last_error()).find("mask_out"), std::string::npos) << dba_last_error();
  p.mask_out = nullptr;
  uint8_t keep[20 * 20];
  p.sq = 20;
  EXPECT_EQ(dba_mask_expand(&p, nullptr, keep), DBA_USAGE);
  EXPECT_NE(std::string(dba_last_error()).find("words"), std::string::npos) << dba_last_error();
  EXPECT_EQ(dba_mask_expand(&p, words, nullptr), DBA_USAGE);
  EXPECT_NE(std::string(dba_last_error()).find("keep"), std::string::npos) << dba_last_error();
  p.causal = 2;
  EXPECT_EQ(dba_mask_expand(&p, words, keep), DBA_USAGE);
  EXPECT_NE(std::string(dba_last_error()).find("causal"), std::string::npos) << dba_last_error();
  p.causal = 0;
  // The backward's size and name calls refuse what its launch refuses, before any buffer exists.
  uint64_t ws = 0;
  char name[128];
  p.head_dim = 96;
  EXPECT_EQ(dba_attention_backward_workspace_bytes(&p, 0, &ws), DBA_USAGE);
  EXPECT_NE(std::string(dba_last_error()).find("head_dim"), std::string::npos) << dba_last_error();
  p.head_dim = 128;
  p.q_heads = 8;
  p.kv_heads = 3;
  EXPECT_EQ(dba_backward_kernel_name(&p, DBA_MODE_NONE, 0, name, sizeof name), DBA_USAGE);
  EXPECT_NE(std::string(dba_last_error()).find("kv_heads"), std::string::npos) << dba_last_error();
  p.q_heads = p.kv_heads = 1;
  p.rounds = 4;
  EXPECT_EQ(dba_backward_kernel_name(&p, DBA_MODE_FUSED, 0, name, sizeof name), DBA_USAGE);
  EXPECT_NE(std::string(dba_last_error()).find("rounds"), std::string::npos) << dba_last_error();
  p.rounds = 7;
  EXPECT_EQ(dba_backward_kernel_name(&p, DBA_MODE_FUSED, 1, name, sizeof name), DBA_OK) << dba_last_error();
  EXPECT_EQ(dba_attention_backward_workspace_bytes(&p, 1, &ws), DBA_OK) << dba_last_error();
  EXPECT_GT(ws, 0u);
  p.sq = 128;
  DB_REQUIRE_GPU();
  p.head_dim = 96;
  void* buf;
  DB_CUDA(cudaMalloc(&buf, 1 << 20));
  p.qkv = buf;
  p.o = buf;
  p.kernel = DBA_KERNEL_WGMMA;
  EXPECT_EQ(dba_attention(&p, DBA_MODE_NONE, nullptr), DBA_USAGE) << dba_last_error();
  cudaFree(buf);
}

}  // namespace
