// `dropbench profile` under Nsight Compute on a GPU: every kernel the model uses -- the RNG tile kernel for
// every R x threshold width, attention none / mask / fused (R 3/5/7/10) causal and not, the cuBLASLt QKV GEMM
// fp8 and bf16 -- gets a non-empty measured per-unit demand, and `dropbench model` then takes its demand from
// those counts ("ncu") for every kernel.
//
// ... and the wgmma attention backward (none / mask / fused, causal and not, at pass bwd: keys wgmma_bwd_*), whose
// counts then time the training step's backward once the profile has its kernels.attention_bwd_wgmma section.
//
// The families run as four `profile` calls chained through --base (rng, gemm, attention, attention_bwd),
// so that a run cut short still leaves the finished ones. DROPBENCH_PROFILE_GPU_KEEP=DIR keeps the profile
// (DIR/profile_ncu.json), ncu's CSV (DIR/ncu_csv/) and the command outputs (DIR/profile_*.out).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli_runner.hpp"
#include "gpu_guard.hpp"
#include "kernels/common/dispatch.cuh"
#include "model_fixtures.hpp"
#include "src/model/model.hpp"
#include "src/model/profile.hpp"
#include "test_paths.hpp"

using namespace dropbench;
namespace fs = std::filesystem;

namespace {

// Checks the measured demand of one kernel: the op classes the model carries for its family are there and > 0.
void expect_measured(const json& prof, const std::string& key) {
  SCOPED_TRACE(key);
  const bool gemm = key.rfind("gemm_", 0) == 0;
  const json& sec = gemm ? prof.at("kernels") : prof.at("sass");
  ASSERT_TRUE(sec.contains(key));
  const json& n = sec.at(key).at("ncu");
  ASSERT_TRUE(n.is_object()) << "no ncu block";
  ASSERT_TRUE(n.contains("demand"));
  const json& d = n.at("demand");
  ASSERT_FALSE(d.empty());
  EXPECT_GT(d.value("inst", 0.0), 0);
  EXPECT_GT(d.value("l2_bytes", 0.0), 0);
  EXPECT_TRUE(d.contains("hbm_bytes"));
  EXPECT_GT(n.value("work", 0.0), 0);
  ASSERT_TRUE(n.contains("workload"));
  EXPECT_EQ(n.at("workload").value("sq", 0), 4096);
  if (key.rfind("rng_", 0) == 0) {
    EXPECT_GT(d.value("alu", 0.0), 0);
    EXPECT_GT(d.value("fma", 0.0), 0);  // the IMADs of Philox
  } else if (key.rfind("attn_", 0) == 0 || key.rfind("wgmma_", 0) == 0) {
    EXPECT_GT(d.value("tensor_op_hmma", 0.0), 0);  // counts wgmma too on Hopper
    EXPECT_GT(d.value("alu", 0.0), 0);
    EXPECT_GT(d.value("fma", 0.0), 0);
    EXPECT_GT(d.value("xu", 0.0), 0);  // MUFU.EX2 of the softmax
    EXPECT_EQ(n.at("workload").value("causal", false), key.find("_causal") != std::string::npos);
  } else {
    EXPECT_GT(d.value("tensor_op_gmma", 0.0), 0);
  }
}

}  // namespace

TEST(ProfileGpu, EveryKernelUnderNcu) {
  DB_REQUIRE_GPU();
  if (std::system("command -v ncu >/dev/null 2>&1") != 0) GTEST_SKIP() << "ncu (Nsight Compute) not on PATH";
  const char* keep_env = std::getenv("DROPBENCH_PROFILE_GPU_KEEP");
  const bool keep = keep_env && *keep_env;
  const fs::path dir = keep ? fs::path(keep_env) : fs::temp_directory_path() / "dropbench_profile_gpu";
  fs::create_directories(dir);
  const fs::path out = dir / "profile_ncu.json", tmp = dir / "profile_ncu.stage.json";
  const std::string csv = keep ? " --ncu-csv '" + (dir / "ncu_csv").string() + "'" : "";

  std::string base = dropbench_test::source_path("configs/profiles/h200.json");
  for (const char* fam : {"rng", "gemm", "attention", "attention_bwd"}) {
    SCOPED_TRACE(fam);
    const auto r = dropbench_test::run_dropbench(std::string("profile --kernels ") + fam + " --base '" + base +
                                                 "' --out '" + tmp.string() + "'" + csv);
    std::cout << r.out << r.err;
    if (keep) std::ofstream(dir / (std::string("profile_") + fam + ".out")) << r.out << r.err;
    if (r.err.find("ERR_NVGPUCTRPERM") != std::string::npos) GTEST_SKIP() << "ncu cannot read the counters here";
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out.find("metric list was refused"), std::string::npos) << "no per-pipe counts for " << fam;
    for (const std::string& k : profile::kernel_keys(profile::parse_kernels(fam)))
      EXPECT_NE(r.out.find("| " + k + " "), std::string::npos) << k;
    fs::rename(tmp, out);
    base = out.string();
  }

  std::ifstream f(out);
  const json prof = json::parse(f);
  EXPECT_EQ(prof["collected"]["path"], "ncu") << prof["collected"].dump();
  const auto keys = profile::kernel_keys(profile::parse_kernels("rng,attention,attention_bwd,gemm"));
  EXPECT_EQ(keys.size(), 50u);
  for (const std::string& k : keys) {
    expect_measured(prof, k);
    EXPECT_FALSE(profile::table_demand(prof, k).empty()) << k;
  }

  // The model takes every kernel's demand from the measurements.
  const model::Profile p = model::load_profile(out.string());
  Workload w = builtin_config().workload;
  w.sq = 8192;
  for (bool causal : {false, true})
    for (int r : kPhiloxRounds) {
      w.causal = causal;
      w.rounds = r;
      std::string src;
      model::rng_demand(p, w, "tile", {}, &src);
      EXPECT_EQ(src, "ncu") << "rng R" << r;
      for (const char* mode : {"none", "mask", "fused"}) {
        model::attention_demand(p, w, mode, {}, nullptr, &src);
        EXPECT_EQ(src, "ncu") << mode << " R" << r << " causal " << causal;
      }
    }
  // The wgmma attention kernel: measured demand only, at every mode, R and causality.
  const model::Machine mach = model::load_machine(dropbench_test::source_path("configs/machines/h200.json"));
  w.attention_kernel = "wgmma";
  for (bool causal : {false, true})
    for (int r : kPhiloxRounds) {
      w.causal = causal;
      w.rounds = r;
      for (const char* mode : {"none", "mask", "fused"})
        EXPECT_EQ(model::attention_time(mach, p, w, mode, {}, {}).source, "ncu") << "wgmma " << mode << " R" << r;
    }
  w.attention_kernel = "auto";
  for (const char* dt : {"fp8", "bf16"}) {
    w.dtype = dt;
    std::string src;
    model::gemm_demand(p, w, &src);
    EXPECT_EQ(src, "ncu") << dt;
  }
  // The backward: with a kernels.attention_bwd_wgmma section (the synthetic fixture's geometry) the training step
  // times it from these launches, mask and regen, at every R and causality.
  json with_bwd = prof;
  with_bwd["kernels"]["attention_bwd_wgmma"] = dropbench_test::bwd_profile_json()["kernels"]["attention_bwd_wgmma"];
  const model::Profile pb = model::profile_from_json(with_bwd, out.string());
  Workload wb = dropbench_test::bwd_workload(8192, false, builtin_config().workload);
  for (bool causal : {false, true})
    for (int r : kPhiloxRounds) {
      wb.causal = causal;
      wb.rounds = r;
      const model::TrainPrediction tp = model::predict_train(mach, pb, wb, {});
      EXPECT_EQ(tp.attn_bwd_mask.source, "ncu(bwd)") << "R" << r << " causal " << causal;
      EXPECT_EQ(tp.attn_bwd_regen.source, "ncu(bwd)") << "R" << r << " causal " << causal;
    }
  const auto m = dropbench_test::run_dropbench("model --profile '" + out.string() + "' --set sweep.sq=[8192]");
  std::cout << m.out << m.err;
  EXPECT_EQ(m.code, 0) << m.err;
  EXPECT_NE(m.out.find("| ncu "), std::string::npos) << "demand column";
  if (!keep) fs::remove_all(dir);
}
