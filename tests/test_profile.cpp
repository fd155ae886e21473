// `dropbench profile` on the CPU: the ncu CSV parser on Nsight Compute output from the H200
// (tests/fixtures/profile/, trimmed from results/h200/model/ncu/), the ncu block, the written profile loading in the
// model, and the CLI's exit codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "cli_runner.hpp"
#include "kernels/common/check.hpp"
#include "src/model/model.hpp"
#include "src/model/profile.hpp"
#include "test_paths.hpp"

using namespace dropbench;
namespace fs = std::filesystem;

namespace {

std::string fixture(const std::string& name) {
  std::ifstream f(dropbench_test::source_path("tests/fixtures/profile/") + name);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string base_profile() { return dropbench_test::source_path("configs/profiles/h200.json"); }

}  // namespace

TEST(ProfileNcuCsv, DetailsPageRng) {
  const auto ls = profile::parse_ncu_csv(fixture("rng_tile_r7_tw8.csv"));
  ASSERT_EQ(ls.size(), 1u);
  const auto& l = ls[0];
  EXPECT_EQ(profile::classify_launch(l.kernel), "rng_tile_r7_tw8");
  EXPECT_EQ(l.block, "(256, 1, 1)");
  EXPECT_EQ(l.grid, "(1056, 1, 1)");
  EXPECT_DOUBLE_EQ(l.get("inst_executed"), 70615808);
  EXPECT_DOUBLE_EQ(l.get("duration_ns"), 115328);
  EXPECT_NEAR(l.get("sm_clock_hz"), 1976072592.95, 1);
  EXPECT_DOUBLE_EQ(l.get("issue_active_pct"), 58.70);
  EXPECT_DOUBLE_EQ(l.get("elapsed_cycles"), 228076);
  EXPECT_DOUBLE_EQ(l.get("dram_throughput_pct"), 7.21);
  // The two "Memory Throughput" rows (% and byte/s) stay apart.
  EXPECT_DOUBLE_EQ(l.get("memory_throughput_pct"), 11.41);
  EXPECT_NEAR(l.metrics.at("Memory Workload Analysis/Memory Throughput"), 347025527192.01, 1);
  // "no data" is absent, not zero; metrics the sections lack are absent.
  EXPECT_EQ(l.metrics.count("Memory Workload Analysis/Local Memory Spilling Request Overhead"), 0u);
  EXPECT_LT(l.get("dram_bytes_read"), 0);
}

TEST(ProfileNcuCsv, DetailsPageAttentionAndGemm) {
  const auto a = profile::parse_ncu_csv(fixture("attention_fused.csv"));
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(profile::classify_launch(a[0].kernel), "attn_fused_r7_tw8");
  EXPECT_DOUBLE_EQ(a[0].get("inst_executed"), 360538112);
  const auto g = profile::parse_ncu_csv(fixture("gemm_fp8.csv"));
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(profile::classify_launch(g[0].kernel), "gemm");
  EXPECT_DOUBLE_EQ(g[0].get("issue_active_pct"), 13.12);
  EXPECT_EQ(profile::classify_launch("void attn_fwd_kernel<Cfg<128, 4, 2, 64, 2, 1>, 0, 7, 8, 0>(KernelArgs)"),
            "attn_none");
  EXPECT_EQ(profile::classify_launch("void attn_fwd_kernel<Cfg<128, 4, 2, 64, 2, 1>, 1, 7, 8, 0>(KernelArgs)"),
            "attn_mask");
  // R / TW of the fused kernel and the causal instantiation, however the template arguments print.
  EXPECT_EQ(profile::classify_launch("void attn_fwd_kernel<Cfg<128, 4, 2, 64, 2, 0>, 2, 3, 16, 1>(KernelArgs)"),
            "attn_fused_r3_tw16_causal");
  EXPECT_EQ(profile::classify_launch(
                "void attn::attn_fwd_kernel<attn::Cfg<128, 4, 2, 64, 2, 0>, (DropoutMode)1, 7, 8, true>(KernelArgs)"),
            "attn_mask_causal");
  EXPECT_EQ(profile::classify_launch("void attn_fwd_kernel<Cfg<128, 4, 2, 64, 2, 1>, 0, 7, 8, false>(KernelArgs)"),
            "attn_none");
  EXPECT_EQ(profile::classify_launch("void attn_fwd_kernel<Cfg<128, 4, 2, 64, 2, 0>, 2>(KernelArgs)"), "attn_fused");
  EXPECT_EQ(profile::classify_launch("fill_fp8_kernel(__nv_fp8_e4m3 *, unsigned long)"), "");
  // The Hopper-native kernel: its own keys (wgmma_*), design (b)'s RNG-warp instance apart.
  EXPECT_EQ(profile::classify_launch("void attn_fwd_wgmma_kernel<WgCfg<128, 128, 3, 1, 0, 0>, 0, 7, 8, 0, 0>(CUtensorMap, "
                                     "CUtensorMap, KernelArgs)"),
            "wgmma_none");
  EXPECT_EQ(profile::classify_launch("void attn_fwd_wgmma_kernel<WgCfg<128, 128, 3, false, 0, false>, 1, 7, 8, true, "
                                     "false>(CUtensorMap, CUtensorMap, KernelArgs)"),
            "wgmma_mask_causal");
  EXPECT_EQ(profile::classify_launch("void dropbench::attn_fwd_wgmma_kernel<dropbench::WgCfg<128, 128, 3, 1, 0, 1>, "
                                     "(dropbench::DropoutMode)2, 10, 16, 1, 0>(CUtensorMap, CUtensorMap, KernelArgs)"),
            "wgmma_fused_r10_tw16_causal");
  EXPECT_EQ(profile::classify_launch("void attn_fwd_wgmma_kernel<WgCfg<128, 128, 2, 1, 3, 0>, 2, 7, 8, 0, 1>(KernelArgs)"),
            "wgmma_fused_r7_tw8_rngwarps");
  EXPECT_EQ(profile::classify_launch("void attn_fwd_wgmma_kernel<WgCfg<128, 128, 3, 1, 0, 0>, 1>(KernelArgs)"), "wgmma_mask");
  // The wgmma backward: the mode from its name (R, TW and causality are run-time arguments); the other launches
  // of a backward (preprocess, dQ convert, the deterministic dQ kernel, the mma backward) are none of its keys.
  const std::string bwd_args = "(CUtensorMap_st, CUtensorMap_st, CUtensorMap_st, CUtensorMap_st, dropbench::attn_bwd::Args)";
  EXPECT_EQ(profile::classify_launch("void dropbench::attn_bwd_wg::attn_bwd_wgmma_kernel<128, (dropbench::DropoutMode)0>" +
                                     bwd_args),
            "wgmma_bwd_none");
  EXPECT_EQ(profile::classify_launch("void dropbench::attn_bwd_wg::attn_bwd_wgmma_kernel<128, (dropbench::DropoutMode)1>" +
                                     bwd_args),
            "wgmma_bwd_mask");
  EXPECT_EQ(profile::classify_launch("void attn_bwd_wgmma_kernel<64, 2>" + bwd_args), "wgmma_bwd_fused");
  // As ncu's demangled kernel-name base prints it (the raw page prints `<128, 2>`).
  EXPECT_EQ(profile::classify_launch("void dropbench::attn_bwd_wg::attn_bwd_wgmma_kernel<(int)128, "
                                     "(dropbench::DropoutMode)2>" + bwd_args),
            "wgmma_bwd_fused");
  EXPECT_EQ(profile::classify_launch("dropbench::(anonymous namespace)::bwd_preprocess_kernel(const __nv_bfloat16 *, "
                                     "long, const __nv_bfloat16 *, long, const float *, float *, float *, int, int, int, "
                                     "int, long)"),
            "");
  EXPECT_EQ(profile::classify_launch("dropbench::(anonymous namespace)::bwd_fp32_to_dqkv_kernel(const float *, int, int, "
                                     "long, long, __nv_bfloat16 *, long, float)"),
            "");
  EXPECT_EQ(profile::classify_launch("void dropbench::attn_bwd::attn_bwd_dq_kernel<128, (dropbench::DropoutMode)2, 7, "
                                     "8>(dropbench::attn_bwd::Args)"),
            "");
  EXPECT_EQ(profile::classify_launch("void dropbench::attn_bwd::attn_bwd_main_kernel<128, (dropbench::DropoutMode)1, 7, "
                                     "8>(dropbench::attn_bwd::Args)"),
            "");
}

// Raw page (--page raw --print-units base): one row per launch, a units row. Synthetic values in ncu's layout.
TEST(ProfileNcuCsv, RawPageUnitsAndPipes) {
  const std::string csv =
      "==PROF== Connected to process 1\n"
      "| sq | table line of the profiled program |\n"
      "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\","
      "\"Grid Size\",\"Device\",\"CC\",\"dram__bytes_read.sum\",\"gpu__time_duration.sum\","
      "\"sm__inst_executed_pipe_alu.sum\",\"smsp__inst_executed_pipe_alu.sum\",\"smsp__inst_executed_pipe_xu.sum\","
      "\"smsp__inst_executed.sum\",\"launch__registers_per_thread\",\"smsp__cycles_elapsed.avg.per_second\","
      "\"lts__t_bytes.sum\"\n"
      "\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"Mbyte\",\"usecond\",\"inst\",\"inst\",\"inst\","
      "\"inst\",\"register/thread\",\"cycle/nsecond\",\"byte\"\n"
      "\"0\",\"9\",\"dropbench\",\"h\",\"void rng_tile_kernel<3, 16>(unsigned int *)\",\"1\",\"7\",\"(256, 1, 1)\","
      "\"(1056, 1, 1)\",\"0\",\"9.0\",\"2.5\",\"115.5\",\"1,000\",\"999\",\"n/a\",\"4,096\",\"44\",\"1.98\",\"2048\"\n"
      "\"1\",\"9\",\"dropbench\",\"h\",\"void rng_tile_kernel<7, 8>(unsigned int *)\",\"1\",\"7\",\"(256, 1, 1)\","
      "\"(1056, 1, 1)\",\"0\",\"9.0\",\"0\",\"1\",\"2\",\"2\",\"3\",\"8\",\"48\",\"1.98\",\"0\"\n"
      "==PROF== Disconnected from process 1\n";
  const auto ls = profile::parse_ncu_csv(csv);
  ASSERT_EQ(ls.size(), 2u);
  EXPECT_EQ(profile::classify_launch(ls[0].kernel), "rng_tile_r3_tw16");
  EXPECT_EQ(profile::classify_launch(ls[1].kernel), "rng_tile_r7_tw8");
  EXPECT_DOUBLE_EQ(ls[0].get("dram_bytes_read"), 2.5e6);
  EXPECT_DOUBLE_EQ(ls[0].get("duration_ns"), 115500);
  EXPECT_DOUBLE_EQ(ls[0].get("pipe_alu"), 1000);  // sm__ preferred over smsp__
  EXPECT_LT(ls[0].get("pipe_xu"), 0);             // n/a: absent
  EXPECT_DOUBLE_EQ(ls[1].get("pipe_xu"), 3);
  EXPECT_DOUBLE_EQ(ls[0].get("registers_per_thread"), 44);
  EXPECT_NEAR(ls[0].get("sm_clock_hz"), 1.98e9, 1);

  const json b = profile::ncu_block(ls[0], 1024, "elements", {{"sq", 32}, {"rounds", 3}});
  EXPECT_EQ(b["workload"]["sq"], 32);
  EXPECT_FALSE(profile::ncu_block(ls[0], 1024, "elements").contains("workload"));
  EXPECT_DOUBLE_EQ(b["demand"]["inst"].get<double>(), 4);
  EXPECT_DOUBLE_EQ(b["demand"]["alu"].get<double>(), 1000.0 / 1024);
  EXPECT_DOUBLE_EQ(b["demand"]["hbm_bytes"].get<double>(), 2.5e6 / 1024);
  EXPECT_DOUBLE_EQ(b["demand"]["l2_bytes"].get<double>(), 2);
  EXPECT_DOUBLE_EQ(b["launch"]["registers_per_thread"].get<double>(), 44);
  EXPECT_THROW(profile::ncu_block(ls[0], 0, "elements"), UsageError);
}

// The raw page from the H200 run of `dropbench profile` (trimmed: three attention launches of
// results/h200/model/ncu/profile_attention.csv): launches told apart by mode, R, TW and causality; the counts the
// model carries; the block loads in the model, which then takes the kernel's demand from it.
TEST(ProfileNcuCsv, RawPageAttentionFromH200) {
  const auto ls = profile::parse_ncu_csv(fixture("attention_raw.csv"));
  ASSERT_EQ(ls.size(), 3u);
  EXPECT_EQ(profile::classify_launch(ls[0].kernel), "attn_mask_causal");
  EXPECT_EQ(profile::classify_launch(ls[1].kernel), "attn_fused_r3_tw8_causal");
  EXPECT_EQ(profile::classify_launch(ls[2].kernel), "attn_none");
  const auto& m = ls[0];
  EXPECT_DOUBLE_EQ(m.get("inst_executed"), 156338176);
  EXPECT_DOUBLE_EQ(m.get("pipe_tensor_op_hmma"), 34078720);  // 256 per visited 64-key block x 32 rows
  EXPECT_DOUBLE_EQ(m.get("pipe_tensor_op_gmma"), 0);
  EXPECT_DOUBLE_EQ(m.get("pipe_alu"), 42133504);
  EXPECT_DOUBLE_EQ(m.get("pipe_fma"), 51283968);
  EXPECT_DOUBLE_EQ(m.get("dram_bytes_read"), 84576512);
  EXPECT_DOUBLE_EQ(m.get("l2_bytes"), 1283746368);
  EXPECT_DOUBLE_EQ(m.get("duration_ns"), 492864);
  EXPECT_DOUBLE_EQ(m.get("registers_per_thread"), 255);
  EXPECT_DOUBLE_EQ(ls[2].get("pipe_tensor_op_hmma"), 67108864);  // non-causal: 32 x 4096^2 / 2048 x 256 = 2^26

  // Into the committed profile's attn_mask_causal entry (at its measured workload), the model carries exactly
  // the measured counts back at that workload.
  std::ifstream f(base_profile());
  json prof = json::parse(f);
  const double work = 32.0 * 4096 * 4096;
  const json wl = {{"batch", 1}, {"q_heads", 32}, {"kv_heads", 8}, {"head_dim", 128}, {"sq", 4096}, {"causal", true}};
  const json b = profile::ncu_block(m, work, "score elements (full SQ x SQ)", wl);
  EXPECT_EQ(b["workload"]["causal"], true);
  EXPECT_EQ(b["metrics"].count("sm__inst_executed_pipe_alu.avg"), 0u);  // only the metrics asked for
  EXPECT_EQ(b["metrics"].count("sm__inst_executed_pipe_alu.sum"), 1u);
  prof["sass"]["attn_mask_causal"]["ncu"] = b;
  const model::Profile p = model::profile_from_json(prof, "test");
  Workload w = builtin_config().workload;
  w.sq = 4096;
  w.causal = true;
  std::string src;
  const model::Demand d = model::attention_demand(p, w, "mask", {}, nullptr, &src);
  EXPECT_EQ(src, "ncu");
  EXPECT_NEAR(d.at("hmma16816"), 34078720, 1e-3);
  EXPECT_NEAR(d.at("inst"), 156338176.0 - 34078720, 1e-3);
  EXPECT_NEAR(d.at("alu"), 42133504, 1e-3);
  EXPECT_NEAR(d.at("l2_bytes"), 1283746368, 1e-1);
  EXPECT_NEAR(d.at("hbm_bytes"), 84576512.0 + 19532288, 1e-2);
}

TEST(ProfileNcuCsv, GarbageGivesNothing) {
  EXPECT_TRUE(profile::parse_ncu_csv("").empty());
  EXPECT_TRUE(profile::parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM\nhello\n").empty());
}

TEST(ProfileKernels, SelectionAndKeys) {
  auto s = profile::parse_kernels("rng");
  EXPECT_TRUE(s.rng);
  EXPECT_FALSE(s.attention || s.gemm);
  EXPECT_EQ(profile::kernel_keys(s).size(), 12u);
  s = profile::parse_kernels("rng,attention,gemm");
  const auto k = profile::kernel_keys(s, 8);
  EXPECT_EQ(k.size(), 38u);  // 12 RNG, 2 kernels x 2 causalities x (none, mask, fused R 3/5/7/10), 2 GEMM
  for (const char* key : {"attn_fused_r7_tw8", "attn_fused_r3_tw8_causal", "attn_mask_causal", "attn_none", "gemm_bf16",
                          "wgmma_none", "wgmma_fused_r7_tw8", "wgmma_mask_causal", "wgmma_fused_r10_tw8_causal"})
    EXPECT_NE(std::find(k.begin(), k.end(), key), k.end()) << key;
  EXPECT_EQ(profile::kernel_keys(profile::parse_kernels("attention"), 16).at(2), "attn_fused_r3_tw16");
  // The wgmma backward: its own family, in the default selection.
  s = profile::parse_kernels("attention_bwd");
  EXPECT_TRUE(s.attention_bwd);
  EXPECT_FALSE(s.rng || s.attention || s.gemm);
  const auto kb = profile::kernel_keys(s, 8);
  EXPECT_EQ(kb.size(), 12u);  // 2 causalities x (none, mask, fused R 3/5/7/10)
  for (const char* key : {"wgmma_bwd_none", "wgmma_bwd_mask_causal", "wgmma_bwd_fused_r7_tw8", "wgmma_bwd_fused_r10_tw8_causal"})
    EXPECT_NE(std::find(kb.begin(), kb.end(), key), kb.end()) << key;
  EXPECT_TRUE(profile::Selection{}.attention_bwd);
  EXPECT_THROW(profile::parse_kernels("rng,bogus"), UsageError);
  EXPECT_THROW(profile::parse_kernels(""), UsageError);
}

// The ncu blocks go into the model's schema without disturbing the loader, and the model still predicts.
TEST(ProfileJson, FilledProfileLoadsInModel) {
  std::ifstream f(base_profile());
  json prof = json::parse(f);
  const auto ls = profile::parse_ncu_csv(fixture("rng_tile_r7_tw8.csv"));
  prof["sass"]["rng_tile_r7_tw8"]["ncu"] = profile::ncu_block(ls.at(0), 536870912.0, "elements");
  const auto g = profile::parse_ncu_csv(fixture("gemm_fp8.csv"));
  prof["kernels"]["gemm_fp8"]["ncu"] = profile::ncu_block(g.at(0), 2.0 * 8192 * 6144 * 8192, "FLOPs");
  prof["collected"] = {{"path", "ncu"}};
  const fs::path out = fs::temp_directory_path() / "dropbench_test_profile.json";
  {
    std::ofstream o(out);
    o << prof.dump(2);
  }
  const model::Profile p = model::load_profile(out.string());
  EXPECT_EQ(p.sass.count("rng_tile_r7_tw8"), 1u);
  EXPECT_EQ(p.gemm.count("fp8"), 1u);
  const auto d = profile::table_demand(prof, "rng_tile_r7_tw8");
  EXPECT_NEAR(d.at("inst"), 70615808.0 / 536870912.0, 1e-12);
  EXPECT_DOUBLE_EQ(d.at("issue_%"), 58.70);
  // Not measured: the SASS per_element counts.
  const auto s = profile::table_demand(prof, "rng_tile_r3_tw8");
  EXPECT_GT(s.at("alu"), 0);
  // The model CLI reads it.
  const auto r = dropbench_test::run_dropbench("model --profile '" + out.string() + "' --format csv");
  EXPECT_EQ(r.code, 0) << r.err;
  fs::remove(out);
}

TEST(ProfileCli, ExitCodes) {
  auto r = dropbench_test::run_dropbench("profile --kernels bogus --no-ncu");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--kernels"), std::string::npos) << r.err;
  r = dropbench_test::run_dropbench("profile --no-ncu --out /nonexistent-dir/x.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
  r = dropbench_test::run_dropbench("profile --no-ncu --base /nonexistent.json");
  EXPECT_EQ(r.code, 2);
  r = dropbench_test::run_dropbench("profile --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("SASS path"), std::string::npos);

  // --no-ncu: the SASS path. Where nvcc + cuobjdump exist it writes a loadable profile; else one line, exit 2.
  const fs::path out = fs::temp_directory_path() / "dropbench_test_profile_sass.json";
  r = dropbench_test::run_dropbench("profile --no-ncu --kernels rng --out '" + out.string() + "'");
  if (r.code == 0) {
    EXPECT_NO_THROW(model::load_profile(out.string()));
    std::ifstream f(out);
    EXPECT_EQ(json::parse(f)["collected"]["path"], "sass");
    EXPECT_NE(r.out.find("rng_tile_r7_tw8"), std::string::npos);
    fs::remove(out);
  } else {
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_NE(r.err.find("dropbench: profile: no way to collect counts"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
}

// `dropbench profile --power-from`: per-kernel power from a report with power data into the profile (no GPU),
// which the model then uses; a report without power data, or a machine without a cap, is bad input (exit 2).
TEST(ProfileCli, PowerFromReports) {
  const std::string fix = dropbench_test::source_path("tests/fixtures/model/");
  const fs::path out = fs::temp_directory_path() / ("dropbench_profile_power_" + std::to_string(::getpid()) + ".json");
  const std::string common = " --base '" + fix + "profile.json' --machine '" + fix + "machine.json' --out '" + out.string() + "'";
  auto r = dropbench_test::run_dropbench("profile --power-from '" + fix + "report_run_power.json'" + common);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* k : {"gemm_fp8", "rng_tile_r7_tw8", "attn_mask", "attn_fused_r7_tw8"})
    EXPECT_NE(r.out.find(k), std::string::npos) << k;
  std::ifstream f(out);
  const json prof = json::parse(f);
  ASSERT_TRUE(prof.contains("power"));
  EXPECT_EQ(prof["power"].size(), 4u);
  EXPECT_DOUBLE_EQ(prof["power"]["gemm_fp8"]["mean_w"].get<double>(), 300.0);
  // The model then runs with the power term.
  r = dropbench_test::run_dropbench("model --machine '" + fix + "machine.json' --profile '" + out.string() +
                                    "' --report '" + fix + "report_run_power.json'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("power term: on"), std::string::npos) << r.out;
  // A report without power data.
  r = dropbench_test::run_dropbench("profile --power-from '" + fix + "report_run.json'" + common);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no single-kernel variant with \"power\" data"), std::string::npos) << r.err;
  fs::remove(out);
}

// --into-machine: the fitted power goes into the machine file's own "power" (its other fields keep their order),
// which the model then uses with a profile that has none; without --power-from it is refused in one line.
TEST(ProfileCli, PowerIntoTheMachineFile) {
  const std::string fix = dropbench_test::source_path("tests/fixtures/model/");
  const fs::path machine = fs::temp_directory_path() / ("dropbench_profile_machine_" + std::to_string(::getpid()) + ".json");
  fs::copy_file(fix + "machine.json", machine, fs::copy_options::overwrite_existing);
  const std::string base = " --base '" + fix + "profile.json' --machine '" + machine.string() + "' --into-machine";
  auto r = dropbench_test::run_dropbench("profile --power-from '" + fix + "report_run_power.json'" + base);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::ordered_json before = nlohmann::ordered_json::parse(std::ifstream(fix + "machine.json"));
  const nlohmann::ordered_json after = nlohmann::ordered_json::parse(std::ifstream(machine));
  ASSERT_TRUE(after.contains("power"));
  EXPECT_EQ(after["power"].size(), 4u);
  EXPECT_DOUBLE_EQ(after["power"]["gemm_fp8"]["mean_w"].get<double>(), 300.0);
  // Each entry names the measurement it is fitted on.
  ASSERT_EQ(after["power"]["gemm_fp8"]["fitted_on"].size(), 1u);
  EXPECT_EQ(after["power"]["gemm_fp8"]["fitted_on"][0]["variant"], "alone:gemm");
  EXPECT_EQ(after["power"]["gemm_fp8"]["fitted_on"][0]["axes"], (nlohmann::json{{"sq", 1024}}));
  std::vector<std::string> kb, ka;
  for (const auto& [k, v] : before.items()) kb.push_back(k);
  for (const auto& [k, v] : after.items())
    if (k != "power") ka.push_back(k);
  EXPECT_EQ(ka, kb);  // every other field, in its order
  r = dropbench_test::run_dropbench("model --machine '" + machine.string() + "' --profile '" + fix +
                                    "profile.json' --report '" + fix + "report_run_power.json'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("power term: on"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 kernel(s) of machine"), std::string::npos) << r.out;
  // A second fit replaces the machine's power whole (an entry the reports do not give is gone).
  {
    nlohmann::ordered_json m = after;
    m["power"]["attn_none"] = m["power"]["gemm_fp8"];
    std::ofstream(machine) << m.dump(2);
  }
  r = dropbench_test::run_dropbench("profile --power-from '" + fix + "report_run_power.json'" + base);
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::ordered_json again = nlohmann::ordered_json::parse(std::ifstream(machine));
  EXPECT_FALSE(again["power"].contains("attn_none"));
  EXPECT_EQ(again["power"].size(), 4u);
  // Refused in one line, the machine file untouched: no --power-from; no explicit --machine (the default is a
  // committed file); an --out beside it.
  const std::string report = " --power-from '" + fix + "report_run_power.json'";
  const std::string h200 = dropbench_test::source_path("configs/machines/h200.json");
  std::stringstream h200_before;
  h200_before << std::ifstream(h200).rdbuf();
  for (const std::string& bad : {"profile --machine '" + machine.string() + "' --into-machine",
                                 "profile" + report + " --into-machine",
                                 "profile" + report + " --machine '" + machine.string() + "' --into-machine --out '" +
                                     (fs::temp_directory_path() / "dropbench_unused.json").string() + "'"}) {
    r = dropbench_test::run_dropbench(bad);
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find("--into-machine: needs --power-from and an explicit --machine"), std::string::npos) << r.err;
  }
  EXPECT_EQ(nlohmann::ordered_json::parse(std::ifstream(machine)), again);
  std::stringstream h200_after;
  h200_after << std::ifstream(h200).rdbuf();
  if (h200_after.str() != h200_before.str()) {
    std::ofstream(h200) << h200_before.str();  // put the committed file back before failing
    ADD_FAILURE() << "--into-machine without --machine rewrote " << h200;
  }
  fs::remove(machine);
}
