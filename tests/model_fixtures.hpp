// The hand-made model fixtures of tests/fixtures/model/ and the small workload the model tests use, shared by
// test_model, test_model_report and test_recommend.
#pragma once
#include <string>

#include "src/core/config.hpp"
#include "src/model/model.hpp"

namespace dropbench_test {

inline const std::string kModelFixtures = std::string(DROPBENCH_SOURCE_DIR) + "/tests/fixtures/model/";

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

}  // namespace dropbench_test
