// CPU: the bootstrap intervals (src/core/bootstrap.hpp) - medians, paired figures, independent ratios.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "src/core/bootstrap.hpp"
#include "src/core/stats.hpp"

using namespace dropbench;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
double ratio(const std::vector<double>& m) { return m[0] / m[1]; }

SampleSeries normal_series(int group, size_t n, double mu, double sd, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d(mu, sd);
  SampleSeries s;
  s.group = group;
  for (size_t i = 0; i < n; ++i) s.x.push_back(d(g));
  return s;
}

}  // namespace

TEST(Bootstrap, FiniteMedianSkipsDiscardedSamples) {
  EXPECT_DOUBLE_EQ(finite_median({3, kNaN, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(finite_median({4, 1, kNaN, 2, 3}), 2.5);
  EXPECT_TRUE(std::isnan(finite_median({kNaN, kNaN})));
}

TEST(Bootstrap, MedianIntervalContainsTheMedianAndNarrowsWithSamples) {
  const SampleSeries small = normal_series(0, 50, 1.0, 0.05, 1);
  const SampleSeries large = normal_series(0, 5000, 1.0, 0.05, 2);
  const Interval a = bootstrap_median(small), b = bootstrap_median(large);
  ASSERT_TRUE(a.valid && b.valid);
  EXPECT_LE(a.low, a.value);
  EXPECT_GE(a.high, a.value);
  // Width ~ 1/sqrt(n): 100x the samples, ~10x narrower.
  EXPECT_LT(b.high - b.low, 0.25 * (a.high - a.low));
  // Fixed seed: the same samples give the same interval.
  const Interval again = bootstrap_median(small);
  EXPECT_EQ(again.low, a.low);
  EXPECT_EQ(again.high, a.high);
}

TEST(Bootstrap, TooFewSamplesHaveNoInterval) {
  SampleSeries s{0, {1.0, kNaN, 2.0, kNaN}};
  EXPECT_FALSE(bootstrap_median(s).valid);
  EXPECT_TRUE(bootstrap_median(s).to_json().is_null());
}

// 95 % intervals from 200 independent experiments cover the true median about 95 % of the time.
TEST(Bootstrap, MedianIntervalCoverage) {
  int covered = 0;
  for (uint32_t e = 0; e < 200; ++e) {
    const Interval iv = bootstrap_median(normal_series(0, 101, 5.0, 1.0, 1000 + e), 400);
    covered += iv.low <= 5.0 && 5.0 <= iv.high;
  }
  EXPECT_GE(covered, 176);  // 88 %: far below would mean a broken interval (binomial sd ~ 3 %)
  EXPECT_LE(covered, 200);
}

// The point of interleaving: two variants that share a drift (round r of both ran under the same clocks). The
// ratio's interval is tight when the rounds are resampled together, wide when the drift is not paired out.
TEST(Bootstrap, PairedRoundsCancelSharedDrift) {
  std::mt19937 g(7);
  std::uniform_real_distribution<double> drift(0.9, 1.1);  // +-10 % from round to round, shared
  std::normal_distribution<double> noise(0, 0.0005);
  SampleSeries a{0, {}}, b{0, {}};
  for (int r = 0; r < 400; ++r) {
    const double d = drift(g);
    a.x.push_back(1.0 * d * (1 + noise(g)));
    b.x.push_back(2.0 * d * (1 + noise(g)));
  }
  const Interval paired = bootstrap_figure({&b, &a}, ratio);
  SampleSeries b_unpaired = b;
  b_unpaired.group = 1;  // same numbers, resampled independently
  const Interval unpaired = bootstrap_figure({&b_unpaired, &a}, ratio);
  ASSERT_TRUE(paired.valid && unpaired.valid);
  EXPECT_NEAR(paired.value, 2.0, 0.01);
  EXPECT_LE(paired.low, 2.0);
  EXPECT_GE(paired.high, 2.0 * 0.999);
  EXPECT_LT(paired.high - paired.low, 0.005);
  EXPECT_GT(unpaired.high - unpaired.low, 5 * (paired.high - paired.low));
}

TEST(Bootstrap, GroupOfDifferentLengthsIsRefused) {
  SampleSeries a{0, {1, 2, 3, 4}}, b{0, {1, 2, 3}};
  EXPECT_FALSE(bootstrap_figure({&a, &b}, ratio).valid);
  b.group = 1;
  EXPECT_TRUE(bootstrap_figure({&a, &b}, ratio).valid);
}

TEST(Bootstrap, UndefinedFigureHasNoInterval) {
  SampleSeries a{0, {1, 1, 1, 1, 1}}, b{0, {0, 0, 0, 0, 0}};
  EXPECT_FALSE(bootstrap_figure({&a, &b}, ratio).valid);  // 1 / 0 everywhere
}

TEST(Bootstrap, SampleBookFindsByNameAndMissingIsInvalid) {
  SampleBook book;
  book.add("x", normal_series(3, 100, 2.0, 0.01, 9));
  book.add("y", normal_series(3, 100, 1.0, 0.01, 10));
  const Interval iv = book.figure({"x", "y"}, ratio);
  ASSERT_TRUE(iv.valid);
  EXPECT_NEAR(iv.value, 2.0, 0.01);
  EXPECT_FALSE(book.figure({"x", "nope"}, ratio).valid);
  EXPECT_EQ(book.find("nope"), nullptr);
}

TEST(Bootstrap, RatioOfIndependentAddsRelativeWidthsInQuadrature) {
  // 2 +- 3 % over 1 +- 4 %: ratio 2 +- 5 %.
  const Interval iv = ratio_of_independent(2.0, 1.94, 2.06, 1.0, 0.96, 1.04);
  ASSERT_TRUE(iv.valid);
  EXPECT_DOUBLE_EQ(iv.value, 2.0);
  EXPECT_NEAR(iv.low, 1.9, 1e-12);
  EXPECT_NEAR(iv.high, 2.1, 1e-12);
  EXPECT_FALSE(ratio_of_independent(1, 1, 1, 0, 0, 0).valid);
  EXPECT_FALSE(ratio_of_independent(1, 2, 1, 1, 1, 1).valid);  // low > high
}

TEST(Bootstrap, StatsCarryTheIntervalThroughJson) {
  Stats s = compute_stats({1, 2, 3});
  EXPECT_FALSE(to_json(s).contains("median_ci"));
  s.median_ci.valid = true;
  s.median_ci.low = 1.5;
  s.median_ci.high = 2.5;
  const Stats back = stats_from_json(to_json(s));
  EXPECT_TRUE(back.median_ci.valid);
  EXPECT_DOUBLE_EQ(back.median_ci.low, 1.5);
  EXPECT_DOUBLE_EQ(back.median_ci.high, 2.5);
  EXPECT_FALSE(stats_from_json(nlohmann::ordered_json::parse(R"({"samples": 3, "median_ci": null})")).median_ci.valid);
}

// ---------------------------------------------------------------------------------------------------
// Serial dependence (block bootstrap) and repeats.

namespace {

// x_t = mu + e_t, e_t = phi e_{t-1} + sd sqrt(1 - phi^2) z_t: stationary, marginal N(mu, sd^2), so the true median
// is mu; phi = 0 is iid.
std::vector<double> ar1(size_t n, double mu, double sd, double phi, std::mt19937& g) {
  std::normal_distribution<double> z(0, 1);
  std::vector<double> x(n);
  double e = sd * z(g);
  for (size_t t = 0; t < n; ++t) {
    if (t) e = phi * e + sd * std::sqrt(1 - phi * phi) * z(g);
    x[t] = mu + e;
  }
  return x;
}

bool covers(const Interval& iv, double v) { return iv.valid && iv.low <= v && v <= iv.high; }

}  // namespace

TEST(BlockBootstrap, BlockLengthFollowsTheSeriesCorrelation) {
  std::mt19937 g(11);
  const SampleSeries iid{0, ar1(1000, 1.0, 0.02, 0.0, g)};
  const SampleSeries slow{0, ar1(1000, 1.0, 0.02, 0.9, g)};
  EXPECT_LE(block_length(iid), 3);
  EXPECT_GE(block_length(slow), 15);
  EXPECT_LE(block_length(slow), 95);  // the rule's cap: 3 sqrt(n)
  // A few discarded rounds change nothing essential; too few rounds: no blocks.
  SampleSeries holes = slow;
  for (size_t t = 0; t < holes.x.size(); t += 50) holes.x[t] = kNaN;
  EXPECT_GE(block_length(holes), 15);
  EXPECT_EQ(block_length(SampleSeries{0, {1, 2, 3, 4}}), 1);
  // A constant series (every round the same time): no correlation to estimate.
  EXPECT_EQ(block_length(SampleSeries{0, std::vector<double>(100, 1.0)}), 1);
}

TEST(BlockBootstrap, IidRoundsGiveAboutTheIidInterval) {
  std::mt19937 g(12);
  const SampleSeries a{0, ar1(1500, 1.0, 0.02, 0.0, g)}, b{0, ar1(1500, 2.0, 0.02, 0.0, g)};
  const Interval rule = bootstrap_median(a), iid = bootstrap_median(a, kBootstrapReplicates, 1);
  ASSERT_TRUE(rule.valid && iid.valid);
  EXPECT_NEAR((rule.high - rule.low) / (iid.high - iid.low), 1.0, 0.2);
  const Interval rr = bootstrap_figure({&b, &a}, ratio), ri = bootstrap_figure({&b, &a}, ratio, 1000, 7, 1);
  ASSERT_TRUE(rr.valid && ri.valid);
  EXPECT_NEAR((rr.high - rr.low) / (ri.high - ri.low), 1.0, 0.2);
  EXPECT_EQ(ri.block, 1);
  EXPECT_FALSE(rule.has_repeats());
  EXPECT_EQ(rule.low, rule.within_low);
}

// The coverage test: 200 strongly autocorrelated series (phi = 0.9, 1000 rounds). The iid bootstrap's 95 % interval
// is ~3x too narrow and misses the true median most of the time; the block bootstrap's covers it at about the
// nominal rate. Fixed seeds: deterministic, and a broken block rule (or blocks not used) fails it.
TEST(BlockBootstrap, CoversAnAr1SeriesWhereTheIidBootstrapDoesNot) {
  std::mt19937 g(2026);
  int cover_block = 0, cover_iid = 0, cover_ratio = 0;
  const int kSeries = 200;
  for (int e = 0; e < kSeries; ++e) {
    const SampleSeries s{0, ar1(1000, 1.0, 0.02, 0.9, g)};
    cover_block += covers(bootstrap_median(s, 400), 1.0);
    cover_iid += covers(bootstrap_median(s, 400, 1), 1.0);
    // A paired ratio whose variants share the drift partly: the common part cancels, the rest is AR(1) too.
    const std::vector<double> common = ar1(1000, 0.0, 0.02, 0.95, g);
    SampleSeries num{1, ar1(1000, 2.0, 0.01, 0.9, g)}, den{1, ar1(1000, 1.0, 0.005, 0.9, g)};
    for (size_t t = 0; t < 1000; ++t) {
      num.x[t] *= 1 + common[t];
      den.x[t] *= 1 + common[t];
    }
    cover_ratio += covers(bootstrap_figure({&num, &den}, ratio, 400), 2.0);
  }
  std::printf("coverage of 95 %% intervals over %d AR(1) series: block %d, iid %d, paired ratio (block) %d\n", kSeries,
              cover_block, cover_iid, cover_ratio);
  EXPECT_GE(cover_block, 170);  // >= 85 %
  EXPECT_LE(cover_iid, 120);    // <= 60 %: the failure the block bootstrap fixes
  EXPECT_GE(cover_ratio, 170);
}

// Repeats: iid rounds inside each, but each repeat starts in its own state (an offset drawn per repeat). The
// within-run interval covers the mean over states rarely; the combined one (hull with the t-interval over the
// repeats) about as often as promised.
TEST(Repeats, CombinedIntervalCoversRepeatLevelEffects) {
  std::mt19937 g(99);
  std::normal_distribution<double> offset(0, 0.005);
  int cover_within = 0, cover_combined = 0;
  const int kExperiments = 200;
  for (int e = 0; e < kExperiments; ++e) {
    SampleSeries s{0, {}};
    for (int k = 0; k < 3; ++k) {
      const double b = offset(g);
      for (double x : ar1(300, 1.0 + b, 0.02, 0.0, g)) s.x.push_back(x);
      s.repeat_rounds.push_back(300);
    }
    const Interval iv = bootstrap_median(s, 300);
    ASSERT_TRUE(iv.has_repeats());
    ASSERT_EQ(iv.repeat_values.size(), 3u);
    cover_within += iv.within_low <= 1.0 && 1.0 <= iv.within_high;
    cover_combined += covers(iv, 1.0);
    EXPECT_LE(iv.low, std::min(iv.within_low, iv.t_low));
    EXPECT_GE(iv.high, std::max(iv.within_high, iv.t_high));
  }
  std::printf("coverage over %d runs of 3 repeats: within-run %d, combined %d\n", kExperiments, cover_within,
              cover_combined);
  EXPECT_LE(cover_within, 130);     // <= 65 %
  EXPECT_GE(cover_combined, 180);   // >= 90 %
}

TEST(Repeats, PerRepeatFiguresArePairedAndWritten) {
  // Two variants, two repeats; variant b is exactly 2x a in every round: the ratio is 2 in every repeat.
  SampleSeries a{0, {1, 1.1, 0.9, 1, 1.2, 3, 3.1, 2.9, 3, 3.2}, {5, 5}}, b = a;
  for (double& x : b.x) x *= 2;
  const Interval r = bootstrap_ratio(b, a);
  ASSERT_TRUE(r.has_repeats());
  EXPECT_DOUBLE_EQ(r.repeat_values[0], 2.0);
  EXPECT_DOUBLE_EQ(r.repeat_values[1], 2.0);
  EXPECT_DOUBLE_EQ(r.repeat_sd, 0.0);
  const Interval m = bootstrap_median(a);
  ASSERT_TRUE(m.has_repeats());
  EXPECT_DOUBLE_EQ(m.repeat_values[0], 1.0);
  EXPECT_DOUBLE_EQ(m.repeat_values[1], 3.0);
  EXPECT_NEAR(m.repeat_sd, std::sqrt(2.0), 1e-12);
  // t(1) = 12.706: the two repeats disagree, so the combined interval is wide.
  EXPECT_NEAR(m.t_high - m.value, 12.706 * std::sqrt(2.0) / std::sqrt(2.0), 1e-9);
  EXPECT_LE(m.low, m.value - 12.7);
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  m.write(j, "x");
  EXPECT_TRUE(j["x_ci"].is_array());
  EXPECT_TRUE(j["x_ci_within"].is_array());
  EXPECT_EQ(j["x_repeats"]["values"].size(), 2u);
  const Interval back = interval_from_json(j, "x");
  EXPECT_TRUE(back.has_repeats());
  EXPECT_DOUBLE_EQ(back.low, m.low);
  EXPECT_DOUBLE_EQ(back.within_high, m.within_high);
  EXPECT_DOUBLE_EQ(back.t_low, m.t_low);
  // One repeat: no extra keys (the report's shape without measure.repeats).
  nlohmann::ordered_json one = nlohmann::ordered_json::object();
  bootstrap_median(SampleSeries{0, {1, 2, 3, 4, 5}}).write(one, "x");
  EXPECT_EQ(one.size(), 1u);
  // Repeats laid out differently in one group cannot be paired.
  SampleSeries c = a;
  c.repeat_rounds = {4, 6};
  EXPECT_FALSE(bootstrap_ratio(c, a).valid);
  SampleSeries bad = a;
  bad.repeat_rounds = {5, 4};  // does not add up to the rounds
  EXPECT_FALSE(bootstrap_median(bad).valid);
}

TEST(Repeats, StatsCarryRepeatsAndSeriesThroughJson) {
  Stats s = compute_stats({1, 2, 3});
  s.median_ci.valid = true;
  s.median_ci.low = 1;
  s.median_ci.high = 3;
  s.median_ci.block = 4;
  nlohmann::ordered_json plain = to_json(s);
  EXPECT_EQ(plain["ci_block"], 4);
  EXPECT_FALSE(plain.contains("median_repeats"));
  EXPECT_FALSE(plain.contains("series"));
  s.median_ci.within_low = 1.5;
  s.median_ci.within_high = 2.5;
  s.median_ci.repeat_values = {1.9, kNaN, 2.1};
  s.median_ci.repeat_sd = 0.14;
  s.median_ci.t_low = 1.6;
  s.median_ci.t_high = 2.4;
  s.series_s = {0.1, kNaN, 0.3};
  s.series_clock_mhz = {1900, 1500, 1890};
  s.series_repeat_rounds = {1, 2};
  const nlohmann::ordered_json j = to_json(s);
  EXPECT_EQ(j["median_ci_within"], nlohmann::ordered_json::parse("[1.5, 2.5]"));
  EXPECT_TRUE(j["median_repeats"]["values"][1].is_null());
  EXPECT_TRUE(j["series"]["seconds"][1].is_null());
  EXPECT_EQ(j["series"]["repeat_rounds"], nlohmann::ordered_json::parse("[1, 2]"));
  const Stats back = stats_from_json(nlohmann::ordered_json::parse(j.dump()));
  EXPECT_EQ(back.median_ci.block, 4);
  ASSERT_EQ(back.median_ci.repeat_values.size(), 3u);
  EXPECT_TRUE(std::isnan(back.median_ci.repeat_values[1]));
  EXPECT_DOUBLE_EQ(back.median_ci.within_high, 2.5);
  EXPECT_DOUBLE_EQ(back.median_ci.t_low, 1.6);
  ASSERT_EQ(back.series_s.size(), 3u);
  EXPECT_TRUE(std::isnan(back.series_s[1]));
  EXPECT_EQ(back.series_clock_mhz[1], 1500);
  EXPECT_EQ(back.series_repeat_rounds, (std::vector<size_t>{1, 2}));
}

TEST(Repeats, TQuantiles) {
  EXPECT_DOUBLE_EQ(t_quantile_975(1), 12.706);
  EXPECT_DOUBLE_EQ(t_quantile_975(2), 4.303);
  // Above the table: the exact quantiles (31: 2.039513, 60: 2.000298, 1000: 1.962339), as dbstats.py gives them.
  EXPECT_NEAR(t_quantile_975(31), 2.039513, 2e-5);
  EXPECT_NEAR(t_quantile_975(60), 2.000298, 2e-5);
  EXPECT_NEAR(t_quantile_975(1000), 1.962339, 2e-5);
}
