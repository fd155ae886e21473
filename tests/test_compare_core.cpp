// The comparison of reports (src/core/compare.{hpp,cpp}) as a library: canonical axis keys, the verdict and
// regression rule, matching, geomean and unmatched rows on tests/fixtures/compare/, and the load errors.
// The command's output and exit codes are tested end to end in tests/test_compare.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "kernels/common/check.hpp"
#include "src/core/compare.hpp"
#include "test_paths.hpp"

using namespace dropbench;
using namespace dropbench::compare;

namespace {

std::string fixture(const std::string& name) {
  return dropbench_test::source_path("tests/fixtures/compare/") + name;
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

// A report as load_report fills in what makes it comparable.
LoadedReport comparable(json workload, json measure, json device, std::vector<std::string> swept) {
  LoadedReport r;
  r.workload = std::move(workload);
  r.measure = std::move(measure);
  r.device = std::move(device);
  r.swept = std::move(swept);
  return r;
}

TEST(CompareCore, DifferencesNameWorkloadDeviceAndMeasureFields) {
  const json w = {{"embed", 4096}, {"q_heads", 32}, {"sq", 4096}, {"causal", false}};
  const json m = {{"min_time", 0.2}, {"cold", false}};
  const LoadedReport base = comparable(w, m, "NVIDIA H200", {"sq"});
  json w_sq = w, w_70b = w, m_fast = m;
  w_sq["sq"] = 8192.0;  // swept by the baseline: not a difference
  w_70b["embed"] = 8192;
  w_70b["q_heads"] = 64;
  m_fast["min_time"] = 0.03;
  EXPECT_TRUE(differences(base, comparable(w_sq, m, "NVIDIA H200", {})).empty());
  EXPECT_EQ(differences(base, comparable(w_70b, m, "NVIDIA H200", {"sq"})),
            (std::vector<std::string>{"workload.embed 4096 vs 8192", "workload.q_heads 32 vs 64"}));
  EXPECT_EQ(differences(base, comparable(w, m, "NVIDIA H100 80GB HBM3", {"sq"})),
            (std::vector<std::string>{"device NVIDIA H200 vs NVIDIA H100 80GB HBM3"}));
  EXPECT_EQ(differences(base, comparable(w, m_fast, "NVIDIA H200", {"sq"})),
            (std::vector<std::string>{"measure.min_time 0.2 vs 0.03"}));
  // A field only one side has, and a section only one side has.
  json w_more = w;
  w_more["layout"] = "bits";
  EXPECT_EQ(differences(base, comparable(w_more, m, "NVIDIA H200", {})),
            (std::vector<std::string>{"workload.layout (none) vs bits"}));
  EXPECT_EQ(differences(base, comparable(nullptr, m, "NVIDIA H200", {})),
            (std::vector<std::string>{"workload (present) vs (none)"}));
  // Reports that record none of it (hand-written) compare as before; load_report reads what a report holds.
  const LoadedReport f = load_report(fixture("base.json"));
  EXPECT_TRUE(differences(f, load_report(fixture("same.json"))).empty());
  EXPECT_EQ(f.git_sha, "fixture");
  EXPECT_TRUE(f.workload.is_null());
  EXPECT_EQ(f.swept, (std::vector<std::string>{"sq", "causal"}));  // from the points' axes
}

TEST(CompareCore, NegativeMedianOrStdevIsALoadError) {
  const std::string path = testing::TempDir() + "dropbench_compare_negative.json";
  for (const char* field : {"median", "rel_stdev"}) {
    std::ifstream in(fixture("base.json"));
    json d = json::parse(in);
    d["points"][0]["variants"][1]["stats"][field] = -0.01;
    std::ofstream(path) << d.dump();
    try {
      load_report(path);
      ADD_FAILURE() << "no error for a negative " << field;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("points[0].variants[1].stats.") + field +
                                           ": -0.01 is out of range (allowed: >= 0, or null)"),
                std::string::npos)
          << e.what();
    }
  }
  std::remove(path.c_str());
}

// Medians with intervals (reports with intervals): the interval rule replaces the rel_stdev rule. A noisy
// variant (5 % stdev) with a tight median interval is judged by the interval, not by its spread.
TEST(CompareCore, IntervalRuleWhereBothMediansHaveIntervals) {
  Settings s;  // floor 1%
  auto with_ci = [](double median, double half_pct) {
    Entry e = entry(median, 0.05);
    e.ci_low = median * (1 - half_pct / 100);
    e.ci_high = median * (1 + half_pct / 100);
    return e;
  };
  const Entry a = with_ci(100e-6, 0.3);
  const Row slower = judge(a, with_ci(104e-6, 0.4), s);  // by the noise rule: same (t = 2 * sqrt(2) * 5 %)
  EXPECT_EQ(slower.rule, "interval");
  EXPECT_EQ(slower.verdict, "slower");
  // ratio 1.04 +- sqrt(0.3^2 + 0.4^2) % = 0.5 %; the floor (1 %) is larger.
  EXPECT_NEAR(slower.ratio_low, 1.04 * (1 - 0.005), 1e-9);
  EXPECT_NEAR(slower.ratio_high, 1.04 * (1 + 0.005), 1e-9);
  EXPECT_NEAR(slower.threshold, std::log1p(0.01), 1e-12);
  // A wide interval makes the same difference "same".
  const Row wide = judge(a, with_ci(104e-6, 6.0), s);
  EXPECT_EQ(wide.verdict, "same");
  EXPECT_GT(wide.threshold, std::log(1.04));
  // One side without an interval: the noise rule.
  const Row mixed = judge(a, entry(104e-6, 0.05), s);
  EXPECT_EQ(mixed.rule, "noise");
  EXPECT_EQ(mixed.verdict, "same");
}
