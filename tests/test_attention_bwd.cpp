// Attention backward host logic without a device: argument checks (one UsageError naming the field), workspace
// bytes, FLOP convention and instance names; `dropbench attention`'s pass axis (workload.pass): the dry
// run's plan (buffers, mask bytes, FLOPs), the variants per pass, bad input refused in one line with exit 2; the
// backward kernels' keep-bit index arithmetic (keep_layout.cuh) against the forward's tile mapping.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "test_paths.hpp"

#include "kernels/attention/attention_wgmma.cuh"
#include "kernels/attention/bwd/attention_bwd.cuh"
#include "kernels/attention/bwd/keep_layout.cuh"
#include "kernels/attention/tile_order.hpp"
#include "kernels/common/check.hpp"
#include "kernels/common/dispatch.cuh"
#include "test_random.hpp"

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
  for (int r : kPhiloxRounds)
    for (int tw : kThresholdBits) {
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
      {"ceil(sq / 128)", [](AttentionBwdParams& p) {
         p.fwd.batch = 65535;
         p.fwd.q_heads = 64;
         p.fwd.kv_heads = 8;
         p.fwd.sq = 65535 * 64;
       }, DropoutMode::None},
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
      {"mode must be none, mask or fused", [](AttentionBwdParams&) {}, static_cast<DropoutMode>(7)},
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

// The wgmma backward's sectioned order: every (block, unit) once over the launch indices; within a section the key
// blocks from the heaviest, the section's units together per block; sections of one subgroup's units are the grid
// order (heads x batch, subgroups x blocks) read by bwd_cta_in_order, the subgroups one after another.
TEST(AttentionBwdHost, WgmmaCtaOrderIsSectionedHeaviestFirst) {
  const int blocks = 5, subgroups = 2, heads = 3, batch = 2, units = subgroups * heads * batch;
  for (int section : {1, 2, 3, 4, 6, 12}) {
    std::vector<int> seen(blocks * units, 0);
    for (int lin = 0; lin < blocks * units; ++lin) {
      const auto c = attn::bwd_cta_sectioned<int>(lin, blocks, section, heads, batch);
      ASSERT_TRUE(c.block >= 0 && c.block < blocks && c.sg >= 0 && c.sg < subgroups && c.head >= 0 &&
                  c.head < heads && c.batch >= 0 && c.batch < batch) << section << " " << lin;
      const int u = (c.sg * batch + c.batch) * heads + c.head;
      ++seen[u * blocks + c.block];
      EXPECT_EQ(u / section, lin / (section * blocks)) << "a section's units launch together";
      EXPECT_EQ(c.block, lin % (section * blocks) / section) << "heaviest first within a section";
      if (section == units / subgroups) {
        const int x = lin % (heads * batch), y = lin / (heads * batch);
        const auto o = attn::bwd_cta_in_order<int>(x, y % blocks, blocks, heads, false);
        EXPECT_EQ(c.block, o.block);
        EXPECT_EQ(c.head, o.head);
        EXPECT_EQ(c.batch, o.batch);
        EXPECT_EQ(c.sg, y / blocks);
      }
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; })) << section;
  }
}

// The section: the fewest units, a divisor of the units, whose CTAs fill kBwdSectionWaves waves; all units where
// no smaller divisor does.
TEST(AttentionBwdHost, WgmmaSectionIsTheFewestUnitsFillingTheWaves) {
  const int slots = 132;
  for (int units : {1, 7, 8, 16, 24, 64, 128})
    for (int blocks : {1, 16, 32, 64, 128, 512}) {
      const int s = attn::bwd_section_units(units, blocks, slots);
      ASSERT_TRUE(s >= 1 && s <= units && units % s == 0) << units << " " << blocks;
      if (s < units) EXPECT_GE(s * blocks, attn::kBwdSectionWaves * slots) << units << " " << blocks;
      for (int t = 1; t < s; ++t)
        EXPECT_FALSE(units % t == 0 && t * blocks >= attn::kBwdSectionWaves * slots) << t << " would do";
    }
  // The backward's grid of record (32 query heads, 8 KV heads: 8 units): sections of 4 KV heads at 8K, 2 at 16K.
  EXPECT_EQ(attn::bwd_section_units(8, 64, slots), 4);
  EXPECT_EQ(attn::bwd_section_units(8, 128, slots), 2);
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
  p = valid();  // the wgmma kernel's 32-bit launch index: 65535 x 64 x 1024 CTAs fit, one more key block does not
  p.fwd.batch = 65535;
  p.fwd.q_heads = 64;
  p.fwd.kv_heads = 8;
  p.fwd.sq = 1024 * 128;
  p.fwd.qkv = nullptr;
  EXPECT_NO_THROW((void)attention_backward_workspace_bytes(p));
  p.fwd.sq += 1;
  refused(p, DropoutMode::None, "ceil(sq / 128)");
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
      for (const auto& v : pt["variants"]) EXPECT_EQ(v["extra"]["pass"], pass);
    }
  }
  ASSERT_GT(fwd_flops, 0);
  for (const auto& pt : f["points"]) {
    const std::string pass = pt["axes"]["pass"];
    const double want = fwd_flops * (pass == "fwd" ? 1.0 : pass == "bwd" ? 2.5 : 3.5);
    for (const auto& v : pt["variants"]) EXPECT_DOUBLE_EQ(v["extra"]["flops"].get<double>(), want) << pass;
  }
}

// The dry run's model times for the backward: each variant's backward call where the profile has the wgmma
// backward (dH 128: none, mask, fused at R 7 / TW 8); fwd+bwd is the forward's time, a launch gap and the backward
// call's, the backward of rng+mask being mask's; a head dim the backward is not profiled at says why instead.
TEST(AttentionPassAxis, DryRunModelsTheBackwardCall) {
  const std::string base = "attention --set workload.q_heads=32 --set workload.kv_heads=8 --set workload.batch=1 "
                           "--set sweep.sq=[8192] --set sweep.causal=[true] --set sweep.rounds=[7] "
                           "--set sweep.threshold_bits=[8] --set sweep.attention_kernel=[wgmma] ";
  const nlohmann::json f = dry_report(base + "--set workload.head_dim=128 --set sweep.pass=[fwd,bwd,fwd+bwd]");
  ASSERT_EQ(f["points"].size(), 3u);
  std::map<std::string, std::map<std::string, double>> us;  // pass -> variant -> model_us
  for (const auto& pt : f["points"])
    for (const auto& v : pt["variants"]) {
      const std::string pass = pt["axes"]["pass"], name = v["name"];
      ASSERT_TRUE(v["derived"].contains("model_us")) << pass << " " << name << ": " << v["extra"].dump();
      us[pass][name] = v["derived"]["model_us"].get<double>();
      EXPECT_GT(us[pass][name], 0) << pass << " " << name;
    }
  ASSERT_EQ(us["bwd"].size(), 3u);
  // Serial launches are a launch gap apart (the dry run's machine: configs/machines/h200.json).
  std::ifstream mf(dropbench_test::source_path("configs/machines/h200.json"));
  const double gap_us = nlohmann::json::parse(mf).at("launch_gap_us").at("value").get<double>();
  ASSERT_GT(gap_us, 0);
  for (const auto& [name, fwd_us] : us["fwd"]) {
    const double bwd_us = us["bwd"][name == "rng+mask" ? "mask" : name];
    EXPECT_NEAR(us["fwd+bwd"][name], fwd_us + bwd_us + gap_us, 1e-9 * (fwd_us + bwd_us)) << name;
  }
  // The backward does 2.5x the forward's FLOPs: its call takes longer than the forward kernel.
  EXPECT_GT(us["bwd"]["none"], us["fwd"]["none"]);

  const nlohmann::json h = dry_report(base + "--set workload.head_dim=64 --set sweep.pass=[bwd]");
  ASSERT_EQ(h["points"].size(), 1u);
  for (const auto& v : h["points"][0]["variants"]) {
    EXPECT_FALSE(v["derived"].contains("model_us")) << v["name"];
    const std::string note = v["extra"].value("model_note", "");
    EXPECT_NE(note.find("not modelled"), std::string::npos) << note;
    EXPECT_NE(note.find("head_dim"), std::string::npos) << note;
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

// ---- Keep bits of the backward kernels (keep_layout.cuh), the functions the kernels call, against the forward's
// tile mapping (dropout_scheme.cuh: tile_lane_of / tile_bit_of) on random words of a 64-query x 64-key block.

// A block's 4 query strips x 32 words (strip j: queries 16 j ..).
using BlockWords = std::array<std::array<uint32_t, 32>, 4>;
BlockWords random_block(std::mt19937_64& rng) {
  BlockWords w;
  for (auto& strip : w)
    for (uint32_t& x : strip) x = static_cast<uint32_t>(rng());
  return w;
}
// The forward's bit of (query ql, key kl) of the block.
uint32_t forward_bit(const BlockWords& w, int ql, int kl) {
  return (w[ql >> 4][tile_lane_of(ql & 15, kl)] >> tile_bit_of(ql & 15, kl)) & 1u;
}
// Mode Fused's staging: every thread (warp j = strip j, lane L = word L) stores its word's 4 bytes
// (staged_store_off + kStagedRegion b), as KeepBits::generate does; a byte written twice fails.
std::vector<uint8_t> stage_bytes(const BlockWords& w) {
  std::vector<int> hits(512, 0);
  std::vector<uint8_t> buf(512, 0);
  for (int j = 0; j < 4; ++j)
    for (int L = 0; L < 32; ++L)
      for (int b = 0; b < 4; ++b) {
        const int at = attn_bwd::staged_store_off(j, L) + attn_bwd::kStagedRegion * b;
        EXPECT_TRUE(at >= 0 && at < 512) << "warp " << j << " lane " << L << " byte " << b << ": " << at;
        if (at < 0 || at >= 512) continue;
        ++hits[at];
        buf[at] = static_cast<uint8_t>(w[j][L] >> (8 * b));
      }
  for (int at = 0; at < 512; ++at) EXPECT_EQ(hits[at], 1) << "byte " << at << " of the staging buffer";
  return buf;
}
// A reader's LDS.64 of the staging buffer (little endian) as keep_bits' two words (staged_bits).
void staged_read(const std::vector<uint8_t>& buf, int warp, int lane, uint32_t (&z)[2]) {
  const int at = attn_bwd::staged_load_off(warp, lane);
  uint32_t v[2] = {0u, 0u};
  for (int k = 0; k < 8; ++k) v[k >> 2] |= static_cast<uint32_t>(buf[at + k]) << (8 * (k & 3));
  attn_bwd::staged_bits(v[0], v[1], 16 * warp + (lane >> 2), z);
}

// The accumulator layout's elements (nb, i) of a warp's lanes cover its 16 keys x 64 queries once.
TEST(BwdKeepLayout, ElementsCoverTheWarpsRowsOnce) {
  for (int warp = 0; warp < 4; ++warp) {
    std::vector<int> hits(16 * 64, 0);
    for (int lane = 0; lane < 32; ++lane)
      for (int nb = 0; nb < 8; ++nb)
        for (int i = 0; i < 4; ++i) {
          const int kl = attn_bwd::el_key(16 * warp + (lane >> 2), i), ql = attn_bwd::el_query(nb, i, lane);
          ASSERT_TRUE(kl >= 16 * warp && kl < 16 * warp + 16 && ql >= 0 && ql < 64) << kl << " " << ql;
          ++hits[(kl - 16 * warp) * 64 + ql];
        }
    for (int h : hits) ASSERT_EQ(h, 1) << "warp " << warp;
  }
}

// Mode Mask (and the mma kernel): the words read from shared memory (read_keep_words, both kernels' strides), then
// keep_bit per element (the mma kernel) and keep_sel / keep_bits / keep_at (the wgmma kernel), for every warp, lane
// and element.
TEST(BwdKeepLayout, MaskPathGivesTheForwardsBits) {
  const uint64_t seed = dropbench_test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 64; ++trial) {
    const BlockWords w = random_block(rng);
    // The wgmma kernel's stage holds 2 tile columns per strip (stride 64, consumer c at + 32 c); the mma kernel's 1.
    for (int stride : {32, 64}) {
      const int c = (stride == 64) ? trial & 1 : 0;
      std::vector<uint32_t> smem(4 * stride, 0xDEADBEEFu);
      for (int j = 0; j < 4; ++j)
        for (int L = 0; L < 32; ++L) smem[j * stride + 32 * c + L] = w[j][L];
      int bad = 0;
      std::ostringstream first;
      for (int warp = 0; warp < 4; ++warp)
        for (int lane = 0; lane < 32; ++lane) {
          const int kl0 = 16 * warp + (lane >> 2);
          uint32_t kw[4][2], z[2];
          if (stride == 32) attn_bwd::read_keep_words<32>(smem.data(), lane, kw);
          else attn_bwd::read_keep_words<64>(smem.data() + 32 * c, lane, kw);
          attn_bwd::keep_bits(kw, kl0, attn_bwd::keep_sel(kl0), z);
          for (int nb = 0; nb < 8; ++nb)
            for (int i = 0; i < 4; ++i) {
              const int kl = attn_bwd::el_key(kl0, i), ql = attn_bwd::el_query(nb, i, lane);
              const uint32_t want = forward_bit(w, ql, kl);
              const uint32_t by_bit = attn_bwd::keep_bit(kw, nb, i, kl, ql), by_at = attn_bwd::keep_at(z, nb, i);
              if (by_bit != want || by_at != want) {
                if (bad++ == 0)
                  first << "warp " << warp << " lane " << lane << " nb " << nb << " i " << i << ": forward " << want
                        << ", keep_bit " << by_bit << ", keep_at " << by_at;
              }
            }
        }
      ASSERT_EQ(bad, 0) << "stride " << stride << ", seed " << seed << "; first: " << first.str();
    }
  }
}

// Mode Fused: the staging stores cover the 512 bytes once, each reader's 8 bytes are byte kl0 / 16 of its 8 words in
// keep_bits' order, and keep_at of the loaded words gives the forward's bit (the same words as mode Mask's).
TEST(BwdKeepLayout, FusedStagingGivesTheForwardsBits) {
  const uint64_t seed = dropbench_test::fresh_seed();
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 64; ++trial) {
    const BlockWords w = random_block(rng);
    const std::vector<uint8_t> buf = stage_bytes(w);
    int bad = 0;
    std::ostringstream first;
    for (int warp = 0; warp < 4; ++warp)
      for (int lane = 0; lane < 32; ++lane) {
        const int kl0 = 16 * warp + (lane >> 2), at = attn_bwd::staged_load_off(warp, lane);
        ASSERT_TRUE(at % 8 == 0 && at >= 0 && at + 8 <= 512) << "warp " << warp << " lane " << lane << ": " << at;
        for (int k = 0; k < 8; ++k) {  // byte 2 j + e: strip j, parity e
          const int j = k >> 1, e = k & 1;
          const uint8_t want = static_cast<uint8_t>(w[j][tile_lane_of(2 * (lane & 3) + e, lane >> 2)] >> (8 * warp));
          ASSERT_EQ(buf[at + k], want) << "warp " << warp << " lane " << lane << " byte " << k << ", seed " << seed;
        }
        uint32_t z[2], kw[4][2], zm[2];
        staged_read(buf, warp, lane, z);
        for (int j = 0; j < 4; ++j)
          for (int e = 0; e < 2; ++e) kw[j][e] = w[j][tile_lane_of(2 * (lane & 3) + e, lane >> 2)];
        attn_bwd::keep_bits(kw, kl0, attn_bwd::keep_sel(kl0), zm);
        EXPECT_TRUE(z[0] == zm[0] && z[1] == zm[1]) << "warp " << warp << " lane " << lane << ": fused and mask words differ";
        for (int nb = 0; nb < 8; ++nb)
          for (int i = 0; i < 4; ++i) {
            const uint32_t want = forward_bit(w, attn_bwd::el_query(nb, i, lane), attn_bwd::el_key(kl0, i));
            if (attn_bwd::keep_at(z, nb, i) != want && bad++ == 0)
              first << "warp " << warp << " lane " << lane << " nb " << nb << " i " << i << ": forward " << want;
          }
      }
    ASSERT_EQ(bad, 0) << "seed " << seed << "; first: " << first.str();
  }
}

// The wgmma kernel's run-time (R, TW) choice: search_list over each list, rounds then width as in dropout.cuh's
// regen, gives every listed pair itself.
TEST(BwdKeepLayout, RoundsAndWidthSearchFindsEveryPair) {
  for (int r : kPhiloxRounds)
    for (int tw : kThresholdBits) {
      const std::pair<int, int> got = attn_bwd::search_list<kPhiloxRounds>(r, [&](auto rr) {
        return attn_bwd::search_list<kThresholdBits>(
            tw, [&](auto tt) { return std::pair<int, int>(decltype(rr)::value, decltype(tt)::value); });
      });
      EXPECT_EQ(got, std::make_pair(r, tw));
    }
}

}  // namespace
