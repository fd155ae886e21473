// `dropbench compare` end to end on the hand-written reports in tests/fixtures/compare/: matching, verdicts,
// geomean, unmatched rows, the regression gate's exit codes and the bad-file errors.
#include <gtest/gtest.h>

#include "cli_runner.hpp"
#include "test_paths.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

using Result = dropbench_test::CliResult;

std::string fixture(const std::string& name) {
  return dropbench_test::source_path("tests/fixtures/compare/") + name;
}

// Runs `dropbench compare` with `args` (fixture names are expanded by the caller); stdout and stderr apart.
Result run(const std::string& args) { return dropbench_test::run_dropbench("compare " + args); }

// "base.json same.json" -> full quoted paths.
std::string files(std::initializer_list<const char*> names) {
  std::string out;
  for (const char* n : names) out += " '" + fixture(n) + "'";
  return out;
}

nlohmann::json run_json(const std::string& args, int expect_code = 0) {
  const Result r = run(args + " --format json");
  EXPECT_EQ(r.code, expect_code) << args << "\n" << r.err;
  return nlohmann::json::parse(r.out);
}

std::vector<std::string> verdicts(const nlohmann::json& comparison) {
  std::vector<std::string> v;
  for (const auto& row : comparison["rows"]) v.push_back(row["verdict"].get<std::string>());
  return v;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// The markdown table row whose cells contain every one of `needles`; "" when none does.
std::string row_with(const std::string& md, std::initializer_list<const char*> needles) {
  for (const auto& l : lines_of(md)) {
    if (l.empty() || l[0] != '|') continue;
    bool all = true;
    for (const char* n : needles) all = all && l.find(n) != std::string::npos;
    if (all) return l;
  }
  return {};
}

// Cells of a markdown row, trimmed.
std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 1; i < row.size(); ++i) {
    if (row[i] == '|') {
      const auto b = cur.find_first_not_of(' '), e = cur.find_last_not_of(' ');
      out.push_back(b == std::string::npos ? std::string() : cur.substr(b, e - b + 1));
      cur.clear();
    } else {
      cur += row[i];
    }
  }
  return out;
}

const std::vector<std::string> kAll = {"same", "same", "same", "same"};

}  // namespace

TEST(Compare, IdenticalReportIsSameWithGeomeanOne) {
  const auto j = run_json(files({"base.json", "base.json"}));
  ASSERT_EQ(j["comparisons"].size(), 1u);
  const auto& c = j["comparisons"][0];
  EXPECT_EQ(verdicts(c), kAll);
  EXPECT_DOUBLE_EQ(c["geomean"].get<double>(), 1.0);
  EXPECT_EQ(c["only_in_a"].size(), 0u);
  EXPECT_EQ(c["only_in_b"].size(), 0u);
}

TEST(Compare, SameWithinNoiseAndFloor) {
  // +1.0% with 1% noise on both sides (t = 2*sqrt(2)*1% = 2.8%) and +0.8% with 0.2% noise, which only the 1%
  // floor keeps "same".
  const auto j = run_json(files({"base.json", "same.json"}));
  const auto& c = j["comparisons"][0];
  EXPECT_EQ(verdicts(c), kAll);
  EXPECT_NEAR(c["rows"][0]["ratio"].get<double>(), 1.01, 1e-9);
  EXPECT_NEAR(c["rows"][2]["ratio"].get<double>(), 1.008, 1e-9);
  EXPECT_NEAR(c["geomean"].get<double>(), std::sqrt(1.01 * 1.008), 1e-9);
  // Without the floor the sq=8192 rows (0.2% noise: t = 0.57%) are slower.
  const auto nf = run_json(files({"base.json", "same.json"}) + " --noise-floor 0");
  EXPECT_EQ(verdicts(nf["comparisons"][0]), (std::vector<std::string>{"same", "same", "slower", "slower"}));
  // A wider noise band (k = 4) does not change the floor-bound rows.
  const auto k4 = run_json(files({"base.json", "same.json"}) + " --noise-k 4");
  EXPECT_EQ(verdicts(k4["comparisons"][0]), kAll);
}

TEST(Compare, FasterMatchesAcrossAxisOrderAndNumberSpelling) {
  // faster.json lists its axes as {causal, sq} and writes 4096.0: still the same points.
  const auto j = run_json(files({"base.json", "faster.json"}));
  const auto& c = j["comparisons"][0];
  EXPECT_EQ(verdicts(c), (std::vector<std::string>{"faster", "faster", "faster", "faster"}));
  EXPECT_NEAR(c["geomean"].get<double>(), 0.8, 1e-9);
  EXPECT_EQ(c["only_in_a"].size(), 0u);
  EXPECT_EQ(c["only_in_b"].size(), 0u);
  EXPECT_EQ(c["counts"]["faster"].get<int>(), 4);
  // Faster never fails the gate.
  EXPECT_EQ(run(files({"base.json", "faster.json"}) + " --fail-on-regression 0").code, 0);
}

TEST(Compare, SlowerWithinNoiseIsSameAndPassesTheGate) {
  // +3% where B has 2% noise: t >= 2*sqrt(0.02^2 + 0.002^2) = 4.0%.
  const auto j = run_json(files({"base.json", "slower_noise.json"}));
  const auto& c = j["comparisons"][0];
  EXPECT_EQ(verdicts(c), kAll);
  EXPECT_NEAR(c["geomean"].get<double>(), 1.03, 1e-9);
  const Result r = run(files({"base.json", "slower_noise.json"}) + " --fail-on-regression 0");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST(Compare, SlowerBeyondNoiseAndTheRegressionRule) {
  const auto j = run_json(files({"base.json", "slower_beyond.json"}));
  const auto& c = j["comparisons"][0];
  EXPECT_EQ(verdicts(c), (std::vector<std::string>{"slower", "slower", "slower", "slower"}));
  EXPECT_NEAR(c["geomean"].get<double>(), 1.10, 1e-9);
  EXPECT_EQ(run(files({"base.json", "slower_beyond.json"})).code, 0);  // no gate: report only

  // B/A = 1.10. sq=4096 rows: t = 2*sqrt(2)*1% = 0.0283, exp(t) = 1.0287; sq=8192 rows: t = ln(1.01) (floor).
  // PCT 5: limits 1.080 and 1.0605 -> all four regress.
  const Result r5 = run(files({"base.json", "slower_beyond.json"}) + " --fail-on-regression 5");
  EXPECT_EQ(r5.code, 1);
  EXPECT_NE(r5.err.find("regression"), std::string::npos) << r5.err;
  EXPECT_EQ(lines_of(r5.err).size(), 4u) << r5.err;
  // PCT 8: limits 1.111 (noisy sq=4096 rows pass) and 1.0908 (sq=8192 rows regress).
  const auto j8 = run_json(files({"base.json", "slower_beyond.json"}) + " --fail-on-regression 8", 1);
  EXPECT_EQ(j8["regressions"].get<int>(), 2);
  const auto& rows = j8["comparisons"][0]["rows"];
  EXPECT_FALSE(rows[0]["regression"].get<bool>());
  EXPECT_FALSE(rows[1]["regression"].get<bool>());
  EXPECT_TRUE(rows[2]["regression"].get<bool>());
  EXPECT_TRUE(rows[3]["regression"].get<bool>());
  const Result r8 = run(files({"base.json", "slower_beyond.json"}) + " --fail-on-regression 8");
  EXPECT_EQ(r8.code, 1);
  EXPECT_NE(r8.err.find("sq=8192 causal=true none"), std::string::npos) << r8.err;
  EXPECT_EQ(r8.err.find("sq=4096"), std::string::npos) << r8.err;
  // PCT 10: limits 1.13 and 1.111 -> passes.
  const Result r10 = run(files({"base.json", "slower_beyond.json"}) + " --fail-on-regression 10");
  EXPECT_EQ(r10.code, 0) << r10.err;
}

TEST(Compare, UnmatchedRowsAndNullMedian) {
  const auto j = run_json(files({"base.json", "unmatched.json"}));
  const auto& c = j["comparisons"][0];
  EXPECT_EQ(verdicts(c), (std::vector<std::string>{"same", "n/a"}));
  EXPECT_TRUE(c["rows"][1]["ratio"].is_null());
  EXPECT_DOUBLE_EQ(c["geomean"].get<double>(), 1.0);  // the n/a row is left out
  ASSERT_EQ(c["only_in_a"].size(), 2u);
  EXPECT_EQ(c["only_in_a"][0]["axes"]["sq"].get<int>(), 8192);
  EXPECT_EQ(c["only_in_a"][0]["variant"], "none");
  EXPECT_EQ(c["only_in_a"][1]["variant"], "fused");
  ASSERT_EQ(c["only_in_b"].size(), 2u);
  EXPECT_EQ(c["only_in_b"][0]["variant"], "rng+mask");
  EXPECT_EQ(c["only_in_b"][1]["axes"]["sq"].get<int>(), 16384);

  const Result md = run(files({"base.json", "unmatched.json"}));
  EXPECT_EQ(md.code, 0);
  EXPECT_NE(md.out.find("Only in A"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("- sq=8192 causal=true: none"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("- sq=4096 causal=false: rng+mask"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("- sq=16384 causal=false: none"), std::string::npos) << md.out;
  // Unmatched rows come after the table.
  EXPECT_GT(md.out.find("Only in A"), md.out.find("geomean"));
  // A report with nothing in common (here: no points, as an interrupted run leaves it) is a warning, and
  // fails the gate because nothing could be checked.
  const Result none = run(files({"base.json", "empty.json"}));
  EXPECT_EQ(none.code, 0);
  EXPECT_NE(none.err.find("no (point, variant) in common"), std::string::npos) << none.err;
  EXPECT_EQ(run(files({"base.json", "empty.json"}) + " --fail-on-regression 5").code, 1);
}

TEST(Compare, MarkdownTable) {
  const Result r = run(files({"base.json", "slower_beyond.json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string header = row_with(r.out, {"variant", "A_us", "B/A"});
  ASSERT_FALSE(header.empty()) << r.out;
  EXPECT_EQ(cells(header), (std::vector<std::string>{"sq", "causal", "variant", "A_us", "A_noise_%", "B_us",
                                                      "B_noise_%", "B/A", "verdict"}));
  const auto fused = cells(row_with(r.out, {"8192", "fused"}));
  EXPECT_EQ(fused, (std::vector<std::string>{"8192", "true", "fused", "800", "0.200", "880", "0.200", "1.100", "slower"}));
  const auto geo = cells(row_with(r.out, {"geomean"}));
  ASSERT_EQ(geo.size(), 9u);
  EXPECT_EQ(geo[7], "1.100");
  EXPECT_EQ(geo[8], "0 faster, 0 same, 4 slower");
  EXPECT_NE(r.out.find("A = " + fixture("base.json") + " (baseline), command attention"), std::string::npos) << r.out;
  // Gated rows are marked in the table.
  const Result g = run(files({"base.json", "slower_beyond.json"}) + " --fail-on-regression 8");
  EXPECT_EQ(cells(row_with(g.out, {"8192", "fused"})).back(), "slower (regression)");
  EXPECT_EQ(cells(row_with(g.out, {"4096", "fused"})).back(), "slower");
}

TEST(Compare, CsvHasCandidateColumnAndUnmatchedRows) {
  const Result r = run(files({"base.json", "unmatched.json"}) + " --format csv");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], "candidate,sq,causal,variant,A_us,A_noise_%,B_us,B_noise_%,B/A,verdict");
  // 2 matched + geomean + 2 only in A + 2 only in B.
  EXPECT_EQ(lines.size(), 1u + 2 + 1 + 2 + 2);
  EXPECT_NE(r.out.find(",8192,true,fused,800,0.200,,,,only in A"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(",16384,false,none,,,1600,1.00,,only in B"), std::string::npos) << r.out;
}

TEST(Compare, SeveralFilesAgainstTheFirst) {
  const auto j = run_json(files({"base.json", "same.json", "faster.json", "slower_beyond.json"}));
  ASSERT_EQ(j["comparisons"].size(), 3u);
  EXPECT_EQ(j["baseline"].get<std::string>(), fixture("base.json"));
  EXPECT_NEAR(j["comparisons"][1]["geomean"].get<double>(), 0.8, 1e-9);
  EXPECT_NEAR(j["comparisons"][2]["geomean"].get<double>(), 1.1, 1e-9);
  const Result md = run(files({"base.json", "same.json", "faster.json", "slower_beyond.json"}));
  EXPECT_EQ(md.code, 0);
  size_t sections = 0;
  for (const auto& l : lines_of(md.out)) sections += l.rfind("B = ", 0) == 0;
  EXPECT_EQ(sections, 3u);
  // One regressing candidate is enough to fail.
  EXPECT_EQ(run(files({"base.json", "same.json", "slower_beyond.json"}) + " --fail-on-regression 5").code, 1);
  EXPECT_EQ(run(files({"base.json", "same.json", "faster.json"}) + " --fail-on-regression 5").code, 0);
}

TEST(Compare, BadFilesExitTwoWithOneLine) {
  struct Case {
    std::string args, needle;
  };
  const std::vector<Case> cases = {
      {files({"base.json"}) + " '" + fixture("does_not_exist.json") + "'", "does_not_exist.json: no such file"},
      {files({"base.json", "not_json.json"}), "not_json.json: not JSON"},
      {files({"base.json", "not_report.json"}), "not_report.json: not a dropbench report"},
      {files({"wrong_version.json", "base.json"}), "wrong_version.json: schema_version 2 is not supported"},
      {files({"base.json", "other_command.json"}), "other_command.json: command \"gemm\" differs"},
      {files({"base.json", "same.json", "other_command.json"}), "other_command.json"},
      {files({"base.json"}), "at least two reports"},
      {"'" + dropbench_test::source_path("tests/fixtures/compare") + "' " + files({"base.json"}), "is a directory"},
  };
  for (const Case& c : cases) {
    for (const char* fmt : {"", " --format json"}) {
      const Result r = run(c.args + fmt);
      EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
      EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << ": " << r.err;
      EXPECT_EQ(lines_of(r.err).size(), 1u) << r.err;
      EXPECT_TRUE(r.out.empty()) << c.args << ": " << r.out;
    }
  }
  EXPECT_EQ(run("").code, 2);  // no files at all
  EXPECT_EQ(run(files({"base.json", "same.json"}) + " --noise-k -1").code, 2);
  EXPECT_EQ(run(files({"base.json", "same.json"}) + " --fail-on-regression abc").code, 2);
}

TEST(Compare, HelpStatesTheRule) {
  const Result r = run("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("B/A > (1 + PCT/100) * exp(t)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("max(K * sqrt(noiseA^2 + noiseB^2), ln(1 + FLOOR/100))"), std::string::npos) << r.out;
}

namespace {

std::filesystem::path derived_dir() {
  return std::filesystem::temp_directory_path() / ("dropbench_compare_" + std::to_string(::getpid()));
}

// Removes derived_dir() when the tests are done (RUN_ALL_TESTS; a static's destructor does not run here).
class DerivedDirCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(derived_dir(), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kDerivedDirCleanup =
    ::testing::AddGlobalTestEnvironment(new DerivedDirCleanup);

// Reports derived from base.json for the comparability and range checks, written once per process to a temp
// folder (not to tests/fixtures/compare/, whose exact file list scripts/plot.py's self-test checks).
std::string derived(const std::string& name) {
  namespace fs = std::filesystem;
  fs::create_directories(derived_dir());
  const fs::path path = derived_dir() / name;
  if (fs::exists(path)) return path.string();
  std::ifstream in(fixture("base.json"));
  nlohmann::ordered_json d = nlohmann::ordered_json::parse(in);
  if (name.rfind("ctx_", 0) == 0) {  // a report as dropbench writes it: context and config filled in
    d["context"]["git_sha"] = "1111111aaaaa";
    d["context"]["date_utc"] = "2026-11-29T18:39:28Z";
    d["context"]["device"] = {{"name", "NVIDIA H200"}, {"cc", "9.0"}};
    d["config"]["workload"] = {{"batch", 1}, {"embed", 4096}, {"q_heads", 32}, {"kv_heads", 8},
                               {"head_dim", 128}, {"sq", 4096}, {"causal", false}, {"dropout_p", 0.1}};
    d["config"]["sweep"] = {{"sq", {4096, 8192}}};
    d["config"]["measure"] = {{"min_samples", 10}, {"max_samples", 2000}, {"min_time", 0.2}, {"max_noise", 0.005},
                              {"timeout", 5.0}, {"warmup", 3}, {"cold", false}, {"throttle", 0.75}};
  }
  if (name == "ctx_same_workload.json") {  // another build, and a workload sq that both reports sweep
    d["context"]["git_sha"] = "2222222bbbbb";
    d["context"]["date_utc"] = "2026-11-30T09:00:00Z";
    d["config"]["workload"]["sq"] = 8192;
  } else if (name == "ctx_other_workload.json") {
    d["config"]["workload"]["embed"] = 8192;
    d["config"]["workload"]["q_heads"] = 64;
  } else if (name == "ctx_other_device.json") {
    d["context"]["device"]["name"] = "NVIDIA H100 80GB HBM3";
  } else if (name == "ctx_other_measure.json") {
    d["config"]["measure"]["min_time"] = 0.03;
  } else if (name == "negative_median.json") {
    d["points"][1]["variants"][0]["stats"]["median"] = -0.0004;
  } else if (name == "negative_stdev.json") {
    d["points"][0]["variants"][1]["stats"]["rel_stdev"] = -0.01;
  }
  std::ofstream(path) << d.dump(2) << "\n";
  return path.string();
}

// files() for derived reports; "base.json" stays the fixture.
std::string dfiles(std::initializer_list<const char*> names) {
  std::string out;
  for (const char* n : names) out += " '" + (std::string(n) == "base.json" ? fixture(n) : derived(n)) + "'";
  return out;
}

}  // namespace

// Reports of another workload, device or measure settings are refused (exit 2, one line naming the
// fields) unless --force, which compares them with a warning. The swept axes may differ.
TEST(Compare, RefusesUnlikeReportsNamingTheFields) {
  struct Case {
    const char* file;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"ctx_other_workload.json", "workload.embed 4096 vs 8192, workload.q_heads 32 vs 64 (--force compares anyway)"},
      {"ctx_other_device.json", "device NVIDIA H200 vs NVIDIA H100 80GB HBM3"},
      {"ctx_other_measure.json", "measure.min_time 0.2 vs 0.03"},
      {"base.json", "workload (present) vs (none)"},
  };
  for (const Case& c : cases) {
    for (const char* extra : {"", " --format json", " --fail-on-regression 5"}) {
      const Result r = run(dfiles({"ctx_base.json", c.file}) + extra);
      EXPECT_EQ(r.code, 2) << c.file << "\n" << r.err;
      EXPECT_EQ(lines_of(r.err).size(), 1u) << r.err;
      EXPECT_EQ(r.err.rfind("dropbench: error: compare: " + (std::string(c.file) == "base.json" ? fixture(c.file) : derived(c.file)) + ": not comparable with the baseline", 0), 0u)
          << r.err;
      EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
      EXPECT_TRUE(r.out.empty()) << r.out;
    }
  }
  // The workload's sq differs, but both reports sweep sq: comparable.
  const Result ok = run(dfiles({"ctx_base.json", "ctx_same_workload.json"}) + " --fail-on-regression 5");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(ok.err, "");
}

TEST(Compare, ForceComparesUnlikeReportsWithAWarning) {
  const Result r = run(dfiles({"ctx_base.json", "ctx_other_workload.json"}) + " --force");
  EXPECT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(lines_of(r.err).size(), 1u) << r.err;
  EXPECT_EQ(r.err.rfind("dropbench: warning: compare: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("workload.embed 4096 vs 8192"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("compared anyway (--force)"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("differs from A (--force): workload.embed 4096 vs 8192"), std::string::npos) << r.out;
  const auto j = run_json(dfiles({"ctx_base.json", "ctx_other_workload.json"}) + " --force");
  EXPECT_EQ(j["comparisons"][0]["differences"].size(), 2u);
  EXPECT_EQ(j["comparisons"][0]["rows"].size(), 4u);
}

TEST(Compare, HeaderShowsGitShaDateAndDeviceOfBothReports) {
  const Result r = run(dfiles({"ctx_base.json", "ctx_same_workload.json"}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("A: git 1111111aaaaa, date 2026-11-29T18:39:28Z, device NVIDIA H200\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("B: git 2222222bbbbb, date 2026-11-30T09:00:00Z, device NVIDIA H200\n"), std::string::npos) << r.out;
  const auto j = run_json(dfiles({"ctx_base.json", "ctx_same_workload.json"}));
  EXPECT_EQ(j["baseline_info"]["git_sha"], "1111111aaaaa");
  EXPECT_EQ(j["comparisons"][0]["candidate_info"]["date_utc"], "2026-11-30T09:00:00Z");
  EXPECT_EQ(j["comparisons"][0]["candidate_info"]["device"], "NVIDIA H200");
  // A hand-written report without them says so.
  EXPECT_NE(run(files({"base.json", "same.json"})).out.find("A: git fixture, date unknown, device unknown"),
            std::string::npos);
}

// Settings out of range or not numbers, and negative figures in a report, are one readable line.
TEST(Compare, BadSettingsAndNegativeFiguresExitTwoWithARange) {
  struct Case {
    std::string args, line;
  };
  const std::vector<Case> cases = {
      {" --noise-k -1", "dropbench: error: compare: --noise-k: -1 is out of range (allowed: [0, 100])"},
      {" --noise-k 1e6", "dropbench: error: compare: --noise-k: 1e6 is out of range (allowed: [0, 100])"},
      {" --noise-floor -0.5", "dropbench: error: compare: --noise-floor: -0.5 is out of range (allowed: [0, 100])"},
      {" --noise-floor nan", "dropbench: error: compare: --noise-floor: 'nan' is not a number (allowed: [0, 100])"},
      {" --fail-on-regression abc",
       "dropbench: error: compare: --fail-on-regression: 'abc' is not a number (allowed: [0, 1000])"},
      {" --fail-on-regression 5x",
       "dropbench: error: compare: --fail-on-regression: '5x' is not a number (allowed: [0, 1000])"},
  };
  for (const Case& c : cases) {
    const Result r = run(files({"base.json", "same.json"}) + c.args);
    EXPECT_EQ(r.code, 2) << c.args;
    EXPECT_EQ(r.err, c.line + "\n") << c.args;
    EXPECT_TRUE(r.out.empty());
  }
  const Result m = run(dfiles({"base.json", "negative_median.json"}));
  EXPECT_EQ(m.code, 2);
  EXPECT_EQ(m.err, "dropbench: error: compare: " + derived("negative_median.json") +
                       ": points[1].variants[0].stats.median: -0.0004 is out of range (allowed: >= 0, or null)\n");
  const Result s = run(dfiles({"negative_stdev.json", "base.json"}));
  EXPECT_EQ(s.code, 2);
  EXPECT_NE(s.err.find("points[0].variants[1].stats.rel_stdev: -0.01 is out of range (allowed: >= 0, or null)"),
            std::string::npos) << s.err;
  // In range: accepted.
  EXPECT_EQ(run(files({"base.json", "same.json"}) + " --noise-k 100 --noise-floor 0 --fail-on-regression 1000").code, 0);
}
