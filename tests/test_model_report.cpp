// The model against a measured report (src/model/model_report.{hpp,cpp}) as a library: loading and its
// errors, which pieces of a report are compared, fit / held-out / composed roles, --clock report, and the
// error statistics, on the hand-made fixtures of tests/fixtures/model/ (known answers as in test_model.cpp).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "kernels/common/check.hpp"
#include "model_fixtures.hpp"
#include "src/model/model_report.hpp"

using namespace dropbench;
using namespace dropbench::model;

namespace {

const std::string kFix = dropbench_test::kModelFixtures;
const std::string kCmp = std::string(DROPBENCH_SOURCE_DIR) + "/tests/fixtures/compare/";

Machine tiny() { return dropbench_test::tiny_machine(); }
using dropbench_test::tiny_profile;

// Expects load_measured_report(path) to throw a UsageError containing `what`.
void expect_load_error(const std::string& path, const std::string& what) {
  try {
    load_measured_report(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(ModelReport, LoadValidates) {
  const MeasuredReport r = load_measured_report(kFix + "report_rng.json");
  EXPECT_EQ(r.command, "rng");
  EXPECT_EQ(r.path, kFix + "report_rng.json");
  expect_load_error(kFix + "no_such_report.json", "cannot open");
  expect_load_error(kCmp + "not_json.json", "is not valid JSON");
  expect_load_error(kCmp + "not_report.json", "is not a dropbench report");
  expect_load_error(kCmp + "wrong_version.json", "has schema_version 2");
}

TEST(ModelReport, RngRowsRolesAndErrors) {
  const Machine m = tiny();
  const Profile p = tiny_profile();
  const ReportComparison c = compare_with_report(m, p, load_measured_report(kFix + "report_rng.json"), {}, false);
  ASSERT_EQ(c.rows.size(), 2u);  // one "gen" phase per point
  EXPECT_EQ(c.skipped, 0u);
  // R7 is the machine's alu fit point: 25.6 us predicted and measured, so efficiency 1.
  const ReportRow& fit = c.rows[0];
  EXPECT_EQ(fit.piece, "gen = rng:tile");
  EXPECT_EQ(fit.role, "fit");
  EXPECT_EQ(fit.fit_unit, "alu");
  EXPECT_NEAR(fit.fit_efficiency(), 1.0, 1e-9);
  // R3: predicted 15.36 us against 16.0 us measured.
  const ReportRow& held = c.rows[1];
  EXPECT_EQ(held.role, "held-out");
  EXPECT_NEAR(held.predicted, 15.36e-6, 1e-12);
  EXPECT_NEAR(held.err(), -0.04, 1e-9);

  const ReportErrors e = report_errors(c.rows);
  EXPECT_EQ(e.fitted, 1u);
  EXPECT_EQ(e.held_out.n, 1u);
  EXPECT_NEAR(e.held_out.mean, 0.04, 1e-9);
  EXPECT_EQ(e.all_including_fit.n, 2u);
  EXPECT_EQ(e.composed.n, 0u);
  ASSERT_EQ(e.held_out_by_piece.count("rng:tile"), 1u);
  EXPECT_EQ(e.held_out_by_piece.at("rng:tile").n, 1u);
  ASSERT_EQ(e.source_by_piece.count("rng:tile"), 1u);
  EXPECT_EQ(e.source_by_piece.at("rng:tile"), held.source);
}

TEST(ModelReport, RunReportComparesPipelinesAndPhases) {
  const ReportComparison c =
      compare_with_report(tiny(), tiny_profile(), load_measured_report(kFix + "report_run.json"), {}, false);
  EXPECT_EQ(c.rows.size(), 10u);  // 4 pipelines + baseline's 3 phases + fused's 2 phases + alone:gemm
  EXPECT_EQ(c.skipped, 1u);       // mech:plain
  for (const ReportRow& row : c.rows) EXPECT_NEAR(row.err(), 0.0, 1e-9) << row.variant << " " << row.piece;
  // Pipelines and their phases are compared, but only kernels name a demand source.
  const ReportErrors e = report_errors(c.rows);
  for (const auto& [k, src] : e.source_by_piece) EXPECT_EQ(k.rfind("pipeline:", 0), std::string::npos) << k;
  EXPECT_EQ(e.held_out_by_piece.count("pipeline:baseline"), 1u);
}

TEST(ModelReport, AtMeasuredClockReplacesThePrediction) {
  const MeasuredReport r = load_measured_report(kFix + "report_rng.json");
  const ReportComparison c = compare_with_report(tiny(), tiny_profile(), r, {}, true);
  ASSERT_FALSE(c.rows.empty());
  for (const ReportRow& row : c.rows) EXPECT_EQ(row.predicted, row.predicted_at_measured_clock);
}

TEST(ModelReport, ErrStats) {
  const ErrStats none = err_stats({});
  EXPECT_EQ(none.n, 0u);
  EXPECT_EQ(none.mean, 0.0);
  const ErrStats one = err_stats({-0.5});
  EXPECT_DOUBLE_EQ(one.mean, 0.5);
  EXPECT_EQ(one.stdev, 0.0);  // n - 1 = 0: no spread
  const ErrStats s = err_stats({0.1, -0.3});  // |err| 0.1, 0.3
  EXPECT_EQ(s.n, 2u);
  EXPECT_NEAR(s.mean, 0.2, 1e-12);
  EXPECT_NEAR(s.max, 0.3, 1e-12);
  EXPECT_NEAR(s.stdev, std::sqrt(0.02), 1e-12);
}

TEST(ModelReport, PieceKind) {
  EXPECT_EQ(piece_kind("gen = rng:tile"), "rng:tile");
  EXPECT_EQ(piece_kind("pipeline:overlap"), "pipeline:overlap");
  EXPECT_EQ(piece_kind("sum:rng:tile+attention:mask"), "sum:rng:tile+attention:mask");
}

// Issue 14: a machine file with an unknown key, a directory where a file is expected, and a dry-run report are
// bad input (UsageError: exit 2 at the CLI), not silently accepted or a crash.
TEST(ModelReport, RejectsDryRunReportsAndDirectories) {
  const auto dir = std::filesystem::temp_directory_path() / ("dropbench_model_report_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::ordered_json d = nlohmann::ordered_json::parse(std::ifstream(kFix + "report_rng.json"));
  d["context"]["dry_run"] = true;
  std::ofstream(dir / "dry.json") << d.dump();
  expect_load_error((dir / "dry.json").string(), "is a dry run");
  expect_load_error(dir.string(), "is a directory");
  std::filesystem::remove_all(dir);
}

TEST(ModelMachine, UnknownKeyAndDirectoryAreErrors) {
  const auto dir = std::filesystem::temp_directory_path() / ("dropbench_model_machine_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  nlohmann::ordered_json m = nlohmann::ordered_json::parse(std::ifstream(kFix + "machine.json"));
  m["hbm_gbs_typo"] = 1;
  std::ofstream(dir / "m.json") << m.dump();
  try {
    load_machine((dir / "m.json").string());
    ADD_FAILURE() << "unknown key accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("hbm_gbs_typo is not a machine field"), std::string::npos) << e.what();
  }
  try {
    load_machine(dir.string());
    ADD_FAILURE() << "directory accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}
