// The comparison of reports (src/core/compare.{hpp,cpp}) as a library: canonical axis keys, the verdict and
// regression rule, matching, geomean and unmatched rows on tests/fixtures/compare/, and the load errors.
// The command's output and exit codes are tested end to end in tests/test_compare.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "kernels/common/check.hpp"
#include "src/core/compare.hpp"

using namespace dropbench;
using namespace dropbench::compare;

namespace {

std::string fixture(const std::string& name) {
  return std::string(DROPBENCH_SOURCE_DIR) + "/tests/fixtures/compare/" + name;
}

Entry entry(double median, double rel_stdev) {
  Entry e;
  e.median = median;
  e.rel_stdev = rel_stdev;
  return e;
}

}  // namespace

TEST(CompareCore, CanonicalIgnoresKeyOrderAndIntegralFloats) {
  EXPECT_EQ(canonical(json::parse(R"({"sq": 4096, "causal": false})")),
            canonical(json::parse(R"({"causal": false, "sq": 4096.0})")));
  EXPECT_NE(canonical(json(4096.5)), canonical(json(4096)));
  EXPECT_EQ(canonical(json::parse("[1.0, 2]")), "[1,2]");
}

TEST(CompareCore, Verdicts) {
  Settings s;  // K 2, floor 1%
  // Noise 1% each: t = max(2 * sqrt(2) %, ln 1.01) = 0.0283.
  const Entry a = entry(100e-6, 0.01);
  EXPECT_EQ(judge(a, entry(102e-6, 0.01), s).verdict, "same");
  EXPECT_EQ(judge(a, entry(104e-6, 0.01), s).verdict, "slower");
  EXPECT_EQ(judge(a, entry(96e-6, 0.01), s).verdict, "faster");
  EXPECT_NEAR(judge(a, entry(104e-6, 0.01), s).threshold, 2 * std::sqrt(2e-4), 1e-12);
  EXPECT_EQ(judge(a, entry(kNaN, 0.01), s).verdict, "n/a");
  EXPECT_EQ(judge(a, entry(0.0, 0.01), s).verdict, "n/a");
  // No noise figure: the floor decides.
  EXPECT_NEAR(judge(entry(1.0, kNaN), entry(1.02, kNaN), s).threshold, std::log1p(0.01), 1e-12);
  // Regression only beyond the noise band plus PCT.
  EXPECT_FALSE(judge(a, entry(104e-6, 0.01), s).regression);  // no --fail-on-regression
  s.fail_pct = 5.0;
  EXPECT_FALSE(judge(a, entry(104e-6, 0.01), s).regression);
  EXPECT_TRUE(judge(a, entry(110e-6, 0.01), s).regression);
}

TEST(CompareCore, MatchesByCanonicalAxesAndVariant) {
  const LoadedReport base = load_report(fixture("base.json"));
  ASSERT_EQ(base.entries.size(), 4u);
  EXPECT_EQ(base.command, "attention");
  const Comparison c = compare_reports(base, load_report(fixture("faster.json")), {});
  ASSERT_EQ(c.rows.size(), 4u);  // faster.json lists its axes in another order, sq as 4096.0
  EXPECT_TRUE(c.only_a.empty());
  EXPECT_TRUE(c.only_b.empty());
  EXPECT_NEAR(c.geomean, 0.8, 1e-12);
  EXPECT_EQ(c.n_faster, 4u);

  const LoadedReport other = load_report(fixture("unmatched.json"));
  const Comparison u = compare_reports(base, other, {});
  EXPECT_EQ(u.rows.size(), 2u);    // sq 4096: none, fused (null median: n/a)
  EXPECT_EQ(u.n_na, 1u);
  EXPECT_EQ(u.only_a.size(), 2u);  // sq 8192
  EXPECT_EQ(u.only_b.size(), 2u);  // rng+mask, sq 16384
  EXPECT_NEAR(u.geomean, 1.0, 1e-12);  // the n/a row is not in the geomean
}

TEST(CompareCore, LoadErrors) {
  auto expect_error = [](const std::vector<std::string>& files, const std::string& what) {
    try {
      load_reports(files);
      ADD_FAILURE() << "no error for " << what;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error({fixture("base.json"), fixture("no_such.json")}, "no such file");
  expect_error({fixture("not_json.json")}, "not JSON");
  expect_error({fixture("not_report.json")}, "not a dropbench report");
  expect_error({fixture("wrong_version.json")}, "schema_version 2 is not supported");
  expect_error({fixture("base.json"), fixture("other_command.json")}, "differs from the baseline's");
  EXPECT_EQ(load_reports({fixture("base.json"), fixture("same.json")}).size(), 2u);
}
