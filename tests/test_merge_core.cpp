// In the core layer, without the executable: the round-robin shard rule, a point's JSON round trip
// (what --resume and merge read back), the Report's sweep state and sorted points, what makes two reports one
// sweep's (identity_differences), and merge_reports' checks and result.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "kernels/common/check.hpp"
#include "src/core/merge.hpp"
#include "src/core/report.hpp"

using namespace dropbench;

namespace {

PointResult point(size_t index, double median) {
  PointResult p;
  p.index = index;
  p.axes = {{"sq", 64 * (index + 1)}};
  p.workload = {{"sq", 64 * (index + 1)}};
  VariantResult v;
  v.name = "rng";
  v.stats.samples = 10;
  v.stats.median = median;
  v.phases.emplace_back("gen", v.stats);
  v.derived["gelem_s"] = 1.5;
  v.extra["mask_bytes"] = 4096;
  p.variants.push_back(v);
  p.derived["note"] = "x";
  return p;
}

json context(const std::string& sha, const json& device) {
  return {{"tool", "dropbench"}, {"version", "0.1.0"}, {"git_sha", sha},      {"argv", json::array()},
          {"date_utc", "2026-12-01T00:00:00Z"}, {"device", device}, {"dry_run", false}, {"options", json::object()}};
}

// A shard report of a 6-point sweep as SweepSession writes it.
ReportFile shard_report(size_t i, size_t n, const json& ctx = context("abc", {{"name", "NVIDIA H200"}}),
                        const Config& cfg = builtin_config()) {
  Report r("rng", ctx, to_json(cfg));
  r.set_sweep(6, Shard{i, n});
  for (size_t k = 0; k < 6; ++k)
    if (Shard{i, n}.holds(k)) r.add_point(point(k, 1e-3 * (k + 1)));
  r.sweep().complete = true;
  return {"shard" + std::to_string(i) + ".json", r.to_json()};
}

Report merge(const std::vector<ReportFile>& in) {
  return merge_reports(in, [](const Report&, const std::vector<json>&, std::string&) { return json::object(); });
}

}  // namespace

TEST(Shard, RoundRobinPartitionsEveryIndexOnce) {
  for (size_t n = 1; n <= 7; ++n)
    for (size_t idx = 0; idx < 50; ++idx) {
      size_t owners = 0;
      for (size_t i = 0; i < n; ++i) owners += Shard{i, n}.holds(idx);
      EXPECT_EQ(owners, 1u) << idx << " of " << n;
      EXPECT_TRUE((Shard{idx % n, n}.holds(idx)));
    }
}

TEST(ReportSweep, PointJsonRoundTrips) {
  const json j = point_to_json(point(3, 2.5e-4));
  EXPECT_EQ(point_to_json(point_from_json(j)), j);
  json bad = j;
  bad.erase("index");
  EXPECT_THROW(point_from_json(bad), json::exception);
}

TEST(ReportSweep, PointsSortedAndAdoptedKeptAsWritten) {
  Report r("rng", json::object(), json::object());
  EXPECT_FALSE(r.to_json().contains("complete")) << "a bare Report writes no sweep state";
  r.set_sweep(5, Shard{1, 2});
  r.add_point(point(3, 1e-3));
  json old = point_to_json(point(1, 2e-3));
  old["variants"][0]["stats"]["ci_low"] = 1.9e-3;  // a key this build does not know survives
  r.adopt_point(old);
  r.set_current_index(4);
  r.add_skipped({{{"sq", 320}}, "too big"});
  const json j = r.to_json();
  ASSERT_EQ(j["points"].size(), 2u);
  EXPECT_EQ(j["points"][0], old);
  EXPECT_EQ(j["points"][1]["index"], 3);
  EXPECT_EQ(j["skipped"][0]["index"], 4);
  EXPECT_EQ(j["complete"], false);
  EXPECT_EQ(j["shard"], json({{"index", 1}, {"count", 2}}));
  EXPECT_EQ(j["total_points"], 5);
  EXPECT_DOUBLE_EQ(r.points()[0].variants[0].stats.median, 2e-3);
}

TEST(MergeCore, IdentityNamesTheFirstDifference) {
  const ReportFile a = shard_report(0, 2);
  EXPECT_TRUE(identity_differences(report_identity(a.doc, "t", a.path), report_identity(a.doc, "t", a.path)).empty());
  Config other = builtin_config();
  other.workload.seed = 7;
  const ReportFile b = shard_report(1, 2, context("abc", {{"name", "NVIDIA H200"}}), other);
  const auto d = identity_differences(report_identity(a.doc, "t", a.path), report_identity(b.doc, "t", b.path));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].rfind("config.workload.seed ", 0), 0u) << d[0];
  const ReportFile c = shard_report(1, 2, context("def", {{"name", "NVIDIA H100"}}));
  const auto e = identity_differences(report_identity(a.doc, "t", a.path), report_identity(c.doc, "t", c.path));
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0], "tool version 0.1.0+abc vs 0.1.0+def");
  EXPECT_EQ(e[1], "device NVIDIA H200 vs NVIDIA H100");
}

TEST(MergeCore, JoinsShardsAndRefusesWhatDoesNotBelong) {
  const Report m = merge({shard_report(2, 3), shard_report(0, 3), shard_report(1, 3)});
  std::vector<size_t> idx;
  for (const PointResult& p : m.points()) idx.push_back(p.index);
  EXPECT_EQ(idx, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_TRUE(m.sweep().complete);
  EXPECT_EQ(m.to_json()["merged_from"].size(), 3u);

  const Report part = merge({shard_report(0, 3), shard_report(2, 3)});
  EXPECT_FALSE(part.sweep().complete);
  EXPECT_EQ(part.sweep().incomplete_reason["kind"], "merge");

  EXPECT_THROW(merge({shard_report(0, 3), shard_report(0, 3)}), UsageError);  // one shard twice
  EXPECT_THROW(merge({shard_report(0, 3), shard_report(1, 2)}), UsageError);  // shard counts
  EXPECT_THROW(merge({shard_report(0, 2), shard_report(1, 2, context("abc", {{"name", "NVIDIA H100"}}))}), UsageError);
  ReportFile dup = shard_report(1, 2);
  dup.doc["points"].push_back(shard_report(0, 2).doc["points"][0]);  // point 0 in both
  try {
    merge({shard_report(0, 2), dup});
    FAIL() << "duplicate point accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("point 0 (sq=64) is in both"), std::string::npos) << e.what();
  }
  // An incomplete input makes the merge incomplete even where the points are all there.
  ReportFile inc = shard_report(1, 2);
  inc.doc["complete"] = false;
  EXPECT_FALSE(merge({shard_report(0, 2), inc}).sweep().complete);
  // No recompute: the summary is left empty and the note says so.
  const Report n = merge_reports({shard_report(0, 1)}, nullptr);
  EXPECT_FALSE(n.sweep().summary_note.empty());
}
