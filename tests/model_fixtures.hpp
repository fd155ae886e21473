// The hand-made model fixtures of tests/fixtures/model/ and the small workload the model tests use, shared by
// test_model, test_model_report and test_recommend.
#pragma once
#include <fstream>
#include <iterator>
#include <string>

#include "src/core/config.hpp"
#include "src/model/model.hpp"
#include "test_paths.hpp"

namespace dropbench_test {

inline const std::string kModelFixtures = dropbench_test::source_path("tests/fixtures/model/");

inline dropbench::model::Machine tiny_machine() { return dropbench::model::load_machine(kModelFixtures + "machine.json"); }
inline dropbench::model::Profile tiny_profile() { return dropbench::model::load_profile(kModelFixtures + "profile.json"); }

// B 1, 1 query / 1 KV head, dH 128, SQ 1024, E 1024, non-causal, fp8, 8-bit thresholds, on top of `base` (the
// other fields, e.g. rounds, as base has them).
inline dropbench::Workload tiny_workload(dropbench::Workload base = {}) {
  base.batch = 1;
  base.q_heads = 1;
  base.kv_heads = 1;
  base.head_dim = 128;
  base.sq = 1024;
  base.embed = 1024;
  base.causal = false;
  base.dtype = "fp8";
  base.threshold_bits = 8;
  base.chunk = 0;
  return base;
}

// The committed H200 profile with a synthetic wgmma attention backward in place of its own:
// kernels.attention_bwd_wgmma (the kernel's geometry; efficiencies made up) and ncu blocks for none, mask and fused R 7 TW 8, causal and not, measured (made
// up) at SQ 4096, B 1, 32 / 8 heads, dH 128: per score element of the full SQ x SQ matrix, the causal launches about
// half the work. Not a measurement: what `dropbench profile --kernels attention_bwd` writes, in shape.
inline dropbench::json bwd_profile_json() {
  std::ifstream f(dropbench_test::source_path("configs/profiles/h200.json"));
  dropbench::json j = dropbench::json::parse(f);
  // Only the synthetic backward below: the committed profile's own backward blocks (every R) are left out.
  for (auto it = j["sass"].begin(); it != j["sass"].end();)
    it = it.key().rfind("wgmma_bwd_", 0) == 0 ? j["sass"].erase(it) : std::next(it);
  auto sourced = [](double v) { return dropbench::json{{"value", v}, {"source", "synthetic (tests)"}}; };
  j["kernels"]["attention_bwd_wgmma"] = {
      {"clock", 1700},          {"head_dim", 128},   {"block_rows", 64},     {"block_keys", 128},
      {"ctas_per_sm", 1},       {"registers", 168},  {"threads", 384},       {"smem_per_cta_bytes", 200704},
      {"sass_key", {{"none", "wgmma_bwd_none"}, {"mask", "wgmma_bwd_mask"},
                    {"fused", "wgmma_bwd_fused_r{rounds}_tw{threshold_bits}"}, {"causal_suffix", "_causal"}}},
      {"issue_efficiency", sourced(0.5)}, {"mma_efficiency", sourced(0.6)}, {"cta_overhead_cycles", sourced(2000)}};
  for (const char* mode : {"none", "mask", "fused_r7_tw8"})
    for (bool causal : {false, true}) {
      const std::string m = mode, key = "wgmma_bwd_" + m + (causal ? "_causal" : "");
      const double c = causal ? 0.52 : 1.0, extra = m == "none" ? 1.0 : m == "mask" ? 1.15 : 2.2;
      dropbench::json n = {
          {"kernel", "void dropbench::attn_bwd_wg::attn_bwd_wgmma_kernel<128, (dropbench::DropoutMode)0>(...)"},
          {"workload", {{"batch", 1}, {"q_heads", 32}, {"kv_heads", 8}, {"head_dim", 128}, {"sq", 4096},
                        {"causal", causal}, {"rounds", 7}, {"threshold_bits", 8}, {"attention_kernel", "wgmma"}}},
          {"work", 32.0 * 4096 * 4096},
          {"work_unit", "score elements (full SQ x SQ)"},
          {"duration_us", 1500 * c * extra},
          {"sm_clock_mhz", 1700},
          {"demand", {{"inst", 0.6 * c * extra}, {"alu", 0.2 * c * extra}, {"fma", 0.2 * c * extra},
                      {"xu", 0.05 * c * extra}, {"lsu", 0.01 * c}, {"tensor_op_gmma", 0.02 * c},
                      {"tensor_op_hmma", 0.02 * c}, {"hbm_bytes", 0.3}, {"l2_bytes", 6 * c}}}};
      j["sass"][key] = {{"elements_per_iteration", 1}, {"per_iteration", dropbench::json::object()}, {"ncu", n}};
    }
  return j;
}

// A training-step workload of the wgmma kernels at Llama-3 70B's attention shape (B 1, 64 / 8 heads, dH 128).
inline dropbench::Workload bwd_workload(int64_t sq, bool causal, dropbench::Workload base = {}) {
  dropbench::Workload w = tiny_workload(base);
  w.q_heads = 64;
  w.kv_heads = 8;
  w.embed = 8192;
  w.sq = sq;
  w.causal = causal;
  w.rounds = 7;
  w.attention_kernel = "wgmma";
  return w;
}

}  // namespace dropbench_test
