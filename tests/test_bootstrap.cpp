// CPU: the bootstrap intervals (src/core/bootstrap.hpp) - medians, paired figures, independent ratios.
#include <gtest/gtest.h>

#include <cmath>
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
  s.has_ci = true;
  s.ci_low = 1.5;
  s.ci_high = 2.5;
  const Stats back = stats_from_json(to_json(s));
  EXPECT_TRUE(back.has_ci);
  EXPECT_DOUBLE_EQ(back.ci_low, 1.5);
  EXPECT_DOUBLE_EQ(back.ci_high, 2.5);
  EXPECT_FALSE(stats_from_json(nlohmann::ordered_json::parse(R"({"samples": 3, "median_ci": null})")).has_ci);
}
