// A dry run that is a plan: the memory each command's plan counts (src/cli/dry_plan.hpp) is what the
// command allocates (the kernels' own byte counts), sizes are checked past 2^64, and the dry run's report and
// table carry the plan: memory, skips against --device-memory (or the 139 GiB default), the model's estimate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "kernels/common/check.hpp"
#include "kernels/gemm/gemm.cuh"
#include "kernels/rng/rng_mask.cuh"
#include "src/block/pipeline_plan.hpp"
#include "src/cli/dry_plan.hpp"
#include "src/core/config.hpp"
#include "src/core/workload_params.hpp"
#include "test_paths.hpp"
#include "usage_error.hpp"

namespace db = dropbench;
using nlohmann::json;

namespace {

db::Workload shape(int64_t batch, int64_t sq, int64_t q_heads, const std::string& layout = "tile") {
  db::Workload w = db::builtin_config().workload;
  w.batch = batch;
  w.sq = sq;
  w.q_heads = q_heads;
  w.layout = layout;
  return w;
}

using dropbench_test::usage_error;

json dry_report(const std::string& args) {
  const auto path = std::filesystem::temp_directory_path() / ("dropbench_dry_plan_" + std::to_string(::getpid()) + ".json");
  const auto r = dropbench_test::run_dropbench(args + " --dry-run -q -o '" + path.string() + "'");
  EXPECT_EQ(r.code, 0) << args << ": " << r.err;
  std::ifstream f(path);
  json j = f ? json::parse(f) : json();
  std::filesystem::remove(path);
  return j;
}

constexpr uint64_t kGiB = uint64_t{1} << 30;

}  // namespace

// The model beside a measured training step reads the measured GPU's machine file, named by the device.
TEST(DryPlan, MachineFileFollowsTheDeviceName) {
  EXPECT_EQ(db::machine_file_for_device("NVIDIA H100 80GB HBM3"), "configs/machines/h100-sxm.json");
  EXPECT_EQ(db::machine_file_for_device("NVIDIA H200"), "configs/machines/h200.json");
  EXPECT_EQ(db::machine_file_for_device("NVIDIA A100-SXM4-80GB"), "configs/machines/h200.json");
}

TEST(DryPlan, RngMemoryIsWhatTheKernelWrites) {
  for (const char* layout : {"tile", "bits", "u8", "i32"})
    for (int64_t sq : {64, 1000, 4096}) {
      const db::Workload w = shape(2, sq, 3, layout);
      db::RngMaskParams rp = db::rng_mask_params(w, db::make_threshold(w.dropout_p, 8), db::parse_mask_layout(layout));
      rp.geo = db::MaskGeometry{static_cast<uint32_t>(w.batch * w.q_heads), static_cast<uint32_t>(sq),
                                static_cast<uint32_t>(sq), w.causal};
      rp.elements = static_cast<uint64_t>(w.batch * w.q_heads) * sq * sq;
      EXPECT_EQ(db::rng_memory(w).bytes("mask"), db::mask_bytes(rp)) << layout << " sq " << sq;
      EXPECT_EQ(db::rng_memory(w).need(), db::mask_bytes(rp) + 8 + (uint64_t{64} << 20));
    }
}

TEST(DryPlan, GemmAttentionAndRunMemoryMatchTheirCommands) {
  db::Workload w = db::builtin_config().workload;
  for (const char* dtype : {"fp8", "bf16"}) {
    w.dtype = dtype;
    const db::GemmShape s = db::qkv_gemm_shape(w);
    const db::MemoryPlan m = db::gemm_memory(w, uint64_t{64} << 20);
    EXPECT_EQ(m.buffers_total(), db::QkvBuffers::bytes_needed(s, db::parse_gemm_dtype(dtype)) + (uint64_t{64} << 20));
  }
  // attention: QKV (M x N bf16), O twice, LSE, the dense tile mask.
  const db::MemoryPlan a = db::attention_memory(w);
  EXPECT_EQ(a.bytes("qkv"), uint64_t(4096) * 6144 * 2);
  EXPECT_EQ(a.bytes("o"), uint64_t(4096) * 32 * 128 * 2);
  EXPECT_EQ(a.bytes("mask"), (db::MaskGeometry{32, 4096, 4096, false}.bytes()));
  // run: block_memory's fields, then the masks the plan keeps.
  const db::BlockMemory b = db::block_memory(w, 512, 4, true);
  EXPECT_EQ(b.full_mask, (db::MaskGeometry{32, 4096, 4096, false}.bytes()));
  EXPECT_EQ(b.chunk_mask, (db::MaskGeometry{32, 512, 4096, false}.bytes()));
  const db::MemoryPlan r = db::run_memory(b, true, true, 512u << 20);
  EXPECT_EQ(r.buffers_total(), b.common() + b.full_mask + 2 * b.chunk_mask);
  EXPECT_EQ(db::run_memory(b, false, false, 0).buffers_total(), b.common());
}

// 4096 x 1024 heads x (2^20)^2 = 2^62 elements: the i32 mask is 2^64 bytes, which must not wrap to 0.
TEST(DryPlan, SizesPast64BitsAreRefusedNamingTheField) {
  const db::Workload w = shape(4096, 1 << 20, 1024, "i32");
  const std::string msg = usage_error([&] { db::rng_memory(w, "sweep point {}: "); });
  EXPECT_EQ(msg.rfind("sweep point {}: workload.sq: 1048576 (batch 4096 x q_heads 1024", 0), 0u) << msg;
  EXPECT_NE(msg.find("more than 2^64 bytes"), std::string::npos) << msg;
  EXPECT_NO_THROW(db::rng_memory(shape(4096, 1 << 20, 1024, "u8")));  // 2^62 bytes: counted, just never fits
  EXPECT_EQ(db::rng_memory(shape(4096, 1 << 20, 1024, "u8")).bytes("mask"), uint64_t{1} << 62);
  EXPECT_NE(usage_error([] { db::checked_product({uint64_t{1} << 32, uint64_t{1} << 32}, "x:"); }), "");
  EXPECT_NE(usage_error([] { db::checked_sum({~uint64_t{0}, 1}, "x:"); }), "");

  // End to end: one line, exit 2, before anything (the dry run writes no report).
  const auto r = dropbench_test::run_dropbench(
      "rng --dry-run -q --set workload.batch=4096 --set workload.q_heads=1024 --set workload.kv_heads=8 "
      "--set sweep.sq=[1024,1048576] --set sweep.layout=[i32] --set sweep.rounds=[7] --set sweep.threshold_bits=[8]");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("dropbench: error: sweep point {\"sq\":1048576", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("workload.sq"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// The run plan at the default 139 GiB: SQ 256K's full mask (256 GiB) does not fit, so baseline and overlap are
// skipped and said why; fused and chunked get the model's estimate. At --device-memory 2 the point does not fit.
TEST(DryPlan, RunReportCarriesThePlan) {
  const json j = dry_report("run --set sweep.sq=[4096,262144]");
  ASSERT_EQ(j["points"].size(), 2u) << j.dump().substr(0, 2000);
  const json& p0 = j["points"][0];
  const json& plan = p0["derived"]["plan"];
  EXPECT_EQ(plan["device_memory_bytes"], 139 * kGiB);
  EXPECT_EQ(plan["device_memory_from"], "default: an idle H200's free memory");
  EXPECT_EQ(plan["fits"], true);
  uint64_t sum = 0;
  for (const auto& [k, v] : plan["memory"]["buffers"].items()) sum += v.get<uint64_t>();
  EXPECT_EQ(plan["memory"]["buffers_bytes"], sum);
  EXPECT_EQ(plan["memory"]["need_bytes"], sum + (uint64_t{512} << 20));
  for (const char* k : {"x", "w", "qkv", "o", "lse", "o_ref", "gemm_workspaces", "full_mask", "chunk_masks"})
    EXPECT_TRUE(plan["memory"]["buffers"].contains(k)) << k;
  ASSERT_EQ(p0["variants"].size(), 4u);
  for (const json& v : p0["variants"]) {
    ASSERT_TRUE(v["derived"].contains("model_us")) << v.dump();
    EXPECT_GT(v["derived"]["model_us"].get<double>(), 0);
  }
  const json& p1 = j["points"][1];
  EXPECT_EQ(p1["axes"]["sq"], 262144);
  ASSERT_TRUE(p1["derived"].contains("skipped_pipelines"));
  EXPECT_NE(p1["derived"]["skipped_pipelines"]["baseline"].get<std::string>().find("256.0 GiB"), std::string::npos);
  EXPECT_EQ(p1["variants"].size(), 2u);  // fused, chunked
  EXPECT_FALSE(p1["derived"]["plan"]["memory"]["buffers"].contains("full_mask"));

  const json small = dry_report("run --set sweep.sq=[4096,262144] --device-memory 2");
  ASSERT_EQ(small["points"].size(), 1u);
  ASSERT_EQ(small["skipped"].size(), 1u);
  const json& s = small["skipped"][0];
  EXPECT_EQ(s["axes"]["sq"], 262144);
  EXPECT_EQ(s["plan"]["fits"], false);
  EXPECT_EQ(s["plan"]["device_memory_bytes"], 2 * kGiB);
  EXPECT_EQ(s["plan"]["device_memory_from"], "--device-memory");
  EXPECT_NE(s["reason"].get<std::string>().find("more than the 2.0 GiB of free device memory"), std::string::npos)
      << s["reason"];
  // No device: the context's clock settings are absent, not zeros.
  for (const char* k : {"applications_sm_mhz", "max_sm_mhz", "power_limit_w", "persistence_mode"})
    EXPECT_FALSE(small["context"]["clocks"].contains(k)) << k;
}

// The other commands: their own buffers, skips against the planned memory, estimates where the model has the
// kernel, and a note where it does not (dropout).
TEST(DryPlan, EveryCommandPlans) {
  const json g = dry_report("gemm --set sweep.sq=[4096] --set sweep.embed=[4096] --set sweep.dtype=[fp8]");
  ASSERT_EQ(g["points"].size(), 1u);
  EXPECT_EQ(g["points"][0]["derived"]["plan"]["memory"]["buffers"]["workspace"], uint64_t{64} << 20);
  EXPECT_GT(g["points"][0]["variants"][0]["derived"]["model_us"].get<double>(), 0);

  const json a = dry_report("attention --set sweep.sq=[4096] --set sweep.causal=[false]");
  ASSERT_EQ(a["points"].size(), 1u);
  for (const json& v : a["points"][0]["variants"]) EXPECT_TRUE(v["derived"].contains("model_us")) << v["name"];

  const json d = dry_report("dropout --set sweep.elements=[1048576] --set sweep.dropout_dtype=[fp32]");
  ASSERT_EQ(d["points"].size(), 1u);
  EXPECT_EQ(d["points"][0]["derived"]["plan"]["memory"]["buffers"]["x"], 4u << 20);
  for (const json& v : d["points"][0]["variants"]) {
    EXPECT_FALSE(v["derived"].contains("model_us"));
    EXPECT_NE(v["extra"]["model_note"].get<std::string>().find("not modelled"), std::string::npos);
  }

  // rng at SQ 128K: the i32 mask is 2 TiB, skipped against the plan (not walked as if it fitted).
  const json r = dry_report("rng --set sweep.sq=[1024,131072] --set sweep.layout=[tile,i32] --set sweep.rounds=[7] "
                            "--set sweep.threshold_bits=[8]");
  EXPECT_EQ(r["points"].size(), 3u);
  ASSERT_EQ(r["skipped"].size(), 1u);
  EXPECT_EQ(r["skipped"][0]["axes"]["layout"], "i32");
  EXPECT_EQ(r["skipped"][0]["plan"]["memory"]["buffers"]["mask"], uint64_t{32} * 131072 * 131072 * 4);
  EXPECT_GT(r["points"][0]["variants"][0]["derived"]["model_us"].get<double>(), 0);
}

// The table answers "what will this sweep do": memory, device, model_us, plan; "-" where nothing is known, never 0.
TEST(DryPlan, MarkdownTableShowsThePlan) {
  auto squeeze = [](std::string s) {  // the markdown pads cells: one space between words
    std::string out;
    for (char c : s)
      if (!(c == ' ' && !out.empty() && out.back() == ' ')) out += c;
    return out;
  };
  auto r = dropbench_test::run_dropbench("run --dry-run -q --set sweep.sq=[4096,262144]");
  ASSERT_EQ(r.code, 0) << r.err;
  r.out = squeeze(r.out);
  EXPECT_EQ(r.out.rfind("| sq | variant | memory | device | model_us | plan |", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("| 262144 | baseline |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| skipped: the full dropout mask needs 256.0 GiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 139.00 GiB |"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("| 0 |"), std::string::npos) << r.out;
  auto d = dropbench_test::run_dropbench("dropout --dry-run -q --set sweep.elements=[1024]");
  ASSERT_EQ(d.code, 0) << d.err;
  d.out = squeeze(d.out);
  EXPECT_NE(d.out.find("| - | runs |"), std::string::npos) << d.out;  // no model for dropout: "-"
  EXPECT_EQ(d.out.find("| 0 |"), std::string::npos) << d.out;
}

TEST(DryPlan, PlanOptionsOnlyWithDryRun) {
  const auto r = dropbench_test::run_dropbench("rng -q --device-memory 80");
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "dropbench: error: --device-memory: only with --dry-run (allowed: a dry run's plan; a measuring "
                   "run checks the device's own free memory)\n");
  const auto m = dropbench_test::run_dropbench("run --dry-run -q --set sweep.sq=[4096] --machine configs/machines/nope.json");
  EXPECT_EQ(m.code, 2) << m.err;
  const auto z = dropbench_test::run_dropbench("rng --dry-run -q --device-memory 0");
  EXPECT_EQ(z.code, 2) << z.err;
  EXPECT_NE(z.err.find("--device-memory"), std::string::npos) << z.err;
}

// Recommend and model at the largest shapes (2.7e8 CTAs at b 4096, sq 64K, 128 heads) answer through the
// closed-form tail instead of simulating every CTA (minutes); `timeout` turns a hang into a failure well before the
// ctest timeout (no speed is asserted: 60 s bounds hanging; the closed form takes ~0.2 s).
TEST(Cli, LargeShapesAnswerQuickly) {
  const std::string bin = "timeout 60 '" + dropbench_test::dropbench_binary() + "' ";
  const std::string out = (std::filesystem::temp_directory_path() / "dropbench_large_shape.out").string();
  for (const std::string args :
       {std::string("recommend --shape b=4096,sq=65536,hq=128,hkv=8"),
        std::string("recommend --shape b=4096,sq=65536,hq=128,hkv=8,causal=1"),
        std::string("model --set workload.batch=4096 --set workload.q_heads=128 --set workload.kv_heads=8 "
                    "--set sweep.sq=[65536] --set workload.causal=true")}) {
    const int status = std::system((bin + args + " > '" + out + "' 2>&1").c_str());
    ASSERT_TRUE(WIFEXITED(status)) << args;
    EXPECT_EQ(WEXITSTATUS(status), 0) << args << " (124 = still running after 60 s)";
    std::ifstream f(out);
    const std::string text((std::istreambuf_iterator<char>(f)), {});
    EXPECT_NE(text.find("fused"), std::string::npos) << args << ": " << text.substr(0, 500);
  }
  std::filesystem::remove(out);
}
