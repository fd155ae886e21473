// Attention backward host logic without a device: argument checks (one UsageError naming the field), workspace
// bytes, FLOP convention and instance names.
#include <gtest/gtest.h>

#include <string>

#include "kernels/attention/bwd/attention_bwd.cuh"
#include "kernels/common/check.hpp"

namespace {

using namespace dropbench;

// A valid parameter set; the pointers are never dereferenced by the checks.
AttentionBwdParams valid() {
  static unsigned char dummy[64];
  AttentionBwdParams p;
  p.fwd.qkv = reinterpret_cast<const __nv_bfloat16*>(dummy);
  p.fwd.o = reinterpret_cast<__nv_bfloat16*>(dummy);
  p.fwd.lse = reinterpret_cast<float*>(dummy);
  p.fwd.batch = 2;
  p.fwd.sq = 300;
  p.fwd.q_heads = 8;
  p.fwd.kv_heads = 2;
  p.fwd.head_dim = 128;
  p.fwd.causal = true;
  p.fwd.keep_scale = 1.25f;
  p.dout = reinterpret_cast<const __nv_bfloat16*>(dummy);
  p.dqkv = reinterpret_cast<__nv_bfloat16*>(dummy);
  p.workspace = dummy;
  return p;
}

std::string refusal(const AttentionBwdParams& p, DropoutMode m) {
  try {
    check_attention_backward(p, m);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(AttentionBwdHost, ValidParamsPass) {
  EXPECT_NO_THROW(check_attention_backward(valid(), DropoutMode::None));
  AttentionBwdParams p = valid();
  p.fwd.mask = reinterpret_cast<const uint32_t*>(p.workspace);
  EXPECT_NO_THROW(check_attention_backward(p, DropoutMode::Mask));
  for (int r : {3, 5, 7, 10})
    for (int tw : {8, 16, 32}) {
      p.fwd.rounds = r;
      p.fwd.threshold_bits = tw;
      EXPECT_NO_THROW(check_attention_backward(p, DropoutMode::Fused)) << r << " " << tw;
    }
}

TEST(AttentionBwdHost, BadInputNamesTheField) {
  struct Bad {
    const char* field;
    void (*edit)(AttentionBwdParams&);
    DropoutMode mode;
  };
  const Bad cases[] = {
      {"head_dim", [](AttentionBwdParams& p) { p.fwd.head_dim = 96; }, DropoutMode::None},
      {"kv_heads", [](AttentionBwdParams& p) { p.fwd.kv_heads = 3; }, DropoutMode::None},
      {"sq", [](AttentionBwdParams& p) { p.fwd.sq = 0; }, DropoutMode::None},
      {"batch", [](AttentionBwdParams& p) { p.fwd.batch = 0; }, DropoutMode::None},
      {"row windows", [](AttentionBwdParams& p) { p.fwd.row_begin = 128; }, DropoutMode::None},
      {"qkv_row_stride", [](AttentionBwdParams& p) { p.fwd.qkv_row_stride = 1537; }, DropoutMode::None},
      {"dout_row_stride", [](AttentionBwdParams& p) { p.dout_row_stride = 100; }, DropoutMode::None},
      {"dqkv_row_stride", [](AttentionBwdParams& p) { p.dqkv_row_stride = 1540; }, DropoutMode::None},
      {"lse", [](AttentionBwdParams& p) { p.fwd.lse = nullptr; }, DropoutMode::None},
      {"dout", [](AttentionBwdParams& p) { p.dout = nullptr; }, DropoutMode::None},
      {"dqkv", [](AttentionBwdParams& p) { p.dqkv = nullptr; }, DropoutMode::None},
      {"workspace", [](AttentionBwdParams& p) { p.workspace = nullptr; }, DropoutMode::None},
      {"mask", [](AttentionBwdParams& p) { p.fwd.mask = nullptr; }, DropoutMode::Mask},
      {"rounds", [](AttentionBwdParams& p) { p.fwd.rounds = 4; }, DropoutMode::Fused},
      {"threshold_bits", [](AttentionBwdParams& p) { p.fwd.threshold_bits = 12; }, DropoutMode::Fused},
      {"keep_scale", [](AttentionBwdParams& p) { p.fwd.keep_scale = 0.5f; }, DropoutMode::Fused},
  };
  for (const Bad& c : cases) {
    AttentionBwdParams p = valid();
    c.edit(p);
    const std::string msg = refusal(p, c.mode);
    EXPECT_NE(msg.find(c.field), std::string::npos) << c.field << ": got '" << msg << "'";
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  }
}

TEST(AttentionBwdHost, WorkspaceBytes) {
  AttentionBwdParams p = valid();
  p.deterministic = true;
  const size_t d = (2ull * 8 * 300 * 4 + 255) / 256 * 256;
  EXPECT_EQ(attention_backward_workspace_bytes(p), d);
  p.deterministic = false;
  EXPECT_EQ(attention_backward_workspace_bytes(p), d + 2ull * 300 * 8 * 128 * 4);
}

TEST(AttentionBwdHost, FlopsAreTwoAndAHalfForward) {
  AttentionBwdParams p = valid();
  p.fwd.causal = false;
  EXPECT_DOUBLE_EQ(attention_backward_flops(p), 2.5 * 4.0 * 2 * 8 * 300.0 * 300.0 * 128);
  p.fwd.causal = true;
  EXPECT_DOUBLE_EQ(attention_backward_flops(p), 2.5 * attention_flops(p.fwd));
}

TEST(AttentionBwdHost, InstanceNames) {
  AttentionBwdParams p = valid();
  p.fwd.rounds = 10;
  p.fwd.threshold_bits = 16;
  EXPECT_EQ(attention_backward_kernel_name(p, DropoutMode::Fused), "attn_bwd_mma_hd128_k64q64w4_fused_r10_tw16_causal_atomic");
  p.deterministic = true;
  p.fwd.causal = false;
  p.fwd.head_dim = 64;
  EXPECT_EQ(attention_backward_kernel_name(p, DropoutMode::Mask), "attn_bwd_mma_hd64_k64q64w4_mask_det");
}

}  // namespace
