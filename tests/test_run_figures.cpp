// run's figures that need no GPU: the sustained (power-pass) pipeline times beside the sampled medians
// (run_figures.hpp, sustained_figures).
#include <gtest/gtest.h>

#include "src/block/run_figures.hpp"

using namespace dropbench;

namespace {

VariantResult pipeline(const std::string& name, double sampled, double sustained) {
  VariantResult v;
  v.name = name;
  v.stats.median = sampled;
  if (sustained > 0) v.power = {{"mean_w", 700.0}, {"energy_mj_per_iter", 1.0}, {"time_per_iter_s", sustained}};
  return v;
}

}  // namespace

TEST(RunFigures, SustainedTimesAndTheirWinner) {
  // Sampled, fused wins by 5 %; back to back (power-capped), baseline is the faster one.
  const std::vector<VariantResult> vs = {pipeline("baseline", 3.50e-3, 3.60e-3), pipeline("fused", 3.33e-3, 3.70e-3),
                                         pipeline("overlap", 3.49e-3, 3.65e-3), pipeline("alone:gemm", 0.9e-3, 1.0e-3)};
  const std::map<std::string, double> medians = {{"baseline", 3.50e-3}, {"fused", 3.33e-3}, {"overlap", 3.49e-3}};
  json d = {{"winner", "fused"}};
  sustained_figures(vs, medians, d);
  ASSERT_TRUE(d.contains("t_sustained"));
  EXPECT_EQ(d["t_sustained"].size(), 3u);  // pipelines only: alone:gemm is not one
  EXPECT_DOUBLE_EQ(d["t_sustained"]["fused"].get<double>(), 3.70e-3);
  EXPECT_EQ(d["sustained_winner"], "baseline");
  EXPECT_EQ(d["sustained_winner_differs"], true);
  EXPECT_DOUBLE_EQ(d["speedup_fused_vs_baseline_sustained"].get<double>(), 3.60 / 3.70);
  EXPECT_DOUBLE_EQ(d["speedup_overlap_vs_baseline_sustained"].get<double>(), 3.60 / 3.65);
  EXPECT_DOUBLE_EQ(d["speedup_overlap_vs_fused_sustained"].get<double>(), 3.70 / 3.65);
  EXPECT_FALSE(d.contains("speedup_chunked_vs_baseline_sustained"));  // no chunked pipeline
}

TEST(RunFigures, NoPowerPassNoSustainedFigures) {
  const std::vector<VariantResult> vs = {pipeline("baseline", 3.5e-3, 0), pipeline("fused", 3.3e-3, 0)};
  json d = {{"winner", "fused"}};
  sustained_figures(vs, {{"baseline", 3.5e-3}, {"fused", 3.3e-3}}, d);
  EXPECT_FALSE(d.contains("t_sustained"));
  EXPECT_FALSE(d.contains("sustained_winner"));
  // One pipeline with a pass: its time, itself the winner, no speedup without a partner.
  const std::vector<VariantResult> one = {pipeline("baseline", 3.5e-3, 3.6e-3), pipeline("fused", 3.3e-3, 0)};
  sustained_figures(one, {{"baseline", 3.5e-3}, {"fused", 3.3e-3}}, d);
  EXPECT_EQ(d["sustained_winner"], "baseline");
  EXPECT_FALSE(d.contains("speedup_fused_vs_baseline_sustained"));
}
