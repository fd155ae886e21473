// Attention backward host logic without a device: argument checks (one UsageError naming the field), workspace
// bytes, FLOP convention and instance names; `dropbench attention`'s pass axis (workload.pass): the dry
// run's plan (buffers, mask bytes, FLOPs), the variants per pass, bad input refused in one line with exit 2.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

#include "kernels/attention/attention_wgmma.cuh"
#include "kernels/attention/bwd/attention_bwd.cuh"
#include "kernels/attention/tile_order.hpp"
#include "kernels/common/check.hpp"

namespace {

using namespace dropbench;

// A valid parameter set; the pointers are never dereferenced by the checks.
AttentionBwdParams valid() {
  alignas(16) static unsigned char dummy[64];
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

// The largest SQ the grids hold (65535 blocks of 64 in y) is accepted; one more is refused (BadInputNamesTheField).
TEST(AttentionBwdHost, LargestSqIsAccepted) {
  AttentionBwdParams p = valid();
  p.fwd.sq = 65535 * 64;
  EXPECT_NO_THROW(check_attention_backward_shape(p, DropoutMode::None));
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
      {"4194240", [](AttentionBwdParams& p) { p.fwd.sq = 65535 * 64 + 1; }, DropoutMode::None},
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

// The backward grids' order: every (block, head, batch) once; (head, batch) fastest; every head's heaviest block before
// any head's next heaviest (key blocks from the first, causal query blocks from the last).
TEST(AttentionBwdHost, CtaOrderIsHeaviestFirstAcrossHeads) {
  const int blocks = 5, heads = 3, batch = 2;
  for (bool heaviest_last : {false, true}) {
    std::vector<int> seen(blocks * heads * batch, 0);
    for (int y = 0; y < blocks; ++y)
      for (int x = 0; x < heads * batch; ++x) {
        const auto c = attn::bwd_cta_in_order<int>(x, y, blocks, heads, heaviest_last);
        ASSERT_TRUE(c.block >= 0 && c.block < blocks && c.head >= 0 && c.head < heads && c.batch >= 0 && c.batch < batch);
        ++seen[(c.batch * heads + c.head) * blocks + c.block];
        EXPECT_EQ(c.block, heaviest_last ? blocks - 1 - y : y);
        EXPECT_EQ(c.head, x % heads);
      }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  }
  // Causal work in launch order (x fastest, then y) never increases: the work of key block kb falls with kb (here
  // blocks - kb), that of query block qb grows with qb (here qb + 1).
  for (bool heaviest_last : {false, true}) {
    int prev = 1 << 30;
    for (int y = 0; y < blocks; ++y)
      for (int x = 0; x < heads * batch; ++x) {
        const int blk = attn::bwd_cta_in_order<int>(x, y, blocks, heads, heaviest_last).block;
        const int work = heaviest_last ? blk + 1 : blocks - blk;
        EXPECT_LE(work, prev);
        prev = work;
      }
  }
}

// The wgmma backward's split of a causal GQA group: subgroups of 2 to kBwdCtaHeads (4) query heads, a divisor of the
// group, the fewest such; unsplit for groups of at most 4, groups without such a divisor, non-causal grids, and where
// the grid's y (key blocks x subgroups) would pass 65535.
TEST(AttentionBwdHost, SubgroupsOfAGroup) {
  using attn::bwd_subgroups;
  for (int g = 1; g <= 64; ++g) {
    const int s = bwd_subgroups(g, 64, true);
    bool splittable = false;
    for (int t = 2; t <= g / 2; ++t) splittable |= g % t == 0 && g / t <= attn::kBwdCtaHeads;
    if (g <= attn::kBwdCtaHeads || !splittable) {
      EXPECT_EQ(s, 1) << g;
      continue;
    }
    EXPECT_EQ(g % s, 0) << g;
    EXPECT_GE(g / s, 2) << g;
    EXPECT_LE(g / s, attn::kBwdCtaHeads) << g;
    for (int fewer = 2; fewer < s; ++fewer)
      EXPECT_FALSE(g % fewer == 0 && g / fewer <= attn::kBwdCtaHeads) << g << ": " << fewer << " would do";
  }
  EXPECT_EQ(bwd_subgroups(4, 64, true), 1);
  EXPECT_EQ(bwd_subgroups(8, 64, true), 2);   // Llama-3 70B
  EXPECT_EQ(bwd_subgroups(16, 64, true), 4);  // Llama-3 405B
  EXPECT_EQ(bwd_subgroups(6, 64, true), 2);
  EXPECT_EQ(bwd_subgroups(10, 64, true), 5);
  EXPECT_EQ(bwd_subgroups(5, 64, true), 1);  // prime: no subgroup of 2 to 4 heads
  EXPECT_EQ(bwd_subgroups(7, 64, true), 1);
  EXPECT_EQ(bwd_subgroups(8, 32767, true), 2);
  EXPECT_EQ(bwd_subgroups(8, 32768, true), 1);  // 65536 rows of CTAs: unsplit
  EXPECT_EQ(bwd_subgroups(16, 16383, true), 4);  // 65532 rows
  EXPECT_EQ(bwd_subgroups(16, 16384, true), 1);  // 65536 rows
  for (int g : {1, 4, 8, 16}) EXPECT_EQ(bwd_subgroups(g, 64, false), 1) << g;  // non-causal: never split
}

TEST(AttentionBwdHost, WorkspaceBytes) {
  AttentionBwdParams p = valid();
  p.deterministic = true;
  const size_t d = (2ull * 8 * 320 * 4 + 255) / 256 * 256;  // D, and the LSE copy: rows of 300 padded to 320
  EXPECT_EQ(attention_backward_workspace_bytes(p), 2 * d);
  p.deterministic = false;
  EXPECT_EQ(attention_backward_workspace_bytes(p), 2 * d + 2ull * 300 * 8 * 128 * 4);
  p.fwd.kernel = AttentionKernel::Wgmma;  // the same layout for both families
  EXPECT_EQ(attention_backward_workspace_bytes(p), 2 * d + 2ull * 300 * 8 * 128 * 4);
  // Group 8 (16 / 2): the wgmma kernel's 2 subgroups' dK and dV partials (fp32, [B*SQ, Hkv*dH] each) follow.
  p.fwd.q_heads = 16;
  const size_t d16 = (2ull * 16 * 320 * 4 + 255) / 256 * 256;
  const size_t parts = 2ull * 2 * (2ull * 300 * 2 * 128) * 4;
  EXPECT_EQ(attention_backward_workspace_bytes(p), 2 * d16 + 2ull * 300 * 16 * 128 * 4 + parts);
  p.deterministic = true;
  EXPECT_EQ(attention_backward_workspace_bytes(p), 2 * d16 + parts);
  p.fwd.causal = false;  // unsplit: no partials
  EXPECT_EQ(attention_backward_workspace_bytes(p), 2 * d16);
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
  p.fwd.kernel = AttentionKernel::Mma;  // pinned: auto resolves to wgmma on an sm_90 device
  p.fwd.rounds = 10;
  p.fwd.threshold_bits = 16;
  EXPECT_EQ(attention_backward_kernel_name(p, DropoutMode::Fused), "attn_bwd_mma_hd128_k64q64w4_fused_r10_tw16_causal_atomic");
  p.deterministic = true;
  p.fwd.causal = false;
  p.fwd.head_dim = 64;
  EXPECT_EQ(attention_backward_kernel_name(p, DropoutMode::Mask), "attn_bwd_mma_hd64_k64q64w4_mask_det");
  p.fwd.kernel = AttentionKernel::Wgmma;
  EXPECT_EQ(attention_backward_kernel_name(p, DropoutMode::Mask), "attn_bwd_wgmma_hd64_k128q64s2_mask_det");
  p.fwd.head_dim = 128;
  p.fwd.causal = true;
  p.deterministic = false;
  EXPECT_EQ(attention_backward_kernel_name(p, DropoutMode::Fused), "attn_bwd_wgmma_hd128_k128q64s2_fused_r10_tw16_causal_atomic");
}

// A size or a name is never given for a problem the launch would refuse: the same shape checks, no pointers needed.
TEST(AttentionBwdHost, SizeAndNameRefuseWhatTheLaunchRefuses) {
  auto refused = [](AttentionBwdParams p, DropoutMode mode, const std::string& field) {
    p.fwd.qkv = nullptr;  // buffers not yet allocated: the shape checks alone decide
    p.fwd.o = nullptr;
    p.dout = nullptr;
    p.dqkv = nullptr;
    p.workspace = nullptr;
    for (int which = 0; which < 2; ++which) {
      try {
        if (which == 0) (void)attention_backward_workspace_bytes(p);
        else (void)attention_backward_kernel_name(p, mode);
        ADD_FAILURE() << (which == 0 ? "workspace bytes" : "kernel name") << " accepted a bad " << field;
      } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
      }
    }
  };
  AttentionBwdParams p = valid();
  p.fwd.head_dim = 96;
  refused(p, DropoutMode::None, "head_dim");
  p = valid();
  p.fwd.kv_heads = 3;
  refused(p, DropoutMode::None, "kv_heads");
  p = valid();
  p.fwd.sq = 0;
  refused(p, DropoutMode::None, "sq");
  p = valid();
  p.fwd.rounds = 4;  // only the fused mode reads rounds: the name refuses it, the size (mode-free) does not
  EXPECT_THROW((void)attention_backward_kernel_name(p, DropoutMode::Fused), UsageError);
  EXPECT_NO_THROW((void)attention_backward_workspace_bytes(p));
  p.fwd.qkv = nullptr;  // the shape alone is fine: size and name need no buffers
  p.fwd.rounds = 7;
  EXPECT_NO_THROW((void)attention_backward_kernel_name(p, DropoutMode::Fused));
}

// Auto resolves to the wgmma backward on an sm_90 device, else to mma (the forward's rule).
TEST(AttentionBwdHost, KernelSelection) {
  AttentionBwdParams p = valid();
  EXPECT_EQ(attention_backward_kernel_resolved(p), attn_wg::device_is_sm90() ? AttentionKernel::Wgmma : AttentionKernel::Mma);
  p.fwd.kernel = AttentionKernel::Mma;
  EXPECT_EQ(attention_backward_kernel_resolved(p), AttentionKernel::Mma);
  p.fwd.kernel = AttentionKernel::Wgmma;
  EXPECT_EQ(attention_backward_kernel_resolved(p), AttentionKernel::Wgmma);
  // The wgmma kernel's bulk copies of the mask words need 16-byte alignment.
  alignas(16) static unsigned char words[64];
  p.fwd.mask = reinterpret_cast<const uint32_t*>(words + 4);
  const std::string msg = refusal(p, DropoutMode::Mask);
  EXPECT_NE(msg.find("mask"), std::string::npos) << msg;
  p.fwd.mask = reinterpret_cast<const uint32_t*>(words);
  EXPECT_EQ(refusal(p, DropoutMode::Mask), "");
  // So do its bulk copies of the workspace's D and LSE rows, in every mode; the mma kernel reads them 4 bytes at a time.
  p.workspace = words + 8;
  for (DropoutMode m : {DropoutMode::None, DropoutMode::Mask, DropoutMode::Fused}) {
    const std::string ws_msg = refusal(p, m);
    EXPECT_NE(ws_msg.find("workspace"), std::string::npos) << dropout_mode_name(m) << ": " << ws_msg;
  }
  p.fwd.kernel = AttentionKernel::Mma;
  EXPECT_EQ(refusal(p, DropoutMode::None), "");
}

// ---- `dropbench attention`, workload.pass ----
nlohmann::json dry_report(const std::string& args) {
  const auto path = std::filesystem::temp_directory_path() / ("dropbench_bwd_plan_" + std::to_string(::getpid()) + ".json");
  const auto r = dropbench_test::run_dropbench(args + " --dry-run -q -o '" + path.string() + "'");
  EXPECT_EQ(r.code, 0) << args << ": " << r.err;
  std::ifstream f(path);
  nlohmann::json j = f ? nlohmann::json::parse(f) : nlohmann::json();
  std::filesystem::remove(path);
  return j;
}

TEST(AttentionPassAxis, DryRunPlansTheBackwardsBuffers) {
  const std::string base = "attention --set workload.q_heads=8 --set workload.kv_heads=2 --set workload.head_dim=128 "
                           "--set workload.batch=2 --set sweep.sq=[1000] --set sweep.causal=[true] ";
  const nlohmann::json f = dry_report(base + "--set sweep.pass=[fwd,bwd,fwd+bwd]");
  ASSERT_EQ(f["points"].size(), 3u);
  const uint64_t B = 2, S = 1000, Hq = 8, Hkv = 2, D = 128;
  const uint64_t o = B * S * Hq * D * 2, qkv = B * S * (Hq + 2 * Hkv) * D * 2;
  const uint64_t mask = B * Hq * ((S + 15) / 16) * ((S + 63) / 64) * 32 * 4;
  // D and the LSE copy (rows padded to 64 queries), the fp32 dQ accumulator.
  const uint64_t ws = 2 * ((B * Hq * ((S + 63) / 64 * 64) * 4 + 255) / 256 * 256) + B * S * Hq * D * 4;
  double fwd_flops = 0;
  for (const auto& pt : f["points"]) {
    const std::string pass = pt["axes"]["pass"];
    const auto& buf = pt["derived"]["plan"]["memory"]["buffers"];
    EXPECT_EQ(buf["mask"].get<uint64_t>(), mask) << pass;
    EXPECT_EQ(buf["qkv"].get<uint64_t>(), qkv) << pass;
    if (pass == "fwd") {
      EXPECT_FALSE(buf.contains("dqkv"));
      EXPECT_FALSE(buf.contains("dout"));
      fwd_flops = pt["variants"][0]["extra"]["flops"].get<double>();
      EXPECT_EQ(pt["variants"].size(), 4u);
    } else {
      EXPECT_EQ(buf["dout"].get<uint64_t>(), o) << pass;
      EXPECT_EQ(buf["dqkv"].get<uint64_t>(), qkv) << pass;
      EXPECT_EQ(buf["bwd_workspace"].get<uint64_t>(), ws) << pass;
      EXPECT_EQ(pt["variants"].size(), pass == "bwd" ? 3u : 4u) << pass;  // the backward alone has no rng+mask
      for (const auto& v : pt["variants"]) {
        EXPECT_EQ(v["extra"]["pass"], pass);
        EXPECT_NE(v["extra"]["model_note"].get<std::string>().find("not modelled"), std::string::npos);
      }
    }
  }
  ASSERT_GT(fwd_flops, 0);
  for (const auto& pt : f["points"]) {
    const std::string pass = pt["axes"]["pass"];
    const double want = fwd_flops * (pass == "fwd" ? 1.0 : pass == "bwd" ? 2.5 : 3.5);
    for (const auto& v : pt["variants"]) EXPECT_DOUBLE_EQ(v["extra"]["flops"].get<double>(), want) << pass;
  }
}

TEST(AttentionPassAxis, BadPassIsRefusedInOneLine) {
  struct Case {
    std::string args, field, allowed;
  };
  const std::vector<Case> cases = {
      {"attention --dry-run -q --set workload.pass=back", "workload.pass", "fwd, bwd, fwd+bwd for attention"},
      {"attention --dry-run -q --set sweep.pass=[fwd,both]", "sweep.pass[1]", "fwd, bwd, fwd+bwd for attention"},
      // A pass of another command: named with the command's own passes.
      {"attention --dry-run -q --set workload.pass=train", "workload.pass", "not a pass of attention (allowed: fwd, bwd, fwd+bwd)"},
      {"attention --dry-run -q --set sweep.pass=[fwd,train]", "sweep.pass", "not a pass of attention (allowed: fwd, bwd, fwd+bwd)"},
      {"run --dry-run -q --set workload.pass=bwd", "workload.pass", "not a pass of run (allowed: fwd, train)"},
      {"run --dry-run -q --set sweep.pass=[fwd+bwd]", "sweep.pass", "not a pass of run (allowed: fwd, train)"},
      // The old key: refused, naming the new one.
      {"attention --dry-run -q --set workload.attention_pass=bwd", "workload.attention_pass", "use workload.pass"},
      {"attention --dry-run -q --set sweep.attention_pass=[fwd,bwd]", "sweep.attention_pass", "use sweep.pass"},
  };
  for (const Case& c : cases) {
    const auto r = dropbench_test::run_dropbench(c.args);
    EXPECT_EQ(r.code, 2) << c.args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << ": " << r.out;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.field + ":"), std::string::npos) << c.args << ": " << r.err;
    EXPECT_NE(r.err.find(c.allowed), std::string::npos) << c.args << ": " << r.err;
  }
}

}  // namespace
