// The model against a measured report (src/model/model_report.{hpp,cpp}) as a library: loading and its
// errors, which pieces of a report are compared, fit / held-out / composed roles, --clock report, and the
// error statistics, on the hand-made fixtures of tests/fixtures/model/ (known answers as in test_model.cpp).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "cli_runner.hpp"
#include "kernels/common/check.hpp"
#include "model_fixtures.hpp"
#include "src/core/config.hpp"
#include "src/model/model_report.hpp"
#include "test_paths.hpp"
#include "usage_error.hpp"

using namespace dropbench;
using namespace dropbench::model;

namespace {

const std::string kFix = dropbench_test::kModelFixtures;
const std::string kCmp = dropbench_test::source_path("tests/fixtures/compare/");

Machine tiny() { return dropbench_test::tiny_machine(); }
using dropbench_test::tiny_profile;

// Expects load_measured_report(path) to throw a UsageError containing `what`.
void expect_load_error(const std::string& path, const std::string& what) {
  dropbench_test::expect_refused([&] { load_measured_report(path); }, what);
}

}  // namespace

TEST(ModelReport, LoadValidates) {
  const MeasuredReport r = load_measured_report(kFix + "report_rng.json");
  EXPECT_EQ(r.command, "rng");
  EXPECT_EQ(r.path, kFix + "report_rng.json");
  expect_load_error(kFix + "no_such_report.json", "cannot open");
  expect_load_error(kCmp + "not_json.json", "not JSON");
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

// ---- A training-step report (`run`, workload.pass = train): each strategy variant against predict_train, as a
// step and phase by phase, never as the forward pipeline of the same name.
namespace {

// One measured phase or variant's stats: a median (us) at 1000 MHz.
json stats_us(double us) {
  return {{"samples", 10}, {"median", us * 1e-6}, {"mean", us * 1e-6}, {"min", us * 1e-6}, {"max", us * 1e-6},
          {"stdev", 0}, {"rel_stdev", 0}, {"discarded", 0}, {"mean_clock_mhz", 1000.0}};
}

json variant(const std::string& name, double us, const std::vector<std::pair<std::string, double>>& phases) {
  json ph = json::array();
  for (const auto& [n, t] : phases) ph.push_back({{"name", n}, {"stats", stats_us(t)}});
  return {{"name", name}, {"peer", false}, {"stats", stats_us(us)}, {"phases", ph}, {"derived", json::object()},
          {"extra", json::object()}};
}

// The tiny workload's fp8 training step measured as the runner names its phases; the overlaps' sides are set so
// that the RNG ends later in stored's forward (45 > 30), the GEMM in regen-overlap's forward (50 > 20), and the
// GEMM stream in regen-overlap's backward by its phases' sum only (1 + 2 + 10 + 10 = 23 > 21 > each of them).
json train_report(const Workload& w) {
  json doc = json::parse(std::ifstream(kFix + "report_run.json"));
  json& pt = doc["points"][0];
  pt["workload"] = to_json(w);
  const json alone = pt["variants"][0];
  const std::vector<std::pair<std::string, double>> casts_out = {{"cast-dy", 1}, {"transpose-w-out", 2}},
                                                    tail = {{"cast-dqkv", 3}, {"transpose-w-qkv", 4},
                                                            {"transpose-x", 5}, {"gemm-dx", 60}, {"gemm-dw", 61}};
  auto step = [&](std::vector<std::pair<std::string, double>> fwd, bool rng_bwd) {
    fwd.insert(fwd.end(), {{"cast-o", 6}, {"gemm-out", 40}});
    fwd.insert(fwd.end(), casts_out.begin(), casts_out.end());
    fwd.insert(fwd.end(), {{"gemm-out-dx", 10}, {"gemm-out-dw", 10}});
    if (rng_bwd) fwd.push_back({"rng-bwd", 21});
    fwd.push_back({"attention-bwd", 300});
    fwd.insert(fwd.end(), tail.begin(), tail.end());
    return fwd;
  };
  pt["variants"] = json::array(
      {alone, variant("overlap:fwd", 50, {{"gemm", 30}, {"rng", 45}}),
       variant("fused", 1000, step({{"gemm", 30}, {"attention", 120}}, false)),
       variant("stored", 1001, step({{"gemm", 30}, {"rng", 45}, {"attention", 100}}, false)),
       variant("regen-overlap", 1002, step({{"gemm", 50}, {"rng", 20}, {"attention", 101}}, true)),
       variant("fused-write", 1003, step({{"gemm", 30}, {"attention", 130}}, false))});
  return doc;
}

Workload train_workload() {
  Workload w = dropbench_test::tiny_workload(builtin_config().workload);
  w.pass = "train";
  return w;
}

const ReportRow* find_row(const std::vector<ReportRow>& rows, const std::string& variant, const std::string& piece) {
  for (const ReportRow& r : rows)
    if (r.variant == variant && r.piece == piece) return &r;
  return nullptr;
}

// The row of a variant whose piece compares the model phase `phase`, whatever measured phases stand in front.
const ReportRow* phase_row(const std::vector<ReportRow>& rows, const std::string& variant, const std::string& phase) {
  for (const ReportRow& r : rows)
    if (r.variant == variant && piece_kind(r.piece) == "train-phase:" + phase) return &r;
  return nullptr;
}

// The synthetic training-step report on the tiny machine and profile, compared, beside predict_train's step.
struct TrainCase {
  Machine m = tiny();
  Profile p = tiny_profile();
  Workload w = train_workload();
  MeasuredReport r{"synthetic train report", "run", train_report(w)};
  ReportComparison c = compare_with_report(m, p, r, {}, false);
  TrainPrediction tp = predict_train(m, p, w, {});
};

}  // namespace

TEST(ModelReport, TrainMeasuredPhasesRule) {
  using Sides = std::vector<std::vector<std::string>>;
  EXPECT_EQ(train_measured_phases("gemm || rng"), (Sides{{"gemm"}, {"rng"}}));
  EXPECT_EQ(train_measured_phases("gemm-out-dx+dw || rng"),
            (Sides{{"cast-dy", "transpose-w-out", "gemm-out-dx", "gemm-out-dw"}, {"rng-bwd"}}));
  EXPECT_EQ(train_measured_phases("attention-bwd(regen)"), (Sides{{"attention-bwd"}}));
  EXPECT_EQ(train_measured_phases("gemm-out"), (Sides{{"gemm-out"}}));
}

TEST(ModelReport, TrainReportComparesEachStrategyThroughPredictTrain) {
  const TrainCase t;
  const ReportComparison& c = t.c;
  const TrainPrediction& tp = t.tp;
  EXPECT_EQ(c.skipped, 1u);  // overlap:fwd, as before
  // alone:gemm is compared with the GEMM kernel, as in a forward report.
  const ReportRow* g = find_row(c.rows, "alone:gemm", "gemm = gemm");
  ASSERT_NE(g, nullptr);
  EXPECT_DOUBLE_EQ(g->predicted, gemm_time(t.m, t.p, t.w, {}).seconds);
  size_t n = 1;
  ASSERT_EQ(tp.strategies.size(), 4u);
  for (const StepTime& st : tp.strategies) {
    SCOPED_TRACE(st.name);
    const ReportRow* whole = find_row(c.rows, st.name, "train-step:" + st.name);
    ASSERT_NE(whole, nullptr);
    EXPECT_DOUBLE_EQ(whole->predicted, st.seconds);
    EXPECT_EQ(whole->role, "held-out");
    std::map<std::string, double> by_limiter;  // the step's limiter: the one limiting most of its phases' time
    for (const std::vector<PhaseTime>* side : {&st.fwd, &st.bwd})
      for (const PhaseTime& ph : *side) by_limiter[ph.limiter] += ph.seconds;
    const auto most = std::max_element(by_limiter.begin(), by_limiter.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    ASSERT_NE(most, by_limiter.end());
    EXPECT_EQ(whole->limiter, most->first);
    size_t rows = 0;
    for (const ReportRow& row : c.rows) rows += row.variant == st.name ? 1 : 0;
    EXPECT_EQ(rows, 1 + st.fwd.size() + st.bwd.size());  // the step, then each model phase once
    n += rows;
    for (const std::vector<PhaseTime>* side : {&st.fwd, &st.bwd})
      for (const PhaseTime& ph : *side) {
        const ReportRow* row = phase_row(c.rows, st.name, ph.name);
        ASSERT_NE(row, nullptr) << ph.name;
        EXPECT_DOUBLE_EQ(row->predicted, ph.seconds) << ph.name;
        EXPECT_EQ(row->limiter, ph.limiter) << ph.name;
      }
  }
  EXPECT_EQ(c.rows.size(), n);
  for (const ReportRow& row : c.rows) EXPECT_EQ(row.piece.find("pipeline:"), std::string::npos) << row.piece;
  // The overlaps end with their later side; a side is the sum of its phases.
  const ReportRow* fwd_rng = find_row(c.rows, "stored", "max(gemm, rng) = train-phase:gemm || rng");
  const ReportRow* fwd_gemm = find_row(c.rows, "regen-overlap", "max(gemm, rng) = train-phase:gemm || rng");
  const ReportRow* bwd = find_row(c.rows, "regen-overlap",
                                  "max(cast-dy+transpose-w-out+gemm-out-dx+gemm-out-dw, rng-bwd) = "
                                  "train-phase:gemm-out-dx+dw || rng");
  ASSERT_TRUE(fwd_rng && fwd_gemm && bwd);
  EXPECT_NEAR(fwd_rng->measured, 45e-6, 1e-15);
  EXPECT_NEAR(fwd_gemm->measured, 50e-6, 1e-15);
  EXPECT_NEAR(bwd->measured, 23e-6, 1e-15);
  // Every other phase is the measured phase of its name less the mode.
  const ReportRow* regen = find_row(c.rows, "fused", "attention-bwd = train-phase:attention-bwd(regen)");
  ASSERT_NE(regen, nullptr);
  EXPECT_NEAR(regen->measured, 300e-6, 1e-15);
  ASSERT_NE(find_row(c.rows, "fused-write", "attention = train-phase:attention(fused-write)"), nullptr);
  // Grouped per step and per model phase; only kernels name a demand source in the summary.
  const ReportErrors e = report_errors(c.rows);
  ASSERT_EQ(e.held_out_by_piece.count("train-step:regen-overlap"), 1u);
  EXPECT_EQ(e.held_out_by_piece.at("train-step:regen-overlap").n, 1u);
  EXPECT_EQ(e.held_out_by_piece.at("train-phase:gemm || rng").n, 2u);  // stored, regen-overlap
  for (const auto& [k, src] : e.source_by_piece) EXPECT_EQ(k.rfind("train-", 0), std::string::npos) << k;
}

// The attention kernels measured alone in a train report (group 3 of a train point): the forward against the
// attention kernel, the backward against the model phase of a strategy that launches it (mask: stored; fused:
// fused), read from the variant's own "attention-bwd" phase.
TEST(ModelReport, TrainReportComparesTheAttentionAlone) {
  const Machine m = tiny();
  const Profile p = tiny_profile();
  const Workload w = train_workload();
  json doc = train_report(w);
  json& vs = doc["points"][0]["variants"];
  vs.push_back(variant("alone:attention-mask", 96, {{"attention", 95}}));
  vs.push_back(variant("alone:attention-bwd-mask", 281, {{"attention-bwd", 280}}));
  vs.push_back(variant("alone:attention-bwd-fused", 291, {{"attention-bwd", 290}}));
  const ReportComparison c = compare_with_report(m, p, MeasuredReport{"train report", "run", doc}, {}, false);
  const TrainPrediction tp = predict_train(m, p, w, {});
  auto model_phase = [&tp](const std::string& strategy, const std::string& name) {
    for (const PhaseTime& x : tp.strategy(strategy)->bwd)
      if (x.name == name) return x.seconds;
    return -1.0;
  };
  const ReportRow* fwd = find_row(c.rows, "alone:attention-mask", "attention = attention:mask");
  ASSERT_NE(fwd, nullptr);
  EXPECT_NEAR(fwd->measured, 95e-6, 1e-15);
  const ReportRow* mask = phase_row(c.rows, "alone:attention-bwd-mask", "attention-bwd(mask)");
  const ReportRow* fused = phase_row(c.rows, "alone:attention-bwd-fused", "attention-bwd(regen)");
  ASSERT_TRUE(mask && fused);
  EXPECT_NEAR(mask->measured, 280e-6, 1e-15);
  EXPECT_NEAR(fused->measured, 290e-6, 1e-15);
  EXPECT_DOUBLE_EQ(mask->predicted, model_phase("stored", "attention-bwd(mask)"));
  EXPECT_DOUBLE_EQ(fused->predicted, model_phase("fused", "attention-bwd(regen)"));
  EXPECT_NE(mask->predicted, fused->predicted);  // regenerating Philox-R costs more than reading the mask
}

// scripts/train_model_check.py restates the mapping of measured to model phases (measured_phase): on every model
// phase of every strategy of the synthetic step, it gives the measured time the C++ rows do.
TEST(ModelReport, TrainPhaseRuleMatchesTheScript) {
  const TrainCase t;
  for (const json& v : t.r.doc["points"][0]["variants"]) {
    const StepTime* st = t.tp.strategy(v["name"].get<std::string>());
    if (!st) continue;
    json in = {{"ph", json::object()}, {"names", json::array()}};
    for (const json& ph : v["phases"]) in["ph"][ph["name"].get<std::string>()] = ph["stats"]["median"].get<double>() * 1e6;
    for (const std::vector<PhaseTime>* side : {&st->fwd, &st->bwd})
      for (const PhaseTime& ph : *side) in["names"].push_back(ph.name);
    const std::string cmd = "/usr/bin/python3 -c 'import json, sys; sys.path.insert(0, \"" +
                            dropbench_test::source_path("scripts") +
                            "\"); import train_model_check as t; d = json.loads(sys.argv[1]); "
                            "print(json.dumps([t.measured_phase(n, d[\"ph\"]) for n in d[\"names\"]]))' '" +
                            in.dump() + "'";
    FILE* f = popen(cmd.c_str(), "r");
    ASSERT_NE(f, nullptr);
    std::string out;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
    ASSERT_EQ(pclose(f), 0) << cmd;
    const json script = json::parse(out);
    ASSERT_EQ(script.size(), in["names"].size());
    for (size_t i = 0; i < script.size(); ++i) {
      const std::string phase = in["names"][i].get<std::string>();
      const ReportRow* row = phase_row(t.c.rows, st->name, phase);
      ASSERT_NE(row, nullptr) << st->name << " " << phase;
      EXPECT_NEAR(row->measured * 1e6, script[i].get<double>(), 1e-9) << st->name << " " << phase;
    }
  }
}

// At the CLI: the table and the per-piece lines name the steps, and no forward pipeline.
TEST(ModelReport, TrainReportAtTheCli) {
  const auto dir = std::filesystem::temp_directory_path() / ("dropbench_model_train_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "train.json") << train_report(train_workload()).dump();
  const dropbench_test::CliResult r = dropbench_test::run_dropbench(
      "model --machine '" + kFix + "machine.json' --profile '" + kFix + "profile.json' --report '" +
      (dir / "train.json").string() + "'");
  std::filesystem::remove_all(dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("| fused "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("train-step:fused "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("train-phase:attention-bwd(regen)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("pipeline:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 variant(s) not modelled"), std::string::npos) << r.out;
}

// a machine file with an unknown key, a directory where a file is expected, and a dry-run report are
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
  dropbench_test::expect_refused([&] { load_machine((dir / "m.json").string()); },
                                 "hbm_gbs_typo is not a machine field");
  dropbench_test::expect_refused([&] { load_machine(dir.string()); }, "is a directory");
  std::filesystem::remove_all(dir);
}

// ---- Power: per-kernel power fitted from a report with power data, the power term, the energy
// bound on co-residency, and the no-power path. Fixture: report_run_power.json on the tiny machine (cap 300 W,
// static 100 W).
namespace {

// The tiny profile with the power fitted from report_run_power.json.
Profile tiny_profile_with_power(const Machine& m) {
  const PowerFits f = fit_power(m, tiny_profile(), {load_measured_report(kFix + "report_run_power.json")});
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(std::ifstream(kFix + "profile.json"));
  j["power"] = power_json(f);
  return profile_from_json(j, "tiny+power");
}

}  // namespace

TEST(ModelPower, FitFromFixtureReport) {
  const Machine m = tiny();
  ASSERT_TRUE(m.has_power());
  const PowerFits f = fit_power(m, tiny_profile(), {load_measured_report(kFix + "report_run_power.json")});
  EXPECT_EQ(f.variants_with_power, 4u);
  ASSERT_EQ(f.kernels.size(), 4u);
  // Dynamic energy per iteration = (mean W - static 100 W) x time; per unit of work as the model counts it.
  const struct {
    const char* key;
    double watts, seconds, work;
  } want[] = {
      {"attn_fused_r7_tw8", 300, 177.792e-6, 1024.0 * 1024},  // visited score elements
      {"attn_mask", 250, 169.472e-6, 1024.0 * 1024},
      {"gemm_fp8", 300, 49.152e-6, 2.0 * 1024 * 384 * 1024},  // FLOPs of the 1024 x 384 x 1024 QKV GEMM
      {"rng_tile_r7_tw8", 200, 25.6e-6, 1024.0 * 1024},        // elements generated
  };
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(want[i].key);
    EXPECT_EQ(f.kernels[i].key, want[i].key);
    EXPECT_NEAR(f.kernels[i].dyn_j_per_work * want[i].work, (want[i].watts - 100) * want[i].seconds, 1e-12);
    EXPECT_DOUBLE_EQ(f.kernels[i].mean_w, want[i].watts);
    EXPECT_EQ(f.kernels[i].measurements, 1u);
    EXPECT_NE(f.kernels[i].source.find("report_run_power.json"), std::string::npos);
  }
  // Without power data: nothing to fit, and a machine without a cap cannot split static from dynamic.
  EXPECT_TRUE(fit_power(m, tiny_profile(), {load_measured_report(kFix + "report_run.json")}).kernels.empty());
  Machine nocap = m;
  nocap.cap_w = nocap.static_w = 0;
  EXPECT_THROW(fit_power(nocap, tiny_profile(), {load_measured_report(kFix + "report_run_power.json")}), UsageError);
}

TEST(ModelPower, TermAndEnergyBound) {
  const Machine m = tiny();
  const Profile pp = tiny_profile_with_power(m);
  Workload w = dropbench_test::tiny_workload(builtin_config().workload);
  w.rounds = 7;
  const Prediction pr = predict(m, pp, w, {});
  // The GEMM ran at the cap: its energy bound is its own time; the RNG at 200 W: half its time.
  EXPECT_NEAR(pr.gemm.energy_j, 200 * 49.152e-6, 1e-12);
  EXPECT_NEAR(pr.gemm.power_bound_s, 49.152e-6, 1e-12);
  EXPECT_NEAR(pr.rng.power_bound_s, 12.8e-6, 1e-12);
  EXPECT_NEAR(pr.rng.seconds, 25.6e-6, 1e-12);  // not binding
  // Pipeline energy: the kernels' dynamic energy + static 100 W x the pipeline's time.
  const double base_e = 200 * 49.152e-6 + 100 * 25.6e-6 + 150 * 169.472e-6 + 100 * 244.224e-6;
  EXPECT_NEAR(pr.pipeline("baseline")->energy_j, base_e, 1e-12);
  // Co-resident (a GEMM leaving room for the RNG): without the power term the RNG would vanish under the
  // GEMM; the two kernels' energy at the cap needs (9.8304 + 2.56) mJ / 200 W = 61.952 us.
  Options oc;
  oc.residency = "coresident";
  const Prediction pc = predict(m, pp, w, oc);
  EXPECT_NEAR(pc.overlap.energy_bound_s, 61.952e-6, 1e-12);
  EXPECT_NEAR(pc.overlap.seconds, 61.952e-6, 1e-12);
  EXPECT_NEAR(pc.overlap.max_hidden, (49.152 + 25.6 - 61.952) / 25.6, 1e-9);  // 50 %
  EXPECT_NEAR(pc.pipeline("overlap")->seconds, (61.952 + 169.472) * 1e-6, 1e-12);
  EXPECT_NEAR(pc.pipeline("overlap")->seconds_no_power, (49.152 + 169.472) * 1e-6, 1e-12);
  // An RNG ten times as energy-hungry is power-bound on its own (25.6 mJ / 200 W = 128 us), and GEMM || RNG
  // can then gain nothing: the bound equals the serial time, the mechanism is serial.
  Profile hot = pp;
  hot.power["rng_tile_r7_tw8"].dyn_j_per_work *= 10;
  const Prediction ph = predict(m, hot, w, oc);
  EXPECT_EQ(ph.rng.limiter, "power");
  EXPECT_NEAR(ph.rng.seconds, 128e-6, 1e-12);
  EXPECT_EQ(ph.overlap.mechanism, "serial");
  EXPECT_NEAR(ph.overlap.seconds, (49.152 + 128) * 1e-6, 1e-12);
  EXPECT_NEAR(ph.overlap.max_hidden, 0.0, 1e-9);
  // --power off: the same profile predicts as without power data.
  Profile off = pp;
  off.use_power = false;
  const Prediction po = predict(m, off, w, oc);
  EXPECT_LT(po.overlap.seconds, 50e-6);
  EXPECT_LT(po.gemm.energy_j, 0);
  EXPECT_LT(po.pipeline("baseline")->energy_j, 0);
}

TEST(ModelPower, BindingBoundSetsTheTime) {
  const Machine m = tiny();
  Profile p = tiny_profile();
  KernelTime t;
  t.key = "k";
  t.seconds = 1e-3;
  t.limiter = "issue";
  t.work = 1e6;
  apply_power(m, p, t);  // no power data for "k": unchanged
  EXPECT_EQ(t.limiter, "issue");
  EXPECT_LT(t.energy_j, 0);
  p.power["k"] = {1e-6, 290, "test"};  // 1 J over (300 - 100) W = 5 ms
  apply_power(m, p, t);
  EXPECT_EQ(t.limiter, "power");
  EXPECT_NEAR(t.seconds, 5e-3, 1e-12);
  EXPECT_NEAR(t.seconds_no_power, 1e-3, 1e-12);
}

TEST(ModelPower, ReportComparisonWithAndWithoutTheTerm) {
  const Machine m = tiny();
  const ReportComparison none = compare_with_report(m, tiny_profile(), load_measured_report(kFix + "report_run_power.json"), {}, false);
  for (const ReportRow& row : none.rows) EXPECT_DOUBLE_EQ(row.predicted, row.predicted_no_power) << row.piece;
  const ReportComparison with =
      compare_with_report(m, tiny_profile_with_power(m), load_measured_report(kFix + "report_run_power.json"), {}, false);
  ASSERT_EQ(with.rows.size(), none.rows.size());
  // The measured kernels are at or under their own energy bound: no time changes, every error stays 0.
  for (const ReportRow& row : with.rows) EXPECT_NEAR(row.err(), 0.0, 1e-9) << row.variant << " " << row.piece;
  const ReportErrors e = report_errors(with.rows);
  EXPECT_EQ(e.held_out_no_power.n, e.held_out.n);
}

namespace {
// `p` with every power entry's fitted_on cleared (an older file's entries name no measurements).
Profile unnamed_power(Profile p) {
  for (auto& [k, e] : p.power) e.fitted_on.clear();
  return p;
}

// The tiny profile with fitted power (through power_json and the profile's parser) and the GEMM's power doubled: its
// bound (2 x its measured time) sets the alone:gemm row's prediction.
Profile gemm_bound_profile(const Machine& m) {
  Profile pp = tiny_profile_with_power(m);
  pp.power.at("gemm_fp8").dyn_j_per_work *= 2;
  return pp;
}

ReportRow gemm_row(const ReportComparison& c) {
  for (const ReportRow& r : c.rows)
    if (r.variant == "alone:gemm") return r;
  throw std::runtime_error("no alone:gemm row");
}

// The alone:gemm row's role with profile q against report r (clock_report: `--clock report`).
std::string gemm_role(const Machine& m, const Profile& q, const MeasuredReport& r, bool clock_report = false) {
  return gemm_row(compare_with_report(m, q, r, {}, clock_report)).role;
}
}  // namespace

// A row whose measured power a kernel's power is fitted on (its fitted_on names the report, axes and variant), and
// whose prediction that power sets, is a fit row, not a held-out check (which measurement that is:
// PowerFitRowsAreTheNamedMeasurement).
TEST(ModelPower, RowsThePowerIsFittedOnAreFitRows) {
  const Machine m = tiny();
  const std::string path = kFix + "report_run_power.json";
  const MeasuredReport report = load_measured_report(path);
  const PowerFits f = fit_power(m, tiny_profile(), {report});
  ASSERT_EQ(f.kernels.size(), 4u);
  for (const PowerFit& k : f.kernels) {
    ASSERT_EQ(k.fitted_on.size(), 1u) << k.key;
    EXPECT_EQ(k.fitted_on[0].report, path);
    EXPECT_EQ(k.fitted_on[0].axes, (json{{"sq", 1024}}));
  }
  const auto gemm_fit = std::find_if(f.kernels.begin(), f.kernels.end(), [](const PowerFit& k) { return k.key == "gemm_fp8"; });
  ASSERT_NE(gemm_fit, f.kernels.end());
  EXPECT_EQ(gemm_fit->fitted_on[0].variant, "alone:gemm");
  const Profile pp = gemm_bound_profile(m);
  ASSERT_EQ(pp.power.at("gemm_fp8").fitted_on.size(), 1u);
  EXPECT_EQ(pp.power.at("gemm_fp8").fitted_on[0].variant, "alone:gemm");
  const ReportComparison fit = compare_with_report(m, pp, report, {}, false);
  const ReportRow g = gemm_row(fit);
  EXPECT_TRUE(g.power_bound);
  EXPECT_EQ(g.role, "fit");
  EXPECT_EQ(g.fit_unit, kPowerFitUnit);
  EXPECT_FALSE(g.efficiency_fit());  // --fit fits no efficiency on it
  // Every alone row is a fit row exactly where its bound sets its prediction; the RNG's does not (it ran at 200 W
  // against the 300 W cap), so its row stays held out although its power is fitted on it.
  size_t alone = 0, bound = 0;
  for (const ReportRow& r : fit.rows) {
    if (r.variant.rfind("alone:", 0) != 0) continue;
    ++alone;
    bound += r.power_bound ? 1 : 0;
    EXPECT_EQ(r.role, r.power_bound ? "fit" : "held-out") << r.variant;
    if (r.variant == "alone:rng") EXPECT_FALSE(r.power_bound);
  }
  EXPECT_EQ(alone, 4u);
  const ReportErrors ef = report_errors(fit.rows);
  EXPECT_EQ(ef.fitted, bound);
  // Its predictions at the measured clock and without the term do not use the power: those statistics keep it.
  const ReportErrors all_held = report_errors(compare_with_report(m, unnamed_power(pp), report, {}, false).rows);
  EXPECT_EQ(ef.held_out.n + bound, all_held.held_out.n);
  EXPECT_EQ(ef.held_out_at_measured_clock.n, all_held.held_out_at_measured_clock.n);
  EXPECT_DOUBLE_EQ(ef.held_out_at_measured_clock.mean, all_held.held_out_at_measured_clock.mean);
  EXPECT_EQ(ef.held_out_no_power.n, all_held.held_out_no_power.n);
  EXPECT_DOUBLE_EQ(ef.held_out_no_power.mean, all_held.held_out_no_power.mean);
  // With --clock report the power term is off: the row is a held-out check.
  EXPECT_EQ(gemm_role(m, pp, report, true), "held-out");
  // A malformed fitted_on is refused in one line naming it.
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(std::ifstream(kFix + "profile.json"));
  j["power"] = power_json(f);
  j["power"]["gemm_fp8"]["fitted_on"] = 3;
  dropbench_test::expect_refused([&] { profile_from_json(j, "bad"); }, "power.gemm_fp8.fitted_on");
  j["power"] = power_json(f);
  j["power"]["gemm_fp8"]["fitted_on"][0].erase("axes");
  EXPECT_THROW(profile_from_json(j, "bad"), UsageError);
}

// A power fit row is the measurement its entry names, and only that one: the same measurements under another path,
// another axes value or variant, or an entry without fitted_on stay held out; the same file named another way (./,
// a directory step, a tail at a path boundary) is the same report.
TEST(ModelPower, PowerFitRowsAreTheNamedMeasurement) {
  const Machine m = tiny();
  const std::string path = kFix + "report_run_power.json";
  const MeasuredReport report = load_measured_report(path);
  const Profile pp = gemm_bound_profile(m);
  ASSERT_EQ(gemm_role(m, pp, report), "fit");
  MeasuredReport other = report;
  other.path = "elsewhere/report_run_power_copy.json";
  EXPECT_EQ(gemm_role(m, pp, other), "held-out");
  EXPECT_EQ(gemm_role(m, unnamed_power(pp), report), "held-out");
  MeasuredReport dotted = report;
  dotted.path = (std::filesystem::path(path).parent_path() / "." / ".." / "model" / "report_run_power.json").string();
  EXPECT_EQ(gemm_role(m, pp, dotted), "fit") << dotted.path;
  // An entry naming the report by its tail (as a fit run from the repository root does) matches at a path
  // boundary; a tail cut inside a directory name does not.
  auto with_report = [&](const std::string& rep) {
    Profile q = pp;
    q.power.at("gemm_fp8").fitted_on[0].report = rep;
    return gemm_role(m, q, report);
  };
  EXPECT_EQ(with_report("model/report_run_power.json"), "fit");
  EXPECT_EQ(with_report("./model/../model/report_run_power.json"), "fit");
  EXPECT_EQ(with_report("report_run_power.json"), "fit");
  EXPECT_EQ(with_report("odel/report_run_power.json"), "held-out");
  Profile moved = pp;
  moved.power.at("gemm_fp8").fitted_on[0].axes = {{"sq", 2048}};
  EXPECT_EQ(gemm_role(m, moved, report), "held-out");
  moved = pp;
  moved.power.at("gemm_fp8").fitted_on[0].variant = "alone:rng";
  EXPECT_EQ(gemm_role(m, moved, report), "held-out");
}

// Sustained (power-pass) times: fit_power takes the static share over the power pass's own time per iteration,
// and the comparison carries that time for whole variants (pipelines, single kernels) but not for a pipeline's
// phases, which the power pass does not time one by one.
TEST(ModelPower, SustainedTimesFromThePowerPass) {
  const Machine m = tiny();
  MeasuredReport r = load_measured_report(kFix + "report_run_power.json");
  const double t_gemm = 1.25 * 49.152e-6, t_base = 1.1 * 244.224e-6;
  for (json& v : r.doc["points"][0]["variants"]) {
    if (v["name"] == "alone:gemm") v["power"]["time_per_iter_s"] = t_gemm;
    if (v["name"] == "baseline") v["power"] = {{"mean_w", 280.0}, {"energy_mj_per_iter", 60.0}, {"time_per_iter_s", t_base}};
  }
  const PowerFits f = fit_power(m, tiny_profile(), {r});
  bool saw_gemm = false;
  for (const PowerFit& k : f.kernels)
    if (k.key == "gemm_fp8") {
      saw_gemm = true;  // 14.7456 mJ - 100 W x the pass's time, not x the 49.152 us median
      EXPECT_NEAR(k.dyn_j_per_work * 2.0 * 1024 * 384 * 1024, 14.7456e-3 - 100 * t_gemm, 1e-12);
    }
  EXPECT_TRUE(saw_gemm);
  const ReportComparison c = compare_with_report(m, tiny_profile(), r, {}, false);
  size_t with_sustained = 0;
  for (const ReportRow& row : c.rows) {
    SCOPED_TRACE(row.variant + " " + row.piece);
    if (row.variant == "alone:gemm") {
      EXPECT_DOUBLE_EQ(row.sustained, t_gemm);
      EXPECT_NEAR(row.err_sustained(), (row.predicted - t_gemm) / t_gemm, 1e-12);
    } else if (row.variant == "baseline" && row.piece == "pipeline:baseline") {
      EXPECT_DOUBLE_EQ(row.sustained, t_base);
    } else if (row.variant == "baseline") {
      EXPECT_EQ(row.sustained, 0.0);  // a phase: no sustained time of its own
    } else if (row.variant == "alone:rng") {
      EXPECT_EQ(row.sustained, 0.0);  // its power pass has no time_per_iter_s
    }
    with_sustained += row.sustained > 0 ? 1 : 0;
  }
  EXPECT_EQ(with_sustained, 2u);
  size_t held_sustained = 0;
  for (const ReportRow& row : c.rows) held_sustained += row.role == "held-out" && row.sustained > 0 ? 1 : 0;
  const ReportErrors e = report_errors(c.rows);
  EXPECT_GE(held_sustained, 1u);
  EXPECT_EQ(e.held_out_sustained.n, held_sustained);
  EXPECT_EQ(e.held_out_sustained_no_power.n, held_sustained);
}

// rng reports carry a "ceiling" variant (the compute-only Philox loop measured beside the mask kernel): it is no
// mask kernel, so the model compares nothing with it, and fit_power takes no energy from it.
TEST(ModelReport, RngCeilingVariantIsNotComparedOrFitted) {
  MeasuredReport r = load_measured_report(kFix + "report_rng.json");
  const size_t rows_before = compare_with_report(tiny(), tiny_profile(), r, {}, false).rows.size();
  ASSERT_GT(rows_before, 0u);
  size_t added = 0;
  for (json& pt : r.doc["points"]) {
    json ceiling = pt["variants"][0];
    ceiling["name"] = "ceiling";
    ceiling["power"] = {{"mean_w", 400.0}, {"energy_mj_per_iter", 1.0}, {"time_per_iter_s", 1e-4}};
    pt["variants"].push_back(ceiling);
    ++added;
  }
  ASSERT_GT(added, 0u);
  const ReportComparison c = compare_with_report(tiny(), tiny_profile(), r, {}, false);
  EXPECT_EQ(c.rows.size(), rows_before);
  for (const ReportRow& row : c.rows) EXPECT_NE(row.variant, "ceiling");
  EXPECT_EQ(fit_power(tiny(), tiny_profile(), {r}).variants_with_power, 0u);
}

// An attention report of pass bwd / fwd+bwd against the committed machine and profile: each variant's backward phase
// is compared with the whole backward call (attention-bwd-call, rng+mask's being mask's), the same prediction in
// both passes; fwd+bwd has no RNG + forward sum row (its variant also holds the backward) and no sustained time on its
// phase rows (its power pass covers two kernels); a report in the backward's fit_reports gives fit rows of unit
// attention_bwd, which no efficiency fit takes.
TEST(ModelReport, AttentionBackwardRowsAreTheWholeCall) {
  const std::string src = dropbench_test::source_path();
  const Machine m = load_machine(src + "/configs/machines/h100-sxm.json");
  const Profile p = load_profile(src + "/configs/profiles/h200.json");
  const ReportComparison c = compare_with_report(
      m, p, load_measured_report(src + "/results/h100/attention/backward/cli_pass.json"), {}, false);
  std::map<std::string, const ReportRow*> bwd;  // "sq causal variant" of pass bwd -> its backward row
  size_t n_bwd = 0, n_both = 0;
  for (const ReportRow& row : c.rows) {
    const std::string pass = row.axes.at("pass");
    if (pass == "fwd") continue;
    EXPECT_NE(row.piece.rfind("sum:", 0), 0u) << pass << " " << row.variant << ": " << row.piece;
    if (row.piece.find("backward = ") != 0) continue;
    const std::string mode = row.variant == "rng+mask" ? "mask" : row.variant;
    EXPECT_EQ(row.piece, "backward = attention-bwd-call:" + mode);
    EXPECT_EQ(row.source, "ncu(bwd)");
    EXPECT_EQ(row.role, "held-out");
    EXPECT_GT(row.predicted, 0);
    const std::string key = row.axes.at("sq").dump() + " " + row.axes.at("causal").dump() + " " + mode;
    if (pass == "bwd") {
      EXPECT_GT(row.sustained, 0) << key;
      EXPECT_TRUE(bwd.emplace(key, &row).second) << key;
      ++n_bwd;
    } else {
      EXPECT_EQ(row.sustained, 0) << key;
      ASSERT_TRUE(bwd.count(key)) << key;  // the report lists pass bwd first
      EXPECT_DOUBLE_EQ(row.predicted, bwd.at(key)->predicted) << key;
      ++n_both;
    }
  }
  EXPECT_GE(n_bwd, 3u);
  EXPECT_EQ(n_both, n_bwd + n_bwd / 3);  // fwd+bwd adds rng+mask's backward

  // The call is the kernel, the launches around it and their gaps (without the power term, which bounds the whole).
  Profile pn = p;
  pn.use_power = false;
  const MeasuredReport rep = load_measured_report(src + "/results/h100/attention/backward/cli_pass.json");
  const ReportComparison cn = compare_with_report(m, pn, rep, {}, false);
  size_t n_call = 0;
  for (const json& pt : rep.doc.at("points")) {
    const Workload w = config_from_json({{"name", "point"}, {"workload", pt.at("workload")}}, "test").workload;
    if (w.pass != "bwd") continue;
    for (const ReportRow& row : cn.rows) {
      if (row.axes != pt.at("axes") || row.piece.find("backward = ") != 0) continue;
      const double want = attention_bwd_kernel_time(m, pn, w, row.variant, {}).seconds +
                          attention_bwd_around_seconds(m, pn, w, {});
      EXPECT_NEAR(row.predicted, want, 1e-9 * want) << row.variant;
      EXPECT_GT(want, attention_bwd_kernel_time(m, pn, w, row.variant, {}).seconds * 1.001) << row.variant;
      ++n_call;
    }
  }
  EXPECT_EQ(n_call, n_bwd);
  // A bwd report's power goes to the backward's keys; fwd+bwd's, which covers two calls, to none.
  for (const PowerFit& f : fit_power(m, pn, {rep}).kernels)
    for (const PowerMeasurement& x : f.fitted_on) {
      const std::string pass = x.axes.at("pass");
      EXPECT_NE(pass, "fwd+bwd") << f.key;
      EXPECT_EQ(f.key.rfind("wgmma_bwd_", 0) == 0, pass == "bwd") << f.key << " " << pass << " " << x.variant;
    }

  const std::string fit_report = "results/h100/attention/backward/gqa/attn_bwd_hq32.json";
  ASSERT_NE(std::find(p.wgmma_bwd->fit_reports.begin(), p.wgmma_bwd->fit_reports.end(), fit_report),
            p.wgmma_bwd->fit_reports.end());
  const ReportComparison f = compare_with_report(m, p, load_measured_report(src + "/" + fit_report), {}, false);
  ASSERT_EQ(f.rows.size(), 3u);  // none, mask, fused
  for (const ReportRow& row : f.rows) {
    EXPECT_EQ(row.role, "fit") << row.variant;
    EXPECT_EQ(row.fit_unit, kAttentionBwdUnit);
    EXPECT_TRUE(row.bwd_fit);
    EXPECT_FALSE(row.efficiency_fit());
  }
  EXPECT_EQ(report_errors(f.rows).held_out.n, 0u);
  // A report given by its bare name from its own folder: the H100's cli_wgmma.json (a fit report) gives fit rows, the
  // H200's file of the same name held-out ones.
  ASSERT_NE(std::find(p.wgmma_bwd->fit_reports.begin(), p.wgmma_bwd->fit_reports.end(),
                      "results/h100/attention/backward/cli_wgmma.json"),
            p.wgmma_bwd->fit_reports.end());
  const std::filesystem::path cwd = std::filesystem::current_path();
  for (const std::string gpu : {"h100", "h200"}) {
    std::filesystem::current_path(src + "/results/" + gpu + "/attention/backward");
    const ReportComparison h = compare_with_report(m, p, load_measured_report("cli_wgmma.json"), {}, false);
    std::filesystem::current_path(cwd);
    size_t n_h = 0;
    for (const ReportRow& row : h.rows)
      if (row.piece.find("backward = attention-bwd-call:") == 0 && row.axes.at("attention_kernel") == "wgmma" &&
          row.axes.at("head_dim") == 128) {
        EXPECT_EQ(row.role, gpu == "h100" ? "fit" : "held-out") << gpu << " " << row.axes.dump() << " " << row.variant;
        ++n_h;
      }
    EXPECT_GE(n_h, 6u) << gpu;
  }
}
