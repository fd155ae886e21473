// run's figures that need no GPU: the sustained (power-pass) pipeline times beside the sampled medians
// (run_figures.hpp, sustained_figures), and the overlap mechanism chosen from one group's paired samples
// (mechanisms.hpp, stable_fastest / choose_overlap_rng).
#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "src/block/mechanisms.hpp"
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

TEST(RunFigures, SummaryKeepsForwardAndTrainingWinnersApart) {
  Report r("run", json::object(), json::object());
  PointResult fwd;
  fwd.index = 0;
  fwd.axes = {{"pass", "fwd"}};
  fwd.derived = {{"winner", "overlap"}, {"energy_winner", "fused"}};
  r.add_point(fwd);
  PointResult train;
  train.index = 1;
  train.axes = {{"pass", "train"}};
  train.derived["train"]["measured"] = {{"winner", "stored"}, {"sustained_winner", "regen-overlap"}};
  r.add_point(train);
  PointResult dry;  // a dry run's training point: planned, nothing measured
  dry.index = 2;
  dry.derived["train"] = {{"strategies", json::object()}};
  r.add_point(dry);
  const json s = run_summary(r, RunTotals{});
  ASSERT_EQ(s["winners"].size(), 1u);
  EXPECT_EQ(s["winners"][0]["winner"], "overlap");
  EXPECT_EQ(s["winners"][0]["energy_winner"], "fused");
  ASSERT_EQ(s["train_winners"].size(), 1u);
  EXPECT_EQ(s["train_winners"][0]["winner"], "stored");
  EXPECT_EQ(s["train_winners"][0]["sustained_winner"], "regen-overlap");
  EXPECT_EQ(s["train_winners"][0]["axes"]["pass"], "train");
}

namespace {

// One group's mechanisms (rounds paired): each round's time = base x (1 + the round's shared drift) x (1 + own
// noise). The drift (2 %) is far larger than the noise (0.1 %): only a paired comparison resolves a 0.5 % lead.
struct MechGroup {
  std::vector<Mech> mechs;
  SampleBook book;
  // noisy: a mechanism whose own per-round noise is 5 % (its interval against plain is wide).
  void build(const std::vector<std::tuple<std::string, double, bool>>& spec, uint64_t seed, size_t rounds = 200,
             const std::string& noisy = "") {
    std::mt19937_64 gen(seed);
    std::normal_distribution<double> drift(0, 0.02), noise(0, 0.001), loud(0, 0.05);
    std::vector<double> d(rounds);
    for (double& x : d) x = drift(gen);
    for (const auto& [name, base, eligible] : spec) {
      SampleSeries s;
      s.group = 1;
      for (size_t r = 0; r < rounds; ++r) s.x.push_back(base * (1 + d[r]) * (1 + (name == noisy ? loud : noise)(gen)));
      Mech m;
      m.rc.name = name;
      m.vname = "mech:" + name;
      m.eligible = eligible;
      m.over.total.median = finite_median(s.x);
      book.add(m.vname, std::move(s));
      mechs.push_back(std::move(m));
    }
  }
};

}  // namespace

TEST(OverlapChoice, NearTieKeepsPlain) {
  // priority 0.01 % ahead of plain (a measured 70B point: 1375.9 vs 1375.2 us, either way round by run):
  // inside the paired interval, so plain, on every seed.
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    MechGroup g;
    g.build({{"plain", 1.3752e-3, true}, {"priority", 1.3750e-3, true}, {"coresident-w4", 1.6e-3, true}}, seed);
    const Mech* m = stable_fastest(g.mechs, g.book, true).pick;
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->rc.name, "plain") << "seed " << seed;
    const OverlapChoice c = choose_overlap_rng(RunOptions{}, g.mechs, g.book);
    EXPECT_EQ(c.rc.name, "plain");
    if (c.vs_plain.valid) {  // the fastest's ratio, straddling 1
      EXPECT_LE(c.vs_plain.low, 1.0);
      EXPECT_GE(c.vs_plain.high, 1.0);
      EXPECT_NE(c.why.find("no eligible mechanism faster beyond its paired interval"), std::string::npos) << c.why;
    }
  }
}

TEST(OverlapChoice, ClearLeadIsTakenEvenUnderDrift) {
  // priority 0.5 % faster: 5 x the per-round noise, a quarter of the shared drift; paired, it is resolved.
  MechGroup g;
  g.build({{"plain", 1.40e-3, true}, {"priority", 1.393e-3, true}, {"coresident-w2", 1.391e-3, false}}, 7);
  const OverlapChoice c = choose_overlap_rng(RunOptions{}, g.mechs, g.book);
  EXPECT_EQ(c.rc.name, "priority");  // coresident-w2 is faster still but cannot serve the pipelines
  ASSERT_TRUE(c.vs_plain.valid);
  EXPECT_LT(c.vs_plain.high, 1.0);
  EXPECT_NEAR(c.vs_plain.value, 1.393 / 1.40, 1e-3);
  EXPECT_NE(c.why.find("priority / plain"), std::string::npos) << c.why;
  // For the candidate scan's partner every fixed mechanism counts: coresident-w2 leads plain clearly too.
  EXPECT_EQ(stable_fastest(g.mechs, g.book, false).pick->rc.name, "coresident-w2");
}

TEST(OverlapChoice, WithoutAMeasuredPlainTheFastestEligible) {
  MechGroup g;
  g.build({{"plain", 1.40e-3, false}, {"priority", 1.45e-3, true}, {"coresident-w4", 1.42e-3, true}}, 3);
  const OverlapChoice c = choose_overlap_rng(RunOptions{}, g.mechs, g.book);
  EXPECT_EQ(c.rc.name, "coresident-w4");
  EXPECT_FALSE(c.vs_plain.valid);
  EXPECT_NE(c.why.find("plain not eligible"), std::string::npos) << c.why;
  // Nothing measured: no choice, the default stays.
  for (Mech& m : g.mechs) m.over.total.median = 0;
  EXPECT_EQ(stable_fastest(g.mechs, g.book, true).pick, nullptr);
  EXPECT_EQ(choose_overlap_rng(RunOptions{}, g.mechs, g.book).rc.name, "plain");
  // --overlap-rng wins over everything.
  RunOptions o;
  o.overlap_rng = "priority";
  EXPECT_EQ(choose_overlap_rng(o, g.mechs, g.book).rc.name, "priority");
}

TEST(OverlapChoice, ChallengersReplaceTheHeldOneOnlyBeyondTheirInterval) {
  // priority and coresident-w4 both beat plain clearly (1 %) and tie with each other (0.01 %): priority, the
  // first challenger, is kept on every seed, whichever of the two the point estimate puts first.
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    MechGroup g;
    g.build({{"plain", 1.40e-3, true}, {"priority", 1.3860e-3, true}, {"coresident-w4", 1.3859e-3, true}}, seed);
    const OverlapChoice c = choose_overlap_rng(RunOptions{}, g.mechs, g.book);
    EXPECT_EQ(c.rc.name, "priority") << "seed " << seed;
    ASSERT_TRUE(c.vs_plain.valid);
    EXPECT_LT(c.vs_plain.high, 1.0);
  }
  // The point-estimate fastest (priority, 1 % ahead but with 5 % noise of its own: not resolved) loses to a
  // slower challenger whose 0.7 % lead is resolved.
  MechGroup g;
  g.build({{"plain", 1.40e-3, true}, {"priority", 1.386e-3, true}, {"coresident-w4", 1.39e-3, true}}, 11, 200,
          "priority");
  ASSERT_GE(g.book.ratio("mech:priority", "mech:plain").high, 1.0);  // the premise: priority is not resolved
  const Mech* fastest = &g.mechs[0];
  for (const Mech& m : g.mechs)
    if (m.over.total.median < fastest->over.total.median) fastest = &m;
  const OverlapChoice c = choose_overlap_rng(RunOptions{}, g.mechs, g.book);
  EXPECT_EQ(c.rc.name, "coresident-w4");
  EXPECT_NE(c.why.find("coresident-w4 / plain"), std::string::npos) << c.why;
  if (fastest->rc.name == "priority") EXPECT_NE(c.why.find("fastest by point estimate: priority"), std::string::npos) << c.why;
}

TEST(OverlapChoice, PlainWithoutSamplesInTheBookIsKept) {
  // A plain median but no series to pair with (too few samples): no interval, plain stays.
  MechGroup g;
  g.build({{"plain", 1.40e-3, true}, {"priority", 1.30e-3, true}}, 5);
  SampleBook only_priority;
  only_priority.add("mech:priority", *g.book.find("mech:priority"));
  const OverlapChoice c = choose_overlap_rng(RunOptions{}, g.mechs, only_priority);
  EXPECT_EQ(c.rc.name, "plain");
  EXPECT_FALSE(c.vs_plain.valid);
  EXPECT_NE(c.why.find("priority, no interval"), std::string::npos) << c.why;
}
